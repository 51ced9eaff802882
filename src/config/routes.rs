//! Tokens and routes: who may send, and through which configured vendor.

use std::time::Duration;

use herald_provider::settings::RouteSettings;
use herald_provider::settings::SecretSource;
use serde::Deserialize;

use super::load::Loader;
use super::sections::{DEFAULT_CALLBACK_BURST, DEFAULT_CALLBACK_RATE, MAX_RATE, MIN_RATE};
use super::{DispatchConfig, Origins};
use crate::domain::{Channel, Delivery, EmailAddress, Scope};

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
    /// Notifications per second this token may enqueue in each process (a batch counts its
    /// items, an upstream event counts as one); over it, `429 rate-limited` with `Retry-After`.
    /// Absent: no limit of its own.
    #[serde(default)]
    pub rate_limit_per_second: Option<f64>,
    /// How many it may enqueue at once above that rate, from a full bucket (default: one
    /// second's worth, at least 1).
    #[serde(default)]
    pub burst: Option<u32>,
}

impl TokenConfig {
    /// Its rate and burst, where it has a limit.
    pub fn rate_limit(&self) -> Option<(f64, u32)> {
        let rate = self.rate_limit_per_second?;
        let burst = self
            .burst
            .unwrap_or_else(|| rate.ceil().clamp(1.0, 1e6) as u32);
        Some((rate, burst))
    }
}

/// A named, configured provider instance.
#[derive(Debug)]
pub struct RouteConfig {
    /// Only these tenants may send through this route; `None`: any tenant whose tokens name
    /// it (or `"*"`). Required on a route that may reach private networks.
    pub tenants: Option<Vec<String>>,
    /// The tenant whose `operate` tokens pause and resume it, where tenants share it.
    pub operated_by: Option<String>,
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
    /// Vendor callbacks (signed as the vendor signs) this process takes per second on this
    /// route; more are answered 429 with `Retry-After`, and nothing of them is stored.
    pub callback_rate_limit_per_second: u32,
    /// How many such callbacks may come at once before that rate applies.
    pub callback_burst: u32,
    /// The senders an email may name in its own `from`: addresses, or `@domain` for any
    /// address at that domain. Empty: every email goes from the provider's `from`.
    pub allowed_from: Vec<String>,
    /// The route its notifications move to when this one is known not to have taken them.
    pub fallback: Option<String>,
    /// Known-not-sent failures in a row that open the route's circuit breaker; 0: never.
    pub circuit_failures: u32,
    /// How long an open circuit rests before one send probes it.
    pub circuit_open: Duration,
    pub provider: ProviderConfig,
}

/// Every vendor herald is built with, one line each: `provider = "name"` → its crate's
/// settings, which read the rest of the route's table and build its adapter.
macro_rules! vendors {
    ($($name:literal => $variant:ident($settings:ty),)*) => {
        /// A route's vendor and its own settings, by `provider = "…"` (read with
        /// [`Loader::parse_tagged`]).
        #[derive(Debug, Deserialize)]
        pub enum ProviderConfig {
            $(#[serde(rename = $name)] $variant($settings),)*
        }

        impl ProviderConfig {
            /// Every `provider = "…"` herald knows.
            pub const NAMES: &[&str] = &[$($name),*];

            /// The `provider = "…"` that chose it.
            pub fn name(&self) -> &'static str {
                match self {
                    $(ProviderConfig::$variant(_) => $name,)*
                }
            }

            /// The vendor's own settings: its channels, secrets and endpoint, and its adapter.
            pub fn settings(&self) -> &dyn RouteSettings {
                match self {
                    $(ProviderConfig::$variant(settings) => settings,)*
                }
            }
        }
    };
}

vendors! {
    "sandbox" => Sandbox(herald_sandbox::Settings),
    "webhook" => Webhook(herald_webhook::Settings),
    "resend" => Resend(herald_resend::Settings),
    "smtp" => Smtp(herald_smtp::Settings),
    "twilio" => Twilio(herald_twilio::Settings),
    "mailjet" => Mailjet(herald_mailjet::Settings),
    "onesignal" => Onesignal(herald_onesignal::Settings),
    "sparkpost" => Sparkpost(herald_sparkpost::Settings),
    "postmark" => Postmark(herald_postmark::Settings),
    "sendgrid" => Sendgrid(herald_sendgrid::Settings),
    "telnyx" => Telnyx(herald_telnyx::Settings),
    "ses" => Ses(herald_ses::Settings),
    "fcm" => Fcm(herald_fcm::Settings),
    "apns" => Apns(herald_apns::Settings),
    "slack" => Slack(herald_slack::Settings),
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
    callback_rate_limit_per_second: Option<u32>,
    #[serde(default)]
    callback_burst: Option<u32>,
    #[serde(default)]
    tenants: Option<Vec<String>>,
    #[serde(default)]
    operated_by: Option<String>,
    #[serde(default)]
    allowed_from: Vec<String>,
    #[serde(default)]
    fallback: Option<String>,
    #[serde(default)]
    circuit_failures: Option<u32>,
    #[serde(default)]
    circuit_open_seconds: Option<u64>,
}

