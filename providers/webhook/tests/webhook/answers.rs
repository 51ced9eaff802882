//! Every answer Standard Webhooks gives a meaning to, classified as the crate docs say: 2xx
//! accepted; 3xx and 410 refused for good; 429 (and 408) refused for now with Retry-After;
//! other 4xx refused for good; 502, 504 and the other 5xx ambiguous, because the receiver may
//! have processed the webhook.

use std::time::Duration;

use herald_provider::{Adapter, Evidence, SendResult};
use herald_webhook::fake::{FakeHandle, Fault};

use crate::support::{adapter, key, message, receiver, route, secret};

/// Sends one webhook to a receiver that answers with `fault`; returns the result and how many
/// times the receiver really processed it.
async fn answer(fault: Fault) -> (SendResult, u64, FakeHandle) {
    let s1 = secret(1);
    let receiver = receiver(&[&s1]).await;
    receiver.set_faults(vec![fault]);
    let key = key();
    let result = adapter(route(&[&s1]))
        .send(&message(format!("{}/h", receiver.base_url())), &key)
        .await;
    let delivered = receiver.ledger().deliveries_of(key.as_str());
    (result, delivered, receiver)
}

fn rejected(result: &SendResult) -> (bool, Option<Duration>, &Evidence) {
    match result {
        SendResult::Rejected {
            permanent,
            retry_after,
            evidence,
        } => (*permanent, *retry_after, evidence),
        other => panic!("expected a rejection, got {other:?}"),
    }
}

fn ambiguous(result: &SendResult) -> &Evidence {
    match result {
        SendResult::Ambiguous { evidence } => evidence,
        other => panic!("expected an ambiguity, got {other:?}"),
    }
}

#[tokio::test]
async fn every_2xx_is_an_acceptance_without_a_provider_ref() {
    for status in [200, 201, 202, 204] {
        let (result, delivered, _) = answer(Fault::StatusAfterProcessing(status)).await;
        match result {
            SendResult::Accepted {
                provider_ref,
                evidence,
            } => {
                assert_eq!(provider_ref, None);
                assert_eq!(evidence.status, Some(status));
                assert_eq!(evidence.vendor_code, None);
            }
            other => panic!("{status}: expected an acceptance, got {other:?}"),
        }
        assert_eq!(delivered, 1);
    }
}

#[tokio::test]
async fn a_redirect_is_a_permanent_rejection_and_is_not_followed() {
    for status in [301, 302, 303, 307, 308] {
        let (result, _, receiver) = answer(Fault::StatusBeforeProcessing(status)).await;
        let (permanent, retry_after, evidence) = rejected(&result);
        assert!(permanent, "{status}");
        assert_eq!(retry_after, None);
        assert_eq!(evidence.status, Some(status));
        assert!(
            evidence.detail.contains("redirect to /moved"),
            "{evidence:?}"
        );
        assert_eq!(receiver.ledger().requests.len(), 1, "followed a {status}");
    }
}

#[tokio::test]
async fn gone_is_a_permanent_rejection_that_says_the_endpoint_is_gone() {
    let (result, delivered, _) = answer(Fault::StatusBeforeProcessing(410)).await;
    let (permanent, _, evidence) = rejected(&result);
    assert!(permanent);
    assert_eq!(evidence.status, Some(410));
    assert!(evidence.detail.starts_with("endpoint gone"), "{evidence:?}");
    assert_eq!(delivered, 0);
}

#[tokio::test]
async fn too_many_requests_is_a_transient_rejection_with_its_retry_after() {
    let (result, delivered, _) = answer(Fault::RateLimited).await;
    let (permanent, retry_after, evidence) = rejected(&result);
    assert!(!permanent);
    assert_eq!(retry_after, Some(Duration::from_secs(1)));
    assert_eq!(evidence.status, Some(429));
    assert_eq!(evidence.vendor_code, None);
    assert_eq!(delivered, 0);
}

#[tokio::test]
async fn a_request_timeout_from_the_receiver_is_a_transient_rejection() {
    let (result, _, _) = answer(Fault::StatusBeforeProcessing(408)).await;
    let (permanent, _, evidence) = rejected(&result);
    assert!(!permanent);
    assert_eq!(evidence.status, Some(408));
}

#[tokio::test]
async fn other_client_errors_are_permanent_rejections() {
    for status in [400, 401, 403, 404, 405, 409, 413, 415, 422] {
        let (result, delivered, _) = answer(Fault::StatusBeforeProcessing(status)).await;
        let (permanent, retry_after, evidence) = rejected(&result);
        assert!(permanent, "{status}");
        assert_eq!(retry_after, None);
        assert_eq!(evidence.status, Some(status));
        assert_eq!(delivered, 0);
    }
}

#[tokio::test]
async fn bad_gateway_and_gateway_timeout_are_ambiguous_because_the_receiver_may_have_processed_it()
{
    for status in [502, 504] {
        let (result, delivered, _) = answer(Fault::StatusAfterProcessing(status)).await;
        let evidence = ambiguous(&result);
        assert_eq!(evidence.status, Some(status));
        assert!(
            evidence.detail.contains("may have processed"),
            "{evidence:?}"
        );
        assert!(evidence.detail.contains("throttle"), "{evidence:?}");
        // The fake's gateway did pass it on: exactly the case a rejection would get wrong.
        assert_eq!(delivered, 1);
    }
}

#[tokio::test]
async fn a_503_is_ambiguous_since_no_receiver_documents_it_as_not_processed() {
    // This receiver did not process it, but nothing in the answer proves so.
    let (result, delivered, _) = answer(Fault::UnavailableBeforeProcessing).await;
    let evidence = ambiguous(&result);
    assert_eq!(evidence.status, Some(503));
    // An ambiguity carries no retry_after, so the receiver's hint is kept in the evidence.
    assert!(evidence.detail.contains("Retry-After: 1 s"), "{evidence:?}");
    assert_eq!(delivered, 0);
}

#[tokio::test]
async fn other_server_errors_are_ambiguous() {
    for status in [500, 501, 505] {
        let (result, _, _) = answer(Fault::StatusAfterProcessing(status)).await;
        assert_eq!(ambiguous(&result).status, Some(status));
    }
}
