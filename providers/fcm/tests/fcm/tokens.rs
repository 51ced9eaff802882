//! The access token against the fake's token endpoint: minted once and shared, replaced before
//! it expires, minted again once when FCM refuses it, and a refused key is a permanent refusal
//! that names no secret.

use std::time::Duration;

use herald_fcm::AUTH_STAGE;
use herald_fcm::fake::{FakeConfig, TEST_PRIVATE_KEY};
use herald_provider::{Adapter, SendResult};
use herald_provider_testkit::support::{accepted_ref, permanent_rejection, rejection, unique_key};

use crate::support::{CLIENT_TIMEOUT, adapter, message, private_key_line, vendor, vendor_with};

#[tokio::test]
async fn a_token_is_minted_once_and_carried_by_every_send() {
    let vendor = vendor(FakeConfig::default()).await;

    for _ in 0..3 {
        accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    }

    assert_eq!(vendor.fake.exchanges(), 1);
    assert_eq!(vendor.fake.ledger().total(), 3);
    let request = vendor.fake.last_request().unwrap();
    assert_eq!(request.auth_scheme.as_deref(), Some("Bearer"));
}

#[tokio::test]
async fn sends_that_need_a_token_at_once_share_one_exchange() {
    let vendor = vendor(FakeConfig::default()).await;
    let sends = (0..8).map(|_| async { vendor.adapter.send(&message(), &unique_key()).await });

    let results = futures::future::join_all(sends).await;

    for result in &results {
        accepted_ref(result);
    }
    assert_eq!(vendor.fake.exchanges(), 1, "one exchange for eight sends");
}

#[tokio::test]
async fn a_refused_token_is_replaced_once_and_the_send_goes_through() {
    let vendor = vendor(FakeConfig::default()).await;
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);

    vendor.fake.expire_tokens();
    let key = unique_key();
    accepted_ref(&vendor.adapter.send(&message(), &key).await);

    assert_eq!(vendor.fake.exchanges(), 2);
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);
    // The 401 was answered before processing; the resend is the one delivery.
    assert_eq!(ledger.requests, 3);
}

#[tokio::test]
async fn a_token_refused_again_after_its_replacement_is_a_permanent_refusal() {
    // Tokens that live no time at all: FCM refuses each one the moment it is issued.
    let config = FakeConfig {
        token_lifetime: Duration::ZERO,
        ..FakeConfig::default()
    };
    let vendor = vendor(config).await;

    let result = vendor.adapter.send(&message(), &unique_key()).await;

    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.status, Some(401));
    assert_eq!(evidence.vendor_code.as_deref(), Some("UNAUTHENTICATED"));
    assert_eq!(vendor.fake.exchanges(), 2, "one replacement, not more");
    assert_eq!(vendor.fake.ledger().requests, 2);
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn a_token_close_to_its_expiry_is_replaced_before_a_send_carries_it() {
    // A token of 2 s is replaced after 1 s (halfway, as it lives less than twice the margin).
    let config = FakeConfig {
        token_lifetime: Duration::from_secs(2),
        ..FakeConfig::default()
    };
    let vendor = vendor(config).await;
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    assert_eq!(vendor.fake.exchanges(), 1, "still fresh");

    // A bounded wait for the halfway point to pass, not for a condition.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);

    assert_eq!(vendor.fake.exchanges(), 2);
    assert_eq!(vendor.fake.ledger().requests, 3, "no send met a refusal");
}

