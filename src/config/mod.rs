//! `herald.toml`, its environment overrides (`HERALD_<SECTION>__<KEY>`), and its defaults.
//!
//! Every key is documented in `herald.example.toml`. Unknown keys are refused, secrets are read
//! from an env var or a file into `secrecy` types, and everything that can be checked is checked
//! here, so that `serve` fails at start-up with one clear line instead of on a later request.
//!
//! The types live in `sections` and `routes`, reading in `load`, the checks in `check`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::bail;
pub use herald_provider::settings::SecretSource;

use crate::domain::{Channel, Template};

mod check;
mod load;
mod routes;
mod sections;

pub use routes::{ProviderConfig, RouteConfig, TokenConfig};
pub use sections::{
    ATTACHMENT_MEMORY_BYTES, AttachmentsConfig, CategoryConfig, DEV_TENANT, DatabaseConfig,
    DispatchConfig, EventMapping, InboxConfig, InboxNatsConfig, RelayConfig, RetentionConfig,
    ReviewConfig, ServerConfig, SinkConfig, UnsubscribeConfig,
};

/// The whole configuration. Each section is read on its own (see [`Config::load`]), so that one
/// bad section does not hide the problems of the next.
#[derive(Debug)]
pub struct Config {
    pub server: ServerConfig,
    pub database: DatabaseConfig,
    pub tokens: Vec<TokenConfig>,
    /// A route's keys depend on its provider.
    pub routes: BTreeMap<String, RouteConfig>,
    /// The default route of each channel.
    pub channels: BTreeMap<Channel, String>,
    pub dispatch: DispatchConfig,
    pub templates: BTreeMap<String, Template>,
    /// `[templates] strict_locales = true`: a `locale` that no translation of the template
    /// serves is refused (422) instead of rendered in the default language.
    pub strict_locales: bool,
    /// The categories a notification may name, by name.
    pub categories: BTreeMap<String, CategoryConfig>,
    /// How one-click unsubscribe links are made, for the categories that have them.
    pub unsubscribe: UnsubscribeConfig,
    /// What attachments an email may carry.
    pub attachments: AttachmentsConfig,
    pub relay: RelayConfig,
    pub retention: RetentionConfig,
    pub review: ReviewConfig,
    /// Where the relay publishes outbox events, by sink name; with none, the log sink.
    pub sinks: BTreeMap<String, SinkConfig>,
    pub inbox: InboxConfig,
    /// Upstream event types and the notifications each maps to, one table or an array of them.
    pub events: BTreeMap<String, Vec<EventMapping>>,
    /// Where each value came from, for problems found after loading (a secret that is missing).
    pub origins: Origins,
}

/// Every problem found in a configuration, each naming its key and where its value came from.
#[derive(Debug)]
pub struct ConfigProblems(pub Vec<String>);

impl std::fmt::Display for ConfigProblems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "config: {one}"),
            many => {
                write!(f, "config: {} problems", many.len())?;
                many.iter().try_for_each(|p| write!(f, "\n  - {p}"))
            }
        }
    }
}

impl std::error::Error for ConfigProblems {}

/// Which file was read and which keys the environment set, so that a problem can say what to
/// edit: a line in the file or a variable.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    file: Option<PathBuf>,
    /// Dotted key (`routes.mail.port`) → the variable that set it.
    env: BTreeMap<String, String>,
}

impl Origins {
    /// Where `key`'s value came from: the variables that set it or a key inside it, else the
    /// file, else herald's defaults.
    pub fn of(&self, key: &str) -> String {
        let vars: Vec<&str> = self
            .env
            .iter()
            .filter(|(k, _)| {
                *k == key
                    || k.strip_prefix(key)
                        .is_some_and(|rest| rest.starts_with('.'))
                    || key
                        .strip_prefix(k.as_str())
                        .is_some_and(|rest| rest.starts_with('.'))
            })
            .map(|(_, var)| var.as_str())
            .collect();
        match (&self.file, vars.is_empty()) {
            (_, false) => format!("set by {}", vars.join(", ")),
            (Some(file), true) => format!("in {}", file.display()),
            (None, true) => "herald's default".into(),
        }
    }
}

impl Config {
    /// Every secret the config names, by its key: the start-up check resolves them all before
    /// anything else is built, so that each missing one is named at once.
    pub fn secrets(&self) -> Vec<(String, &SecretSource)> {
        let mut secrets = Vec::new();
        for (i, token) in self.tokens.iter().enumerate() {
            secrets.push((format!("tokens[{i}].secret"), &token.secret));
        }
        for (name, route) in &self.routes {
            for (key, secret) in route.provider.settings().secrets() {
                secrets.push((format!("routes.{name}.{key}"), secret));
            }
        }
        for (i, secret) in self.unsubscribe.secrets.iter().enumerate() {
            secrets.push((format!("unsubscribe.secrets[{i}]"), secret));
        }
        for (name, sink) in &self.sinks {
            if let SinkConfig::Webhook {
                secret,
                secrets: list,
                ..
            } = sink
            {
                secrets.extend(secret.iter().map(|s| (format!("sinks.{name}.secret"), s)));
                for (i, secret) in list.iter().enumerate() {
                    secrets.push((format!("sinks.{name}.secrets[{i}]"), secret));
                }
            }
        }
        secrets
    }
}

impl Config {
    /// The tenant of events taken from `[inbox.nats]`: the configured one, else the one tenant
    /// the tokens name, else `dev` (the development token's) when there are no tokens.
    pub fn inbox_tenant(&self) -> anyhow::Result<String> {
        if let Some(tenant) = self.inbox.nats.as_ref().and_then(|n| n.tenant.clone()) {
            return Ok(tenant);
        }
        let tenants: std::collections::BTreeSet<&str> =
            self.tokens.iter().map(|t| t.tenant.as_str()).collect();
        match tenants.len() {
            0 => Ok(DEV_TENANT.to_owned()),
            1 => Ok(tenants.into_iter().next().unwrap_or_default().to_owned()),
            _ => bail!(
                "config: inbox.nats.tenant is required when the tokens name several tenants ({})",
                tenants.into_iter().collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests;
