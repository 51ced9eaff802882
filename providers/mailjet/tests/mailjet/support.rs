//! Shared set-up: a fake Mailjet per test, an adapter pointed at it, and distinct keys.

use std::sync::Once;
use std::time::Duration;

use herald_mailjet::fake::{self, FakeConfig, FakeHandle};
use herald_mailjet::{MailjetAdapter, MailjetRoute};
use herald_provider::{Adapter, Channel, Message, ProviderKey, QueryResult};
use secrecy::SecretString;

pub const API_KEY: &str = "0123456789abcdef0123456789abcdef";
pub const SECRET: &str = "canary-secret-7f3a";
pub const FROM: &str = "pilot@mailjet.com";
pub const TO: &str = "passenger1@mailjet.com";

/// Long enough for any answer the fake gives at once on a busy machine, far below `Delay`.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Vendor {
    pub fake: FakeHandle,
    pub adapter: MailjetAdapter,
}

pub fn fake_config() -> FakeConfig {
    FakeConfig::new(API_KEY, SecretString::from(SECRET))
}

pub fn route(base_url: String) -> MailjetRoute {
    MailjetRoute {
        base_url,
        from_name: Some("Mailjet Pilot".to_owned()),
        timeout: CLIENT_TIMEOUT,
        ..MailjetRoute::new(API_KEY, SecretString::from(SECRET), FROM)
    }
}

pub async fn vendor() -> Vendor {
    vendor_with(fake_config(), |_| {}).await
}

/// A fake with `config`, and an adapter whose route `adjust` may change.
pub async fn vendor_with(config: FakeConfig, adjust: impl FnOnce(&mut MailjetRoute)) -> Vendor {
    install_crypto_provider();
    let fake = fake::spawn(config)
        .await
        .expect("the fake binds a loopback port");
    let mut route = route(fake.base_url());
    adjust(&mut route);
    let adapter = MailjetAdapter::new(route).expect("a valid route");
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

/// An email notification created now (herald's ids are UUIDv7).
pub fn email() -> Message {
    Message {
        notification_id: uuid::Uuid::now_v7().to_string(),
        channel: Channel::Email,
        to: TO.to_owned(),
        subject: Some("Your email flight plan!".to_owned()),
        text: Some("Dear passenger 1, welcome to Mailjet!".to_owned()),
        html: Some("<h3>Dear passenger 1, welcome to Mailjet!</h3>".to_owned()),
        payload: None,
        email: Default::default(),
    }
}

/// Herald's provider key for `message`: stable per notification.
pub fn key(message: &Message) -> ProviderKey {
    ProviderKey::new(format!("ntf-{}", message.notification_id))
}

/// Asks until the answer is not `NotFoundYet`, for at most `within`: only to let a visibility
/// lag pass, in short steps.
pub async fn query_until_found(
    adapter: &MailjetAdapter,
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

/// The query parameters of a recorded request.
pub fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

pub fn pair<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}
