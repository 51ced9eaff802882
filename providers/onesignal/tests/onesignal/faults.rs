//! Faults of the fake OneSignal, as its ledger records them: an ambiguity, from a lost answer
//! or from one held past the client's timeout, that a resend inside the window settles without
//! a second delivery (the kit's `ledger` check), and the fake's fault queue itself. How each
//! fault is classified is the conformance kit's to check (`conformance.rs`).

use std::time::Duration;

use herald_onesignal::fake::{FakeConfig, Fault, Faults};
use herald_provider::{Adapter, Evidence, SendResult};
use herald_provider_testkit::ledger::{self, Loss};
use herald_provider_testkit::support::{accepted_ref, ambiguous, unique_key};

use crate::support::{SHORT_TIMEOUT, Vendor, documented_error, message, vendor, vendor_with};

const SERVICE_UNAVAILABLE: &str =
    include_str!("../../../../fixtures/onesignal/errors/service-unavailable.503.json");

async fn vendor_with_faults(faults: Faults) -> Vendor {
    let vendor = vendor(FakeConfig::default()).await;
    vendor.fake.set_faults(faults);
    vendor
}

/// A fake that holds its next answer for a minute, and a client that gives up long before.
async fn delaying_vendor() -> Vendor {
    let config = FakeConfig {
        delay: Duration::from_secs(60),
        faults: Faults::next([Fault::Delay]),
        ..FakeConfig::default()
    };
    let (app_id, api_key) = (config.app_id.clone(), config.api_key.clone());
    vendor_with(config, &app_id, &api_key, SHORT_TIMEOUT).await
}

/// Sends a push through `vendor`'s next fault, and resends it: the kit's check that the
/// resend settles what `loss` made ambiguous. The ambiguity's evidence.
async fn resent(vendor: Vendor, loss: Loss) -> Evidence {
    let deliveries = |key: &str| vendor.fake.ledger().deliveries_of(key);
    ledger::settled_by_resend(&vendor.adapter, &message(), loss, deliveries).await
}

#[tokio::test]
async fn accept_then_drop_is_ambiguous_and_the_resend_is_answered_without_a_second_delivery() {
    let vendor = vendor_with_faults(Faults::next([Fault::AcceptThenDrop])).await;
    resent(vendor, Loss::DroppedAfterProcessing).await;
}

#[tokio::test]
async fn a_repeat_while_the_first_answer_is_held_gets_the_first_result_at_once() {
    resent(delaying_vendor().await, Loss::HeldPastTheTimeout).await;
}

#[tokio::test]
async fn a_500_after_processing_is_ambiguous_and_the_resend_answers_the_first_id() {
    let vendor = vendor_with_faults(Faults::next([Fault::ErrorAfterProcessing])).await;
    resent(vendor, Loss::ErrorAfterProcessing(500)).await;
}

#[tokio::test]
async fn a_503_is_ambiguous_because_onesignal_does_not_document_it_as_not_processed() {
    let vendor = vendor_with_faults(Faults::next([Fault::UnavailableBeforeProcessing])).await;
    // This fake did not process it; the resend inside the window is the first delivery.
    let evidence = resent(vendor, Loss::UnavailableBeforeProcessing(503)).await;
    assert_eq!(
        evidence.vendor_code,
        Some(documented_error(SERVICE_UNAVAILABLE))
    );
}

#[tokio::test]
async fn faults_apply_in_order_and_then_stop_unless_set_for_every_request() {
    let vendor = vendor_with_faults(Faults::next([Fault::RateLimited])).await;
    let send = async || vendor.adapter.send(&message(), &unique_key()).await;

    assert!(matches!(send().await, SendResult::Rejected { .. }));
    accepted_ref(&send().await);

    let unavailable = Faults::always(Fault::UnavailableBeforeProcessing);
    vendor.fake.set_faults(unavailable);
    for _ in 0..3 {
        ambiguous(&send().await);
    }
    vendor.fake.set_faults(Faults::none());
    accepted_ref(&send().await);
    assert_eq!(vendor.fake.ledger().total_deliveries(), 2);
}
