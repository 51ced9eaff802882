//! `herald.toml`, its environment overrides (`HERALD_<SECTION>__<KEY>`), and its defaults.
//!
//! Every key is documented in `herald.example.toml`. Unknown keys are refused, secrets are read
//! from an env var or a file into `secrecy` types, and everything that can be checked is checked
//! here, so that `serve` fails at start-up with one clear line instead of on a later request.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use secrecy::SecretString;
use serde::Deserialize;

use crate::api::auth::Scope;
use crate::domain::{Channel, Delivery, Template};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub database: DatabaseConfig,
    #[serde(default)]
    pub tokens: Vec<TokenConfig>,
    /// Parsed separately (see [`RouteConfig::from_table`]): a route's keys depend on its provider.
    #[serde(skip)]
    pub routes: BTreeMap<String, RouteConfig>,
    /// The default route of each channel.
    #[serde(default)]
    pub channels: BTreeMap<Channel, String>,
    #[serde(default)]
    pub dispatch: DispatchConfig,
    #[serde(default)]
    pub templates: BTreeMap<String, Template>,
    #[serde(default)]
    pub relay: RelayConfig,
    /// Where the relay publishes outbox events, by sink name; with none, the log sink.
    #[serde(default)]
    pub sinks: BTreeMap<String, SinkConfig>,
    #[serde(default)]
    pub inbox: InboxConfig,
    /// Parsed separately (see [`Config::load`]): upstream event types and the notifications
    /// each maps to, one table or an array of them.
    #[serde(skip)]
    pub events: BTreeMap<String, Vec<EventMapping>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RelayConfig {
    /// Run the relay in this process (`herald relay` runs it alone, whatever this says).
    pub enabled: bool,
    /// Events claimed per sink in one transaction.
    pub batch_size: u32,
    /// How long a claim holds its events; a crashed relay's events are taken up after it.
    pub lease_seconds: u64,
    /// How often an idle relay looks for new events.
    pub poll_interval_ms: u64,
    /// The first pause after a failed publish; each later one doubles, up to `retry_max_seconds`
    /// (which is also the pause after a receiver refused an event outright).
    pub retry_base_ms: u64,
    pub retry_max_seconds: u64,
    /// How long an event published to every sink is kept before it is deleted.
    pub retention_seconds: u64,
    /// Events deleted per statement, so that a large clean-up never holds long locks.
    pub prune_batch: u32,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            enabled: true,
            batch_size: 256,
            lease_seconds: 30,
            poll_interval_ms: 200,
            retry_base_ms: 500,
            retry_max_seconds: 60,
            retention_seconds: 86_400,
            prune_batch: 1000,
        }
    }
}

/// One sink of the relay, by `kind = "…"`.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SinkConfig {
    /// NATS JetStream: one message per event on `<subject_prefix>.notification.<state>`, with
    /// `Nats-Msg-Id` = the event id, counted published once the stream acknowledged it.
    Nats {
        url: String,
        /// Created if missing, with subjects `<subject_prefix>.>`.
        #[serde(default = "default_stream")]
        stream: String,
        #[serde(default = "default_subject_prefix")]
        subject_prefix: String,
        /// A NATS credentials file (JWT and NKey seed), if the server wants one.
        credentials: Option<PathBuf>,
        /// How long to wait for the stream's acknowledgement.
        #[serde(default = "default_nats_timeout_seconds")]
        timeout_seconds: u64,
    },
    /// One Standard Webhooks POST per event to a fixed URL, `webhook-id` = the event id.
    Webhook {
        url: String,
        /// `whsec_…` signing secrets (newest first; every request is signed with each).
        #[serde(default)]
        secret: Option<SecretSource>,
        #[serde(default)]
        secrets: Vec<SecretSource>,
        /// Let the URL reach loopback and private addresses (off: refused like webhooks are).
        #[serde(default)]
        allow_private_networks: bool,
        #[serde(default = "default_webhook_timeout_seconds")]
        timeout_seconds: u64,
    },
    /// JSON lines, one event per line, on stdout or appended to `path`.
    Log { path: Option<PathBuf> },
}

fn default_stream() -> String {
    "HERALD".into()
}

