//! Each injected fault, as the adapter classifies it and as the ledger records it: a fault
//! after processing must never look like a rejection, and the look-up must then find the
//! delivery that the lost answer would have announced.

use std::time::Duration;

use herald_provider::{Adapter, QueryResult, SendResult};
use herald_twilio::fake::{FakeConfig, Fault};

use crate::support::{fake_config, key, route, sms, unique_text, vendor, vendor_with};

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

#[tokio::test]
async fn a_429_is_a_transient_rejection_with_retry_after_and_code_20429() {
    let vendor = vendor().await;
    vendor.fake.set_faults([Fault::RateLimited]);
    let text = unique_text();
    let message = sms(&text);

    match vendor.adapter.send(&message, &key(&message)).await {
        SendResult::Rejected {
            permanent: false,
            retry_after,
            evidence,
        } => {
            assert_eq!(retry_after, Some(Duration::from_secs(1)));
            assert_eq!(evidence.status, Some(429));
            assert_eq!(evidence.vendor_code.as_deref(), Some("20429"));
        }
        other => panic!("expected a transient rejection, got {other:?}"),
    }
    assert_eq!(vendor.fake.ledger().total(), 0);

    // The fault was for one request only: the retry goes through.
    let retried = vendor.adapter.send(&message, &key(&message)).await;
    assert!(
        matches!(retried, SendResult::Accepted { .. }),
        "{retried:?}"
    );
    assert_eq!(vendor.fake.ledger().deliveries_of(&text), 1);
}

#[tokio::test]
async fn a_refused_connection_is_a_transient_rejection() {
    crate::support::install_crypto_provider();
    // A port that was free a moment ago and has no listener now.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let adapter = herald_twilio::TwilioAdapter::new(route(url)).unwrap();
    let message = sms(&unique_text());

    match adapter.send(&message, &key(&message)).await {
        SendResult::Rejected {
            permanent: false,
            evidence,
            ..
        } => assert_eq!(evidence.stage, "connect"),
        other => panic!("expected a transient rejection, got {other:?}"),
    }
}
