//! Faults of the fake APNs, as its ledger records them: each ambiguity, whether the push was
//! delivered or not, and why APNs leaves it ambiguous — it deduplicates nothing, so a resend
//! of a push it took is a second delivery, which `apns-collapse-id` shows as one notification.
//! How each answer is classified is the conformance kit's to check too (`conformance.rs`).

use herald_apns::CollapseId;
use herald_apns::fake::{FakeConfig, Fault, Faults};
use herald_provider::{Adapter, Evidence};
use herald_provider_testkit::support::{accepted_ref, ambiguous, unique_key};

use crate::support::{DEVICE, SHORT_TIMEOUT, Vendor, message, vendor, vendor_with};

/// Sends a push into `fault` and returns the ambiguity's evidence, with how many times the fake
/// delivered it.
async fn ambiguous_after(vendor: &Vendor, fault: Fault) -> (Evidence, u64) {
    vendor.fake.set_faults(Faults::next([fault]));
    let key = unique_key();
    let evidence = ambiguous(&vendor.adapter.send(&message(), &key).await).clone();
    (evidence, vendor.fake.ledger().deliveries_of(key.as_str()))
}

#[tokio::test]
async fn a_connection_dropped_after_delivery_is_ambiguous() {
    let vendor = vendor(FakeConfig::default()).await;
    let (evidence, delivered) = ambiguous_after(&vendor, Fault::AcceptThenDrop).await;
    assert_eq!(evidence.stage, "awaiting_response");
    assert_eq!(evidence.status, None);
    assert_eq!(delivered, 1);
    // The route goes on, on a new connection.
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
}

#[tokio::test]
async fn an_answer_held_past_the_timeout_is_ambiguous() {
    let vendor = vendor_with(FakeConfig::default(), |route| route.timeout = SHORT_TIMEOUT).await;
    let (evidence, delivered) = ambiguous_after(&vendor, Fault::Delay).await;
    assert!(evidence.detail.starts_with("timed out"), "{evidence:?}");
    assert_eq!(delivered, 1);
}

#[tokio::test]
async fn a_500_after_delivery_is_ambiguous() {
    let vendor = vendor(FakeConfig::default()).await;
    let (evidence, delivered) = ambiguous_after(&vendor, Fault::ErrorAfterProcessing).await;
    assert_eq!(evidence.status, Some(500));
    assert_eq!(evidence.vendor_code.as_deref(), Some("InternalServerError"));
    assert_eq!(delivered, 1);
}

#[tokio::test]
async fn a_503_is_ambiguous_because_apple_does_not_say_it_was_not_delivered() {
    let vendor = vendor(FakeConfig::default()).await;
    let (evidence, delivered) = ambiguous_after(&vendor, Fault::UnavailableBeforeProcessing).await;
    assert_eq!(evidence.status, Some(503));
    assert_eq!(evidence.vendor_code.as_deref(), Some("ServiceUnavailable"));
    // This fake did not deliver it; nothing in the answer could have told the adapter so.
    assert_eq!(delivered, 0);
}

/// The same notification sent twice, the first answer lost: APNs delivers both.
async fn resent_after_a_lost_answer(collapse_id: CollapseId) -> Vendor {
    let vendor = vendor_with(FakeConfig::default(), |route| {
        route.collapse_id = collapse_id
    })
    .await;
    vendor
        .fake
        .set_faults(Faults::next([Fault::AcceptThenDrop]));
    let (push, key) = (message(), unique_key());
    ambiguous(&vendor.adapter.send(&push, &key).await);
    accepted_ref(&vendor.adapter.send(&push, &key).await);
    assert_eq!(
        vendor.fake.ledger().deliveries_of(key.as_str()),
        2,
        "APNs deduplicates nothing by apns-id"
    );
    vendor
}

#[tokio::test]
async fn with_collapse_id_a_resent_notification_shows_as_one_on_the_device() {
    let vendor = resent_after_a_lost_answer(CollapseId::Notification).await;
    assert_eq!(vendor.fake.shown_on(DEVICE).len(), 1);
    // Another notification is not merged into it.
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    assert_eq!(vendor.fake.shown_on(DEVICE).len(), 2);
}

#[tokio::test]
async fn without_collapse_id_a_resent_notification_shows_twice() {
    let vendor = resent_after_a_lost_answer(CollapseId::None).await;
    assert_eq!(vendor.fake.shown_on(DEVICE).len(), 2);
}

#[tokio::test]
async fn faults_apply_in_order_and_then_stop() {
    let vendor = vendor(FakeConfig::default()).await;
    vendor
        .fake
        .set_faults(Faults::next([Fault::RateLimited, Fault::Unregistered]));
    let send = async || vendor.adapter.send(&message(), &unique_key()).await;

    assert_eq!(send().await.evidence().status, Some(429));
    let gone = send().await;
    assert_eq!(gone.evidence().status, Some(410));
    assert!(vendor.adapter.unsubscribed(gone.evidence()));
    accepted_ref(&send().await);
    assert_eq!(vendor.fake.ledger().total(), 1);
}
