//! Faults of the fake Twilio, as its ledger records them: after each lost or doubtful answer,
//! the look-up finds the delivery the answer would have announced, or shows there was none.
//! How each fault is classified is the conformance kit's to check (`conformance.rs`).

use std::time::Duration;

use herald_provider::{Adapter, QueryResult, SendResult};
use herald_twilio::fake::{FakeConfig, Fault};

use crate::support::{fake_config, key, sms, unique_text, vendor, vendor_with};

#[tokio::test]
async fn accept_then_drop_is_ambiguous_yet_delivered_and_the_query_finds_it() {
    let vendor = vendor().await;
    vendor.fake.set_faults([Fault::AcceptThenDrop]);
    let text = unique_text();
    let message = sms(&text);

    match vendor.adapter.send(&message, &key(&message)).await {
        SendResult::Ambiguous { evidence } => {
            assert_eq!(evidence.stage, "awaiting_response");
            assert_eq!(evidence.status, None, "no status line may reach the client");
        }
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.deliveries_of(&text), 1);

    match vendor.adapter.query(&message, &key(&message)).await {
        QueryResult::LookAlikes { refs, evidence, .. } => {
            assert_eq!(refs, [ledger.deliveries[0].sid.clone()]);
            assert_eq!(evidence.status, Some(200));
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
    vendor.fake.set_faults([Fault::Delay]);
    let text = unique_text();
    let message = sms(&text);

    match vendor.adapter.send(&message, &key(&message)).await {
        SendResult::Ambiguous { evidence } => {
            assert!(evidence.detail.starts_with("timed out"), "{evidence:?}")
        }
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    assert_eq!(vendor.fake.ledger().deliveries_of(&text), 1);
    let found = vendor.adapter.query(&message, &key(&message)).await;
    assert!(
        matches!(&found, QueryResult::LookAlikes { refs, .. } if refs.len() == 1),
        "{found:?}"
    );
}

#[tokio::test]
async fn a_500_after_processing_is_ambiguous_and_the_query_finds_the_delivery() {
    let vendor = vendor().await;
    vendor.fake.set_faults([Fault::ErrorAfterProcessing]);
    let text = unique_text();
    let message = sms(&text);

    match vendor.adapter.send(&message, &key(&message)).await {
        SendResult::Ambiguous { evidence } => {
            assert_eq!(evidence.status, Some(500));
            assert_eq!(evidence.vendor_code.as_deref(), Some("20500"));
        }
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    assert_eq!(vendor.fake.ledger().deliveries_of(&text), 1);
    let found = vendor.adapter.query(&message, &key(&message)).await;
    assert!(
        matches!(&found, QueryResult::LookAlikes { refs, .. } if refs.len() == 1),
        "{found:?}"
    );
}

/// Twilio does not document 503 as "not processed", so it stays ambiguous; here nothing was
/// delivered, and the look-up says so.
#[tokio::test]
async fn a_503_is_ambiguous_and_the_query_shows_nothing_was_delivered() {
    let vendor = vendor().await;
    vendor.fake.set_faults([Fault::UnavailableBeforeProcessing]);
    let text = unique_text();
    let message = sms(&text);

    match vendor.adapter.send(&message, &key(&message)).await {
        SendResult::Ambiguous { evidence } => assert_eq!(evidence.status, Some(503)),
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    assert_eq!(vendor.fake.ledger().total(), 0);
    let lookup = vendor.adapter.query(&message, &key(&message)).await;
    assert!(
        matches!(lookup, QueryResult::NotFoundYet { .. }),
        "{lookup:?}"
    );
}
