//! The access token against the fake's token endpoint: minted once and shared, replaced before
//! it expires, minted again once when FCM refuses it, and a refused key is a permanent refusal
//! that names no secret.

use std::time::{Duration, Instant};

use herald_fcm::fake::{FakeConfig, TEST_PRIVATE_KEY};
use herald_fcm::{AUTH_STAGE, FcmAdapter};
use herald_provider::{Adapter, SendResult};
use herald_provider_testkit::support::{
    accepted_ref, ambiguous, permanent_rejection, rejection, unique_key,
};

use crate::scripted::{Play, SENT, Scripted, THIRD_PARTY_AUTH_ERROR, UNAUTHENTICATED};
use crate::support::{CLIENT_TIMEOUT, adapter, message, private_key_line, vendor};

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
    // A token that lives less than twice the adapter's margin of 5 minutes is replaced halfway
    // through its life: one of 4 s after 2 s.
    let lifetime = Duration::from_secs(4);
    let halfway = lifetime / 2;
    let config = FakeConfig {
        token_lifetime: lifetime,
        ..FakeConfig::default()
    };
    let vendor = vendor(config).await;
    let asked = Instant::now();
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    // The token came between `asked` and now: it is due for replacement no sooner than
    // `asked + halfway`, and no later than `received_by + halfway`.
    let received_by = Instant::now();
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    assert!(
        Instant::now() < asked + halfway,
        "the second send came after the token was due: nothing proven"
    );
    assert_eq!(vendor.fake.exchanges(), 1, "still fresh");

    // Until the latest moment the token can fall due, not a guess around it.
    tokio::time::sleep_until((received_by + halfway).into()).await;
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

/// How much later than its timeout a send may come back: `within`'s own grace for a timer that
/// fired late, and a busy machine's scheduling.
const GRACE: Duration = Duration::from_millis(500);

/// Each of `sends` sends started together, with how long it took.
async fn timed_sends(adapter: &FcmAdapter, sends: usize) -> Vec<(SendResult, Duration)> {
    let sends = (0..sends).map(|_| async {
        let started = Instant::now();
        let result = adapter.send(&message(), &unique_key()).await;
        (result, started.elapsed())
    });
    futures::future::join_all(sends).await
}

#[tokio::test]
async fn a_slow_token_exchange_counts_against_the_sends_timeout() {
    // A token endpoint that never answers: the first send waits for its exchange, the others
    // for the first's (or, where the first gave up just before their own deadline, for one of
    // their own), and every one of them only as long as its own timeout.
    let stand_in = Scripted::start(vec![Play::Hang], vec![Play::Answer(200, SENT)]).await;
    let timeout = Duration::from_millis(500);
    let adapter = stand_in.adapter(timeout);

    for (result, took) in timed_sends(&adapter, 4).await {
        assert!(took <= timeout + GRACE, "took {took:?}: {result:?}");
        let (permanent, _, evidence) = rejection(result);
        assert!(!permanent, "{evidence:?}");
        assert_eq!(evidence.stage, AUTH_STAGE);
        assert!(
            evidence.detail.starts_with("nothing was sent"),
            "{evidence:?}"
        );
    }
    assert!(stand_in.exchanges() >= 1);
    assert_eq!(stand_in.sends(), 0, "no send reached messages:send");
}

#[tokio::test]
async fn a_new_token_after_a_401_is_had_within_the_sends_timeout_or_not_at_all() {
    // FCM refuses the first token; the exchange for a new one never answers.
    let stand_in = Scripted::start(
        vec![Play::token(), Play::Hang],
        vec![Play::Answer(401, UNAUTHENTICATED)],
    )
    .await;
    let timeout = Duration::from_millis(500);
    let adapter = stand_in.adapter(timeout);

    let [(result, took)] = <[_; 1]>::try_from(timed_sends(&adapter, 1).await).unwrap();

    assert!(took <= timeout + GRACE, "took {took:?}: {result:?}");
    let (permanent, _, evidence) = rejection(result);
    assert!(!permanent, "{evidence:?}");
    assert_eq!(evidence.stage, AUTH_STAGE);
    assert!(
        evidence.detail.contains("not sent again") && !evidence.detail.contains("nothing was sent"),
        "a send was made, and refused: {evidence:?}"
    );
    assert_eq!((stand_in.exchanges(), stand_in.sends()), (2, 1));
}

