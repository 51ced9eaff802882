//! Shared set-up: a fake Mailjet per test, an adapter pointed at it, distinct keys and a file
//! an email may carry. The crypto provider, result readers and look-up waits are the
//! conformance kit's (`support`).

use std::time::Duration;

use herald_mailjet::fake::{self, FakeConfig, FakeHandle};
use herald_mailjet::{MailjetAdapter, MailjetRoute};
use herald_provider::{Channel, Message, ProviderKey};
use herald_provider_testkit::support;
use secrecy::SecretString;

pub use herald_provider_testkit::support::{expanded, install_crypto_provider, invoice};

pub const API_KEY: &str = "0123456789abcdef0123456789abcdef";
pub const SECRET: &str = "canary-secret-7f3a";
pub const FROM: &str = "pilot@mailjet.com";
pub const TO: &str = "passenger1@mailjet.com";

/// Long enough for any answer the fake gives at once on a busy machine, far below `Delay`.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// A running fake with the adapter a test needs.
pub type Vendor = support::Vendor<FakeHandle, MailjetAdapter>;

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
    Vendor::start(fake::spawn(config), FakeHandle::base_url, |base_url| {
        let mut route = route(base_url);
        adjust(&mut route);
        MailjetAdapter::new(route).expect("a valid route")
    })
    .await
}

/// An email notification to `TO` created now, with the content of Mailjet's own example.
pub fn email() -> Message {
    Message {
        subject: Some("Your email flight plan!".to_owned()),
        text: Some("Dear passenger 1, welcome to Mailjet!".to_owned()),
        html: Some("<h3>Dear passenger 1, welcome to Mailjet!</h3>".to_owned()),
        ..support::message(Channel::Email, TO)
    }
}

/// Herald's provider key for `message`: stable per notification.
pub fn key(message: &Message) -> ProviderKey {
    ProviderKey::new(format!("ntf-{}", message.notification_id))
}
