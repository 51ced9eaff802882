//! Shared set-up: a fake Slack per test, an adapter pointed at it, and the message it posts.
//! Keys, result readers and the crypto provider are the conformance kit's (`support`).

use std::time::Duration;

use herald_provider::{Channel, Message};
use herald_provider_testkit::support;
use herald_slack::fake::{self, CHANNEL, FakeConfig, FakeHandle};
use herald_slack::{SlackAdapter, SlackRoute};
use secrecy::SecretString;

pub use herald_provider_testkit::support::install_crypto_provider;

/// A running fake with the adapter a test needs.
pub type Vendor = support::Vendor<FakeHandle, SlackAdapter>;

/// Long enough for any answer the fake gives at once on a busy machine, and far below the
/// `delay` fault's hold.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// A client timeout short enough that a test waiting for it stays quick.
pub const SHORT_TIMEOUT: Duration = Duration::from_millis(300);

pub async fn vendor(config: FakeConfig) -> Vendor {
    vendor_with(config, CLIENT_TIMEOUT).await
}

/// A fake with `config`, and an adapter with its token, its lag and `timeout`.
pub async fn vendor_with(config: FakeConfig, timeout: Duration) -> Vendor {
    let (token, lag) = (config.bot_token.clone(), config.visibility_lag);
    let adapter = move |base_url: String| {
        let mut route = route(&base_url, &token);
        route.visibility_lag = Some(lag.max(Duration::from_millis(1)));
        route.timeout = timeout;
        adapter(&route)
    };
    Vendor::start(fake::spawn(config), FakeHandle::base_url, adapter).await
}

pub fn route(base_url: &str, token: &str) -> SlackRoute {
    SlackRoute {
        base_url: base_url.to_owned(),
        bot_token: SecretString::from(token),
        visibility_lag: Some(Duration::from_secs(60)),
        timeout: CLIENT_TIMEOUT,
    }
}

pub fn adapter(route: &SlackRoute) -> SlackAdapter {
    install_crypto_provider();
    SlackAdapter::new(route.clone()).expect("a valid route")
}

/// A chat message to the fake's channel: `Your code is 123456` (the kit's chat message).
pub fn message() -> Message {
    support::message(Channel::Chat, CHANNEL)
}