#[tokio::test]
async fn the_send_once_more_after_a_401_has_only_what_is_left_of_the_timeout() {
    // The 401 comes after most of the timeout; the send once more is never answered. Given a
    // whole timeout of its own, it would end at 1.6 s.
    let stand_in = Scripted::start(
        vec![Play::token()],
        vec![
            Play::After(Duration::from_millis(600), 401, UNAUTHENTICATED),
            Play::Hang,
        ],
    )
    .await;
    let timeout = Duration::from_secs(1);
    let adapter = stand_in.adapter(timeout);

    let [(result, took)] = <[_; 1]>::try_from(timed_sends(&adapter, 1).await).unwrap();

    assert!(took <= timeout + GRACE / 2, "took {took:?}: {result:?}");
    // Written, and no answer: anything may have happened.
    assert_eq!(ambiguous(&result).stage, "awaiting_response");
    assert_eq!((stand_in.exchanges(), stand_in.sends()), (2, 2));
}

#[tokio::test]
async fn no_time_left_after_a_401_is_a_transient_refusal_and_no_send_once_more() {
    // The process stands still past the timeout while FCM's 401 comes: the answer is read on
    // waking, and no time is left for a new token or a send.
    let timeout = Duration::from_millis(300);
    let stand_in = Scripted::start(
        vec![Play::token()],
        vec![Play::Frozen(
            timeout + Duration::from_millis(400),
            401,
            UNAUTHENTICATED,
        )],
    )
    .await;
    let adapter = stand_in.adapter(timeout);

    let (permanent, _, evidence) = rejection(adapter.send(&message(), &unique_key()).await);

    assert!(!permanent, "{evidence:?}");
    assert_eq!(evidence.stage, AUTH_STAGE);
    assert!(evidence.detail.contains("not sent again"), "{evidence:?}");
    assert!(evidence.detail.contains("no time was left"), "{evidence:?}");
    assert_eq!((stand_in.exchanges(), stand_in.sends()), (1, 1));
}

#[tokio::test]
async fn a_third_party_auth_error_is_not_sent_again_with_a_new_token() {
    // A 401 for the project's APNs or web push credential: a new access token cures nothing.
    // The stand-in would answer a send once more the same way, so only the counts tell.
    let stand_in = Scripted::start(
        vec![Play::token()],
        vec![Play::Answer(401, THIRD_PARTY_AUTH_ERROR)],
    )
    .await;

    let result = stand_in
        .adapter(CLIENT_TIMEOUT)
        .send(&message(), &unique_key())
        .await;

    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.status, Some(401));
    assert_eq!(
        evidence.vendor_code.as_deref(),
        Some("THIRD_PARTY_AUTH_ERROR")
    );
    assert_eq!(stand_in.sends(), 1, "not sent again");
    assert_eq!(stand_in.exchanges(), 1, "no new token");
}

/// An access token no test shares: it must show up nowhere.
const CANARY: &str = "ya29.CANARY-c0ffee-0123456789abcdef";

#[tokio::test]
async fn a_token_answer_the_adapter_cannot_use_puts_no_access_token_into_evidence() {
    // Each 2xx holds a token the adapter does not take, for what is missing or wrong beside it;
    // the 400 echoes one, as an endpoint that echoes what it has might.
    let cases: [(&str, &'static str, &str); 4] = [
        (
            "no expires_in",
            r#"{"access_token":"ya29.CANARY-c0ffee-0123456789abcdef","token_type":"Bearer"}"#,
            "expires_in",
        ),
        (
            "a token type other than Bearer",
            r#"{"access_token":"ya29.CANARY-c0ffee-0123456789abcdef","expires_in":3599,"token_type":"mac"}"#,
            "token_type",
        ),
        (
            "a token that cannot be a header value",
            r#"{"access_token":"ya29.CANARY-c0ffee-0123456789abcdef\n","expires_in":3599,"token_type":"Bearer"}"#,
            "header",
        ),
        (
            "a refusal that echoes a token",
            r#"{"error":"invalid_grant","access_token":"ya29.CANARY-c0ffee-0123456789abcdef"}"#,
            "invalid_grant",
        ),
    ];
    for (case, body, named) in cases {
        let status = if case.starts_with("a refusal") {
            400
        } else {
            200
        };
        let stand_in = Scripted::start(
            vec![Play::Answer(status, body)],
            vec![Play::Answer(200, SENT)],
        )
        .await;

        let result = stand_in
            .adapter(CLIENT_TIMEOUT)
            .send(&message(), &unique_key())
            .await;

        let evidence = result.evidence().clone();
        let shown = format!("{result:?} {}", serde_json::to_string(&evidence).unwrap());
        assert!(
            !shown.contains(CANARY) && !shown.contains("CANARY"),
            "{case}: the token leaked into {shown}"
        );
        assert_eq!(evidence.stage, AUTH_STAGE, "{case}: {evidence:?}");
        assert!(evidence.detail.contains(named), "{case}: {evidence:?}");
        assert_eq!(stand_in.sends(), 0, "{case}: no send without a token");
    }
}
