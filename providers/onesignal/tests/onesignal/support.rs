//! Shared set-up: a fake OneSignal per test, an adapter pointed at it, and the message it
//! sends. Keys, result readers and the crypto provider are the conformance kit's (`support`).

use std::time::Duration;

use herald_onesignal::fake::{self, FakeConfig, FakeHandle};
use herald_onesignal::{OneSignalAdapter, OneSignalRoute};
use herald_provider::{Channel, Message};
use herald_provider_testkit::support;
use secrecy::SecretString;

pub use herald_provider_testkit::support::install_crypto_provider;

/// A running fake with the adapter a test needs.
pub type Vendor = support::Vendor<FakeHandle, OneSignalAdapter>;

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
    let adapter = |base_url: String| adapter(&base_url, app_id, api_key, timeout);
    Vendor::start(fake::spawn(config), FakeHandle::base_url, adapter).await
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

/// A push to the docs' example subscription: `Your code`, `123456` (the kit's push).
pub fn message() -> Message {
    support::message(Channel::Push, SUBSCRIPTION)
}

/// The first message of a documented `{"errors": [...]}` body.
pub fn documented_error(json: &str) -> String {
    support::json(json)["errors"][0]
        .as_str()
        .expect("error fixtures carry a message")
        .to_owned()
}
