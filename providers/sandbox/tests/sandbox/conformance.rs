//! The sandbox's adapter against herald's conformance kit, once for each profile that declares
//! a capability: every answer the sandbox documents (its `server` module), to a send and, in
//! profile `queryable`, to `GET /messages?reference=…`, with the kit's transport faults and its
//! key and look-up checks. The sandbox takes no credentials, so there is no secret to keep out
//! of the evidence.

use std::time::Duration;

use herald_provider_testkit::{Expect, ExpectQuery, KEY, Kit, Reply, Subject};
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

/// The answer to `GET /messages?reference=…`: one delivery per reference in `references`, in
/// order, as `sbx_1`, `sbx_2`, ….
fn deliveries(references: &[&str]) -> Reply {
    let data: Vec<serde_json::Value> = references
        .iter()
        .zip(1..)
        .map(|(reference, nth)| {
            serde_json::json!({
                "id": format!("sbx_{nth}"),
                "reference": reference,
                "accepted_at": "2026-01-01T00:00:00Z",
            })
        })
        .collect();
    Reply::json(200, serde_json::json!({ "data": data }).to_string())
}

/// What a sandbox of `profile` says it offers, on every answer; the adapter holds each answer
/// to what its route declares.
fn offer(profile: Profile) -> String {
    format!(
        "profile={profile}; window_ms={}; lag_ms={}",
        WINDOW.as_millis(),
        LAG.as_millis()
    )
}

fn kit(profile: Profile) -> Kit {
    let accepted = serde_json::json!({"id": "sbx_1", "reference": KEY, "status": "accepted"});
    Kit::new(&format!("sandbox ({profile})"), move |base_url, timeout| {
        let route = SandboxRoute {
            base_url: base_url.to_owned(),
            from: None,
            profile,
            idempotency_window: WINDOW,
            visibility_lag: LAG,
            timeout,
            callback_secret: None,
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
    let found = || ExpectQuery::Accepted {
        provider_ref: Some("sbx_1".to_owned()),
    };
    kit(Profile::Queryable)
        .lookup_case("our delivery listed (200)", deliveries(&[KEY]), found())
        .lookup_case(
            "our reference delivered twice (200)",
            deliveries(&[KEY, KEY]),
            found(),
        )
        .lookup_case(
            "no delivery visible yet (200)",
            deliveries(&[]),
            ExpectQuery::NotFoundYet,
        )
        // An answer about other messages: the filter did not hold, so the list proves nothing
        // (providers/README.md, "Query results").
        .lookup_case(
            "only another reference's delivery listed (200)",
            deliveries(&["ntf-other"]),
            ExpectQuery::Unsupported,
        )
        .lookup_case(
            "a list from a sandbox of another profile (200)",
            deliveries(&[KEY]).header("sandbox-capabilities", offer(Profile::Plain)),
            ExpectQuery::Unsupported,
        )
        .run()
        .await
        .assert_honest();
}