#[tokio::test]
async fn a_refused_key_is_a_permanent_refusal_of_the_route_naming_no_secret() {
    let vendor = vendor(FakeConfig::default()).await;
    vendor.fake.revoke_key();

    let result = vendor.adapter.send(&message(), &unique_key()).await;

    let evidence = permanent_rejection(&result).clone();
    assert_eq!(evidence.stage, AUTH_STAGE);
    // Recorded as a refusal of the route's credential, whatever the token endpoint's 400.
    assert_eq!(evidence.status, Some(401));
    assert_eq!(evidence.vendor_code.as_deref(), Some("invalid_grant"));
    assert!(
        evidence.detail.contains("Invalid JWT Signature"),
        "{evidence:?}"
    );
    let shown = format!("{result:?} {}", serde_json::to_string(&evidence).unwrap());
    assert!(!shown.contains(TEST_PRIVATE_KEY.trim()), "{shown}");
    assert!(!shown.contains(private_key_line()), "{shown}");
    assert!(!shown.contains("eyJ"), "no assertion (a JWT) in: {shown}");
    assert_eq!(vendor.fake.ledger().requests, 0, "no send was made");
}

#[tokio::test]
async fn a_key_the_fake_does_not_know_is_refused_like_a_revoked_one() {
    let vendor = vendor(FakeConfig::default()).await;
    let other = FakeConfig {
        private_key_id: "ffffffffffffffffffffffffffffffffffffffff".to_owned(),
        ..FakeConfig::default()
    };
    let unknown = adapter(
        &vendor.fake.base_url(),
        &other.service_account(&vendor.fake.token_uri()),
        CLIENT_TIMEOUT,
    );

    let evidence = permanent_rejection(&unknown.send(&message(), &unique_key()).await).clone();

    assert_eq!(evidence.stage, AUTH_STAGE);
    assert_eq!(evidence.vendor_code.as_deref(), Some("invalid_grant"));
    assert_eq!(vendor.fake.exchanges(), 0);
}

#[tokio::test]
async fn a_token_endpoint_that_cannot_be_reached_is_a_transient_refusal_before_any_send() {
    let vendor = vendor(FakeConfig::default()).await;
    // Bound and dropped: nothing listens there any more.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let token_uri = format!("http://{}/token", closed.local_addr().unwrap());
    drop(closed);
    let unreachable = adapter(
        &vendor.fake.base_url(),
        &FakeConfig::default().service_account(&token_uri),
        CLIENT_TIMEOUT,
    );

    let (permanent, _, evidence) = rejection(unreachable.send(&message(), &unique_key()).await);

    assert!(!permanent);
    assert_eq!(evidence.stage, AUTH_STAGE);
    assert!(evidence.detail.contains("nothing was sent"), "{evidence:?}");
    assert_eq!(vendor.fake.ledger().requests, 0);
}

#[tokio::test]
async fn a_token_endpoint_that_answers_503_is_a_transient_refusal_with_its_retry_after() {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    use axum::routing::post;

    let vendor = vendor(FakeConfig::default()).await;
    let down = axum::Router::new().route(
        "/token",
        post(|| async {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, "3")],
                r#"{"error": "internal_failure"}"#,
            )
                .into_response()
        }),
    );
    let server = herald_provider::fake::serve(down).await.unwrap();
    let key = FakeConfig::default().service_account(&format!("{}/token", server.base_url()));
    let adapter = adapter(&vendor.fake.base_url(), &key, CLIENT_TIMEOUT);

    match adapter.send(&message(), &unique_key()).await {
        SendResult::Rejected {
            permanent: false,
            retry_after,
            evidence,
        } => {
            assert_eq!(retry_after, Some(Duration::from_secs(3)));
            assert_eq!(evidence.stage, AUTH_STAGE);
            assert_eq!(evidence.status, Some(503));
        }
        other => panic!("expected a transient refusal, got {other:?}"),
    }
    assert_eq!(vendor.fake.ledger().requests, 0);
}

#[tokio::test]
async fn a_slow_token_exchange_counts_against_the_sends_timeout() {
    // The fake answers its token endpoint at once; a timeout of a few milliseconds cannot fit
    // an exchange and a send, and says so without sending.
    let vendor = vendor_with(FakeConfig::default(), Duration::from_millis(1)).await;

    let result = vendor.adapter.send(&message(), &unique_key()).await;

    let (permanent, _, evidence) = rejection(result);
    assert!(!permanent);
    assert_eq!(evidence.stage, AUTH_STAGE);
    assert_eq!(vendor.fake.ledger().requests, 0);
}