impl RouteConfig {
    pub const COMMON_KEYS: [&'static str; 15] = [
        "fallback",
        "circuit_failures",
        "circuit_open_seconds",
        "tenants",
        "operated_by",
        "allowed_from",
        "delivery",
        "concurrency",
        "timeout_seconds",
        "max_attempts",
        "max_age_seconds",
        "rate_limit_per_second",
        "burst",
        "callback_rate_limit_per_second",
        "callback_burst",
    ];

    /// Parses route `name`; `None` if it has a problem (pushed to `loader`).
    pub(super) fn from_table(
        name: &str,
        mut table: toml::Table,
        dispatch: &DispatchConfig,
        loader: &mut Loader,
    ) -> Option<Self> {
        let key = format!("routes.{name}");
        let mut common = toml::Table::new();
        for key in Self::COMMON_KEYS {
            if let Some(value) = table.remove(key) {
                common.insert(key.into(), value);
            }
        }
        let common: Option<RouteCommon> = loader.parse(&key, common.into());
        let provider: Option<ProviderConfig> =
            loader.parse_tagged(&key, "provider", table, &Self::COMMON_KEYS);
        let (common, provider) = (common?, provider?);
        // Every bad entry is named, then the route is dropped: the check reports all at once.
        let allowed_key = format!("{key}.allowed_from");
        let before = loader.problems.len();
        for entry in &common.allowed_from {
            let address = entry
                .strip_prefix('@')
                .map_or(entry.clone(), |d| format!("x@{d}"));
            if EmailAddress::parse("allowed_from", &address).is_err() {
                loader.push(
                    &allowed_key,
                    format!("`{entry}` is neither an email address nor an @domain"),
                );
            }
        }
        if !common.allowed_from.is_empty()
            && !provider.settings().channels().contains(&Channel::Email)
        {
            loader.push(&allowed_key, "is only used on a route that sends email");
        }
        // A pace is 0 (off) or a finite rate a token bucket can wait for: one too small would
        // ask a send to wait longer than any clock holds.
        if let Some(rate) = common.rate_limit_per_second
            && !(rate == 0.0 || (MIN_RATE..=MAX_RATE).contains(&rate))
        {
            loader.push(
                &format!("{key}.rate_limit_per_second"),
                format!("{rate} is out of range: 0 (no limit), or from {MIN_RATE} to {MAX_RATE}"),
            );
        }
        if loader.problems.len() > before {
            return None;
        }
        Some(RouteConfig {
            delivery: common.delivery.unwrap_or(Delivery::DEFAULT),
            concurrency: common.concurrency.unwrap_or(16),
            timeout: Duration::from_secs(common.timeout_seconds.unwrap_or(10)),
            max_attempts: common.max_attempts.unwrap_or(dispatch.max_attempts),
            max_age: Duration::from_secs(common.max_age_seconds.unwrap_or(24 * 3600)),
            // 0 turns a vendor's default pace off.
            rate_limit_per_second: common
                .rate_limit_per_second
                .or_else(|| provider.settings().default_pace())
                .filter(|r| *r > 0.0),
            burst: common.burst.unwrap_or(1),
            callback_rate_limit_per_second: common
                .callback_rate_limit_per_second
                .unwrap_or(DEFAULT_CALLBACK_RATE),
            callback_burst: common.callback_burst.unwrap_or(DEFAULT_CALLBACK_BURST),
            tenants: common.tenants,
            operated_by: common.operated_by,
            allowed_from: common.allowed_from,
            fallback: common.fallback,
            circuit_failures: common.circuit_failures.unwrap_or(5),
            circuit_open: Duration::from_secs(common.circuit_open_seconds.unwrap_or(30)),
            provider,
        })
    }

    /// The route `serve` uses when none is configured: the in-process sandbox vendor.
    pub fn builtin_sandbox(dispatch: &DispatchConfig) -> Self {
        let mut table = toml::Table::new();
        table.insert("provider".into(), "sandbox".into());
        let mut loader = Loader {
            origins: Origins::default(),
            problems: Vec::new(),
            broken_routes: Vec::new(),
        };
        Self::from_table("sandbox", table, dispatch, &mut loader)
            .expect("the built-in sandbox route is valid")
    }
}
