//! A route's vendor settings, as the vendor's own crate reads them.
//!
//! herald's configuration names a route's vendor (`provider = "resend"`) and hands the rest of
//! the route's table to that vendor's `Settings`, which deserializes it (unknown keys refused),
//! names the secrets it holds, says where its vendor is reached and builds the adapter. herald
//! keeps one line per vendor that maps the name to the type; everything else about a vendor
//! lives in its crate.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use secrecy::SecretString;
use serde::Deserialize;

use crate::{Adapter, Channel};

/// Where a secret comes from: `{ env = "NAME" }`, `{ file = "/path" }` (its content, without the
/// final line break), or the secret written literally, which is accepted for development with a
/// warning.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum SecretSource {
    Env { env: String },
    File { file: PathBuf },
    Literal(SecretString),
}

impl SecretSource {
    /// Reads the secret; `key` names it in the error (`api_key`, `secrets[1]`).
    pub fn resolve(&self, key: &str) -> Result<SecretString, SettingsError> {
        match self {
            SecretSource::Env { env } => std::env::var(env).map(SecretString::from).map_err(|_| {
                SettingsError::new(key, format!("environment variable {env} is not set"))
            }),
            SecretSource::File { file } => std::fs::read_to_string(file)
                .map(|s| SecretString::from(s.trim_end().to_owned()))
                .map_err(|e| {
                    SettingsError::new(key, format!("cannot read {}: {e}", file.display()))
                }),
            SecretSource::Literal(secret) => Ok(secret.clone()),
        }
    }

    pub fn is_literal(&self) -> bool {
        matches!(self, SecretSource::Literal(_))
    }
}

/// A setting that cannot be used, named by its key inside the route's table. Never quotes a
/// secret.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingsError {
    pub key: String,
    pub problem: String,
}

impl SettingsError {
    pub fn new(key: impl Into<String>, problem: impl fmt::Display) -> Self {
        SettingsError {
            key: key.into(),
            problem: problem.to_string(),
        }
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.problem)
    }
}

impl std::error::Error for SettingsError {}

/// What herald's route settings give every vendor alike.
#[derive(Debug, Clone)]
pub struct RouteContext<'a> {
    /// The route's name, for the vendor's own log lines.
    pub name: &'a str,
    /// How long one call to the vendor may take, connect to last byte.
    pub timeout: Duration,
}

/// A vendor's settings for one route. Implemented by each vendor crate's `Settings`, which is
/// also `Deserialize` with `deny_unknown_fields`, so that a misspelt key is refused by name.
#[async_trait::async_trait]
pub trait RouteSettings: fmt::Debug + Send + Sync {
    /// The channels a route of this vendor carries.
    fn channels(&self) -> &[Channel];

    /// Every secret the settings name, by key, so that herald's start-up check can resolve them
    /// all and name each one missing.
    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        Vec::new()
    }

    /// `host:port` the vendor is reached at, for `check-config --connect`; `None` when there is
    /// nothing to reach before a send (each webhook's URL is its notification's).
    fn endpoint(&self) -> Option<String>;

    /// Whether the route may reach loopback and private addresses; herald then requires the
    /// route to name its tenants.
    fn reaches_private_networks(&self) -> bool {
        false
    }

    /// Whether every send goes to the same vendor, so that one send's failures say something of
    /// the next: the premise of a circuit breaker. Not so for webhooks (one receiver per URL).
    fn one_destination(&self) -> bool {
        true
    }

    /// Sends per second a route of this vendor keeps unless it sets `rate_limit_per_second`:
    /// the vendor's documented rate, where sending faster only earns refusals. `None`: the
    /// route is not paced unless it says so.
    fn default_pace(&self) -> Option<f64> {
        None
    }

    /// Whether building the adapter starts a vendor in this process (the built-in sandbox), so
    /// that a configuration check does not build it.
    fn starts_a_vendor(&self) -> bool {
        false
    }

    /// What herald derives from these settings that the operator should read before serving (a
    /// vendor limit each send will carry, say): `check-config` prints each line under the
    /// route's name.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Builds the route's adapter, resolving its secrets.
    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError>;
}

/// `host:port` of `base_url`, or of `default` when the route names none: a vendor's
/// [`RouteSettings::endpoint`].
pub fn endpoint_of(base_url: Option<&str>, default: &str) -> Option<String> {
    let url = Url::parse(base_url.unwrap_or(default)).ok()?;
    Some(format!(
        "{}:{}",
        url.host_str()?,
        url.port_or_known_default()?
    ))
}

/// Whether `host` (a name or an address, IPv6 in brackets or not) is this machine: where a
/// route may relax a rule that exists for a real vendor's sake, for a test double beside it.
pub fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_names_and_addresses_of_this_machine() {
        for host in [
            "localhost",
            "LOCALHOST",
            "127.0.0.1",
            "127.8.0.1",
            "::1",
            "[::1]",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "api.twilio.com",
            "10.0.0.1",
            "localhost.example",
            "",
            "[::2]",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn an_endpoint_is_the_host_and_port_of_the_base_url_or_the_default() {
        assert_eq!(
            endpoint_of(None, "https://api.resend.com").as_deref(),
            Some("api.resend.com:443")
        );
        assert_eq!(
            endpoint_of(Some("http://127.0.0.1:4010/v1"), "https://x.example").as_deref(),
            Some("127.0.0.1:4010")
        );
        assert_eq!(endpoint_of(Some("not a url"), ""), None);
    }

    #[test]
    fn a_missing_secret_is_named_by_its_key_and_variable() {
        let source = SecretSource::Env {
            env: "HERALD_TEST_SURELY_UNSET_7F3A".into(),
        };
        let err = source.resolve("api_key").unwrap_err();
        assert_eq!(
            err.to_string(),
            "api_key: environment variable HERALD_TEST_SURELY_UNSET_7F3A is not set"
        );
    }
}
