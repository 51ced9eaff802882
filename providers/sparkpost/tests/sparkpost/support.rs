//! Shared set-up: a fake SparkPost per test, an adapter pointed at it, the message it sends and
//! a file that message may carry. Keys, result readers and the crypto provider are the
//! conformance kit's (`support`).

use std::time::Duration;

use herald_provider::{Channel, Message};
use herald_provider_testkit::support;
use herald_sparkpost::fake::{self, FakeConfig, FakeHandle};
use herald_sparkpost::{SparkPostAdapter, SparkPostRoute};
use secrecy::SecretString;

pub use herald_provider_testkit::support::{expanded, install_crypto_provider, invoice};

/// A running fake with the adapter a test needs.
pub type Vendor = support::Vendor<FakeHandle, SparkPostAdapter>;

/// Long enough for any answer the fake gives at once on a busy machine, and far below the
/// `delay` fault's hold.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// A client timeout short enough that a test waiting for it stays quick.
pub const SHORT_TIMEOUT: Duration = Duration::from_millis(300);

pub const SENDER: &str = "Herald <notify@herald.example>";

/// The webhook's Basic credentials, as a route configures them.
pub const CALLBACK_USER: &str = "sparkpost";
pub const CALLBACK_PASSWORD: &str = "0123456789abcdef0123456789abcdef-hook";

pub async fn vendor(config: FakeConfig) -> Vendor {
    let api_key = config.api_key.clone();
    vendor_with(config, &api_key, CLIENT_TIMEOUT).await
}

/// A fake with `config`, and an adapter that authenticates with `api_key`.
pub async fn vendor_with(config: FakeConfig, api_key: &str, timeout: Duration) -> Vendor {
    let adapter = |base_url: String| adapter(&route(&base_url, api_key, timeout));
    Vendor::start(fake::spawn(config), FakeHandle::base_url, adapter).await
}

/// A route to `base_url` with the webhook's credentials set.
pub fn route(base_url: &str, api_key: &str, timeout: Duration) -> SparkPostRoute {
    SparkPostRoute {
        base_url: base_url.to_owned(),
        api_key: SecretString::from(api_key),
        from: SENDER.to_owned(),
        timeout,
        callback_username: Some(CALLBACK_USER.to_owned()),
        callback_password: Some(SecretString::from(CALLBACK_PASSWORD)),
    }
}

pub fn adapter(route: &SparkPostRoute) -> SparkPostAdapter {
    install_crypto_provider();
    SparkPostAdapter::new(route.clone()).expect("a valid route")
}

/// An email to ada@example.com: `Your code`, `123456`, `<p>123456</p>` (the kit's email).
pub fn message() -> Message {
    support::message(Channel::Email, "ada@example.com")
}
