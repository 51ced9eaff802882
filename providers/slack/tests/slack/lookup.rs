//! The history look-up against the fake: a failed look-up — a fault, a missing scope, a bot
//! outside the conversation — proves nothing, however long after the send; each notification
//! finds its own message among its siblings'; and a route without the look-up asks nothing.

use std::time::Duration;

use herald_provider::Adapter;
use herald_provider_testkit::ledger;
use herald_provider_testkit::support::{accepted_ref, found, unique_key, unsupported};
use herald_slack::fake::{FakeConfig, Fault, Faults};

use crate::support::{adapter, message, route, vendor};

#[tokio::test]
async fn a_look_up_that_fails_proves_nothing() {
    let vendor = vendor(FakeConfig::default()).await;
    vendor.fake.set_lookup_faults(Faults::next([
        Fault::ErrorAfterProcessing,
        Fault::RateLimited,
        Fault::UnavailableBeforeProcessing,
        Fault::AcceptThenDrop,
    ]));

    ledger::failed_lookups_prove_nothing(&vendor.adapter, &message(), &unique_key(), 4).await;
}

#[tokio::test]
async fn without_a_history_scope_the_look_up_proves_nothing_even_after_the_lag() {
    let lag = Duration::from_millis(100);
    let vendor = vendor(FakeConfig {
        history_scope: false,
        visibility_lag: lag,
        ..FakeConfig::default()
    })
    .await;
    let (posted, never) = (unique_key(), unique_key());
    accepted_ref(&vendor.adapter.send(&message(), &posted).await);
    tokio::time::sleep(lag + Duration::from_millis(100)).await;

    for key in [&posted, &never] {
        let lookup = vendor.adapter.query(&message(), key).await;
        // Never "not found": after the lag herald would read that as "not sent".
        let evidence = unsupported(&lookup);
        assert_eq!(evidence.vendor_code.as_deref(), Some("missing_scope"));
    }
}

#[tokio::test]
async fn a_bot_outside_the_conversation_cannot_look_it_up() {
    let vendor = vendor(FakeConfig {
        outside: vec!["C0OUTSIDE00".to_owned()],
        ..FakeConfig::default()
    })
    .await;
    let mut message = message();
    message.to = "C0OUTSIDE00".to_owned();

    let lookup = vendor.adapter.query(&message, &unique_key()).await;

    assert_eq!(
        unsupported(&lookup).vendor_code.as_deref(),
        Some("not_in_channel")
    );
}

#[tokio::test]
async fn each_notification_finds_its_own_message_among_its_siblings() {
    let vendor = vendor(FakeConfig::default()).await;
    let sent: Vec<_> = posted_in_order(&vendor.adapter, 3).await;

    for (message, key, id) in &sent {
        let lookup = vendor.adapter.query(message, key).await;
        assert_eq!(&found(&lookup), std::slice::from_ref(id));
    }
    assert_eq!(vendor.fake.ledger().total(), 3);
}

/// `n` notifications posted one after the other: each message, key and `provider_ref`.
async fn posted_in_order(
    adapter: &herald_slack::SlackAdapter,
    n: usize,
) -> Vec<(
    herald_provider::Message,
    herald_provider::ProviderKey,
    String,
)> {
    let mut sent = Vec::new();
    for _ in 0..n {
        let (message, key) = (message(), unique_key());
        let id = accepted_ref(&adapter.send(&message, &key).await);
        sent.push((message, key, id));
    }
    sent
}

#[tokio::test]
async fn a_route_without_the_look_up_declares_none_and_asks_nothing() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut route = route(&vendor.fake.base_url(), &FakeConfig::default().bot_token);
    route.visibility_lag = None;
    let adapter = adapter(&route);
    let key = unique_key();
    accepted_ref(&adapter.send(&message(), &key).await);

    assert_eq!(adapter.capabilities().query_visibility_lag, None);
    unsupported(&adapter.query(&message(), &key).await);
    assert!(vendor.fake.lookups().is_empty());
}
