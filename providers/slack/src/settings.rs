//! A Slack route's settings (`provider = "slack"`).

use std::sync::Arc;
use std::time::Duration;

use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of,
};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{
    DEFAULT_BASE_URL, DEFAULT_PACE, DEFAULT_VISIBILITY_LAG, SlackAdapter, SlackError, SlackRoute,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Default `https://slack.com/api`.
    pub base_url: Option<String>,
    /// The app's bot token (`xoxb-…`), with `chat:write`, and for the look-up the history
    /// scope of each kind of conversation the route posts to: `channels:history` (public
    /// channels, `C…`), `groups:history` (private ones, `C…` or `G…`), `im:history` (direct
    /// messages, `D…`), `mpim:history` (group direct messages, `G…`).
    pub bot_token: SecretSource,
    /// Whether ambiguous sends are looked up in `conversations.history` (default `true`).
    /// `false` for a bot without a history scope: the route then declares no look-up, and its
    /// ambiguities settle by the delivery policy at once.
    pub history_lookup: Option<bool>,
    /// How long a posted message may take to show in `conversations.history` (default
    /// 600 000); Slack documents no figure.
    pub visibility_lag_ms: Option<u64>,
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Chat]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        vec![("bot_token".into(), &self.bot_token)]
    }

    /// Slack's documented rate for `chat.postMessage`: "one message per second per channel".
    /// herald's pace is per process: one process keeps it whatever conversations the route
    /// posts to; N processes post up to N a second (see the crate docs).
    fn default_pace(&self) -> Option<f64> {
        Some(DEFAULT_PACE)
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(self.base_url.as_deref(), DEFAULT_BASE_URL)
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let history_lookup = self.history_lookup.unwrap_or(true);
        if !history_lookup && self.visibility_lag_ms.is_some() {
            return Err(SettingsError::new(
                "visibility_lag_ms",
                "is only read with the history look-up (history_lookup = true)",
            ));
        }
        let adapter = SlackAdapter::new(SlackRoute {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE_URL.into()),
            bot_token: self.bot_token.resolve("bot_token")?,
            visibility_lag: history_lookup.then(|| {
                self.visibility_lag_ms
                    .map_or(DEFAULT_VISIBILITY_LAG, Duration::from_millis)
            }),
            timeout: route.timeout,
        })
        .map_err(|e| {
            let key = match e {
                SlackError::BaseUrl { .. } => "base_url",
                SlackError::BotToken => "bot_token",
                SlackError::VisibilityLag => "visibility_lag_ms",
                SlackError::Client(_) => "",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
