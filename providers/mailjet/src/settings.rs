//! A Mailjet route's settings (`provider = "mailjet"`).

use std::sync::Arc;
use std::time::Duration;

use herald_provider::callback::CredentialsError;
use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of,
};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{
    DEFAULT_BASE_URL, DEFAULT_VISIBILITY_LAG, MailjetAdapter, MailjetError, MailjetRoute,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub base_url: Option<String>,
    pub api_key: String,
    pub api_secret: SecretSource,
    pub from: String,
    pub from_name: Option<String>,
    /// How long a sent message may take to show in the look-up (default 900 000).
    pub visibility_lag_ms: Option<u64>,
    /// The user name of the Basic credentials written into the Event API URL configured in
    /// Mailjet (`https://user:pass@herald.example.com/v1/callbacks/mailjet-main`); with
    /// `callback_password`, herald reads Mailjet's events.
    pub callback_username: Option<String>,
    /// Their password; set both or neither.
    pub callback_password: Option<SecretSource>,
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Email]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        let mut secrets = vec![("api_secret".into(), &self.api_secret)];
        if let Some(password) = &self.callback_password {
            secrets.push(("callback_password".into(), password));
        }
        secrets
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(self.base_url.as_deref(), DEFAULT_BASE_URL)
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let adapter = MailjetAdapter::new(MailjetRoute {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE_URL.into()),
            api_key: self.api_key.clone(),
            api_secret: self.api_secret.resolve("api_secret")?,
            from: self.from.clone(),
            from_name: self.from_name.clone(),
            visibility_lag: self
                .visibility_lag_ms
                .map_or(DEFAULT_VISIBILITY_LAG, Duration::from_millis),
            timeout: route.timeout,
            callback_username: self.callback_username.clone(),
            callback_password: self
                .callback_password
                .as_ref()
                .map(|password| password.resolve("callback_password"))
                .transpose()?,
        })
        .map_err(|e| {
            let key = match e {
                MailjetError::BaseUrl { .. } => "base_url",
                MailjetError::ApiKey => "api_key",
                MailjetError::From => "from",
                MailjetError::VisibilityLag => "visibility_lag_ms",
                MailjetError::Client(_) => "",
                MailjetError::Callback(CredentialsError::Username) => "callback_username",
                MailjetError::Callback(CredentialsError::Password) => "callback_password",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
