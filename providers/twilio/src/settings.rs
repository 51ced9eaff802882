//! A Twilio route's settings (`provider = "twilio"`).

use std::sync::Arc;
use std::time::Duration;

use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of, is_loopback_host,
};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{
    DEFAULT_BASE_URL, DEFAULT_VALIDITY_PERIOD, DEFAULT_VISIBILITY_LAG, LIST_ALLOWANCE,
    TwilioAdapter, TwilioError, TwilioRoute,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub base_url: Option<String>,
    pub account_sid: String,
    /// `SK…` to authenticate with an API key (then `auth_token` is the key's secret).
    pub api_key_sid: Option<String>,
    pub auth_token: SecretSource,
    /// The sender; or `messaging_service_sid`, exactly one of the two.
    pub from: Option<String>,
    pub messaging_service_sid: Option<String>,
    /// herald's public URL for this route's status callbacks, e.g.
    /// `https://herald.example.com/v1/callbacks/twilio-main`. Sent as `StatusCallback` with
    /// `herald_key=<provider key>` appended; set, herald reads the callbacks Twilio posts there.
    pub status_callback: Option<String>,
    /// The account's Auth Token, which Twilio signs status callbacks with: needed with
    /// `api_key_sid` and `status_callback` (`auth_token` is then the API key's secret).
    pub callback_auth_token: Option<SecretSource>,
    /// How long after a send the look-up may call it absent (default 600 000): at least the
    /// validity period plus 30 s against Twilio itself.
    pub visibility_lag_ms: Option<u64>,
    /// The longest Twilio may queue a message before dropping it (`ValidityPeriod`, 60 to 36 000;
    /// default 570); a notification that expires sooner is kept only until then.
    pub validity_period_seconds: Option<u64>,
}

impl Settings {
    fn visibility_lag(&self) -> Duration {
        self.visibility_lag_ms
            .map_or(DEFAULT_VISIBILITY_LAG, Duration::from_millis)
    }

    fn validity_period(&self) -> Duration {
        self.validity_period_seconds
            .map_or(DEFAULT_VALIDITY_PERIOD, Duration::from_secs)
    }
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Sms]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        let mut secrets = vec![("auth_token".into(), &self.auth_token)];
        if let Some(token) = &self.callback_auth_token {
            secrets.push(("callback_auth_token".into(), token));
        }
        secrets
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(self.base_url.as_deref(), DEFAULT_BASE_URL)
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = vec![format!(
            "each SMS carries ValidityPeriod = its time left before expiry, at most {} s \
             (validity_period_seconds): Twilio drops a message it has not sent by then; a \
             look-up calls a send absent {} ms after it (visibility_lag_ms)",
            self.validity_period().as_secs(),
            self.visibility_lag().as_millis()
        )];
        let base = self
            .base_url
            .as_deref()
            .and_then(|url| url::Url::parse(url).ok());
        if base.is_some_and(|url| url.host_str().is_some_and(is_loopback_host))
            && self.visibility_lag() < self.validity_period() + LIST_ALLOWANCE
        {
            notes.push(format!(
                "base_url is on loopback, taken for a test double that queues nothing: the lag is \
                 not held to the validity period plus 30 s; if it is a proxy to Twilio, set \
                 visibility_lag_ms to at least {}",
                (self.validity_period() + LIST_ALLOWANCE).as_millis()
            ));
        }
        notes
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let adapter = TwilioAdapter::new(TwilioRoute {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE_URL.into()),
            account_sid: self.account_sid.clone(),
            api_key_sid: self.api_key_sid.clone(),
            auth_token: self.auth_token.resolve("auth_token")?,
            from: self.from.clone(),
            messaging_service_sid: self.messaging_service_sid.clone(),
            status_callback: self.status_callback.clone(),
            callback_auth_token: self
                .callback_auth_token
                .as_ref()
                .map(|token| token.resolve("callback_auth_token"))
                .transpose()?,
            visibility_lag: self.visibility_lag(),
            validity_period: self.validity_period(),
            timeout: route.timeout,
        })
        .map_err(|e| {
            let key = match e {
                TwilioError::BaseUrl { .. } => "base_url",
                TwilioError::AccountSid => "account_sid",
                TwilioError::Sender => "from",
                TwilioError::VisibilityLag | TwilioError::LagUnderValidity { .. } => {
                    "visibility_lag_ms"
                }
                TwilioError::ValidityPeriod(_) => "validity_period_seconds",
                TwilioError::StatusCallback { .. } => "status_callback",
                TwilioError::CallbackAuthToken | TwilioError::UnusedCallbackAuthToken => {
                    "callback_auth_token"
                }
                TwilioError::Client(_) => "",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
