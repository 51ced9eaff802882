//! Each documented Telnyx answer, as the adapter classifies it and as the ledger records it —
//! and why herald claims nothing of a resend under the key.

use herald_provider::{Adapter, ProviderKey};
use herald_provider_testkit::support::{
    accepted_ref, ambiguous, permanent_rejection, rejection, unique_key,
};
use herald_telnyx::fake::{FakeConfig, Fault, Faults};
use serde_json::json;

use crate::support::{FROM, TO, WEBHOOK_URL, adapter, message, route, vendor};

#[tokio::test]
async fn a_sent_message_is_accepted_with_its_id_under_the_key_and_names_the_key_in_its_webhook_url()
{
    let vendor = vendor(FakeConfig::default()).await;
    let mut with_webhooks = route(&vendor.fake.base_url(), &FakeConfig::default().api_key);
    with_webhooks.webhook_url = Some(WEBHOOK_URL.to_owned());
    with_webhooks.webhook_public_key =
        Some("R+UMEB5mOqTOX+8lyBoP+/prUDoPfOms0HmdqTDatwM=".to_owned());
    let adapter = adapter(&with_webhooks);
    let key = ProviderKey::new("01970000-0000-7000-8000-000000000001-f1");

    let id = accepted_ref(&adapter.send(&message(), &key).await);

    let request = vendor
        .fake
        .last_request()
        .expect("the fake saw the request");
    assert_eq!(request.idempotency_key.as_deref(), Some(key.as_str()));
    assert_eq!(request.content_type.as_deref(), Some("application/json"));
    assert_eq!(
        request.body,
        json!({
            "from": FROM, "to": TO, "text": "Your code is 123456",
            "webhook_url": format!("{WEBHOOK_URL}?herald_key={}", key.as_str()),
        })
    );
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);
    assert_eq!(ledger.deliveries[0].message_id, id);
}

#[tokio::test]
async fn a_resend_after_a_lost_success_is_answered_with_the_first_message() {
    let vendor = vendor(FakeConfig::default()).await;
    vendor
        .fake
        .set_faults(Faults::next([Fault::AcceptThenDrop]));
    let key = unique_key();

    ambiguous(&vendor.adapter.send(&message(), &key).await);
    accepted_ref(&vendor.adapter.send(&message(), &key).await);

    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn a_resend_after_an_error_answer_may_send_again_which_is_why_no_window_is_declared() {
    let vendor = vendor(FakeConfig::default()).await;
    vendor
        .fake
        .set_faults(Faults::next([Fault::ErrorAfterProcessing]));
    let key = unique_key();

    let evidence = ambiguous(&vendor.adapter.send(&message(), &key).await).clone();
    accepted_ref(&vendor.adapter.send(&message(), &key).await);

    // "Only successful responses are replayed": the 500's message went out, and so did the
    // resend's.
    assert_eq!(evidence.vendor_code.as_deref(), Some("10007"));
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 2);
    assert_eq!(vendor.adapter.capabilities().idempotency_window, None);
    assert_eq!(vendor.adapter.capabilities().query_visibility_lag, None);
}

#[tokio::test]
async fn a_recipient_who_texted_stop_is_refused_and_suppressed() {
    let vendor = vendor(FakeConfig {
        stopped: vec![TO.to_owned()],
        ..FakeConfig::default()
    })
    .await;

    let result = vendor.adapter.send(&message(), &unique_key()).await;
    let evidence = permanent_rejection(&result);

    assert_eq!(evidence.vendor_code.as_deref(), Some("40300"));
    assert!(vendor.adapter.unsubscribed(evidence));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn a_key_telnyx_would_refuse_is_refused_before_anything_is_sent() {
    let vendor = vendor(FakeConfig::default()).await;
    for bad in ["has space", "dots.are.out", &"k".repeat(256)] {
        let key = ProviderKey::new(bad);
        let (permanent, _, evidence) = rejection(vendor.adapter.send(&message(), &key).await);
        assert!(permanent);
        assert_eq!(evidence.stage, "request");
    }
    assert_eq!(vendor.fake.ledger().requests, 0);
}