fn default_subject_prefix() -> String {
    "herald".into()
}

fn default_nats_timeout_seconds() -> u64 {
    5
}

fn default_webhook_timeout_seconds() -> u64 {
    15
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboxConfig {
    /// Consume upstream CloudEvents from NATS JetStream.
    pub nats: Option<InboxNatsConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboxNatsConfig {
    pub url: String,
    /// Created if missing, with `subjects`.
    pub stream: String,
    pub subjects: Vec<String>,
    /// The durable consumer's name: where herald resumes after a restart.
    #[serde(default = "default_durable")]
    pub durable: String,
    /// The tenant whose notifications these events create. Default: the one tenant the tokens
    /// name (`dev` with no tokens).
    pub tenant: Option<String>,
    pub credentials: Option<PathBuf>,
}

fn default_durable() -> String {
    "herald".into()
}

/// `[events."Type"]`: one notification to create from an upstream event of that type. Every
/// string but `channel`, `route` and `delivery` is a template rendered from the event (its
/// `data`, and its attributes under `event`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventMapping {
    /// A configured template for the content, rendered with the event's data.
    pub template: String,
    pub channel: Channel,
    /// The recipient, e.g. `"{{ email }}"`.
    pub to: String,
    /// Default: the channel's default route.
    pub route: Option<String>,
    pub delivery: Option<Delivery>,
    /// Metadata to echo in events, each value a template, e.g. `{ export = "{{ event.id }}" }`.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub max_body_bytes: usize,
    /// A client must send a request's headers within this, and an idle kept-alive connection
    /// is closed after it.
    pub header_timeout_seconds: u64,
    /// A request's body must arrive within this.
    pub body_timeout_seconds: u64,
    /// Connections served at once; more wait in the listen queue.
    pub max_connections: usize,
    /// On shutdown, connections get this long to finish before they are closed.
    pub shutdown_grace_seconds: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            max_body_bytes: 256 * 1024,
            header_timeout_seconds: 10,
            body_timeout_seconds: 30,
            max_connections: 1024,
            shutdown_grace_seconds: 10,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite://herald.db` or `postgres://user@host/db`.
    pub url: String,
    /// Connections to PostgreSQL (SQLite always has one writer and a few readers).
    pub max_connections: u32,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: "sqlite://herald.db".into(),
            max_connections: 10,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// The principal, recorded in audits.
    pub name: String,
    pub tenant: String,
    pub scopes: Vec<Scope>,
    pub secret: SecretSource,
    /// The routes this token may send through: names, or `"*"` for every route (except those
    /// that reach private networks, which are named by the route's own `tenants`). Without it:
    /// every route when the config has one tenant; with several tenants, it must be said.
    #[serde(default)]
    pub routes: Option<Vec<String>>,
}

/// Where a secret comes from. A literal is accepted for development, with a warning.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum SecretSource {
    Env { env: String },
    File { file: PathBuf },
    Literal(SecretString),
}

impl SecretSource {
    pub fn resolve(&self, what: &str) -> anyhow::Result<SecretString> {
        match self {
            SecretSource::Env { env } => std::env::var(env)
                .map(SecretString::from)
                .with_context(|| format!("{what}: environment variable {env} is not set")),
            SecretSource::File { file } => std::fs::read_to_string(file)
                .map(|s| SecretString::from(s.trim_end().to_owned()))
                .with_context(|| format!("{what}: cannot read {}", file.display())),
            SecretSource::Literal(secret) => {
                tracing::warn!(
                    "{what} is written literally in the config; use {{ env = … }} or {{ file = … }} outside development"
                );
                Ok(secret.clone())
            }
        }
    }
}

/// A named, configured provider instance.
#[derive(Debug)]
pub struct RouteConfig {
    /// Only these tenants may send through this route; `None`: any tenant whose tokens name
    /// it (or `"*"`). Required on a route that may reach private networks.
    pub tenants: Option<Vec<String>>,
    /// The policy for notifications that do not choose one.
    pub delivery: Delivery,
    /// Sends in flight at once on this route.
    pub concurrency: usize,
    /// How long one call to the provider may take before it is abandoned as ambiguous.
    pub timeout: Duration,
    pub max_attempts: u32,
    /// A notification older than this is not tried again.
    pub max_age: Duration,
    /// Calls per second this process makes to the vendor (a token bucket); `None`: no limit.
    pub rate_limit_per_second: Option<f64>,
    /// How many calls may go at once before the rate applies.
    pub burst: u32,
    pub provider: ProviderConfig,
}

