//! The bot token appears in no route, adapter or construction error, not even when the token
//! itself is malformed. What the adapter answers and keeps as evidence is the conformance kit's
//! to check (`conformance.rs`).

use herald_slack::{SlackAdapter, SlackError};
use secrecy::SecretString;

use crate::support::{install_crypto_provider, route};

const CANARY: &str = "xoxb-canary-secret-7f3a";

fn assert_clean(text: &str) {
    assert!(!text.contains(CANARY), "the token leaked into: {text}");
}

#[test]
fn routes_adapters_and_construction_errors_never_print_the_token() {
    install_crypto_provider();
    let route = route("https://slack.com/api", CANARY);
    assert_clean(&format!("{route:?}"));
    let adapter = SlackAdapter::new(route.clone()).unwrap();
    assert_clean(&format!("{adapter:?}"));

    let mut broken = route.clone();
    broken.bot_token = SecretString::from(format!("{CANARY}\n"));
    let err = SlackAdapter::new(broken).unwrap_err();
    assert!(matches!(err, SlackError::BotToken));
    assert_clean(&format!("{err} {err:?}"));

    let mut elsewhere = route;
    elsewhere.base_url = format!("ftp://{CANARY}.example");
    let err = SlackAdapter::new(elsewhere).unwrap_err();
    assert!(matches!(err, SlackError::BaseUrl { .. }));
}
