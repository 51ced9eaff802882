//! Shared set-up: a fake Resend per test, an adapter pointed at it, the message it sends and a
//! file that message may carry.
//! Keys, result readers and the crypto provider are the conformance kit's (`support`).

use std::time::Duration;

use herald_provider::{Channel, Message};
use herald_provider_testkit::support;
use herald_resend::fake::{self, FakeConfig, FakeHandle};
use herald_resend::{ResendAdapter, ResendRoute};
use secrecy::SecretString;

pub use herald_provider_testkit::support::{expanded, install_crypto_provider, invoice};

/// A running fake with the adapter a test needs.
pub type Vendor = support::Vendor<FakeHandle, ResendAdapter>;

/// Long enough for any answer the fake gives at once on a busy machine, and far below the
/// `delay` fault's hold.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// A client timeout short enough that a test waiting for it stays quick.
pub const SHORT_TIMEOUT: Duration = Duration::from_millis(300);

pub const SENDER: &str = "Herald <notify@herald.example>";

pub async fn vendor(config: FakeConfig) -> Vendor {
    let api_key = config.api_key.clone();
    vendor_with(config, &api_key, CLIENT_TIMEOUT).await
}

/// A fake with `config`, and an adapter that authenticates with `api_key`.
pub async fn vendor_with(config: FakeConfig, api_key: &str, timeout: Duration) -> Vendor {
    let adapter = |base_url: String| adapter(&base_url, api_key, timeout);
    Vendor::start(fake::spawn(config), FakeHandle::base_url, adapter).await
}

pub fn adapter(base_url: &str, api_key: &str, timeout: Duration) -> ResendAdapter {
    install_crypto_provider();
    ResendAdapter::new(ResendRoute {
        base_url: base_url.to_owned(),
        api_key: SecretString::from(api_key),
        from: SENDER.to_owned(),
        timeout,
        webhook_secret: None,
    })
    .expect("a valid route")
}

/// An email to ada@example.com: `Your code`, `123456`, `<p>123456</p>` (the kit's email).
pub fn message() -> Message {
    support::message(Channel::Email, "ada@example.com")
}

/// The `message` of a documented error body.
pub fn documented_message(json: &str) -> String {
    support::json(json)["message"]
        .as_str()
        .expect("error fixtures carry a message")
        .to_owned()
}

/// One webhook for `sign.py` to sign: Svix's library signs `payload` as message `id` sent at
/// `timestamp` with `secret`.
pub struct ToSign<'a> {
    pub secret: &'a str,
    pub id: &'a str,
    pub timestamp: i64,
    pub payload: &'a str,
}

/// `svix-signature` for each webhook, as Svix's own library computes it
/// (`svix.webhooks.Webhook(secret).sign(id, timestamp, payload)`), run by `sign.py`.
pub fn svix_signatures(webhooks: &[ToSign<'_>]) -> Vec<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/resend/sign.py");
    let input: Vec<serde_json::Value> = webhooks
        .iter()
        .map(|w| {
            serde_json::json!({
                "secret": w.secret,
                "id": w.id,
                "timestamp": w.timestamp,
                "payload": w.payload,
            })
        })
        .collect();
    serde_json::from_value(support::run_python(script, &input.into()))
        .expect("the signer prints a JSON list")
}
