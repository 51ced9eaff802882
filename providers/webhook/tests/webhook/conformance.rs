//! The webhook adapter against herald's conformance kit: every answer Standard Webhooks gives a
//! meaning to, as the crate docs classify it, with the kit's transport faults and its key,
//! look-up and secret checks. The message's URL is the kit's server.

use herald_provider_testkit::{Derived, Expect, Kit, Reply, Subject};
use herald_webhook::{WEBHOOK_SIGNATURE, WEBHOOK_TIMESTAMP, WebhookRoute};

use crate::support::{CANARY_SECRET, adapter, message, route};

/// Standard Webhooks judges an answer by its status alone; the verdict is the status line.
const A_2XX_IS_THE_VERDICT: &str =
    "a receiver's 2xx is its acceptance, and its body carries nothing herald needs";

#[tokio::test]
async fn the_webhook_adapter_passes_the_conformance_kit() {
    Kit::new("webhook", |base_url, timeout| {
        let adapter = adapter(WebhookRoute {
            timeout,
            ..route(&[CANARY_SECRET])
        });
        Subject::new(adapter, message(format!("{base_url}/hooks/conformance")))
    })
    .secret(CANARY_SECRET)
    // Receivers' bodies are documented nowhere; this one is any receiver's.
    .success(Reply::json(200, r#"{"received": true}"#))
    .rate_limited(Reply::text(429, "Too Many Requests"))
    .expect_instead(
        Derived::TruncatedSuccess,
        Expect::Accepted,
        A_2XX_IS_THE_VERDICT,
    )
    .expect_instead(
        Derived::NonJsonSuccess,
        Expect::Accepted,
        A_2XX_IS_THE_VERDICT,
    )
    .expect_instead(Derived::SlowSuccess, Expect::Accepted, A_2XX_IS_THE_VERDICT)
    .varies_per_attempt(
        WEBHOOK_TIMESTAMP,
        "the spec: each attempt carries its own time, which a receiver checks against replays",
    )
    .varies_per_attempt(WEBHOOK_SIGNATURE, "it signs the attempt's own timestamp")
    .case("no content (204)", Reply::text(204, ""), Expect::Accepted)
    .case(
        "a redirect, never followed (301)",
        Reply::text(301, "").header("location", "https://elsewhere.example/hooks"),
        Expect::Permanent,
    )
    .case(
        "a wrong signature (401)",
        Reply::text(401, "invalid signature"),
        Expect::Permanent,
    )
    .case(
        "request timeout (408)",
        Reply::text(408, "Request Timeout"),
        Expect::Transient,
    )
    .case(
        "the endpoint gone (410)",
        Reply::text(410, "Gone"),
        Expect::Permanent,
    )
    .case(
        "payload too large (413)",
        Reply::text(413, "Payload Too Large"),
        Expect::Permanent,
    )
    .case(
        "internal error (500)",
        Reply::text(500, "Internal Server Error"),
        Expect::Ambiguous,
    )
    .case(
        "bad gateway (502)",
        Reply::text(502, "Bad Gateway"),
        Expect::Ambiguous,
    )
    .case(
        "unavailable (503)",
        Reply::text(503, "Service Unavailable"),
        Expect::Ambiguous,
    )
    .case(
        "gateway timeout (504)",
        Reply::text(504, "Gateway Timeout"),
        Expect::Ambiguous,
    )
    .run()
    .await
    .assert_honest();
}
