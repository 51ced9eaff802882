//! Faults of the fake Mailjet, as its ledger records them: after each lost or doubtful answer,
//! the look-up finds the delivery the answer would have announced, or shows there was none
//! (the kit's `ledger` check). How each fault is classified is the conformance kit's to check
//! (`conformance.rs`).

use std::time::Duration;

use herald_mailjet::fake::{FakeConfig, Fault};
use herald_provider::{Evidence, QueryResult};
use herald_provider_testkit::ledger::{self, Loss};

use crate::support::{Vendor, email, fake_config, key, vendor, vendor_with};

/// Sends an email into `fault` of `vendor`'s fake, and looks it up by its `CustomID`: the kit's
/// check that the look-up settles what `loss` made ambiguous. The ambiguity's evidence, and
/// the look-up.
async fn looked_up(vendor: &Vendor, fault: Fault, loss: Loss) -> (Evidence, QueryResult) {
    vendor.fake.set_faults([fault]);
    let message = email();
    let key = key(&message);
    let deliveries = || vendor.fake.ledger().deliveries_of(key.as_str());
    ledger::settled_by_lookup(&vendor.adapter, &message, &key, loss, deliveries).await
}

#[tokio::test]
async fn accept_then_drop_is_ambiguous_yet_delivered_and_the_query_finds_it() {
    let vendor = vendor().await;

    let (_, found) = looked_up(&vendor, Fault::AcceptThenDrop, Loss::DroppedAfterProcessing).await;
    match found {
        QueryResult::Accepted {
            provider_ref,
            evidence,
        } => {
            let sent = vendor.fake.ledger().deliveries[0].message_id.to_string();
            assert_eq!(provider_ref, Some(sent));
            assert!(evidence.detail.starts_with("found message"), "{evidence:?}");
        }
        other => panic!("expected the delivery to be found, got {other:?}"),
    }
}

#[tokio::test]
async fn a_delayed_answer_times_out_as_ambiguous_yet_delivered() {
    let config = FakeConfig {
        delay: Duration::from_secs(60),
        ..fake_config()
    };
    let vendor = vendor_with(config, |route| route.timeout = Duration::from_millis(300)).await;

    let (_, found) = looked_up(&vendor, Fault::Delay, Loss::HeldPastTheTimeout).await;
    assert!(matches!(found, QueryResult::Accepted { .. }), "{found:?}");
}

#[tokio::test]
async fn a_500_after_processing_is_ambiguous_and_the_query_finds_the_delivery() {
    let vendor = vendor().await;
    let loss = Loss::ErrorAfterProcessing(500);

    let (_, found) = looked_up(&vendor, Fault::ErrorAfterProcessing, loss).await;
    assert!(matches!(found, QueryResult::Accepted { .. }), "{found:?}");
}

/// Mailjet does not document 503 as "not processed", so it stays ambiguous; here nothing was
/// delivered, and the look-up says so.
#[tokio::test]
async fn a_503_is_ambiguous_and_the_query_shows_nothing_was_delivered() {
    let vendor = vendor().await;
    let loss = Loss::UnavailableBeforeProcessing(503);

    looked_up(&vendor, Fault::UnavailableBeforeProcessing, loss).await;
    assert_eq!(vendor.fake.ledger().total(), 0);
}
