//! A sandbox route's settings (`provider = "sandbox"`).

use std::sync::Arc;
use std::time::Duration;

use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of,
};
use herald_provider::signature::SigningSecret;
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{SandboxAdapter, SandboxRoute};
use crate::server::{CallbackTarget, Profile, SandboxConfig, spawn};

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
    /// The Standard Webhooks secret (`whsec_…`) the sandbox signs its delivery reports with;
    /// set, the route takes them at `POST /v1/callbacks/<route>`.
    pub callback_secret: Option<SecretSource>,
    /// Where the built-in sandbox posts its reports: herald's callback URL for this route,
    /// e.g. `http://127.0.0.1:8080/v1/callbacks/sandbox`. (A separate `herald sandbox` is told
    /// with `--callback-url`.)
    pub callback_url: Option<String>,
    /// How long after a delivery the built-in sandbox reports it.
    #[serde(default)]
    pub callback_delay_ms: u64,
    /// How many extra times it posts each report.
    #[serde(default)]
    pub callback_duplicates: u32,
    /// Whether it posts a delivery's reports last first.
    #[serde(default)]
    pub callback_reorder: bool,
    /// The channels this route stands in for (default: every one), so that a sandbox named for
    /// mail refuses an SMS sent to it, as a real mail vendor's route would.
    pub channels: Option<Vec<Channel>>,
}

fn idempotent() -> Profile {
    Profile::Idempotent
}

fn one_day() -> u64 {
    24 * 3600
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &[Channel] {
        self.channels.as_deref().unwrap_or(&Channel::ALL)
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        self.callback_secret
            .iter()
            .map(|secret| ("callback_secret".to_owned(), secret))
            .collect()
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(Some(self.base_url.as_deref()?), "")
    }

    fn starts_a_vendor(&self) -> bool {
        self.base_url.is_none()
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        if self.channels.as_ref().is_some_and(Vec::is_empty) {
            return Err(SettingsError::new(
                "channels",
                "names no channel: leave it out to carry every one",
            ));
        }
        let idempotency_window = Duration::from_secs(self.idempotency_window_seconds);
        let visibility_lag = Duration::from_millis(self.visibility_lag_ms);
        let callback_secret = self
            .callback_secret
            .as_ref()
            .map(|secret| {
                SigningSecret::parse(&secret.resolve("callback_secret")?)
                    .map_err(|e| SettingsError::new("callback_secret", e.to_string()))
            })
            .transpose()?;
        let target = match (&self.callback_url, &callback_secret) {
            (None, _) => None,
            (Some(_), _) if self.base_url.is_some() => {
                return Err(SettingsError::new(
                    "callback_url",
                    "is for the built-in sandbox; tell a separate `herald sandbox` with --callback-url",
                ));
            }
            (Some(_), None) => {
                return Err(SettingsError::new(
                    "callback_url",
                    "needs callback_secret, which signs the reports",
                ));
            }
            (Some(url), Some(_)) => Some(CallbackTarget {
                url: url.clone(),
                delay_ms: self.callback_delay_ms,
                duplicates: self.callback_duplicates,
                reorder: self.callback_reorder,
            }),
        };
        let mut vendor = None;
        let base_url = match &self.base_url {
            Some(url) => url.clone(),
            None => {
                let handle = spawn(SandboxConfig {
                    profile: self.profile,
                    idempotency_window,
                    visibility_lag,
                    callback_secret: callback_secret.clone(),
                    callbacks: target,
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
            callback_secret,
        })
        .map_err(|e| SettingsError::new("base_url", e))?;
        Ok(Arc::new(match vendor {
            Some(vendor) => adapter.keeping(vendor),
            None => adapter,
        }))
    }
}
