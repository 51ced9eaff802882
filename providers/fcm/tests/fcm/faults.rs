//! Faults of the fake FCM, as its ledger records them. FCM keeps no key and offers no look-up,
//! so nothing settles an ambiguity here: each is shown for what it is (delivered or not, the
//! ledger knows), and a resend after one that was delivered is a second delivery under the
//! same key, which the app can drop by its `herald_key`. How each fault is classified is the
//! conformance kit's to check too (`conformance.rs`).

use std::time::Duration;

use herald_fcm::QUOTA_BACKOFF;
use herald_fcm::fake::{FakeConfig, Fault, Faults};
use herald_provider::{Adapter, Evidence};
use herald_provider_testkit::support::{accepted_ref, ambiguous, rejection, unique_key};

use crate::support::{SHORT_TIMEOUT, Vendor, message, vendor, vendor_with};

/// Sends once into `fault`; the ambiguity's evidence, and how many deliveries the send made.
async fn ambiguous_after(vendor: &Vendor, fault: Fault) -> (Evidence, u64) {
    vendor.fake.set_faults(Faults::next([fault]));
    let key = unique_key();
    let evidence = ambiguous(&vendor.adapter.send(&message(), &key).await).clone();
    (evidence, vendor.fake.ledger().deliveries_of(key.as_str()))
}

#[tokio::test]
async fn accept_then_drop_is_ambiguous_and_was_delivered() {
    let vendor = vendor(FakeConfig::default()).await;

    let (evidence, delivered) = ambiguous_after(&vendor, Fault::AcceptThenDrop).await;

    assert_eq!(evidence.stage, "awaiting_response");
    assert_eq!(evidence.status, None);
    assert_eq!(delivered, 1);
}

#[tokio::test]
async fn a_resend_after_a_lost_answer_is_a_second_delivery_under_the_same_key() {
    let vendor = vendor(FakeConfig::default()).await;
    vendor
        .fake
        .set_faults(Faults::next([Fault::AcceptThenDrop]));
    let key = unique_key();

    ambiguous(&vendor.adapter.send(&message(), &key).await);
    accepted_ref(&vendor.adapter.send(&message(), &key).await);

    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.deliveries_of(key.as_str()), 2, "FCM keeps no key");
    assert!(ledger.deliveries.iter().all(|d| d.key == key.as_str()));
}

#[tokio::test]
async fn an_answer_held_past_the_timeout_is_ambiguous_and_was_delivered() {
    let config = FakeConfig {
        delay: Duration::from_secs(60),
        ..FakeConfig::default()
    };
    let vendor = vendor_with(config, SHORT_TIMEOUT).await;
    // The token first, so that the timeout is the send's alone.
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);

    let (evidence, delivered) = ambiguous_after(&vendor, Fault::Delay).await;

    assert!(evidence.detail.starts_with("timed out"), "{evidence:?}");
    assert_eq!(delivered, 1);
}

#[tokio::test]
async fn internal_after_processing_is_ambiguous_and_was_delivered() {
    let vendor = vendor(FakeConfig::default()).await;

    let (evidence, delivered) = ambiguous_after(&vendor, Fault::ErrorAfterProcessing).await;

    assert_eq!(evidence.status, Some(500));
    assert_eq!(evidence.vendor_code.as_deref(), Some("INTERNAL"));
    assert_eq!(delivered, 1);
}

#[tokio::test]
async fn a_503_is_ambiguous_because_fcm_does_not_document_it_as_not_processed() {
    let vendor = vendor(FakeConfig::default()).await;

    let (evidence, delivered) = ambiguous_after(&vendor, Fault::UnavailableBeforeProcessing).await;

    assert_eq!(evidence.status, Some(503));
    // This fake did not process it; FCM's docs would not let the adapter know that.
    assert_eq!(delivered, 0);
}

#[tokio::test]
async fn a_quota_429_waits_at_least_a_minute_and_delivered_nothing() {
    let vendor = vendor(FakeConfig::default()).await;
    vendor.fake.set_faults(Faults::next([Fault::RateLimited]));
    let key = unique_key();

    let (permanent, retry_after, evidence) = rejection(vendor.adapter.send(&message(), &key).await);

    assert!(!permanent);
    // The fake says `retry-after: 1`; FCM's documented minimum is a minute.
    assert_eq!(retry_after, Some(QUOTA_BACKOFF));
    assert_eq!(evidence.status, Some(429));
    assert_eq!(evidence.vendor_code.as_deref(), Some("QUOTA_EXCEEDED"));
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 0);
    // The queue is used up: the next send goes through.
    accepted_ref(&vendor.adapter.send(&message(), &key).await);
}

#[tokio::test]
async fn refusals_for_the_token_use_up_no_fault() {
    let vendor = vendor(FakeConfig::default()).await;
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    vendor
        .fake
        .set_faults(Faults::next([Fault::ErrorAfterProcessing]));
    vendor.fake.expire_tokens();

    // The 401 is answered before the fault is drawn; the resend with a new token meets it.
    let (evidence, delivered) = {
        let key = unique_key();
        let result = vendor.adapter.send(&message(), &key).await;
        let delivered = vendor.fake.ledger().deliveries_of(key.as_str());
        (ambiguous(&result).clone(), delivered)
    };

    assert_eq!(evidence.status, Some(500));
    assert_eq!(delivered, 1);
    assert_eq!(vendor.fake.exchanges(), 2);
}
