//! Resend against herald's conformance kit: each answer of Resend's errors page and
//! idempotency guide, as the crate docs classify it, with the kit's transport faults and its
//! key, look-up and secret checks.

use std::time::Duration;

use herald_provider_testkit::{Expect, Kit, Reply, Subject};

use crate::support::{adapter, message};

/// A documented answer from `fixtures/resend/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/resend/", $file))
    };
}

const CANARY: &str = "re_canary-secret-7f3a";

#[tokio::test]
async fn resend_passes_the_conformance_kit() {
    // The headers of https://resend.com/docs/api-reference/rate-limit.
    let rate_limited = Reply::json(429, fixture!("errors/rate_limit_exceeded.json"))
        .header("ratelimit-limit", "2")
        .header("ratelimit-remaining", "0")
        .header("ratelimit-reset", "1");
    Kit::new("resend", |base_url, timeout| {
        Subject::new(adapter(base_url, CANARY, timeout), message())
    })
    .secret(CANARY)
    .success(Reply::json(200, fixture!("send-email.response.json")))
    .rate_limited(rate_limited.clone().header("retry-after", "1"))
    .case(
        "rate limit with only ratelimit-reset (429)",
        rate_limited.header("ratelimit-reset", "3"),
        Expect::RetryAfter {
            wait: Duration::from_secs(3),
            slack: Duration::ZERO,
        },
    )
    .case(
        "invalid_idempotency_key (400)",
        Reply::json(400, fixture!("errors/invalid_idempotency_key.json")),
        Expect::Permanent,
    )
    .case(
        "validation_error (400)",
        Reply::json(400, fixture!("errors/validation_error.json")),
        Expect::Permanent,
    )
    .case(
        "missing_api_key (401)",
        Reply::json(401, fixture!("errors/missing_api_key.json")),
        Expect::Permanent,
    )
    .case(
        "invalid_api_key (403)",
        Reply::json(403, fixture!("errors/invalid_api_key.json")),
        Expect::Permanent,
    )
    .case(
        "no User-Agent, error code 1010 (403)",
        Reply::text(403, "error code: 1010"),
        Expect::Permanent,
    )
    .case(
        "invalid_idempotent_request (409)",
        Reply::json(409, fixture!("errors/invalid_idempotent_request.json")),
        Expect::KeyReused,
    )
    .case(
        "concurrent_idempotent_requests (409)",
        Reply::json(409, fixture!("errors/concurrent_idempotent_requests.json")),
        Expect::Transient,
    )
    .case(
        "missing_required_field (422)",
        Reply::json(422, fixture!("errors/missing_required_field.json")),
        Expect::Permanent,
    )
    .case(
        "application_error (500)",
        Reply::json(500, fixture!("errors/application_error.json")),
        Expect::Ambiguous,
    )
    .case(
        "unavailable (503)",
        Reply::text(503, "Service Unavailable"),
        Expect::Ambiguous,
    )
    .vendor_code("documented rate limit", "rate_limit_exceeded")
    .vendor_code("missing_api_key (401)", "missing_api_key")
    .vendor_code("invalid_api_key (403)", "invalid_api_key")
    .run()
    .await
    .assert_honest();
}
