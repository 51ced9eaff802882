//! Shared set-up: secrets, keys, messages, an adapter, and the independent Python verifier.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use herald_provider::{Channel, Message, ProviderKey};
use herald_provider_testkit::support::run_python;
use herald_webhook::fake::{self, FakeConfig, FakeHandle, Received};
use herald_webhook::{WebhookAdapter, WebhookRoute};
use secrecy::SecretString;

pub use herald_provider_testkit::support::install_crypto_provider;

/// The spec's full example payload, from the fixtures.
pub const PAYLOAD: &str = include_str!("../../../../fixtures/webhook/payload.full.json");

/// A secret that must never show up in evidence, errors or `Debug` output. Its base64 text is
/// what an operator would paste into a config file, so that is what the tests look for.
pub const CANARY: &str = "canarySecret7f3a";
pub const CANARY_SECRET: &str = "whsec_canarySecret7f3aCanarySecret7f3a";

/// Long enough for any answer the fake gives at once on a busy machine, and far below the
/// `Delay` fault's hold.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// A valid `whsec_` secret of 32 bytes, distinct per `n`.
pub fn secret(n: u8) -> String {
    format!("whsec_{}", STANDARD.encode([n; 32]))
}

/// A route for a loopback receiver: private networks allowed, as herald's own tests need.
pub fn route(secrets: &[&str]) -> WebhookRoute {
    WebhookRoute {
        secrets: secrets.iter().map(|s| SecretString::from(*s)).collect(),
        timeout: CLIENT_TIMEOUT,
        allow_private_networks: true,
        max_payload_bytes: None,
        user_agent: None,
    }
}

pub fn adapter(route: WebhookRoute) -> WebhookAdapter {
    install_crypto_provider();
    WebhookAdapter::new(route).expect("a valid route")
}

/// A receiver that knows `secrets`.
pub async fn receiver(secrets: &[&str]) -> FakeHandle {
    receiver_with(FakeConfig {
        secrets: secrets.iter().map(|s| (*s).to_owned()).collect(),
        ..FakeConfig::default()
    })
    .await
}

pub async fn receiver_with(config: FakeConfig) -> FakeHandle {
    fake::spawn(config)
        .await
        .expect("the fake binds a loopback port")
}

/// A key no other test uses, shaped like the UUID herald derives per notification.
pub fn key() -> ProviderKey {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    ProviderKey::new(format!("01970000-0000-7000-8000-{n:012x}"))
}

pub fn message(to: impl Into<String>) -> Message {
    Message {
        notification_id: "01970000-0000-7000-8000-000000000001".to_owned(),
        channel: Channel::Webhook,
        to: to.into(),
        subject: None,
        text: None,
        html: None,
        payload: Some(serde_json::from_str(PAYLOAD).expect("the fixture is JSON")),
        blocks: None,
        email: Default::default(),
        expires_at: None,
        trace_parent: None,
    }
}

/// The one request a receiver got.
pub fn only_request(handle: &FakeHandle) -> Received {
    let ledger = handle.ledger();
    assert_eq!(ledger.requests.len(), 1, "{:?}", ledger.requests);
    ledger.requests[0].clone()
}

/// Runs `verify_signature.py` on a received request: for each secret, the index of the
/// signature entry it verifies, or -1.
pub fn python_verify(secrets: &[&str], request: &Received, body: &[u8]) -> Vec<i64> {
    python_verify_raw(
        secrets,
        request.header("webhook-id").expect("webhook-id"),
        request
            .header("webhook-timestamp")
            .expect("webhook-timestamp"),
        request
            .header("webhook-signature")
            .expect("webhook-signature"),
        body,
    )
}

pub fn python_verify_raw(
    secrets: &[&str],
    id: &str,
    timestamp: &str,
    signature: &str,
    body: &[u8],
) -> Vec<i64> {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/webhook/verify_signature.py"
    );
    let input = serde_json::json!({
        "secrets": secrets,
        "id": id,
        "timestamp": timestamp,
        "signature": signature,
        "body_b64": STANDARD.encode(body),
    });
    serde_json::from_value(run_python(script, &input)).expect("the verifier prints a JSON list")
}
