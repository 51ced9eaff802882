//! Telnyx against herald's conformance kit: each documented answer of `POST /v2/messages`, as the
//! crate docs classify it, with the kit's transport faults and its key, look-up and secret
//! checks.

use herald_provider_testkit::{Expect, Kit, Reply, Subject};

use crate::support::{adapter, message, route};

/// A documented answer from `fixtures/telnyx/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/telnyx/", $file))
    };
}

const CANARY: &str = "KEYcanary-secret-7f3a";

#[tokio::test]
async fn telnyx_passes_the_conformance_kit() {
    Kit::new("telnyx", |base_url, timeout| {
        let mut route = route(base_url, CANARY);
        route.timeout = timeout;
        Subject::new(adapter(&route), message())
    })
    .secret(CANARY)
    .success(Reply::json(200, fixture!("send-message.response.json")))
    .rate_limited(
        Reply::json(429, fixture!("errors/rate_limited_429.json")).header("retry-after", "1"),
    )
    .case(
        "authentication failed, 10009 (401)",
        Reply::json(401, fixture!("errors/authentication_401.json")),
        Expect::Permanent,
    )
    .case(
        "invalid request, 10005 (422)",
        Reply::json(422, fixture!("errors/invalid_request_422.json")),
        Expect::Permanent,
    )
    .case(
        "the key with another body (422)",
        Reply::json(422, fixture!("errors/idempotency_key_reused_422.json")),
        Expect::Permanent,
    )
    .case(
        "blocked by STOP, 40300 (400)",
        Reply::json(400, fixture!("errors/blocked_by_stop_40300.json")),
        Expect::Permanent,
    )
    .case(
        "unexpected error, 10007 (500)",
        Reply::json(500, fixture!("errors/unexpected_500.json")),
        Expect::Ambiguous,
    )
    .case(
        "unavailable (503)",
        Reply::text(503, "Service Unavailable"),
        Expect::Ambiguous,
    )
    .vendor_code("authentication failed, 10009 (401)", "10009")
    .vendor_code("blocked by STOP, 40300 (400)", "40300")
    .vendor_code("unexpected error, 10007 (500)", "10007")
    .run()
    .await
    .assert_honest();
}
