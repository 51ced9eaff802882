//! Shared set-up: a fake Resend per test, an adapter pointed at it, and distinct keys.

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herald_provider::{Channel, Message, ProviderKey, SendResult};
use herald_resend::fake::{self, FakeConfig, FakeHandle};
use herald_resend::{ResendAdapter, ResendRoute};
use secrecy::SecretString;

/// A running fake with the adapter a test needs.
pub struct Vendor {
    pub fake: FakeHandle,
    pub adapter: ResendAdapter,
}

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
    let fake = fake::spawn(config)
        .await
        .expect("the fake binds a loopback port");
    let adapter = adapter(&fake.base_url(), api_key, timeout);
    Vendor { fake, adapter }
}

pub fn adapter(base_url: &str, api_key: &str, timeout: Duration) -> ResendAdapter {
    install_crypto_provider();
    ResendAdapter::new(ResendRoute {
        base_url: base_url.to_owned(),
        api_key: SecretString::from(api_key),
        from: SENDER.to_owned(),
        timeout,
    })
    .expect("a valid route")
}

/// reqwest (with `rustls-no-provider`) panics when building any client, even for http, unless
/// a crypto provider is installed; herald's main does this, so the tests do it once too.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A key no other test uses, shaped like herald's (a notification's UUID).
pub fn key() -> ProviderKey {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    ProviderKey::new(format!(
        "01970000-0000-7000-8000-{:012}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

pub fn message() -> Message {
    Message {
        notification_id: "01970000-0000-7000-8000-000000000001".to_owned(),
        channel: Channel::Email,
        to: "ada@example.com".to_owned(),
        subject: Some("Your code".to_owned()),
        text: Some("123456".to_owned()),
        html: Some("<p>123456</p>".to_owned()),
        payload: None,
        email: Default::default(),
    }
}

pub fn fixture(json: &str) -> serde_json::Value {
    serde_json::from_str(json).expect("fixtures are JSON")
}

/// The `message` of a documented error body.
pub fn documented_message(json: &str) -> String {
    fixture(json)["message"]
        .as_str()
        .expect("error fixtures carry a message")
        .to_owned()
}

pub fn accepted_ref(result: &SendResult) -> String {
    match result {
        SendResult::Accepted {
            provider_ref: Some(id),
            ..
        } => id.clone(),
        other => panic!("expected an acceptance with an id, got {other:?}"),
    }
}
