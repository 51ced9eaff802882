//! A route's table as herald hands it over: the keys a Slack route takes, their defaults, the
//! secret it names, and the settings it refuses by key.

use std::time::Duration;

use herald_provider::Channel;
use herald_provider::settings::{RouteContext, RouteSettings};
use herald_slack::{DEFAULT_VISIBILITY_LAG, Settings};
use serde_json::{Value, json};

use crate::support::install_crypto_provider;

fn settings(table: Value) -> Result<Settings, serde_json::Error> {
    serde_json::from_value(table)
}

fn context() -> RouteContext<'static> {
    RouteContext {
        name: "slack",
        timeout: Duration::from_secs(5),
    }
}

#[tokio::test]
async fn a_route_needs_only_its_token_and_looks_up_with_the_default_lag() {
    install_crypto_provider();
    let settings = settings(json!({"bot_token": {"env": "SLACK_BOT_TOKEN"}})).unwrap();

    assert_eq!(settings.channels(), [Channel::Chat]);
    let secrets = settings.secrets();
    assert_eq!(secrets.len(), 1);
    assert_eq!(secrets[0].0, "bot_token");
    assert_eq!(settings.endpoint().as_deref(), Some("slack.com:443"));
    // Slack's one post per second per channel, unless the route sets its own.
    assert_eq!(settings.default_pace(), Some(1.0));

    let literal = self::settings(json!({"bot_token": "xoxb-literal"})).unwrap();
    let adapter = literal.adapter(&context()).await.unwrap();
    assert_eq!(
        adapter.capabilities().query_visibility_lag,
        Some(DEFAULT_VISIBILITY_LAG)
    );
    assert_eq!(adapter.capabilities().idempotency_window, None);
}

#[tokio::test]
async fn the_look_up_can_be_turned_off_and_its_lag_set() {
    install_crypto_provider();
    let off = settings(json!({"bot_token": "xoxb-t", "history_lookup": false})).unwrap();
    let adapter = off.adapter(&context()).await.unwrap();
    assert_eq!(adapter.capabilities().query_visibility_lag, None);

    let lag = settings(json!({"bot_token": "xoxb-t", "visibility_lag_ms": 120000})).unwrap();
    let adapter = lag.adapter(&context()).await.unwrap();
    assert_eq!(
        adapter.capabilities().query_visibility_lag,
        Some(Duration::from_secs(120))
    );
}

#[tokio::test]
async fn wrong_settings_are_refused_by_key() {
    install_crypto_provider();
    assert!(settings(json!({"bot_token": "xoxb-t", "channel": "C1"})).is_err());
    assert!(settings(json!({})).is_err());
    for (table, key) in [
        (
            json!({"bot_token": "xoxb-t", "visibility_lag_ms": 0}),
            "visibility_lag_ms",
        ),
        (
            json!({"bot_token": "xoxb-t", "history_lookup": false, "visibility_lag_ms": 1000}),
            "visibility_lag_ms",
        ),
        (
            json!({"bot_token": "xoxb-t", "base_url": "ftp://slack.example"}),
            "base_url",
        ),
        (
            json!({"bot_token": {"env": "HERALD_TEST_SLACK_SURELY_UNSET_9C1D"}}),
            "bot_token",
        ),
        (json!({"bot_token": "xoxb-bad\ntoken"}), "bot_token"),
    ] {
        let err = settings(table.clone())
            .unwrap()
            .adapter(&context())
            .await
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.key, key, "{table}");
        assert!(!err.to_string().contains("xoxb-bad"), "{err}");
    }
}
