//! OneSignal against herald's conformance kit: each documented answer of create message, as
//! the crate docs classify it, with the kit's transport faults and its key, look-up and secret
//! checks.

use herald_provider_testkit::{Expect, Kit, Reply, Subject};

use crate::support::{SUBSCRIPTION, adapter, message};

/// A documented answer from `fixtures/onesignal/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/onesignal/", $file))
    };
}

const CANARY: &str = "os_v2_app_canary-secret-7f3a";
const APP_ID: &str = "8250eaf6-1a58-489e-b136-7c74a864b434";

#[tokio::test]
async fn onesignal_passes_the_conformance_kit() {
    // The `invalid_aliases` shape of the 200's `errors` (crate docs): created, but not for us.
    let skipped = format!(
        r#"{{"id": "b3a0c8bd-3a4c-4b22-9a73-3f1a8c2d1b88",
             "errors": {{"invalid_aliases": {{"subscription_id": ["{SUBSCRIPTION}"]}}}}}}"#
    );
    Kit::new("onesignal", |base_url, timeout| {
        Subject::new(adapter(base_url, APP_ID, CANARY, timeout), message())
    })
    .secret(CANARY)
    .success(Reply::json(200, fixture!("create-message.response.json")))
    .rate_limited(
        Reply::json(429, fixture!("errors/rate-limit.429.json")).header("retry-after", "1"),
    )
    .case(
        "a replay of the key (200, Idempotent-Replayed)",
        Reply::json(200, fixture!("create-message.response.json"))
            .header("idempotent-replayed", "true"),
        Expect::Accepted,
    )
    .case(
        "no subscribers, no id (200)",
        Reply::json(200, fixture!("create-message.no-subscribers.json")),
        Expect::Permanent,
    )
    .case(
        "our recipient skipped (200)",
        Reply::json(200, skipped),
        Expect::Permanent,
    )
    .case(
        "no targeting (400)",
        Reply::json(400, fixture!("errors/no-targeting.400.json")),
        Expect::Permanent,
    )
    .case(
        "missing Authorization (400)",
        Reply::json(400, fixture!("errors/missing-authorization.400.json")),
        Expect::Permanent,
    )
    .case(
        "access denied (403)",
        Reply::json(403, fixture!("errors/access-denied.403.json")),
        Expect::Permanent,
    )
    .case(
        "internal error (500)",
        Reply::json(500, r#"{"errors": ["Internal server error"]}"#),
        Expect::Ambiguous,
    )
    .case(
        "service unavailable (503)",
        Reply::json(503, fixture!("errors/service-unavailable.503.json")),
        Expect::Ambiguous,
    )
    .vendor_code("documented rate limit", "API rate limit exceeded.")
    .vendor_code(
        "service unavailable (503)",
        "Service temporarily unavailable",
    )
    .run()
    .await
    .assert_honest();
}
