//! Shared set-up: a fake Telnyx per test, an adapter pointed at it, and the message it sends.
//! Keys, result readers and the crypto provider are the conformance kit's (`support`).

use std::time::Duration;

use herald_provider::{Channel, Message};
use herald_provider_testkit::support;
use herald_telnyx::fake::{self, FakeConfig, FakeHandle};
use herald_telnyx::{Sender, TelnyxAdapter, TelnyxRoute};
use secrecy::SecretString;

pub use herald_provider_testkit::support::install_crypto_provider;

/// A running fake with the adapter a test needs.
pub type Vendor = support::Vendor<FakeHandle, TelnyxAdapter>;

pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
pub const FROM: &str = "+18445550001";
pub const TO: &str = "+18445550002";
/// herald's callback URL for the route, as Telnyx will call it.
pub const WEBHOOK_URL: &str = "https://herald.example.com/v1/callbacks/telnyx";

pub async fn vendor(config: FakeConfig) -> Vendor {
    let api_key = config.api_key.clone();
    let adapter = move |base_url: String| adapter(&route(&base_url, &api_key));
    Vendor::start(fake::spawn(config), FakeHandle::base_url, adapter).await
}

/// A route to `base_url` from [`FROM`], without webhooks.
pub fn route(base_url: &str, api_key: &str) -> TelnyxRoute {
    TelnyxRoute {
        base_url: base_url.to_owned(),
        api_key: SecretString::from(api_key),
        sender: Sender::From(FROM.to_owned()),
        timeout: CLIENT_TIMEOUT,
        webhook_url: None,
        webhook_public_key: None,
    }
}

pub fn adapter(route: &TelnyxRoute) -> TelnyxAdapter {
    install_crypto_provider();
    TelnyxAdapter::new(route.clone()).expect("a valid route")
}

/// An SMS to [`TO`]: `Your code is 123456` (the kit's text message).
pub fn message() -> Message {
    support::message(Channel::Sms, TO)
}

/// One webhook for `sign.py`: `payload` sent at `timestamp`.
pub struct ToSign<'a> {
    pub timestamp: &'a str,
    pub payload: &'a str,
}

/// A fresh public key (base64, as Telnyx's portal shows it) and each webhook's
/// `telnyx-signature-ed25519`, made as Telnyx signs and checked by Telnyx's own library
/// (`sign.py`). Ask `support::python_with(&["telnyx", "nacl"], …)` first.
pub fn telnyx_signatures(webhooks: &[ToSign<'_>]) -> (String, Vec<String>) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/telnyx/sign.py");
    let input: Vec<serde_json::Value> = webhooks
        .iter()
        .map(|w| serde_json::json!({"timestamp": w.timestamp, "payload": w.payload}))
        .collect();
    let output = support::run_python(script, &input.into());
    let key = output["public_key"].as_str().expect("a key").to_owned();
    let signatures = serde_json::from_value(output["signatures"].clone()).expect("a list");
    (key, signatures)
}
