//! Shared set-up: a fake OneSignal per test, an adapter pointed at it, and distinct keys.

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herald_onesignal::fake::{self, FakeConfig, FakeHandle};
use herald_onesignal::{OneSignalAdapter, OneSignalRoute};
use herald_provider::{Channel, Message, ProviderKey, SendResult};
use secrecy::SecretString;

/// A running fake with the adapter a test needs.
pub struct Vendor {
    pub fake: FakeHandle,
    pub adapter: OneSignalAdapter,
}

/// Long enough for any answer the fake gives at once on a busy machine, and far below the
/// `delay` fault's hold.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// A client timeout short enough that a test waiting for it stays quick.
pub const SHORT_TIMEOUT: Duration = Duration::from_millis(300);

/// The docs' example subscription id.
pub const SUBSCRIPTION: &str = "1dd608f2-c6a1-11e3-851d-000c2940e62c";

pub async fn vendor(config: FakeConfig) -> Vendor {
    let (app_id, api_key) = (config.app_id.clone(), config.api_key.clone());
    vendor_with(config, &app_id, &api_key, CLIENT_TIMEOUT).await
}

/// A fake with `config`, and an adapter that sends for `app_id` with `api_key`.
pub async fn vendor_with(
    config: FakeConfig,
    app_id: &str,
    api_key: &str,
    timeout: Duration,
) -> Vendor {
    let fake = fake::spawn(config)
        .await
        .expect("the fake binds a loopback port");
    let adapter = adapter(&fake.base_url(), app_id, api_key, timeout);
    Vendor { fake, adapter }
}

pub fn adapter(base_url: &str, app_id: &str, api_key: &str, timeout: Duration) -> OneSignalAdapter {
    install_crypto_provider();
    OneSignalAdapter::new(OneSignalRoute {
        base_url: base_url.to_owned(),
        app_id: app_id.to_owned(),
        api_key: SecretString::from(api_key),
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

/// A key no other test uses, shaped like herald's (a notification's UUIDv7).
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
        channel: Channel::Push,
        to: SUBSCRIPTION.to_owned(),
        subject: Some("Your code".to_owned()),
        text: Some("123456".to_owned()),
        html: None,
        payload: None,
        email: Default::default(),
    }
}

pub fn fixture(json: &str) -> serde_json::Value {
    serde_json::from_str(json).expect("fixtures are JSON")
}

/// The first message of a documented `{"errors": [...]}` body.
pub fn documented_error(json: &str) -> String {
    fixture(json)["errors"][0]
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

pub fn rejection(result: SendResult) -> (bool, Option<Duration>, herald_provider::Evidence) {
    match result {
        SendResult::Rejected {
            permanent,
            retry_after,
            evidence,
        } => (permanent, retry_after, evidence),
        other => panic!("expected a rejection, got {other:?}"),
    }
}
