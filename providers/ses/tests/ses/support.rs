//! Shared set-up: a fake SES per test, an adapter pointed at it, the message it sends and a
//! file that message may carry. Keys, result readers and the crypto provider are the
//! conformance kit's (`support`).

use std::time::Duration;

use herald_provider::{Channel, Message};
use herald_provider_testkit::support;
use herald_ses::fake::{self, FakeConfig, FakeHandle};
use herald_ses::{SesAdapter, SesRoute, SnsOrigin};
use secrecy::SecretString;

pub use herald_provider_testkit::support::{expanded, install_crypto_provider, invoice};

/// A running fake with the adapter a test needs.
pub type Vendor = support::Vendor<FakeHandle, SesAdapter>;

pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
pub const FROM: &str = "Acme <noreply@acme.example>";
pub const TO: &str = "ada@example.com";

pub async fn vendor(config: FakeConfig) -> Vendor {
    let route_config = config.clone();
    let adapter = move |base_url: String| adapter(&route(&base_url, &route_config));
    Vendor::start(fake::spawn(config), FakeHandle::base_url, adapter).await
}

/// A route to `base_url` with `config`'s region and keys, its events read from `config`'s
/// topic on the fake's own SNS (at `base_url`).
pub fn route(base_url: &str, config: &FakeConfig) -> SesRoute {
    SesRoute {
        region: config.region.clone(),
        base_url: base_url.to_owned(),
        access_key_id: config.access_key_id.clone(),
        secret_access_key: SecretString::from(config.secret_access_key.as_str()),
        session_token: None,
        from: FROM.to_owned(),
        configuration_set: Some("herald-events".to_owned()),
        timeout: CLIENT_TIMEOUT,
        sns_topic_arn: Some(config.topic_arn.clone()),
        sns_origin: SnsOrigin::Local(base_url.parse().expect("a URL")),
    }
}

pub fn adapter(route: &SesRoute) -> SesAdapter {
    install_crypto_provider();
    SesAdapter::new(route.clone()).expect("a valid route")
}

/// An email to [`TO`]: the kit's (`Your code`, `123456`).
pub fn message() -> Message {
    support::message(Channel::Email, TO)
}
