//! Faults of the fake Resend, as its ledger records them: an ambiguity that a resend inside
//! the window settles without a second delivery, and the fake's fault queue itself. How each
//! fault is classified is the conformance kit's to check (`conformance.rs`).

use herald_provider::{Adapter, SendResult};
use herald_resend::fake::{FakeConfig, Fault, Faults};

use crate::support::{Vendor, accepted_ref, key, message, vendor};

async fn vendor_with_faults(faults: Faults) -> Vendor {
    let vendor = vendor(FakeConfig::default()).await;
    vendor.fake.set_faults(faults);
    vendor
}

#[tokio::test]
async fn accept_then_drop_is_ambiguous_and_the_resend_is_answered_without_a_second_delivery() {
    let vendor = vendor_with_faults(Faults::next([Fault::AcceptThenDrop])).await;
    let key = key();

    match vendor.adapter.send(&message(), &key).await {
        SendResult::Ambiguous { evidence } => {
            assert_eq!(evidence.stage, "awaiting_response");
            assert_eq!(evidence.status, None, "no status line may reach the client");
        }
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);

    accepted_ref(&vendor.adapter.send(&message(), &key).await);
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn a_500_after_processing_is_ambiguous_and_the_resend_answers_the_first_id() {
    let vendor = vendor_with_faults(Faults::next([Fault::ErrorAfterProcessing])).await;
    let key = key();

    match vendor.adapter.send(&message(), &key).await {
        SendResult::Ambiguous { evidence } => {
            assert_eq!(evidence.status, Some(500));
            assert_eq!(evidence.vendor_code.as_deref(), Some("application_error"));
        }
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    let id = accepted_ref(&vendor.adapter.send(&message(), &key).await);
    assert!(!id.is_empty());
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn a_503_is_ambiguous_because_resend_does_not_document_it_as_not_processed() {
    let vendor = vendor_with_faults(Faults::next([Fault::UnavailableBeforeProcessing])).await;
    let key = key();

    match vendor.adapter.send(&message(), &key).await {
        SendResult::Ambiguous { evidence } => assert_eq!(evidence.status, Some(503)),
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    // This fake did not process it; the resend inside the window is the first delivery.
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 0);
    accepted_ref(&vendor.adapter.send(&message(), &key).await);
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn faults_apply_in_order_and_then_stop_unless_set_for_every_request() {
    let vendor = vendor_with_faults(Faults::next([Fault::RateLimited])).await;
    assert!(matches!(
        vendor.adapter.send(&message(), &key()).await,
        SendResult::Rejected { .. }
    ));
    accepted_ref(&vendor.adapter.send(&message(), &key()).await);

    vendor.fake.set_faults(Faults::always(Fault::RateLimited));
    for _ in 0..3 {
        assert!(matches!(
            vendor.adapter.send(&message(), &key()).await,
            SendResult::Rejected {
                permanent: false,
                ..
            }
        ));
    }
    vendor.fake.set_faults(Faults::none());
    accepted_ref(&vendor.adapter.send(&message(), &key()).await);
    assert_eq!(vendor.fake.ledger().total_deliveries(), 2);
}
