//! A SparkPost route's settings (`provider = "sparkpost"`).

use std::sync::Arc;

use herald_provider::callback::CredentialsError;
use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of,
};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{DEFAULT_BASE_URL, SparkPostAdapter, SparkPostError, SparkPostRoute};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Default: SparkPost's US endpoint; an EU account uses `https://api.eu.sparkpost.com/api/v1`.
    pub base_url: Option<String>,
    pub api_key: SecretSource,
    /// The sender, e.g. `Acme <noreply@acme.example>`, on a verified sending domain.
    pub from: String,
    /// The user name of the Basic credentials of the SparkPost webhook (`auth_type = "basic"`)
    /// that posts to herald's callback URL for this route; with `callback_password`, herald
    /// reads SparkPost's events.
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
        let mut secrets = vec![("api_key".into(), &self.api_key)];
        if let Some(password) = &self.callback_password {
            secrets.push(("callback_password".into(), password));
        }
        secrets
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(self.base_url.as_deref(), DEFAULT_BASE_URL)
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let adapter = SparkPostAdapter::new(SparkPostRoute {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE_URL.into()),
            api_key: self.api_key.resolve("api_key")?,
            from: self.from.clone(),
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
                SparkPostError::BaseUrl { .. } => "base_url",
                SparkPostError::ApiKey => "api_key",
                SparkPostError::Client(_) => "",
                SparkPostError::Callback(CredentialsError::Username) => "callback_username",
                SparkPostError::Callback(CredentialsError::Password) => "callback_password",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
