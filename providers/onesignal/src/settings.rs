//! A OneSignal route's settings (`provider = "onesignal"`).

use std::sync::Arc;

use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of,
};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{DEFAULT_BASE_URL, OneSignalAdapter, OneSignalError, OneSignalRoute};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub base_url: Option<String>,
    pub app_id: String,
    pub api_key: SecretSource,
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Push]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        vec![("api_key".into(), &self.api_key)]
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(self.base_url.as_deref(), DEFAULT_BASE_URL)
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let adapter = OneSignalAdapter::new(OneSignalRoute {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE_URL.into()),
            app_id: self.app_id.clone(),
            api_key: self.api_key.resolve("api_key")?,
            timeout: route.timeout,
        })
        .map_err(|e| {
            let key = match e {
                OneSignalError::BaseUrl { .. } => "base_url",
                OneSignalError::ApiKey => "api_key",
                OneSignalError::Client(_) => "",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
