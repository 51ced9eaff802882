//! Faults of the fake OneSignal, as its ledger records them: an ambiguity that a resend inside
//! the window settles without a second delivery, a repeat while the first answer is held, and
//! the fake's fault queue itself. How each fault is classified is the conformance kit's to
//! check (`conformance.rs`).

use std::time::Duration;

use herald_onesignal::fake::{FakeConfig, Fault, Faults};
use herald_provider::{Adapter, SendResult};

use crate::support::{
    SHORT_TIMEOUT, Vendor, accepted_ref, documented_error, key, message, vendor, vendor_with,
};

const SERVICE_UNAVAILABLE: &str =
    include_str!("../../../../fixtures/onesignal/errors/service-unavailable.503.json");

async fn vendor_with_faults(faults: Faults) -> Vendor {
    let vendor = vendor(FakeConfig::default()).await;
    vendor.fake.set_faults(faults);
    vendor
}

async fn delaying_vendor() -> Vendor {
    let config = FakeConfig {
        delay: Duration::from_secs(60),
        faults: Faults::next([Fault::Delay]),
        ..FakeConfig::default()
    };
    let (app_id, api_key) = (config.app_id.clone(), config.api_key.clone());
    vendor_with(config, &app_id, &api_key, SHORT_TIMEOUT).await
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
async fn a_repeat_while_the_first_answer_is_held_gets_the_first_result_at_once() {
    let vendor = delaying_vendor().await;
    let key = key();

    let first = vendor.adapter.send(&message(), &key).await;
    let repeat = vendor.adapter.send(&message(), &key).await;

    assert!(matches!(first, SendResult::Ambiguous { .. }), "{first:?}");
    accepted_ref(&repeat);
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn a_500_after_processing_is_ambiguous_and_the_resend_answers_the_first_id() {
    let vendor = vendor_with_faults(Faults::next([Fault::ErrorAfterProcessing])).await;
    let key = key();

    match vendor.adapter.send(&message(), &key).await {
        SendResult::Ambiguous { evidence } => assert_eq!(evidence.status, Some(500)),
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    accepted_ref(&vendor.adapter.send(&message(), &key).await);
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn a_503_is_ambiguous_because_onesignal_does_not_document_it_as_not_processed() {
    let vendor = vendor_with_faults(Faults::next([Fault::UnavailableBeforeProcessing])).await;
    let key = key();

    match vendor.adapter.send(&message(), &key).await {
        SendResult::Ambiguous { evidence } => {
            assert_eq!(evidence.status, Some(503));
            assert_eq!(
                evidence.vendor_code,
                Some(documented_error(SERVICE_UNAVAILABLE))
            );
        }
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

    vendor
        .fake
        .set_faults(Faults::always(Fault::UnavailableBeforeProcessing));
    for _ in 0..3 {
        assert!(matches!(
            vendor.adapter.send(&message(), &key()).await,
            SendResult::Ambiguous { .. }
        ));
    }
    vendor.fake.set_faults(Faults::none());
    accepted_ref(&vendor.adapter.send(&message(), &key()).await);
    assert_eq!(vendor.fake.ledger().total_deliveries(), 2);
}
