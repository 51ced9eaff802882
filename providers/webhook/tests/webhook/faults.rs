//! Faults of the connection, classified by when they happened: before the request was written
//! nothing was delivered (a transient rejection); after it, the receiver may have processed it
//! (an ambiguity), and the ledger shows that it did.

use std::time::Duration;

use herald_provider::{Adapter, SendResult};
use herald_webhook::WebhookRoute;
use herald_webhook::fake::{FakeConfig, Fault};

use crate::support::{adapter, key, message, receiver, receiver_with, route, secret};

#[tokio::test]
async fn accept_then_drop_is_ambiguous_although_the_webhook_was_processed() {
    let s1 = secret(1);
    let receiver = receiver(&[&s1]).await;
    receiver.set_faults(vec![Fault::AcceptThenDrop]);
    let key = key();

    let result = adapter(route(&[&s1]))
        .send(&message(format!("{}/h", receiver.base_url())), &key)
        .await;

    match result {
        SendResult::Ambiguous { evidence } => {
            assert_eq!(evidence.stage, "awaiting_response");
            assert_eq!(evidence.status, None, "no status line may reach the client");
            assert!(!evidence.detail.contains("timed out"), "{evidence:?}");
        }
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    assert_eq!(receiver.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn a_late_answer_times_out_as_ambiguous_although_the_webhook_was_processed() {
    let s1 = secret(1);
    let receiver = receiver_with(FakeConfig {
        secrets: vec![s1.clone()],
        faults: vec![Fault::Delay],
        delay: Duration::from_secs(60),
        ..FakeConfig::default()
    })
    .await;
    let key = key();
    let adapter = adapter(WebhookRoute {
        timeout: Duration::from_millis(500),
        ..route(&[&s1])
    });

    match adapter
        .send(&message(format!("{}/h", receiver.base_url())), &key)
        .await
    {
        SendResult::Ambiguous { evidence } => {
            assert_eq!(evidence.stage, "awaiting_response");
            assert!(evidence.detail.contains("timed out"), "{evidence:?}");
        }
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    assert_eq!(receiver.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn a_500_after_processing_is_ambiguous() {
    let s1 = secret(1);
    let receiver = receiver(&[&s1]).await;
    receiver.set_faults(vec![Fault::ErrorAfterProcessing]);
    let key = key();

    match adapter(route(&[&s1]))
        .send(&message(format!("{}/h", receiver.base_url())), &key)
        .await
    {
        SendResult::Ambiguous { evidence } => {
            assert_eq!(evidence.status, Some(500));
            assert!(
                evidence.detail.contains("may have been processed"),
                "{evidence:?}"
            );
        }
        other => panic!("expected an ambiguity, got {other:?}"),
    }
    assert_eq!(receiver.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn a_refused_connection_is_a_transient_rejection() {
    // A port that was just free: nothing listens there.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };

    match adapter(route(&[&secret(1)]))
        .send(&message(format!("http://127.0.0.1:{port}/h")), &key())
        .await
    {
        SendResult::Rejected {
            permanent,
            retry_after,
            evidence,
        } => {
            assert!(!permanent);
            assert_eq!(retry_after, None);
            assert_eq!(evidence.stage, "connect");
            assert!(
                !evidence.detail.contains("/h"),
                "no URL in the evidence: {evidence:?}"
            );
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[tokio::test]
async fn a_resend_after_an_ambiguity_is_processed_again_by_a_receiver_that_does_not_dedup() {
    // Why the adapter declares no idempotency window: the same webhook-id does not stop a
    // receiver that keeps no record of it from processing the resend.
    let s1 = secret(1);
    let receiver = receiver(&[&s1]).await;
    receiver.set_faults(vec![Fault::AcceptThenDrop]);
    let adapter = adapter(route(&[&s1]));
    let key = key();
    let message = message(format!("{}/h", receiver.base_url()));

    let first = adapter.send(&message, &key).await;
    let second = adapter.send(&message, &key).await;

    assert!(matches!(first, SendResult::Ambiguous { .. }), "{first:?}");
    assert!(matches!(second, SendResult::Accepted { .. }), "{second:?}");
    assert_eq!(receiver.ledger().deliveries_of(key.as_str()), 2);
    assert!(adapter.capabilities().idempotency_window.is_none());
}
