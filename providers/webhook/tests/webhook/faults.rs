//! Faults of the connection, as the webhook's own concerns see them: a connection error names
//! no URL (a receiver's URL may carry its token), and a receiver that does not deduplicate
//! processes a resend again. How each fault is classified is the conformance kit's to check
//! (`conformance.rs`).

use herald_provider::{Adapter, SendResult};
use herald_webhook::fake::Fault;

use crate::support::{adapter, key, message, receiver, route, secret};

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
