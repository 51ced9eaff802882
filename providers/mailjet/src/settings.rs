//! A Mailjet route's settings (`provider = "mailjet"`).

use std::sync::Arc;
use std::time::Duration;

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
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Email]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        vec![("api_secret".into(), &self.api_secret)]
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
        })
        .map_err(|e| {
            let key = match e {
                MailjetError::BaseUrl { .. } => "base_url",
                MailjetError::ApiKey => "api_key",
                MailjetError::From => "from",
                MailjetError::VisibilityLag => "visibility_lag_ms",
                MailjetError::Client(_) => "",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
