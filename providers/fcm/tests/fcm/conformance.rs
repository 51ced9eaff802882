//! FCM against herald's conformance kit: each documented answer of `messages:send`, as the
//! crate docs classify it, with the kit's transport faults and its key, look-up and secret
//! checks. The kit's server plays FCM; the access tokens come from a fake FCM's token
//! endpoint, which every adapter the kit builds mints its token at.

use std::time::Duration;

use herald_fcm::fake::{self, FakeConfig, TEST_PRIVATE_KEY};
use herald_provider_testkit::{Derived, Expect, Kit, Reply, Subject};

use crate::support::{adapter, message, private_key_line};

/// A documented answer from `fixtures/fcm/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/fcm/", $file))
    };
}

/// Why the kit's `Retry-After` cases wait a minute here: FCM's 429 asks for at least that.
const A_MINUTE_AT_LEAST: &str = "FCM's 429 (QUOTA_EXCEEDED) asks for \"exponential backoff with a \
     minimum initial delay of 1 minute\" (https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode), \
     so a shorter Retry-After is stretched to 60 s";

#[tokio::test]
async fn fcm_passes_the_conformance_kit() {
    let tokens = fake::spawn(FakeConfig::default())
        .await
        .expect("the token endpoint binds a loopback port");
    let key = tokens.service_account();
    let a_minute = Expect::RetryAfter {
        wait: Duration::from_secs(60),
        slack: Duration::ZERO,
    };

    Kit::new("fcm", move |base_url, timeout| {
        Subject::new(adapter(base_url, &key, timeout), message())
    })
    .secret(TEST_PRIVATE_KEY.trim())
    .secret(private_key_line())
    .success(Reply::json(200, fixture!("send.response.json")))
    .rate_limited(
        Reply::json(429, fixture!("errors/quota-exceeded.429.json")).header("retry-after", "1"),
    )
    .expect_instead(Derived::RetryAfterSeconds, a_minute, A_MINUTE_AT_LEAST)
    .expect_instead(Derived::RetryAfterDate, a_minute, A_MINUTE_AT_LEAST)
    .case(
        "a quota 429 that asks for longer than a minute",
        Reply::json(429, fixture!("errors/quota-exceeded.429.json")).header("retry-after", "90"),
        Expect::RetryAfter {
            wait: Duration::from_secs(90),
            slack: Duration::ZERO,
        },
    )
    .case(
        "a 200 without a message name",
        Reply::json(200, "{}"),
        Expect::Ambiguous,
    )
    .case(
        "invalid registration token (400 INVALID_ARGUMENT)",
        Reply::json(400, fixture!("errors/invalid-argument.400.json")),
        Expect::Permanent,
    )
    .case(
        "invalid data value (400, a BadRequest detail)",
        Reply::json(
            400,
            fixture!("errors/invalid-argument.bad-request.400.json"),
        ),
        Expect::Permanent,
    )
    .case(
        "third party auth error (401 THIRD_PARTY_AUTH_ERROR)",
        Reply::json(401, fixture!("errors/third-party-auth-error.401.json")),
        Expect::Permanent,
    )
    .case(
        "access token refused, and its replacement too (401 UNAUTHENTICATED)",
        Reply::json(401, fixture!("errors/unauthenticated.401.json")),
        Expect::Permanent,
    )
    .case(
        "sender id mismatch (403 SENDER_ID_MISMATCH)",
        Reply::json(403, fixture!("errors/sender-id-mismatch.403.json")),
        Expect::Permanent,
    )
    .case(
        "permission denied (403 PERMISSION_DENIED)",
        Reply::json(403, fixture!("errors/permission-denied.403.json")),
        Expect::Permanent,
    )
    .case(
        "unregistered token (404 UNREGISTERED)",
        Reply::json(404, fixture!("errors/unregistered.404.json")),
        Expect::Permanent,
    )
    .case(
        "internal error (500 INTERNAL)",
        Reply::json(500, fixture!("errors/internal.500.json")),
        Expect::Ambiguous,
    )
    .case(
        "unavailable (503 UNAVAILABLE)",
        Reply::json(503, fixture!("errors/unavailable.503.json")).header("retry-after", "5"),
        Expect::Ambiguous,
    )
    .case(
        "a front end's 502 page",
        Reply::text(
            502,
            "<html><title>Error 502 (Server Error)!!1</title></html>",
        ),
        Expect::Ambiguous,
    )
    .vendor_code("documented rate limit", "QUOTA_EXCEEDED")
    .vendor_code(
        "invalid registration token (400 INVALID_ARGUMENT)",
        "INVALID_ARGUMENT",
    )
    .vendor_code(
        "invalid data value (400, a BadRequest detail)",
        "INVALID_ARGUMENT",
    )
    .vendor_code(
        "third party auth error (401 THIRD_PARTY_AUTH_ERROR)",
        "THIRD_PARTY_AUTH_ERROR",
    )
    .vendor_code(
        "access token refused, and its replacement too (401 UNAUTHENTICATED)",
        "UNAUTHENTICATED",
    )
    .vendor_code(
        "sender id mismatch (403 SENDER_ID_MISMATCH)",
        "SENDER_ID_MISMATCH",
    )
    .vendor_code("unregistered token (404 UNREGISTERED)", "UNREGISTERED")
    .vendor_code("internal error (500 INTERNAL)", "INTERNAL")
    .vendor_code("unavailable (503 UNAVAILABLE)", "UNAVAILABLE")
    .run()
    .await
    .assert_honest();

    // The kit built an adapter per case; each minted its token at the fake.
    assert!(tokens.exchanges() > 20, "{} exchanges", tokens.exchanges());
}
