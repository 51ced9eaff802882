//! Faults of the fake Twilio, as its ledger records them: after each lost or doubtful answer,
//! the look-up finds the delivery the answer would have announced, or shows there was none
//! (the kit's `ledger` check). How each fault is classified is the conformance kit's to check
//! (`conformance.rs`).

use std::time::Duration;

use herald_provider::{Evidence, QueryResult};
use herald_provider_testkit::ledger::{self, Loss};
use herald_twilio::fake::{FakeConfig, Fault};

use crate::support::{Vendor, fake_config, key, sms, unique_text, vendor, vendor_with};

/// A fake Twilio that holds its next answer for a minute, and a client that gives up long
/// before.
async fn delaying_vendor() -> Vendor {
    let config = FakeConfig {
        delay: Duration::from_secs(60),
        ..fake_config()
    };
    let vendor = vendor_with(config, |route| route.timeout = Duration::from_millis(300)).await;
    vendor.fake.set_faults([Fault::Delay]);
    vendor
}

/// Sends an SMS through `vendor`'s next fault, and looks it up: the kit's check that the
/// look-up settles what `loss` made ambiguous. The ambiguity's evidence, and the look-up.
async fn looked_up(vendor: &Vendor, loss: Loss) -> (Evidence, QueryResult) {
    let text = unique_text();
    let message = sms(&text);
    let deliveries = || vendor.fake.ledger().deliveries_of(&text);
    ledger::settled_by_lookup(&vendor.adapter, &message, &key(&message), loss, deliveries).await
}

#[tokio::test]
async fn accept_then_drop_is_ambiguous_yet_delivered_and_the_query_finds_it() {
    let vendor = vendor().await;
    vendor.fake.set_faults([Fault::AcceptThenDrop]);

    let (_, found) = looked_up(&vendor, Loss::DroppedAfterProcessing).await;

    match found {
        QueryResult::LookAlikes { refs, evidence, .. } => {
            assert_eq!(refs, [vendor.fake.ledger().deliveries[0].sid.clone()]);
            assert_eq!(evidence.status, Some(200));
        }
        other => panic!("expected the delivery to be found, got {other:?}"),
    }
}

#[tokio::test]
async fn a_delayed_answer_times_out_as_ambiguous_yet_delivered() {
    let vendor = delaying_vendor().await;

    let (_, found) = looked_up(&vendor, Loss::HeldPastTheTimeout).await;

    assert!(matches!(found, QueryResult::LookAlikes { .. }), "{found:?}");
}

#[tokio::test]
async fn a_500_after_processing_is_ambiguous_and_the_query_finds_the_delivery() {
    let vendor = vendor().await;
    vendor.fake.set_faults([Fault::ErrorAfterProcessing]);

    let (evidence, found) = looked_up(&vendor, Loss::ErrorAfterProcessing(500)).await;

    assert_eq!(evidence.vendor_code.as_deref(), Some("20500"));
    assert!(matches!(found, QueryResult::LookAlikes { .. }), "{found:?}");
}

/// Twilio does not document 503 as "not processed", so it stays ambiguous; here nothing was
/// delivered, and the look-up says so.
#[tokio::test]
async fn a_503_is_ambiguous_and_the_query_shows_nothing_was_delivered() {
    let vendor = vendor().await;
    vendor.fake.set_faults([Fault::UnavailableBeforeProcessing]);

    looked_up(&vendor, Loss::UnavailableBeforeProcessing(503)).await;
    assert_eq!(vendor.fake.ledger().total(), 0);
}
