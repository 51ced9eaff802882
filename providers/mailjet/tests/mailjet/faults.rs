//! Faults of the fake Mailjet, as its ledger records them: after each lost or doubtful answer,
//! the look-up finds the delivery the answer would have announced, or shows there was none.
//! How each fault is classified is the conformance kit's to check (`conformance.rs`).

use std::time::Duration;

use herald_mailjet::fake::{FakeConfig, Fault};
use herald_provider::{Adapter, QueryResult, SendResult};

use crate::support::{email, fake_config, key, vendor, vendor_with};

#[tokio::test]
async fn accept_then_drop_is_ambiguous_yet_delivered_and_the_query_finds_it() {
    let vendor = vendor().await;
    vendor.fake.set_faults([Fault::AcceptThenDrop]);
    let message = email();
    let key = key(&message);

    match vendor.adapter.send(&message, &key).await {
        SendResult::Ambiguous { evidence } => {
            assert_eq!(evidence.stage, "awaiting_response");
            assert_eq!(evidence.status, None, "no status line may reach the client");
        }
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);

    match vendor.adapter.query(&message, &key).await {
        QueryResult::Accepted {
            provider_ref,
            evidence,
        } => {
            assert_eq!(
                provider_ref,
                Some(ledger.deliveries[0].message_id.to_string())
            );
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
    vendor.fake.set_faults([Fault::Delay]);
    let message = email();
    let key = key(&message);

    match vendor.adapter.send(&message, &key).await {
        SendResult::Ambiguous { evidence } => {
            assert!(evidence.detail.starts_with("timed out"), "{evidence:?}")
        }
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
    let found = vendor.adapter.query(&message, &key).await;
    assert!(matches!(found, QueryResult::Accepted { .. }), "{found:?}");
}

#[tokio::test]
async fn a_500_after_processing_is_ambiguous_and_the_query_finds_the_delivery() {
    let vendor = vendor().await;
    vendor.fake.set_faults([Fault::ErrorAfterProcessing]);
    let message = email();
    let key = key(&message);

    match vendor.adapter.send(&message, &key).await {
        SendResult::Ambiguous { evidence } => assert_eq!(evidence.status, Some(500)),
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
    let found = vendor.adapter.query(&message, &key).await;
    assert!(matches!(found, QueryResult::Accepted { .. }), "{found:?}");
}

/// Mailjet does not document 503 as "not processed", so it stays ambiguous; here nothing was
/// delivered, and the look-up says so.
#[tokio::test]
async fn a_503_is_ambiguous_and_the_query_shows_nothing_was_delivered() {
    let vendor = vendor().await;
    vendor.fake.set_faults([Fault::UnavailableBeforeProcessing]);
    let message = email();
    let key = key(&message);

    match vendor.adapter.send(&message, &key).await {
        SendResult::Ambiguous { evidence } => assert_eq!(evidence.status, Some(503)),
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    assert_eq!(vendor.fake.ledger().total(), 0);
    let lookup = vendor.adapter.query(&message, &key).await;
    assert!(
        matches!(lookup, QueryResult::NotFoundYet { .. }),
        "{lookup:?}"
    );
}