/// The adapter and its own settings, by `provider = "…"`.
#[derive(Debug, Deserialize)]
#[serde(tag = "provider", rename_all = "snake_case", deny_unknown_fields)]
pub enum ProviderConfig {
    Sandbox {
        /// A running `herald sandbox`; without it, `serve` starts one in-process.
        base_url: Option<String>,
        #[serde(default = "default_sandbox_profile")]
        profile: String,
        #[serde(default = "default_idempotency_window_seconds")]
        idempotency_window_seconds: u64,
        #[serde(default)]
        visibility_lag_ms: u64,
        /// The sender named in each message, as a real vendor's `from` would be.
        from: Option<String>,
    },
    /// Signed Standard Webhooks POSTs to each notification's URL.
    Webhook {
        /// `whsec_…` signing secrets; every request carries a signature for each (rotation).
        secrets: Vec<SecretSource>,
        /// Let webhooks reach loopback and private addresses (off: the URL is the sender's).
        #[serde(default)]
        allow_private_networks: bool,
        #[serde(default)]
        max_payload_bytes: Option<usize>,
    },
    /// Resend's email API, deduplicating on `Idempotency-Key` for 24 h.
    Resend {
        /// Default: Resend's public endpoint.
        base_url: Option<String>,
        api_key: SecretSource,
        /// The sender, e.g. `Acme <noreply@acme.example>`.
        from: String,
    },
    /// An SMTP server (a relay or a vendor's SMTP endpoint).
    Smtp {
        host: String,
        /// Default: 25, 587 or 465 by `tls`.
        port: Option<u16>,
        #[serde(default)]
        tls: SmtpTls,
        username: Option<String>,
        password: Option<SecretSource>,
        /// The envelope and header sender.
        from: String,
        /// The EHLO name; default: this host's name.
        hello_name: Option<String>,
        /// A PEM file of extra CA certificates to trust (a private relay's CA).
        root_certificate: Option<PathBuf>,
    },
    /// Twilio's Messages API: no idempotency key, but a look-up of the Messages list.
    Twilio {
        base_url: Option<String>,
        account_sid: String,
        /// `SK…` to authenticate with an API key (then `auth_token` is the key's secret).
        api_key_sid: Option<String>,
        auth_token: SecretSource,
        /// The sender; or `messaging_service_sid`, exactly one of the two.
        from: Option<String>,
        messaging_service_sid: Option<String>,
        status_callback: Option<String>,
        /// How long a sent message may take to show in the Messages list (default 600 000).
        visibility_lag_ms: Option<u64>,
    },
    /// Mailjet's Send API v3.1: no idempotency key, but a look-up by `CustomID`.
    Mailjet {
        base_url: Option<String>,
        api_key: String,
        api_secret: SecretSource,
        from: String,
        from_name: Option<String>,
        /// How long a sent message may take to show in the look-up (default 900 000).
        visibility_lag_ms: Option<u64>,
    },
    /// OneSignal's push API, deduplicating on `idempotency_key` for 30 days.
    Onesignal {
        base_url: Option<String>,
        app_id: String,
        api_key: SecretSource,
    },
}

/// How an SMTP route protects its connection.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SmtpTls {
    None,
    #[default]
    Starttls,
    Implicit,
}

fn default_sandbox_profile() -> String {
    "idempotent".into()
}

fn default_idempotency_window_seconds() -> u64 {
    24 * 3600
}

impl ProviderConfig {
    pub fn channels(&self) -> Vec<Channel> {
        match self {
            ProviderConfig::Sandbox { .. } => Channel::ALL.to_vec(),
            ProviderConfig::Webhook { .. } => vec![Channel::Webhook],
            ProviderConfig::Resend { .. }
            | ProviderConfig::Smtp { .. }
            | ProviderConfig::Mailjet { .. } => vec![Channel::Email],
            ProviderConfig::Onesignal { .. } => vec![Channel::Push],
            ProviderConfig::Twilio { .. } => vec![Channel::Sms],
        }
    }
}

