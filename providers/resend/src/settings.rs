//! A Resend route's settings (`provider = "resend"`).

use std::sync::Arc;

use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of,
};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{DEFAULT_BASE_URL, ResendAdapter, ResendError, ResendRoute};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Default: Resend's public endpoint.
    pub base_url: Option<String>,
    pub api_key: SecretSource,
    /// The sender, e.g. `Acme <noreply@acme.example>`.
    pub from: String,
    /// The signing secret (`whsec_…`) of the Resend webhook endpoint that posts to herald's
    /// callback URL for this route; set, herald reads Resend's webhooks.
    pub webhook_secret: Option<SecretSource>,
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Email]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        let mut secrets = vec![("api_key".into(), &self.api_key)];
        if let Some(secret) = &self.webhook_secret {
            secrets.push(("webhook_secret".into(), secret));
        }
        secrets
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(self.base_url.as_deref(), DEFAULT_BASE_URL)
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let adapter = ResendAdapter::new(ResendRoute {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE_URL.into()),
            api_key: self.api_key.resolve("api_key")?,
            from: self.from.clone(),
            timeout: route.timeout,
            webhook_secret: self
                .webhook_secret
                .as_ref()
                .map(|secret| secret.resolve("webhook_secret"))
                .transpose()?,
        })
        .map_err(|e| {
            let key = match e {
                ResendError::BaseUrl { .. } => "base_url",
                ResendError::ApiKey => "api_key",
                ResendError::Client(_) => "",
                ResendError::WebhookSecret(_) => "webhook_secret",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
