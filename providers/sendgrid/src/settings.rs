//! A SendGrid route's settings (`provider = "sendgrid"`).

use std::sync::Arc;
use std::time::Duration;

use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of,
};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{
    DEFAULT_BASE_URL, DEFAULT_VISIBILITY_LAG, SendGridAdapter, SendGridError, SendGridRoute,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub base_url: Option<String>,
    pub api_key: SecretSource,
    /// The sender, e.g. `Acme <noreply@acme.example>`, a verified sender or domain.
    pub from: String,
    /// Look ambiguous sends up through Email Activity, a paid add-on: turn it on only where the
    /// account has it (default off: no outcome query).
    #[serde(default)]
    pub activity_lookup: bool,
    /// With `activity_lookup`: how long a sent message may take to show (default 900 000).
    pub visibility_lag_ms: Option<u64>,
    /// The Event Webhook's verification key, as SendGrid shows it (base64 DER); set, herald
    /// reads SendGrid's signed events.
    pub webhook_public_key: Option<String>,
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Email]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        vec![("api_key".into(), &self.api_key)]
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(self.base_url.as_deref(), DEFAULT_BASE_URL)
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        if self.visibility_lag_ms.is_some() && !self.activity_lookup {
            return Err(SettingsError::new(
                "visibility_lag_ms",
                "applies only to the Email Activity look-up: set activity_lookup = true too",
            ));
        }
        let lag = self
            .visibility_lag_ms
            .map_or(DEFAULT_VISIBILITY_LAG, Duration::from_millis);
        let adapter = SendGridAdapter::new(SendGridRoute {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE_URL.into()),
            api_key: self.api_key.resolve("api_key")?,
            from: self.from.clone(),
            activity_lookup: self.activity_lookup.then_some(lag),
            timeout: route.timeout,
            webhook_public_key: self.webhook_public_key.clone(),
        })
        .map_err(|e| {
            let key = match e {
                SendGridError::BaseUrl { .. } => "base_url",
                SendGridError::ApiKey => "api_key",
                SendGridError::VisibilityLag => "visibility_lag_ms",
                SendGridError::Client(_) => "",
                SendGridError::WebhookPublicKey(_) => "webhook_public_key",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
