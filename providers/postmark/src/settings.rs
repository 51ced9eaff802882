//! A Postmark route's settings (`provider = "postmark"`).

use std::sync::Arc;
use std::time::Duration;

use herald_provider::callback::CredentialsError;
use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of,
};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{
    DEFAULT_BASE_URL, DEFAULT_MESSAGE_STREAM, DEFAULT_VISIBILITY_LAG, PostmarkAdapter,
    PostmarkError, PostmarkRoute,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub base_url: Option<String>,
    pub server_token: SecretSource,
    /// The sender, e.g. `Acme <noreply@acme.example>`, a confirmed sender signature or domain.
    pub from: String,
    /// Default `outbound`, Postmark's transactional stream.
    pub message_stream: Option<String>,
    /// How long a sent message may take to show in the outbound search (default 900 000).
    pub visibility_lag_ms: Option<u64>,
    /// The user name of the Basic credentials in the webhook URL configured in Postmark
    /// (`https://user:pass@herald.example.com/v1/callbacks/postmark`); with
    /// `callback_password`, herald reads Postmark's webhooks.
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
        let mut secrets = vec![("server_token".into(), &self.server_token)];
        if let Some(password) = &self.callback_password {
            secrets.push(("callback_password".into(), password));
        }
        secrets
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(self.base_url.as_deref(), DEFAULT_BASE_URL)
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let adapter = PostmarkAdapter::new(PostmarkRoute {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE_URL.into()),
            server_token: self.server_token.resolve("server_token")?,
            from: self.from.clone(),
            message_stream: self
                .message_stream
                .clone()
                .unwrap_or_else(|| DEFAULT_MESSAGE_STREAM.into()),
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
                PostmarkError::BaseUrl { .. } => "base_url",
                PostmarkError::ServerToken => "server_token",
                PostmarkError::VisibilityLag => "visibility_lag_ms",
                PostmarkError::Client(_) => "",
                PostmarkError::Callback(CredentialsError::Username) => "callback_username",
                PostmarkError::Callback(CredentialsError::Password) => "callback_password",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
