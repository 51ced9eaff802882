//! Faults of the fake SendGrid, as its ledger records them: with Email Activity, an ambiguity
//! that the look-up settles — the message found if it was processed, nothing yet if not. How
//! each fault is classified is the conformance kit's to check (`conformance.rs`).

use herald_provider_testkit::ledger::{self, Loss};
use herald_provider_testkit::support::unique_key;
use herald_sendgrid::fake::{FakeConfig, Fault, Faults};

use crate::support::{message, vendor};

async fn looked_up_after(fault: Fault, loss: Loss) {
    let vendor = vendor(FakeConfig::default()).await;
    vendor.fake.set_faults(Faults::next([fault]));
    let key = unique_key();
    let deliveries = || vendor.fake.ledger().deliveries_of(key.as_str());
    ledger::settled_by_lookup(&vendor.adapter, &message(), &key, loss, deliveries).await;
}

#[tokio::test]
async fn accept_then_drop_is_ambiguous_and_the_look_up_finds_the_one_message() {
    looked_up_after(Fault::AcceptThenDrop, Loss::DroppedAfterProcessing).await;
}

#[tokio::test]
async fn a_500_after_processing_is_ambiguous_and_the_look_up_finds_the_one_message() {
    looked_up_after(Fault::ErrorAfterProcessing, Loss::ErrorAfterProcessing(500)).await;
}

#[tokio::test]
async fn a_503_is_ambiguous_and_the_look_up_finds_nothing_yet() {
    looked_up_after(
        Fault::UnavailableBeforeProcessing,
        Loss::UnavailableBeforeProcessing(503),
    )
    .await;
}
