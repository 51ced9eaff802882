//! Faults of the fake SparkPost, as its ledger records them: an ambiguity that a resend inside
//! the window settles without a second delivery (the kit's `ledger` check). How each fault is
//! classified is the conformance kit's to check (`conformance.rs`).

use herald_provider::Evidence;
use herald_provider_testkit::ledger::{self, Loss};
use herald_sparkpost::fake::{FakeConfig, Fault, Faults};

use crate::support::{message, vendor};

/// Sends an email into `fault`, and resends it: the kit's check that the resend settles what
/// `loss` made ambiguous. The ambiguity's evidence.
async fn resent_after(fault: Fault, loss: Loss) -> Evidence {
    let vendor = vendor(FakeConfig {
        faults: Faults::next([fault]),
        ..FakeConfig::default()
    })
    .await;
    let deliveries = |key: &str| vendor.fake.ledger().deliveries_of(key);
    ledger::settled_by_resend(&vendor.adapter, &message(), loss, deliveries).await
}

#[tokio::test]
async fn accept_then_drop_is_ambiguous_and_the_resend_is_answered_without_a_second_delivery() {
    resent_after(Fault::AcceptThenDrop, Loss::DroppedAfterProcessing).await;
}

#[tokio::test]
async fn a_500_after_processing_is_ambiguous_and_the_resend_answers_the_first_id() {
    resent_after(Fault::ErrorAfterProcessing, Loss::ErrorAfterProcessing(500)).await;
}

#[tokio::test]
async fn a_503_is_ambiguous_because_sparkpost_does_not_document_it_as_not_processed() {
    // This fake did not process it; the resend inside the window is the first delivery.
    let loss = Loss::UnavailableBeforeProcessing(503);
    resent_after(Fault::UnavailableBeforeProcessing, loss).await;
}