/// The keys every route has, whatever its provider.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteCommon {
    #[serde(default)]
    delivery: Option<Delivery>,
    #[serde(default)]
    concurrency: Option<usize>,
    #[serde(default)]
    timeout_seconds: Option<u64>,
    #[serde(default)]
    max_attempts: Option<u32>,
    #[serde(default)]
    max_age_seconds: Option<u64>,
    #[serde(default)]
    rate_limit_per_second: Option<f64>,
    #[serde(default)]
    burst: Option<u32>,
    #[serde(default)]
    tenants: Option<Vec<String>>,
}

impl RouteConfig {
    const COMMON_KEYS: [&'static str; 8] = [
        "tenants",
        "delivery",
        "concurrency",
        "timeout_seconds",
        "max_attempts",
        "max_age_seconds",
        "rate_limit_per_second",
        "burst",
    ];

    fn from_table(mut table: toml::Table, dispatch: &DispatchConfig) -> anyhow::Result<Self> {
        let mut common = toml::Table::new();
        for key in Self::COMMON_KEYS {
            if let Some(value) = table.remove(key) {
                common.insert(key.into(), value);
            }
        }
        let common = RouteCommon::deserialize(common)?;
        Ok(RouteConfig {
            delivery: common.delivery.unwrap_or(Delivery::DEFAULT),
            concurrency: common.concurrency.unwrap_or(16).max(1),
            timeout: Duration::from_secs(common.timeout_seconds.unwrap_or(10)),
            max_attempts: common.max_attempts.unwrap_or(dispatch.max_attempts),
            max_age: Duration::from_secs(common.max_age_seconds.unwrap_or(24 * 3600)),
            rate_limit_per_second: common.rate_limit_per_second.filter(|r| *r > 0.0),
            burst: common.burst.unwrap_or(1),
            tenants: common.tenants,
            provider: ProviderConfig::deserialize(table)?,
        })
    }

