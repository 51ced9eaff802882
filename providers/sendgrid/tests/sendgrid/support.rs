//! Shared set-up: a fake SendGrid per test, an adapter pointed at it, the message it sends and
//! a file that message may carry. Keys, result readers and the crypto provider are the
//! conformance kit's (`support`).

use std::time::Duration;

use herald_provider::{Channel, Message};
use herald_provider_testkit::support;
use herald_sendgrid::fake::{self, FakeConfig, FakeHandle};
use herald_sendgrid::{SendGridAdapter, SendGridRoute};
use secrecy::SecretString;

pub use herald_provider_testkit::support::{expanded, install_crypto_provider, invoice};

/// A running fake with the adapter a test needs.
pub type Vendor = support::Vendor<FakeHandle, SendGridAdapter>;

/// Long enough for any answer the fake gives at once on a busy machine, and far below the
/// `delay` fault's hold.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

pub const SENDER: &str = "Herald <notify@herald.example>";

/// A fake with `config`, and an adapter with the Email Activity look-up (after the fake's lag).
pub async fn vendor(config: FakeConfig) -> Vendor {
    let (api_key, lag) = (config.api_key.clone(), config.visibility_lag);
    let adapter = move |base_url: String| {
        let mut route = route(&base_url, &api_key);
        route.activity_lookup = Some(lag.max(Duration::from_millis(1)));
        adapter(&route)
    };
    Vendor::start(fake::spawn(config), FakeHandle::base_url, adapter).await
}

/// A route to `base_url`, without Email Activity or the Event Webhook.
pub fn route(base_url: &str, api_key: &str) -> SendGridRoute {
    SendGridRoute {
        base_url: base_url.to_owned(),
        api_key: SecretString::from(api_key),
        from: SENDER.to_owned(),
        activity_lookup: None,
        timeout: CLIENT_TIMEOUT,
        webhook_public_key: None,
    }
}

pub fn adapter(route: &SendGridRoute) -> SendGridAdapter {
    install_crypto_provider();
    SendGridAdapter::new(route.clone()).expect("a valid route")
}

/// An email to ada@example.com: `Your code`, `123456`, `<p>123456</p>` (the kit's email).
pub fn message() -> Message {
    support::message(Channel::Email, "ada@example.com")
}

/// One Event Webhook request for `sign.py`: `payload` sent at `timestamp`.
pub struct ToSign<'a> {
    pub timestamp: &'a str,
    pub payload: &'a str,
}

/// A fresh verification key (base64 DER, as SendGrid shows it) and each request's
/// `X-Twilio-Email-Event-Webhook-Signature`, made as SendGrid signs and checked by SendGrid's own
/// library (`sign.py`). Ask `support::python_with(&["sendgrid"], …)` first.
pub fn sendgrid_signatures(requests: &[ToSign<'_>]) -> (String, Vec<String>) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sendgrid/sign.py");
    let input: Vec<serde_json::Value> = requests
        .iter()
        .map(|r| serde_json::json!({"timestamp": r.timestamp, "payload": r.payload}))
        .collect();
    let output = support::run_python(script, &input.into());
    let key = output["public_key"].as_str().expect("a key").to_owned();
    let signatures = serde_json::from_value(output["signatures"].clone()).expect("a list");
    (key, signatures)
}
