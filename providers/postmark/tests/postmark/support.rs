//! Shared set-up: a fake Postmark per test, an adapter pointed at it, the message it sends and
//! a file that message may carry. Keys, result readers and the crypto provider are the
//! conformance kit's (`support`).

use std::time::Duration;

use herald_postmark::fake::{self, FakeConfig, FakeHandle};
use herald_postmark::{PostmarkAdapter, PostmarkRoute};
use herald_provider::{Channel, Message};
use herald_provider_testkit::support;
use secrecy::SecretString;

pub use herald_provider_testkit::support::{expanded, install_crypto_provider, invoice};

/// A running fake with the adapter a test needs.
pub type Vendor = support::Vendor<FakeHandle, PostmarkAdapter>;

/// Long enough for any answer the fake gives at once on a busy machine, and far below the
/// `delay` fault's hold.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

pub const SENDER: &str = "Herald <notify@herald.example>";

/// The webhook URL's Basic credentials, as a route configures them.
pub const CALLBACK_USER: &str = "postmark";
pub const CALLBACK_PASSWORD: &str = "0123456789abcdef0123456789abcdef-hook";

pub async fn vendor(config: FakeConfig) -> Vendor {
    let (token, lag) = (config.server_token.clone(), config.visibility_lag);
    let adapter = move |base_url: String| {
        let mut route = route(&base_url, &token);
        route.visibility_lag = lag.max(Duration::from_millis(1));
        adapter(&route)
    };
    Vendor::start(fake::spawn(config), FakeHandle::base_url, adapter).await
}

/// A route to `base_url` with the webhook's credentials set.
pub fn route(base_url: &str, token: &str) -> PostmarkRoute {
    PostmarkRoute {
        base_url: base_url.to_owned(),
        server_token: SecretString::from(token),
        from: SENDER.to_owned(),
        message_stream: "outbound".to_owned(),
        visibility_lag: Duration::from_secs(60),
        timeout: CLIENT_TIMEOUT,
        callback_username: Some(CALLBACK_USER.to_owned()),
        callback_password: Some(SecretString::from(CALLBACK_PASSWORD)),
    }
}

pub fn adapter(route: &PostmarkRoute) -> PostmarkAdapter {
    install_crypto_provider();
    PostmarkAdapter::new(route.clone()).expect("a valid route")
}

/// An email to ada@example.com: `Your code`, `123456`, `<p>123456</p>` (the kit's email).
pub fn message() -> Message {
    support::message(Channel::Email, "ada@example.com")
}
