//! An APNs route's settings (`provider = "apns"`).

use std::path::PathBuf;
use std::sync::Arc;

use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of,
};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{ApnsAdapter, ApnsError, ApnsRoute, CollapseId, DEFAULT_BASE_URL, PushType};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Default: APNs' production server; `https://api.sandbox.push.apple.com` for the
    /// development environment.
    pub base_url: Option<String>,
    /// The 10-character Team ID (the token's `iss`).
    pub team_id: String,
    /// The 10-character Key ID of the signing key (the token's `kid`).
    pub key_id: String,
    /// The `.p8` file Apple gave: `{ file = "/run/secrets/AuthKey_ABC123DEFG.p8" }`.
    pub signing_key: SecretSource,
    /// `apns-topic`: the app's bundle id.
    pub topic: String,
    /// `apns-push-type`; default `alert`.
    #[serde(default)]
    pub push_type: PushType,
    /// `apns-priority`: 10, 5 or 1; default none sent (APNs then uses 10).
    pub priority: Option<u8>,
    /// `apns-collapse-id`: `"none"` (default) or `"notification"` (herald's notification id).
    #[serde(default)]
    pub collapse_id: CollapseId,
    /// A PEM file of extra CA certificates to trust (a test stand-in's CA).
    pub root_certificate: Option<PathBuf>,
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Push]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        vec![("signing_key".into(), &self.signing_key)]
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(self.base_url.as_deref(), DEFAULT_BASE_URL)
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let extra_root_certificate_pem = match &self.root_certificate {
            Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
                SettingsError::new(
                    "root_certificate",
                    format!("cannot read {}: {e}", path.display()),
                )
            })?),
            None => None,
        };
        let adapter = ApnsAdapter::new(ApnsRoute {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE_URL.into()),
            team_id: self.team_id.clone(),
            key_id: self.key_id.clone(),
            signing_key: self.signing_key.resolve("signing_key")?,
            topic: self.topic.clone(),
            push_type: self.push_type,
            priority: self.priority,
            collapse_id: self.collapse_id,
            extra_root_certificate_pem,
            timeout: route.timeout,
        })
        .map_err(|e| {
            let key = match e {
                ApnsError::BaseUrl { .. } => "base_url",
                ApnsError::TeamId(_) => "team_id",
                ApnsError::KeyId(_) => "key_id",
                ApnsError::SigningKey(_) => "signing_key",
                ApnsError::Topic(_) => "topic",
                ApnsError::Priority(_) | ApnsError::BackgroundPriority => "priority",
                ApnsError::Certificate(_) => "root_certificate",
                ApnsError::Client(_) => "",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