    /// The route `serve` uses when none is configured: the in-process sandbox vendor.
    pub fn builtin_sandbox(dispatch: &DispatchConfig) -> Self {
        let mut table = toml::Table::new();
        table.insert("provider".into(), "sandbox".into());
        Self::from_table(table, dispatch).expect("the built-in sandbox route is valid")
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DispatchConfig {
    /// Run the dispatcher in this process. `false` makes an API-only node (another process
    /// sharing the PostgreSQL database dispatches).
    pub enabled: bool,
    /// How long a claim holds a notification. Must outlast every route's timeout, so that a
    /// stalled send has been abandoned before another worker reconciles it.
    pub lease_seconds: u64,
    /// Attempts per notification before it ends (routes may override).
    pub max_attempts: u32,
    /// Notifications claimed in one transaction.
    pub batch_size: u32,
    /// Sends in flight at once across all routes, per process.
    pub concurrency: usize,
    /// How often to look for due work when no wake-up signal arrives.
    pub poll_interval_ms: u64,
    /// The first retry delay; each later one doubles, up to `retry_max_seconds`.
    pub retry_base_ms: u64,
    pub retry_max_seconds: u64,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        DispatchConfig {
            enabled: true,
            lease_seconds: 30,
            max_attempts: 8,
            batch_size: 64,
            concurrency: 128,
            poll_interval_ms: 1000,
            retry_base_ms: 1000,
            retry_max_seconds: 3600,
        }
    }
}

/// Safety margin between a route's timeout and the lease (see [`DispatchConfig::lease_seconds`]).
const LEASE_MARGIN: Duration = Duration::from_secs(2);

impl Config {
    /// Reads `path` (if any), applies `HERALD_<SECTION>__<KEY>` overrides from `env`, fills
    /// defaults and checks the result.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Config> {
        let mut table = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read config {}", path.display()))?;
                toml::from_str::<toml::Table>(&text)
                    .with_context(|| format!("config {} is not valid TOML", path.display()))?
            }
            None => toml::Table::new(),
        };
        apply_env_overrides(&mut table, env)?;
        let routes = match table.remove("routes") {
            Some(toml::Value::Table(routes)) => routes,
            Some(_) => bail!("config: `routes` must be a table of routes"),
            None => toml::Table::new(),
        };
        let events = match table.remove("events") {
            Some(toml::Value::Table(events)) => events,
            Some(_) => bail!("config: `events` must be a table of event types"),
            None => toml::Table::new(),
        };
        let mut config: Config = Config::deserialize(table).map_err(|e| {
            anyhow::anyhow!("config: {}", e.to_string().trim_end().replace('\n', " "))
        })?;
        for (name, route) in routes {
            let toml::Value::Table(route) = route else {
                bail!("config: routes.{name} must be a table");
            };
            let route = RouteConfig::from_table(route, &config.dispatch).map_err(|e| {
                anyhow::anyhow!(
                    "config: routes.{name}: {}",
                    e.to_string().trim_end().replace('\n', " ")
                )
            })?;
            config.routes.insert(name, route);
        }
        for (event_type, mappings) in events {
            let mappings = match mappings {
                toml::Value::Array(many) => many,
                one => vec![one],
            };
            let mappings = mappings
                .into_iter()
                .map(EventMapping::deserialize)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| {
                    anyhow::anyhow!(
                        "config: events.\"{event_type}\": {}",
                        e.to_string().trim_end().replace('\n', " ")
                    )
                })?;
            config.events.insert(event_type, mappings);
        }
        if config.routes.is_empty() {
            config.routes.insert(
                "sandbox".into(),
                RouteConfig::builtin_sandbox(&config.dispatch),
            );
            for channel in Channel::ALL {
                config
                    .channels
                    .entry(channel)
                    .or_insert_with(|| "sandbox".into());
            }
        }
        config.check()?;
        Ok(config)
    }

    /// Which tenants may use which routes: tokens name their routes where tenants share one
    /// herald, and a route that may reach private networks names its tenants.
    fn check_route_grants(&self) -> anyhow::Result<()> {
        let tenants: std::collections::BTreeSet<&str> =
            self.tokens.iter().map(|t| t.tenant.as_str()).collect();
        for token in &self.tokens {
            match &token.routes {
                None if tenants.len() > 1 => bail!(
                    "config: token `{}`: with several tenants, each token names the routes it \
                     may send through (routes = [\"mail\", …], or [\"*\"] for every route)",
                    token.name
                ),
                None => {}
                Some(routes) => {
                    for route in routes.iter().filter(|r| *r != "*") {
                        if !self.routes.contains_key(route) {
                            bail!(
                                "config: token `{}` names unknown route `{route}`",
                                token.name
                            );
                        }
                    }
                }
            }
        }
        for (name, route) in &self.routes {
            let private = matches!(
                route.provider,
                ProviderConfig::Webhook {
                    allow_private_networks: true,
                    ..
                }
            );
            if private && route.tenants.is_none() && !self.tokens.is_empty() {
                bail!(
                    "config: routes.{name} may reach private networks: name the tenants allowed \
                     to use it (tenants = [\"…\"])"
                );
            }
            for tenant in route.tenants.iter().flatten() {
                if !tenants.contains(tenant.as_str()) && !self.tokens.is_empty() {
                    bail!("config: routes.{name}.tenants names `{tenant}`, which no token has");
                }
            }
        }
        Ok(())
    }

    fn check(&self) -> anyhow::Result<()> {
        for (channel, route) in &self.channels {
            let Some(r) = self.routes.get(route) else {
                bail!("config: channels.{channel} names unknown route `{route}`");
            };
            if !r.provider.channels().contains(channel) {
                bail!("config: channels.{channel}: route `{route}` does not carry {channel}");
            }
        }
        let lease = Duration::from_secs(self.dispatch.lease_seconds);
        for (name, route) in &self.routes {
            if route.timeout + LEASE_MARGIN > lease {
                bail!(
                    "config: routes.{name}.timeout_seconds ({}) must be at least {} s below dispatch.lease_seconds ({})",
                    route.timeout.as_secs(),
                    LEASE_MARGIN.as_secs(),
                    lease.as_secs()
                );
            }
        }
        for token in &self.tokens {
            if token.scopes.is_empty() {
                bail!("config: token `{}` has no scopes", token.name);
            }
        }
        self.check_route_grants()?;
        if self.dispatch.batch_size == 0 || self.dispatch.concurrency == 0 {
            bail!("config: dispatch.batch_size and dispatch.concurrency must be at least 1");
        }
        if self.relay.batch_size == 0 || self.relay.prune_batch == 0 {
            bail!("config: relay.batch_size and relay.prune_batch must be at least 1");
        }
        for (name, sink) in &self.sinks {
            if let SinkConfig::Nats { subject_prefix, .. } = sink
                && (subject_prefix.is_empty()
                    || subject_prefix
                        .split('.')
                        .any(|t| t.is_empty() || t.contains(['*', '>', ' '])))
            {
                bail!(
                    "config: sinks.{name}.subject_prefix must be NATS subject tokens without wildcards"
                );
            }
            if let SinkConfig::Webhook {
                secret, secrets, ..
            } = sink
                && secret.is_none()
                && secrets.is_empty()
            {
                bail!("config: sinks.{name} needs a `secret` (whsec_…) to sign with");
            }
        }
        if let Some(nats) = &self.inbox.nats {
            if nats.subjects.is_empty() {
                bail!("config: inbox.nats.subjects must name at least one subject");
            }
            if nats.tenant.is_none() {
                self.inbox_tenant()?;
            }
        }
        Ok(())
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
            0 => Ok(crate::app::DEV_TENANT.to_owned()),
            1 => Ok(tenants.into_iter().next().unwrap_or_default().to_owned()),
            _ => bail!(
                "config: inbox.nats.tenant is required when the tokens name several tenants ({})",
                tenants.into_iter().collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// `HERALD_DATABASE__URL=…` sets `database.url`; `HERALD_ROUTES__MAIL__PORT=2525` sets
/// `routes.mail.port`. A value that parses as a TOML value (a number, a boolean, an array) is
/// taken as one; anything else is a string.
fn apply_env_overrides(
    table: &mut toml::Table,
    env: impl IntoIterator<Item = (String, String)>,
) -> anyhow::Result<()> {
    for (name, raw) in env {
        let Some(path) = name.strip_prefix("HERALD_") else {
            continue;
        };
        if !path.contains("__") {
            continue; // HERALD_CONFIG, HERALD_DEV_TOKEN, HERALD_URL … are not config keys
        }
        let keys: Vec<String> = path.split("__").map(str::to_lowercase).collect();
        let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or(toml::Value::String(raw));
        let (last, parents) = keys.split_last().expect("split yields at least one key");
        let mut node = &mut *table;
        for key in parents {
            let entry = node
                .entry(key.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            node = entry
                .as_table_mut()
                .with_context(|| format!("{name}: `{key}` is not a table in the config"))?;
        }
        node.insert(last.clone(), value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml_text: &str, env: &[(&str, &str)]) -> anyhow::Result<Config> {
        let dir = std::env::temp_dir().join(format!("herald-config-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("herald.toml");
        std::fs::write(&path, toml_text).unwrap();
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        let config = Config::load(Some(&path), env);
        std::fs::remove_dir_all(dir).unwrap();
        config
    }

    #[test]
    fn the_example_config_documents_valid_keys() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/herald.example.toml"))
                .unwrap();
        let config = load(&text, &[]).unwrap();
        assert_eq!(config.tokens.len(), 2);
        assert_eq!(
            config.routes.len(),
            7,
            "every provider has an example route"
        );
        assert_eq!(config.channels[&Channel::Webhook], "sandbox");
        assert!(config.templates.contains_key("export-ready"));
        assert_eq!(config.sinks.len(), 3, "one sink of each kind");
        assert_eq!(config.events["ExportCompleted"].len(), 1);
        assert_eq!(config.inbox_tenant().unwrap(), "acme");
    }

    #[test]
    fn an_event_type_maps_to_one_table_or_an_array_of_them_and_unknown_keys_are_named() {
        let config = load(
            "[events.\"A\"]\ntemplate = \"t\"\nchannel = \"email\"\nto = \"{{ e }}\"\n\
             [[events.\"B\"]]\ntemplate = \"t\"\nchannel = \"sms\"\nto = \"{{ p }}\"\n\
             [[events.\"B\"]]\ntemplate = \"t\"\nchannel = \"email\"\nto = \"{{ e }}\"\n",
            &[],
        )
        .unwrap();
        assert_eq!((config.events["A"].len(), config.events["B"].len()), (1, 2));
        let err = load(
            "[events.\"A\"]\ntemplate = \"t\"\nchannel = \"email\"\nto = \"x\"\ntoo = 1\n",
            &[],
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("events.\"A\"") && err.to_string().contains("too"),
            "{err}"
        );
        let err = load(
            "[sinks.s]\nkind = \"webhook\"\nurl = \"https://h.io\"\n",
            &[],
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("sinks.s") && err.to_string().contains("secret"),
            "{err}"
        );
    }

    #[test]
    fn no_config_means_sqlite_localhost_and_the_sandbox_for_every_channel() {
        let config = Config::load(None, []).unwrap();
        assert_eq!(config.database.url, "sqlite://herald.db");
        assert_eq!(config.server.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(config.server.max_body_bytes, 262_144);
        for channel in Channel::ALL {
            assert_eq!(config.channels[&channel], "sandbox");
        }
    }

    #[test]
    fn environment_variables_override_nested_keys_with_typed_values() {
        let config = load(
            "[database]\nurl = \"sqlite://a.db\"\n[routes.box]\nprovider = \"sandbox\"\n",
            &[
                ("HERALD_DATABASE__URL", "postgres://postgres@127.0.0.1/x"),
                ("HERALD_SERVER__MAX_BODY_BYTES", "1024"),
                ("HERALD_ROUTES__BOX__VISIBILITY_LAG_MS", "250"),
                ("HERALD_DEV_TOKEN", "not-a-key"),
            ],
        )
        .unwrap();
        assert_eq!(config.database.url, "postgres://postgres@127.0.0.1/x");
        assert_eq!(config.server.max_body_bytes, 1024);
        assert!(matches!(
            config.routes["box"].provider,
            ProviderConfig::Sandbox {
                visibility_lag_ms: 250,
                ..
            }
        ));
    }

    #[test]
    fn unknown_keys_are_refused_with_their_name() {
        let err = load("[server]\nlisten = \"127.0.0.1:1\"\nlistn = 3\n", &[]).unwrap_err();
        assert!(err.to_string().contains("listn"), "{err}");
        let err = load("[routes.a]\nprovider = \"sandbox\"\nhots = \"x\"\n", &[]).unwrap_err();
        assert!(
            err.to_string().contains("routes.a") && err.to_string().contains("hots"),
            "{err}"
        );
    }

    #[test]
    fn a_timeout_that_outlasts_the_lease_is_refused() {
        let err = load(
            "[dispatch]\nlease_seconds = 5\n[routes.a]\nprovider = \"sandbox\"\ntimeout_seconds = 10\n",
            &[],
        )
        .unwrap_err();
        assert!(err.to_string().contains("lease_seconds"), "{err}");
    }

    #[test]
    fn a_channel_default_must_name_a_route_that_carries_it() {
        let err = load(
            "[channels]\nemail = \"nope\"\n[routes.a]\nprovider = \"sandbox\"\n",
            &[],
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown route"), "{err}");
    }

    #[test]
    fn token_secrets_come_from_the_environment_and_stay_redacted() {
        let config = load(
            "[[tokens]]\nname = \"billing\"\ntenant = \"acme\"\nscopes = [\"send\"]\nsecret = { env = \"HERALD_TEST_TOKEN_SECRET_X\" }\n",
            &[],
        )
        .unwrap();
        let err = config.tokens[0]
            .secret
            .resolve("token billing")
            .unwrap_err();
        assert!(err.to_string().contains("HERALD_TEST_TOKEN_SECRET_X"));
        let literal = SecretSource::Literal(SecretString::from("canary-secret-1"));
        assert!(!format!("{literal:?}").contains("canary-secret-1"));
    }
}
