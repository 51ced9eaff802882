//! A Telnyx route's settings (`provider = "telnyx"`).

use std::sync::Arc;

use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of,
};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{DEFAULT_BASE_URL, Sender, TelnyxAdapter, TelnyxError, TelnyxRoute};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub base_url: Option<String>,
    pub api_key: SecretSource,
    /// The sending number (E.164) or alphanumeric sender ID; or `messaging_profile_id`.
    pub from: Option<String>,
    pub messaging_profile_id: Option<String>,
    /// herald's callback URL for this route, as Telnyx will call it; with `webhook_public_key`,
    /// herald reads Telnyx's message webhooks.
    pub webhook_url: Option<String>,
    /// The account's webhook public key (base64), from Telnyx's portal.
    pub webhook_public_key: Option<String>,
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Sms]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        vec![("api_key".into(), &self.api_key)]
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(self.base_url.as_deref(), DEFAULT_BASE_URL)
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let sender = match (&self.from, &self.messaging_profile_id) {
            (Some(from), None) => Sender::From(from.clone()),
            (None, Some(profile)) => Sender::MessagingProfile(profile.clone()),
            _ => {
                return Err(SettingsError::new(
                    "from",
                    "set exactly one of `from` and `messaging_profile_id`",
                ));
            }
        };
        let adapter = TelnyxAdapter::new(TelnyxRoute {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE_URL.into()),
            api_key: self.api_key.resolve("api_key")?,
            sender,
            timeout: route.timeout,
            webhook_url: self.webhook_url.clone(),
            webhook_public_key: self.webhook_public_key.clone(),
        })
        .map_err(|e| {
            let key = match e {
                TelnyxError::BaseUrl { .. } => "base_url",
                TelnyxError::ApiKey => "api_key",
                TelnyxError::Client(_) => "",
                TelnyxError::WebhookUrl(_) => "webhook_url",
                TelnyxError::WebhookPublicKey(_) | TelnyxError::WebhookHalf => "webhook_public_key",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
