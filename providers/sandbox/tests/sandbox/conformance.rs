//! The sandbox's adapter against herald's conformance kit, once for each profile that declares
//! a capability: every answer the sandbox documents (its `server` module), with the kit's
//! transport faults and its key and look-up checks. The sandbox takes no credentials, so there
//! is no secret to keep out of the evidence.

use std::time::Duration;

use herald_provider_testkit::{Expect, KEY, Kit, Reply, Subject};
use herald_sandbox::{Profile, SandboxAdapter, SandboxRoute};

use crate::support::message;

const WINDOW: Duration = Duration::from_secs(60);
const LAG: Duration = Duration::from_millis(250);

/// An error in the sandbox's RFC 9457 shape, with its own `code`.
fn problem(status: u16, code: &str, detail: &str) -> Reply {
    let body = serde_json::json!({
        "type": "about:blank",
        "status": status,
        "code": code,
        "detail": detail,
    });
    Reply::json(status, body.to_string()).header("content-type", "application/problem+json")
}

fn kit(profile: Profile) -> Kit {
    // What the sandbox says it offers, on every answer; the adapter holds each answer to it.
    let offer = |profile: Profile| {
        format!(
            "profile={profile}; window_ms={}; lag_ms={}",
            WINDOW.as_millis(),
            LAG.as_millis()
        )
    };
    let accepted = serde_json::json!({"id": "sbx_1", "reference": KEY, "status": "accepted"});
    Kit::new(&format!("sandbox ({profile})"), move |base_url, timeout| {
        let route = SandboxRoute {
            base_url: base_url.to_owned(),
            from: None,
            profile,
            idempotency_window: WINDOW,
            visibility_lag: LAG,
            timeout,
        };
        Subject::new(SandboxAdapter::new(route), message())
    })
    .on_every_answer("sandbox-capabilities", &offer(profile))
    .success(Reply::json(202, accepted.to_string()))
    .rate_limited(problem(429, "rate_limited", "slow down").header("retry-after", "1"))
    .case(
        "a replay of the key (202, idempotent-replayed)",
        Reply::json(202, accepted.to_string()).header("idempotent-replayed", "true"),
        Expect::Accepted,
    )
    .case(
        "an acceptance of another reference (202)",
        Reply::json(202, accepted.to_string().replace(KEY, "ntf-other")),
        Expect::Ambiguous,
    )
    .case(
        "an answer from a sandbox of another profile (202)",
        Reply::json(202, accepted.to_string())
            .header("sandbox-capabilities", offer(Profile::Plain)),
        Expect::Ambiguous,
    )
    .case(
        "the key still in progress (409)",
        problem(
            409,
            "concurrent_idempotent_request",
            "still being processed",
        ),
        Expect::Transient,
    )
    .case(
        "the key used with another body (422)",
        problem(
            422,
            "idempotency_key_reused",
            "used with another request body",
        ),
        Expect::KeyReused,
    )
    .case(
        "an invalid message (422)",
        problem(
            422,
            "invalid_message",
            "`reference` and `to` must not be empty",
        ),
        Expect::Permanent,
    )
    .case(
        "an error after processing (500)",
        problem(500, "internal_error", "something went wrong"),
        Expect::Ambiguous,
    )
    .case(
        "unavailable, not processed (503)",
        problem(503, "unavailable", "not processed; try again"),
        Expect::Transient,
    )
}

#[tokio::test]
async fn the_idempotent_profile_passes_the_conformance_kit() {
    kit(Profile::Idempotent).run().await.assert_honest();
}

#[tokio::test]
async fn the_queryable_profile_passes_the_conformance_kit() {
    kit(Profile::Queryable).run().await.assert_honest();
}
