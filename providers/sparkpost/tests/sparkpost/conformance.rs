//! SparkPost against herald's conformance kit: each answer of SparkPost's error table,
//! transmissions reference and idempotency documentation, as the crate docs classify it, with
//! the kit's transport faults and its key, look-up and secret checks.

use herald_provider_testkit::{Expect, Kit, Reply, Subject};

use crate::support::{adapter, message, route};

/// A documented answer from `fixtures/sparkpost/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/sparkpost/", $file))
    };
}

const CANARY: &str = "sp-canary-secret-7f3a";

#[tokio::test]
async fn sparkpost_passes_the_conformance_kit() {
    Kit::new("sparkpost", |base_url, timeout| {
        Subject::new(adapter(&route(base_url, CANARY, timeout)), message())
    })
    .secret(CANARY)
    .success(Reply::json(200, fixture!("transmission.response.json")))
    .rate_limited(
        Reply::json(429, fixture!("errors/rate_limited_429.json")).header("retry-after", "1"),
    )
    .case(
        "replayed (200, X-Idempotent-Replayed)",
        Reply::json(200, fixture!("transmission.response.json"))
            .header("x-idempotent-replayed", "true"),
        Expect::Accepted,
    )
    .case(
        "no recipient accepted (200)",
        Reply::json(200, fixture!("transmission.all-rejected.json")),
        Expect::Permanent,
    )
    .case(
        "invalid idempotency key, 1602 (400)",
        Reply::json(400, fixture!("errors/invalid_idempotency_key_400.json")),
        Expect::Permanent,
    )
    .case(
        "unverified sending domain, 7001 (400)",
        Reply::json(400, fixture!("errors/invalid_domain_400.json")),
        Expect::Permanent,
    )
    .case(
        "unauthorized (401)",
        Reply::json(401, fixture!("errors/unauthorized_401.json")),
        Expect::Permanent,
    )
    .case(
        "same key, another payload, 1600 (409)",
        Reply::json(409, fixture!("errors/idempotency_key_reused_409.json")),
        Expect::KeyReused,
    )
    .case(
        "same key in progress, 1601 (409)",
        Reply::json(
            409,
            fixture!("errors/idempotent_request_in_progress_409.json"),
        ),
        Expect::Transient,
    )
    .case(
        "sending limit, 2101 (420)",
        Reply::json(420, fixture!("errors/sending_limit_420.json")),
        Expect::Transient,
    )
    .case(
        "required field missing, 1400 (422)",
        Reply::json(422, fixture!("errors/required_field_422.json")),
        Expect::Permanent,
    )
    .case(
        "internal error (500)",
        Reply::json(500, fixture!("errors/internal_error_500.json")),
        Expect::Ambiguous,
    )
    .case(
        "higher than normal traffic (503)",
        Reply::text(503, "Service Unavailable"),
        Expect::Ambiguous,
    )
    .vendor_code("invalid idempotency key, 1602 (400)", "1602")
    .vendor_code("same key, another payload, 1600 (409)", "1600")
    .vendor_code("same key in progress, 1601 (409)", "1601")
    .vendor_code("sending limit, 2101 (420)", "2101")
    .run()
    .await
    .assert_honest();
}
