//! Shared set-up: a fake Twilio per test, an adapter pointed at it, and distinct texts.

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herald_provider::{Adapter, Channel, Message, ProviderKey, QueryResult};
use herald_twilio::fake::{self, FakeConfig, FakeHandle};
use herald_twilio::{TwilioAdapter, TwilioRoute};
use secrecy::SecretString;

pub const ACCOUNT: &str = "AC00000000000000000000000000000001";
pub const TOKEN: &str = "canary-secret-7f3a";
pub const FROM: &str = "+15005550006";
pub const TO: &str = "+14155550100";
pub const SERVICE: &str = "MG00000000000000000000000000000001";

/// Long enough for any answer the fake gives at once on a busy machine, far below `Delay`.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Vendor {
    pub fake: FakeHandle,
    pub adapter: TwilioAdapter,
}

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
    install_crypto_provider();
    let fake = fake::spawn(config)
        .await
        .expect("the fake binds a loopback port");
    let mut route = route(fake.base_url());
    adjust(&mut route);
    let adapter = TwilioAdapter::new(route).expect("a valid route");
    Vendor { fake, adapter }
}

/// reqwest (with `rustls-no-provider`) panics when building any client, even for http, unless
/// a crypto provider is installed; herald's main does this, so the tests do it once too.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A text no other test uses: Twilio has no client reference, so the text is the key.
pub fn unique_text() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("Your code is {:06}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// An SMS notification created now (herald's ids are UUIDv7).
pub fn sms(text: &str) -> Message {
    Message {
        notification_id: uuid::Uuid::now_v7().to_string(),
        channel: Channel::Sms,
        to: TO.to_owned(),
        subject: None,
        text: Some(text.to_owned()),
        html: None,
        payload: None,
        email: Default::default(),
    }
}

pub fn key(message: &Message) -> ProviderKey {
    ProviderKey::new(format!("ntf-{}", message.notification_id))
}

/// Asks until the answer is not `NotFoundYet`, for at most `within`: only to let a visibility
/// lag pass, in short steps.
pub async fn query_until_found(
    adapter: &TwilioAdapter,
    message: &Message,
    within: Duration,
) -> QueryResult {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let result = adapter.query(message, &key(message)).await;
        if !matches!(result, QueryResult::NotFoundYet { .. })
            || tokio::time::Instant::now() >= deadline
        {
            return result;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The form fields of a recorded create.
pub fn form(body: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

pub fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}
