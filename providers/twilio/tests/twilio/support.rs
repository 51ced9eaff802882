//! Shared set-up: a fake Twilio per test, an adapter pointed at it, and distinct texts. The
//! crypto provider, result readers and look-up waits are the conformance kit's (`support`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herald_provider::{Channel, Message, ProviderKey};
use herald_provider_testkit::support;
use herald_twilio::fake::{self, FakeConfig, FakeHandle};
use herald_twilio::{TwilioAdapter, TwilioRoute};
use secrecy::SecretString;

pub use herald_provider_testkit::support::install_crypto_provider;

pub const ACCOUNT: &str = "AC00000000000000000000000000000001";
pub const TOKEN: &str = "canary-secret-7f3a";
pub const FROM: &str = "+15005550006";
pub const TO: &str = "+14155550100";
pub const SERVICE: &str = "MG00000000000000000000000000000001";

/// Long enough for any answer the fake gives at once on a busy machine, far below `Delay`.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// A running fake with the adapter a test needs.
pub type Vendor = support::Vendor<FakeHandle, TwilioAdapter>;

pub fn fake_config() -> FakeConfig {
    FakeConfig::new(ACCOUNT, SecretString::from(TOKEN))
}

pub fn route(base_url: String) -> TwilioRoute {
    TwilioRoute {
        base_url,
        from: Some(FROM.to_owned()),
        timeout: CLIENT_TIMEOUT,
        ..TwilioRoute::new(ACCOUNT, SecretString::from(TOKEN))
    }
}

pub async fn vendor() -> Vendor {
    vendor_with(fake_config(), |_| {}).await
}

/// A fake with `config`, and an adapter whose route `adjust` may change.
pub async fn vendor_with(config: FakeConfig, adjust: impl FnOnce(&mut TwilioRoute)) -> Vendor {
    Vendor::start(fake::spawn(config), FakeHandle::base_url, |base_url| {
        let mut route = route(base_url);
        adjust(&mut route);
        TwilioAdapter::new(route).expect("a valid route")
    })
    .await
}

/// A text no other test uses: Twilio has no client reference, so the text is the key.
pub fn unique_text() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("Your code is {:06}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// An SMS notification to `TO` created now (the kit's, with this text).
pub fn sms(text: &str) -> Message {
    Message {
        text: Some(text.to_owned()),
        ..support::message(Channel::Sms, TO)
    }
}

pub fn key(message: &Message) -> ProviderKey {
    ProviderKey::new(format!("ntf-{}", message.notification_id))
}

/// One request for `sign.py`: Twilio's SDK signs `params` posted to `url` with `token`.
pub struct ToSign<'a> {
    pub token: &'a str,
    pub url: &'a str,
    pub params: &'a [(&'a str, &'a str)],
}

/// `X-Twilio-Signature` for each request, as Twilio's own helper library computes it
/// (`RequestValidator(token).compute_signature(url, params)`), run by `sign.py`.
pub fn sdk_signatures(requests: &[ToSign<'_>]) -> Vec<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/twilio/sign.py");
    let input: Vec<serde_json::Value> = requests
        .iter()
        .map(|r| serde_json::json!({"token": r.token, "url": r.url, "params": r.params}))
        .collect();
    serde_json::from_value(support::run_python(script, &input.into()))
        .expect("the signer prints a JSON list")
}
