//! Faults of the fake Resend, as its ledger records them: an ambiguity that a resend inside
//! the window settles without a second delivery (the kit's `ledger` check), and the fake's
//! fault queue itself. How each fault is classified is the conformance kit's to check
//! (`conformance.rs`).

use herald_provider::{Adapter, Evidence};
use herald_provider_testkit::ledger::{self, Loss};
use herald_provider_testkit::support::{accepted_ref, rejection, unique_key};
use herald_resend::fake::{FakeConfig, Fault, Faults};

use crate::support::{Vendor, message, vendor};

async fn vendor_with_faults(faults: Faults) -> Vendor {
    let vendor = vendor(FakeConfig::default()).await;
    vendor.fake.set_faults(faults);
    vendor
}

/// Sends an email into `fault`, and resends it: the kit's check that the resend settles what
/// `loss` made ambiguous. The ambiguity's evidence.
async fn resent_after(fault: Fault, loss: Loss) -> Evidence {
    let vendor = vendor_with_faults(Faults::next([fault])).await;
    let deliveries = |key: &str| vendor.fake.ledger().deliveries_of(key);
    ledger::settled_by_resend(&vendor.adapter, &message(), loss, deliveries).await
}

#[tokio::test]
async fn accept_then_drop_is_ambiguous_and_the_resend_is_answered_without_a_second_delivery() {
    resent_after(Fault::AcceptThenDrop, Loss::DroppedAfterProcessing).await;
}

#[tokio::test]
async fn a_500_after_processing_is_ambiguous_and_the_resend_answers_the_first_id() {
    let loss = Loss::ErrorAfterProcessing(500);
    let evidence = resent_after(Fault::ErrorAfterProcessing, loss).await;
    assert_eq!(evidence.vendor_code.as_deref(), Some("application_error"));
}

#[tokio::test]
async fn a_503_is_ambiguous_because_resend_does_not_document_it_as_not_processed() {
    // This fake did not process it; the resend inside the window is the first delivery.
    let loss = Loss::UnavailableBeforeProcessing(503);
    resent_after(Fault::UnavailableBeforeProcessing, loss).await;
}

#[tokio::test]
async fn faults_apply_in_order_and_then_stop_unless_set_for_every_request() {
    let vendor = vendor_with_faults(Faults::next([Fault::RateLimited])).await;
    let send = async || vendor.adapter.send(&message(), &unique_key()).await;

    let (permanent, ..) = rejection(send().await);
    assert!(!permanent, "a rate limit passes");
    accepted_ref(&send().await);

    vendor.fake.set_faults(Faults::always(Fault::RateLimited));
    for _ in 0..3 {
        let (permanent, ..) = rejection(send().await);
        assert!(!permanent, "a rate limit passes");
    }
    vendor.fake.set_faults(Faults::none());
    accepted_ref(&send().await);
    assert_eq!(vendor.fake.ledger().total_deliveries(), 2);
}
