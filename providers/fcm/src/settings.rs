//! An FCM route's settings (`provider = "fcm"`).

use std::sync::Arc;

use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of,
};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{DEFAULT_BASE_URL, FcmAdapter, FcmError, FcmRoute};

/// ```toml
/// [routes.push]
/// provider = "fcm"
/// service_account = { file = "/etc/herald/fcm-service-account.json" }
/// # project_id = "my-project"            # default: the key's own project_id
/// # base_url = "https://fcm.googleapis.com"
/// ```
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Default: FCM's public API root.
    pub base_url: Option<String>,
    /// The Firebase project to send for. Default: the key's `project_id`.
    pub project_id: Option<String>,
    /// The service account key file's content (the JSON the Firebase console downloads). Its
    /// `token_uri` is where access tokens are minted.
    pub service_account: SecretSource,
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Push]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        vec![("service_account".into(), &self.service_account)]
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(self.base_url.as_deref(), DEFAULT_BASE_URL)
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let adapter = FcmAdapter::new(FcmRoute {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE_URL.into()),
            project_id: self.project_id.clone(),
            service_account: self.service_account.resolve("service_account")?,
            timeout: route.timeout,
        })
        .map_err(|e| {
            let key = match e {
                FcmError::BaseUrl { .. } => "base_url",
                FcmError::ServiceAccount(_) | FcmError::TokenUri { .. } => "service_account",
                FcmError::NoProject | FcmError::ProjectId(_) => "project_id",
                FcmError::Client(_) => "",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
