//! Building a route and refusing what cannot be sent: malformed secrets at construction, bad
//! messages before any connection; and the canary secret in no route, error or refusal.

use herald_provider::{Adapter, Channel, QueryResult, SendResult};
use herald_webhook::{WebhookAdapter, WebhookError, WebhookRoute};

use crate::support::{
    CANARY, CANARY_SECRET, adapter, install_crypto_provider, key, message, receiver, route, secret,
};

fn build(route: WebhookRoute) -> Result<WebhookAdapter, WebhookError> {
    install_crypto_provider();
    WebhookAdapter::new(route)
}

#[test]
fn a_route_without_secrets_is_refused() {
    assert!(matches!(build(route(&[])), Err(WebhookError::NoSecrets)));
}

#[test]
fn malformed_secrets_are_refused_naming_which_one_but_not_its_content() {
    let good = secret(1);
    for (bad, problem) in [
        (
            "canarySecret7f3aCanarySecret7f3a",
            "does not start with `whsec_`",
        ),
        ("whsec_canary-secret-7f3a", "is not standard base64"),
        ("whsec_canarySecret7f3a", "decodes to 12 bytes"),
    ] {
        let err = build(route(&[&good, bad])).expect_err(bad);
        let text = err.to_string();
        assert!(text.starts_with("signing secret #2 "), "{text}");
        assert!(text.contains(problem), "{text}");
        assert!(!text.contains("canary"), "{text}");
        assert!(!format!("{err:?}").contains("canary"), "{err:?}");
    }
}

#[tokio::test]
async fn the_canary_secret_appears_in_no_route_and_no_refusal_before_a_connection() {
    // Answers from a receiver are the conformance kit's to check (`conformance.rs`).
    let route = route(&[CANARY_SECRET]);
    assert!(!format!("{route:?}").contains(CANARY), "{route:?}");
    let adapter = adapter(route);

    let mut results = vec![adapter.send(&message("ftp://example.com/h"), &key()).await];
    let mut guarded = crate::support::route(&[CANARY_SECRET]);
    guarded.allow_private_networks = false;
    results.push(
        crate::support::adapter(guarded)
            .send(&message("http://localhost:1/h"), &key())
            .await,
    );
    for result in results {
        let debug = format!("{result:?}");
        assert!(!debug.contains(CANARY), "{debug}");
    }
}

#[tokio::test]
async fn messages_that_cannot_be_sent_are_refused_before_any_connection() {
    let s1 = secret(1);
    let receiver = receiver(&[&s1]).await;
    let url = format!("{}/h", receiver.base_url());
    let adapter = adapter(WebhookRoute {
        max_payload_bytes: Some(64),
        ..route(&[&s1])
    });
    let small = || {
        let mut m = message(&url);
        m.payload = Some(serde_json::json!({"type": "ping"}));
        m
    };
    let with = |f: &dyn Fn(&mut herald_provider::Message)| {
        let mut m = small();
        f(&mut m);
        m
    };
    let cases = [
        (
            "the full fixture is over 64 bytes",
            message(&url),
            "at most 64",
        ),
        (
            "an array payload",
            with(&|m| m.payload = Some(serde_json::json!([1]))),
            "JSON object",
        ),
        ("no payload", with(&|m| m.payload = None), "JSON object"),
        (
            "another channel",
            with(&|m| m.channel = Channel::Email),
            "not email",
        ),
        (
            "another scheme",
            with(&|m| m.to = "ftp://example.com/h".into()),
            "http or https",
        ),
        (
            "credentials in the URL",
            with(&|m| m.to = url.replace("http://", "http://user:pw@")),
            "credentials",
        ),
        ("not a URL", with(&|m| m.to = "hooks".into()), "not a URL"),
    ];
    for (case, message, reason) in cases {
        match adapter.send(&message, &key()).await {
            SendResult::Rejected {
                permanent: true,
                evidence,
                ..
            } => {
                assert_eq!(evidence.stage, "request", "{case}");
                assert!(evidence.detail.contains(reason), "{case}: {evidence:?}");
            }
            other => panic!("{case}: expected a permanent rejection, got {other:?}"),
        }
    }
    // A key with a `.` would make the signed content ambiguous (spec, "Signature scheme").
    let dotted = herald_provider::ProviderKey::new("ntf.1");
    assert!(matches!(
        adapter.send(&small(), &dotted).await,
        SendResult::Rejected {
            permanent: true,
            ..
        }
    ));
    assert_eq!(receiver.ledger().connections, 0);
    // And the small payload does go through.
    assert!(matches!(
        adapter.send(&small(), &key()).await,
        SendResult::Accepted { .. }
    ));
}

#[tokio::test]
async fn capabilities_declare_no_idempotency_window_and_no_query() {
    let adapter = adapter(WebhookRoute {
        max_payload_bytes: Some(20_000),
        ..route(&[&secret(1)])
    });
    let capabilities = adapter.capabilities();
    assert_eq!(capabilities.idempotency_window, None);
    assert_eq!(capabilities.query_visibility_lag, None);
    assert_eq!(capabilities.max_payload_bytes, Some(20_000));
    assert!(matches!(
        adapter
            .query(&message("https://example.com/h"), &key())
            .await,
        QueryResult::Unsupported { .. }
    ));
}
