//! Faults of the fake Slack, as its ledger records them: an ambiguity that the look-up settles —
//! the message found, under the `ts` Slack gave it, if it was posted; nothing if not, also once
//! the lag has passed — never a resend. How each fault is classified is the conformance kit's to
//! check (`conformance.rs`).

use std::time::Duration;

use herald_provider::{Adapter, QueryResult};
use herald_provider_testkit::ledger::{self, Loss};
use herald_provider_testkit::support::{ambiguous, assert_not_found_yet, found, unique_key};
use herald_slack::fake::{CHANNEL, FakeConfig, Fault, Faults};
use herald_slack::provider_ref;

use crate::support::{SHORT_TIMEOUT, message, vendor, vendor_with};

/// `fault` plays on the next post; the look-up then finds the one message Slack posted, under
/// the `ts` the ledger holds, or nothing.
async fn looked_up_after(fault: Fault, loss: Loss, timeout: Duration) {
    let vendor = vendor_with(FakeConfig::default(), timeout).await;
    vendor.fake.set_faults(Faults::next([fault]));
    let (message, key) = (message(), unique_key());
    let deliveries = || vendor.fake.ledger().deliveries_of(key.as_str());

    let (_, lookup) =
        ledger::settled_by_lookup(&vendor.adapter, &message, &key, loss, deliveries).await;

    if let QueryResult::Accepted { .. } = lookup {
        let posted = &vendor.fake.ledger().deliveries[0];
        assert_eq!(found(&lookup), [provider_ref(CHANNEL, &posted.message_id)]);
    }
}

#[tokio::test]
async fn accept_then_drop_is_ambiguous_and_the_look_up_finds_the_one_message_by_key() {
    looked_up_after(
        Fault::AcceptThenDrop,
        Loss::DroppedAfterProcessing,
        crate::support::CLIENT_TIMEOUT,
    )
    .await;
}

#[tokio::test]
async fn a_500_after_posting_is_ambiguous_and_the_look_up_finds_the_one_message() {
    looked_up_after(
        Fault::ErrorAfterProcessing,
        Loss::ErrorAfterProcessing(500),
        crate::support::CLIENT_TIMEOUT,
    )
    .await;
}

#[tokio::test]
async fn an_answer_held_past_the_timeout_is_ambiguous_and_the_look_up_finds_the_message() {
    looked_up_after(Fault::Delay, Loss::HeldPastTheTimeout, SHORT_TIMEOUT).await;
}

#[tokio::test]
async fn a_503_before_posting_is_ambiguous_and_the_look_up_finds_nothing() {
    looked_up_after(
        Fault::UnavailableBeforeProcessing,
        Loss::UnavailableBeforeProcessing(503),
        crate::support::CLIENT_TIMEOUT,
    )
    .await;
}

#[tokio::test]
async fn a_send_dropped_before_posting_is_still_not_found_once_the_lag_has_passed() {
    let lag = Duration::from_millis(300);
    let vendor = vendor(FakeConfig {
        visibility_lag: lag,
        ..FakeConfig::default()
    })
    .await;
    vendor
        .fake
        .set_faults(Faults::next([Fault::UnavailableBeforeProcessing]));
    let (message, key) = (message(), unique_key());
    ambiguous(&vendor.adapter.send(&message, &key).await);
    // A sibling notification posted meanwhile is listed, and is not ours.
    let sibling = unique_key();
    herald_provider_testkit::support::accepted_ref(
        &vendor
            .adapter
            .send(&crate::support::message(), &sibling)
            .await,
    );

    // A bounded wait for the lag to pass, not for a condition.
    tokio::time::sleep(lag + Duration::from_millis(200)).await;

    assert_not_found_yet(&vendor.adapter.query(&message, &key).await);
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 0);
    assert_eq!(vendor.fake.ledger().total(), 1);
}

#[tokio::test]
async fn a_post_is_listed_only_after_the_visibility_lag() {
    let lag = Duration::from_millis(400);
    let vendor = vendor(FakeConfig {
        visibility_lag: lag,
        ..FakeConfig::default()
    })
    .await;

    ledger::visible_only_after_the_lag(&vendor.adapter, &message(), &unique_key(), lag).await;
}
