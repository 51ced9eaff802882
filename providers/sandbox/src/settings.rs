//! A sandbox route's settings (`provider = "sandbox"`).

use std::sync::Arc;
use std::time::Duration;

use herald_provider::settings::{RouteContext, RouteSettings, SettingsError, endpoint_of};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{SandboxAdapter, SandboxRoute};
use crate::server::{Profile, SandboxConfig, spawn};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// A running `herald sandbox`; without it, the route starts one in its own process.
    pub base_url: Option<String>,
    #[serde(default = "idempotent")]
    pub profile: Profile,
    #[serde(default = "one_day")]
    pub idempotency_window_seconds: u64,
    #[serde(default)]
    pub visibility_lag_ms: u64,
    /// The sender named in each message, as a real vendor's `from` would be.
    pub from: Option<String>,
}

fn idempotent() -> Profile {
    Profile::Idempotent
}

fn one_day() -> u64 {
    24 * 3600
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &Channel::ALL
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(Some(self.base_url.as_deref()?), "")
    }

    fn starts_a_vendor(&self) -> bool {
        self.base_url.is_none()
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let idempotency_window = Duration::from_secs(self.idempotency_window_seconds);
        let visibility_lag = Duration::from_millis(self.visibility_lag_ms);
        let mut vendor = None;
        let base_url = match &self.base_url {
            Some(url) => url.clone(),
            None => {
                let handle = spawn(SandboxConfig {
                    profile: self.profile,
                    idempotency_window,
                    visibility_lag,
                    ..SandboxConfig::default()
                })
                .await
                .map_err(|e| {
                    SettingsError::new(
                        "base_url",
                        format!("cannot start the built-in sandbox vendor: {e}"),
                    )
                })?;
                let url = handle.base_url();
                tracing::info!(route = route.name, %url, profile = self.profile.as_str(), "built-in sandbox vendor started");
                vendor = Some(handle);
                url
            }
        };
        let adapter = SandboxAdapter::try_new(SandboxRoute {
            base_url,
            from: self.from.clone(),
            profile: self.profile,
            idempotency_window,
            visibility_lag,
            timeout: route.timeout,
        })
        .map_err(|e| SettingsError::new("base_url", e))?;
        Ok(Arc::new(match vendor {
            Some(vendor) => adapter.keeping(vendor),
            None => adapter,
        }))
    }
}
