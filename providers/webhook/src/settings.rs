//! A webhook route's settings (`provider = "webhook"`).

use std::sync::Arc;

use herald_provider::settings::{RouteContext, RouteSettings, SecretSource, SettingsError};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{WebhookAdapter, WebhookError, WebhookRoute};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// `whsec_…` signing secrets; every request carries a signature for each (rotation).
    pub secrets: Vec<SecretSource>,
    /// Let webhooks reach loopback and private addresses (off: the URL is the sender's).
    #[serde(default)]
    pub allow_private_networks: bool,
    #[serde(default)]
    pub max_payload_bytes: Option<usize>,
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Webhook]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        let keys = self.secrets.iter().enumerate();
        keys.map(|(i, s)| (format!("secrets[{i}]"), s)).collect()
    }

    fn endpoint(&self) -> Option<String> {
        None
    }

    fn reaches_private_networks(&self) -> bool {
        self.allow_private_networks
    }

    fn one_destination(&self) -> bool {
        false
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let secrets = self
            .secrets()
            .into_iter()
            .map(|(key, s)| s.resolve(&key))
            .collect::<Result<_, _>>()?;
        let adapter = WebhookAdapter::new(WebhookRoute {
            secrets,
            timeout: route.timeout,
            allow_private_networks: self.allow_private_networks,
            max_payload_bytes: self.max_payload_bytes,
            user_agent: None,
        })
        .map_err(|e| match e {
            // The key names the secret; the error's own `#n` would count it again, from 1.
            WebhookError::Secret { index, problem } => {
                SettingsError::new(format!("secrets[{}]", index - 1), problem)
            }
            WebhookError::NoSecrets => SettingsError::new("secrets", e),
            WebhookError::UserAgent | WebhookError::Client(_) => SettingsError::new("", e),
        })?;
        Ok(Arc::new(adapter))
    }
}
