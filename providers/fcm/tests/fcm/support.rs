//! Shared set-up: a fake FCM per test, an adapter pointed at it with a key file whose
//! `token_uri` is the fake's, and the message it sends. Keys, result readers and the crypto
//! provider are the conformance kit's (`support`).

use std::time::Duration;

use herald_fcm::fake::{self, FakeConfig, FakeHandle};
use herald_fcm::{FcmAdapter, FcmRoute};
use herald_provider::{Channel, Message};
use herald_provider_testkit::support;
use secrecy::SecretString;

pub use herald_provider_testkit::support::install_crypto_provider;

/// A running fake with the adapter a test needs.
pub type Vendor = support::Vendor<FakeHandle, FcmAdapter>;

/// Long enough for any answer the fake gives at once on a busy machine, and far below the
/// `delay` fault's hold.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// A client timeout short enough that a test waiting for it stays quick.
pub const SHORT_TIMEOUT: Duration = Duration::from_millis(800);

/// A registration token shaped like the docs' example.
pub const DEVICE: &str = "bk3RNwTe3H0:CI2k_HHwgIpoDKCIZvvDMExUdFQ3P1";

pub async fn vendor(config: FakeConfig) -> Vendor {
    vendor_with(config, CLIENT_TIMEOUT).await
}

/// A fake with `config`, and an adapter with the fake's own key file and `timeout`.
pub async fn vendor_with(config: FakeConfig, timeout: Duration) -> Vendor {
    let fake = fake::spawn(config)
        .await
        .expect("the fake binds a loopback port");
    let adapter = adapter(&fake.base_url(), &fake.service_account(), timeout);
    Vendor { fake, adapter }
}

/// An adapter to `base_url` with the key file `service_account` (JSON).
pub fn adapter(base_url: &str, service_account: &str, timeout: Duration) -> FcmAdapter {
    install_crypto_provider();
    FcmAdapter::new(route(base_url, service_account, timeout)).expect("a valid route")
}

pub fn route(base_url: &str, service_account: &str, timeout: Duration) -> FcmRoute {
    FcmRoute {
        base_url: base_url.to_owned(),
        project_id: None,
        service_account: SecretString::from(service_account.to_owned()),
        timeout,
    }
}

/// A push to [`DEVICE`]: `Your code`, `123456` (the kit's push).
pub fn message() -> Message {
    support::message(Channel::Push, DEVICE)
}

/// A middle line of the test key's base64 body: a piece of the private key that an echo or a
/// leak could carry without the rest.
pub fn private_key_line() -> &'static str {
    let lines: Vec<&str> = fake::TEST_PRIVATE_KEY
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    lines[lines.len() / 2]
}
