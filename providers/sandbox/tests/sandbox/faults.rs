//! Each injected fault as the ledger records it: a fault after processing is settled by a
//! replay without a second delivery, one before processing delivers nothing, and the fault
//! rules trigger as configured. How each answer is classified is the conformance kit's to
//! check (`conformance.rs`).

use herald_provider::{Adapter, SendResult};
use herald_sandbox::{Profile, parse_faults};

use crate::support::{Vendor, config, key, message, vendor};

async fn vendor_with_faults(spec: &str) -> Vendor {
    let vendor = vendor(config(Profile::Idempotent)).await;
    vendor
        .ledger
        .set_faults(&parse_faults(spec).unwrap())
        .await
        .unwrap();
    vendor
}

#[tokio::test]
async fn accept_then_drop_is_ambiguous_although_the_message_was_delivered() {
    let vendor = vendor_with_faults("accept_then_drop:nth=1").await;
    let key = key();

    match vendor.adapter.send(&message(), &key).await {
        SendResult::Ambiguous { evidence } => {
            assert_eq!(evidence.stage, "awaiting_response");
            assert_eq!(evidence.status, None, "no status line may reach the client");
            assert!(!evidence.detail.contains("timed out"), "{evidence:?}");
        }
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    assert_eq!(
        vendor
            .ledger
            .ledger()
            .await
            .unwrap()
            .deliveries_of(key.as_str()),
        1
    );

    // The resend inside the window settles it: the vendor answers from its record.
    match vendor.adapter.send(&message(), &key).await {
        SendResult::Accepted { evidence, .. } => {
            assert!(
                evidence.detail.starts_with("idempotent replay"),
                "{evidence:?}"
            )
        }
        other => panic!("expected a replayed acceptance, got {other:?}"),
    }
    assert_eq!(
        vendor
            .ledger
            .ledger()
            .await
            .unwrap()
            .deliveries_of(key.as_str()),
        1
    );
}

#[tokio::test]
async fn a_500_after_processing_is_ambiguous_and_its_replay_answers_the_acceptance() {
    let vendor = vendor_with_faults("error_after_processing:nth=1").await;
    let key = key();

    match vendor.adapter.send(&message(), &key).await {
        SendResult::Ambiguous { evidence } => assert_eq!(evidence.status, Some(500)),
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    match vendor.adapter.send(&message(), &key).await {
        SendResult::Accepted {
            provider_ref: Some(_),
            evidence,
        } => {
            assert_eq!(evidence.status, Some(202));
            assert!(
                evidence.detail.starts_with("idempotent replay"),
                "{evidence:?}"
            );
        }
        other => panic!("expected a replayed acceptance, got {other:?}"),
    }
    assert_eq!(
        vendor
            .ledger
            .ledger()
            .await
            .unwrap()
            .deliveries_of(key.as_str()),
        1
    );
}

#[tokio::test]
async fn unavailable_before_processing_is_a_transient_rejection_and_nothing_is_delivered() {
    let vendor = vendor_with_faults("unavailable_before_processing:1").await;
    let key = key();

    match vendor.adapter.send(&message(), &key).await {
        SendResult::Rejected {
            permanent: false,
            evidence,
            ..
        } => {
            assert_eq!(evidence.status, Some(503));
            assert_eq!(evidence.vendor_code.as_deref(), Some("unavailable"));
        }
        other => panic!("expected a transient rejection, got {other:?}"),
    }
    let ledger = vendor.ledger.ledger().await.unwrap();
    assert_eq!(ledger.requests, 1);
    assert_eq!(ledger.deliveries_of(key.as_str()), 0);
}

#[tokio::test]
async fn an_nth_trigger_hits_exactly_the_nth_request() {
    let vendor = vendor_with_faults("unavailable_before_processing:nth=3").await;
    let keys: Vec<_> = (0..5).map(|_| key()).collect();

    let mut rejected = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        if let SendResult::Rejected { .. } = vendor.adapter.send(&message(), key).await {
            rejected.push(i + 1);
        }
    }

    assert_eq!(rejected, vec![3]);
    let ledger = vendor.ledger.ledger().await.unwrap();
    assert_eq!(ledger.requests, 5);
    let delivered: Vec<u64> = keys
        .iter()
        .map(|k| ledger.deliveries_of(k.as_str()))
        .collect();
    assert_eq!(delivered, vec![1, 1, 0, 1, 1]);
}

#[tokio::test]
async fn fault_rules_replaced_at_runtime_take_effect_at_once() {
    let vendor = vendor_with_faults("rate_limited:1").await;
    assert!(matches!(
        vendor.adapter.send(&message(), &key()).await,
        SendResult::Rejected { .. }
    ));

    vendor.ledger.set_faults(&[]).await.unwrap();

    assert!(matches!(
        vendor.adapter.send(&message(), &key()).await,
        SendResult::Accepted { .. }
    ));
}
