//! `herald.toml`, its environment overrides (`HERALD_<SECTION>__<KEY>`), and its defaults.
//!
//! Every key is documented in `herald.example.toml`. Unknown keys are refused, secrets are read
//! from an env var or a file into `secrecy` types, and everything that can be checked is checked
//! here, so that `serve` fails at start-up with one clear line instead of on a later request.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;
use herald_provider::settings::RouteSettings;
pub use herald_provider::settings::SecretSource;
use serde::Deserialize;

use crate::domain::{AttachmentRules, Channel, Delivery, EmailAddress, Scope, Template, Templates};
use crate::review::{PermanentRefusals, Policy};

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

/// Collects problems while a config is read, each with its key and origin.
struct Loader {
    origins: Origins,
    problems: Vec<String>,
    /// Routes named in the config whose own problems left them out: a reference to one is not
    /// a second problem.
    broken_routes: Vec<String>,
}

impl Loader {
    /// Whether `route` names no route at all (not one left out for its own problems).
    fn unknown_route(&self, routes: &BTreeMap<String, RouteConfig>, route: &str) -> bool {
        !routes.contains_key(route) && !self.broken_routes.iter().any(|r| r == route)
    }
}

impl Loader {
    fn push(&mut self, key: &str, message: impl std::fmt::Display) {
        let mut message = message.to_string().trim_end().replace('\n', " ");
        // toml ends some messages with " in `port`": the key already says it.
        if let Some((head, field)) = message.rsplit_once(" in `")
            && key.ends_with(field.trim_end_matches('`'))
        {
            message = head.to_owned();
        }
        // serde quotes a string of the wrong type, and the key may hold a secret (an API key
        // given where a table was expected): say what it is, never what it says.
        if let Some(start) = message.find("string \"")
            && let Some(end) = message.rfind("\", expected")
            && end > start
        {
            message.replace_range(start..=end, "a string");
        }
        let origin = self.origins.of(key);
        self.problems.push(format!("{key}: {message} ({origin})"));
    }

    /// Deserializes `value` found at `key`, naming the inner key at fault if it fails, and every
    /// unknown key in it, each with the nearest valid one.
    fn parse<T: serde::de::DeserializeOwned>(
        &mut self,
        key: &str,
        value: toml::Value,
    ) -> Option<T> {
        let problems = match read_naming_every_unknown_key(value) {
            Ok(parsed) => return Some(parsed),
            Err(problems) => problems,
        };
        for (path, message) in problems {
            let key = match path.as_str() {
                "." => key.to_owned(),
                path => format!("{key}.{path}"),
            };
            self.push(&key, nearest_key(message, &[]));
        }
        None
    }

    /// Like [`Loader::parse`] for a table whose key `tag` names its kind (`provider = "smtp"`):
    /// serde loses the path inside internally tagged enums, so the kind is taken out and the
    /// rest read as the externally tagged `{ smtp = { … } }`, which keeps it. `common` are the
    /// keys every kind takes (read apart), which an unknown key's hint weighs too.
    fn parse_tagged<T: serde::de::DeserializeOwned>(
        &mut self,
        key: &str,
        tag: &str,
        mut table: toml::Table,
        common: &[&str],
    ) -> Option<T> {
        let Some(toml::Value::String(kind)) = table.remove(tag) else {
            self.push(key, format!("needs `{tag} = \"…\"`"));
            return None;
        };
        let mut tagged = toml::Table::new();
        tagged.insert(kind.clone(), table.into());
        let problems = match read_naming_every_unknown_key(toml::Value::from(tagged)) {
            Ok(parsed) => return Some(parsed),
            Err(problems) => problems,
        };
        for (path, message) in problems {
            // The path starts with the kind, which is not a key the user wrote.
            let inner = path
                .strip_prefix(kind.as_str())
                .map(|rest| rest.trim_start_matches('.'))
                .unwrap_or_default();
            let key = match inner {
                "" => key.to_owned(),
                inner => format!("{key}.{inner}"),
            };
            let message = match message.strip_prefix("unknown variant ") {
                Some(rest) if inner.is_empty() => format!("unknown {tag} {rest}"),
                _ => nearest_key(message, common),
            };
            self.push(&key, message);
        }
        None
    }

    /// Removes section `key` from `table` and parses it; a missing or broken one is its default
    /// (a broken one is also a problem, so the config is refused anyway).
    fn section<T: serde::de::DeserializeOwned + Default>(
        &mut self,
        table: &mut toml::Table,
        key: &str,
    ) -> T {
        table
            .remove(key)
            .and_then(|value| self.parse(key, value))
            .unwrap_or_default()
    }

    /// Removes section `key`, which must be a table of named items.
    fn named(&mut self, table: &mut toml::Table, key: &str) -> toml::Table {
        match table.remove(key) {
            Some(toml::Value::Table(items)) => items,
            Some(_) => {
                self.push(key, "must be a table");
                toml::Table::new()
            }
            None => toml::Table::new(),
        }
    }
}

/// Takes `strict_locales` out of `[templates]`, whose other keys name templates: a boolean
/// there is the setting, a table a template that happens to bear its name.
fn strict_locales(table: &mut toml::Table, loader: &mut Loader) -> bool {
    let Some(toml::Value::Table(templates)) = table.get_mut("templates") else {
        return false;
    };
    match templates.remove("strict_locales") {
        None => false,
        Some(toml::Value::Boolean(strict)) => strict,
        Some(template @ toml::Value::Table(_)) => {
            templates.insert("strict_locales".into(), template);
            false
        }
        Some(_) => {
            loader.push("templates.strict_locales", "must be true or false");
            false
        }
    }
}

/// A config holding more unknown keys than this is not worth reading on: the rest are left for
/// the next run.
const MAX_UNKNOWN_KEYS: usize = 64;

/// Deserializes `value`; where serde stops at an unknown key (it names only the first), takes
/// that key out and reads again, so that one run names every unknown key of every table. Each
/// problem is its path inside `value` (`.` for the value itself) and serde's message.
fn read_naming_every_unknown_key<T: serde::de::DeserializeOwned>(
    mut value: toml::Value,
) -> Result<T, Vec<(String, String)>> {
    let mut problems = Vec::new();
    while problems.len() < MAX_UNKNOWN_KEYS {
        let err = match serde_path_to_error::deserialize(value.clone()) {
            Ok(parsed) if problems.is_empty() => return Ok(parsed),
            Ok(_) => break,
            Err(err) => err,
        };
        let message = err.inner().to_string();
        let path = err.path().to_string();
        // A required key missing from a table that held an unknown key near its name is that
        // key misspelt, which is already named with it.
        let missing = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split_once('`'))
            .map(|(field, _)| field);
        let misspelt = missing.is_some_and(|missing| {
            problems.iter().any(|(unknown, _): &(String, String)| {
                let (table, key) = unknown.rsplit_once('.').unwrap_or((".", unknown));
                table == path && strsim::jaro_winkler(key, missing) >= NEAR
            })
        });
        if !misspelt {
            problems.push((path, message.clone()));
        }
        if !message.starts_with("unknown field `") || !remove_at(&mut value, err.path()) {
            break;
        }
    }
    Err(problems)
}

/// Removes the key `path` ends with from `value`; false if the path does not lead to a table
/// holding it.
fn remove_at(value: &mut toml::Value, path: &serde_path_to_error::Path) -> bool {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let Some((Segment::Map { key: last }, parents)) = segments.split_last() else {
        return false;
    };
    let mut at = value;
    for segment in parents {
        let next = match (segment, at) {
            (Segment::Map { key } | Segment::Enum { variant: key }, toml::Value::Table(table)) => {
                table.get_mut(key)
            }
            (Segment::Seq { index }, toml::Value::Array(items)) => items.get_mut(*index),
            _ => None,
        };
        let Some(next) = next else {
            return false;
        };
        at = next;
    }
    match at {
        toml::Value::Table(table) => table.remove(last).is_some(),
        _ => false,
    }
}

/// How alike an unknown key and a valid one must be (Jaro–Winkler, 0 to 1) for the valid one to
/// be offered as what was meant; below it, every valid key is listed instead.
const NEAR: f64 = 0.8;

/// serde's "unknown field `x`, expected one of `a`, `b`" lists the keys of the kind's own type
/// alphabetically: say the nearest of those and `common` (the keys every kind takes) instead,
/// or list them all where none is near.
fn nearest_key(message: String, common: &[&str]) -> String {
    let Some((field, expected)) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once("`, "))
    else {
        return message;
    };
    // The kind's keys are the quoted words of "expected `a`", "expected `a` or `b`" and
    // "expected one of `a`, `b`" ("there are no fields" quotes none).
    let mut keys: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    keys.extend(common);
    keys.sort_unstable();
    keys.dedup();
    let nearest = keys
        .iter()
        .map(|key| (strsim::jaro_winkler(field, key), *key))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match nearest {
        Some((likeness, key)) if likeness >= NEAR => {
            format!("unknown field `{field}`, did you mean `{key}`?")
        }
        Some(_) => {
            let keys: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
            format!(
                "unknown field `{field}`, expected one of {}",
                keys.join(", ")
            )
        }
        None => message,
    }
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
    /// How often an idle relay looks for new events that no commit in this process told it of.
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

/// How long herald keeps what it no longer needs. Deletes go a small batch per transaction, so
/// a large clean-up never holds long locks.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// How long an `Idempotency-Key` (and an upstream event's id) is remembered; a request
    /// that repeats it later creates a new notification.
    pub idempotency_seconds: u64,
    /// How long a finished notification (`delivered`, `cancelled`, `failed` and closed by a
    /// person, or refused for good where `[review] permanent_refusals = "final"`) is kept,
    /// with its attempts and audit, after it finished; 0 keeps it for ever. 30 days by
    /// default, as delivery logs of the kind usually keep (at 200 a second, keeping everything
    /// grows the database by about 48 GB a day). Notifications in review (`unknown`, a dead
    /// letter nobody closed, an unacknowledged `duplicate_possible` or `contradicted`) are
    /// never deleted.
    pub finished_seconds: u64,
    /// Rows deleted per transaction.
    pub batch_size: u32,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            idempotency_seconds: 7 * 86_400,
            finished_seconds: 30 * 86_400,
            batch_size: 500,
        }
    }
}

/// A category of message.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CategoryConfig {
    /// Recipients may leave it: its email carries a one-click unsubscribe (RFC 8058), and an
    /// unsubscribe stops this category's notifications to them, no other's.
    #[serde(default)]
    pub unsubscribe: bool,
}

/// One-click unsubscribe links (`[unsubscribe]`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UnsubscribeConfig {
    /// herald's address as a mail reader reaches it, e.g. `https://herald.example.com`: links
    /// are `<public_url>/v1/unsubscribe/<token>`.
    pub public_url: Option<String>,
    /// The first signs every link; each verifies one, so a secret is rotated by putting the new
    /// one first and removing the old once the mail it signed is no longer read.
    pub secrets: Vec<SecretSource>,
}

/// Email attachments (`[attachments]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AttachmentsConfig {
    /// The most one email's attachments may hold together, decoded, in bytes. The enqueue
    /// routes' body limit grows by this much (in base64) beyond `server.max_body_bytes`.
    pub max_total_bytes: usize,
    /// The MIME types an attachment may have.
    pub content_types: Vec<String>,
    /// What this process may hold in memory at once for attachments, in bytes: the enqueues
    /// that carry them (each counted at three times its body: the body, its parsed and its
    /// decoded form) and the sends that carry them (each at twice its expanded request). Work
    /// that finds it spent waits: an enqueue a few seconds, then 503; a send until its
    /// deadline, then a hold. With the attachment cache (32 MiB) and herald's own ~50 MiB, it
    /// sets the memory a process needs (the README's "Memory").
    pub memory_bytes: usize,
}

/// The default of `[attachments] memory_bytes`.
pub const ATTACHMENT_MEMORY_BYTES: usize = 96 * 1024 * 1024;
/// The least `memory_bytes` herald takes: room for one attachment of the default size.
const MIN_ATTACHMENT_MEMORY_BYTES: usize = 16 * 1024 * 1024;
/// The most `memory_bytes` herald takes.
const MAX_ATTACHMENT_MEMORY_BYTES: usize = 16 * 1024 * 1024 * 1024;

/// The largest `max_total_bytes` herald takes: a request body is held in memory whole, and so is
/// each attachment while it is sent.
const MAX_ATTACHMENT_BYTES: usize = 64 * 1024 * 1024;

impl Default for AttachmentsConfig {
    fn default() -> Self {
        let rules = AttachmentRules::default();
        AttachmentsConfig {
            max_total_bytes: rules.max_total_bytes,
            content_types: rules.content_types.into_iter().collect(),
            memory_bytes: ATTACHMENT_MEMORY_BYTES,
        }
    }
}

impl AttachmentsConfig {
    pub fn rules(&self) -> AttachmentRules {
        AttachmentRules {
            max_total_bytes: self.max_total_bytes,
            content_types: self
                .content_types
                .iter()
                .map(|t| t.to_ascii_lowercase())
                .collect(),
        }
    }

    fn check(&self, loader: &mut Loader) {
        if !(1..=MAX_ATTACHMENT_BYTES).contains(&self.max_total_bytes) {
            loader.push(
                "attachments.max_total_bytes",
                format!("must be 1 to {MAX_ATTACHMENT_BYTES}"),
            );
        }
        if !(MIN_ATTACHMENT_MEMORY_BYTES..=MAX_ATTACHMENT_MEMORY_BYTES).contains(&self.memory_bytes)
        {
            loader.push(
                "attachments.memory_bytes",
                format!("must be {MIN_ATTACHMENT_MEMORY_BYTES} to {MAX_ATTACHMENT_MEMORY_BYTES}"),
            );
        }
        // RFC 6838 §4.2's restricted names: a type herald could never match is a typo.
        let token = |part: &str| {
            !part.is_empty()
                && part.len() <= 127
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
        };
        for (i, content_type) in self.content_types.iter().enumerate() {
            if !content_type
                .split_once('/')
                .is_some_and(|(kind, sub)| token(kind) && token(sub))
            {
                loader.push(
                    &format!("attachments.content_types[{i}]"),
                    format!("`{content_type}` is not a MIME type such as application/pdf"),
                );
            }
        }
    }
}

/// On-call review: what waits for a person.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReviewConfig {
    /// `final` (the default): a permanent refusal (a bad address, a suppressed recipient) is
    /// final and known, listed with `reason=rejected` but not waiting in the review queue, and
    /// deleted by retention when due. `review`: refusals wait in the queue, like dead letters,
    /// until a person closes or resends them.
    pub permanent_refusals: PermanentRefusals,
}

impl ReviewConfig {
    pub fn policy(&self) -> Policy {
        Policy {
            permanent_refusals: self.permanent_refusals,
        }
    }
}

/// The shortest window a key is remembered: an upstream retrying through an outage of a few
/// minutes must still find its key.
const MIN_IDEMPOTENCY_SECONDS: u64 = 3600;
/// The tenant of the development token (`serve` without tokens).
pub const DEV_TENANT: &str = "dev";
/// The longest retention: ten years, far inside the dates the clock can subtract to.
const MAX_RETENTION_SECONDS: u64 = 3650 * 86_400;
/// The slowest pace a route may keep: one send in about 17 minutes.
const MIN_RATE: f64 = 0.001;
/// The fastest pace a route may keep.
const MAX_RATE: f64 = 1_000_000.0;
/// A route's vendor callbacks per second, and burst, by default: well above what a vendor
/// reports of a busy route (a few events per message), well below what a flood of forged
/// requests could make the process verify.
const DEFAULT_CALLBACK_RATE: u32 = 500;
const DEFAULT_CALLBACK_BURST: u32 = 2000;

/// One sink of the relay, by `kind = "…"` (read with [`Loader::parse_tagged`]).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
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
    /// The notification's cancellation key, a template, e.g. `"signup/{{ user_id }}"`.
    pub cancellation_key: Option<String>,
    /// The template's locale, a template, e.g. `"{{ user.locale }}"`; rendered empty, the
    /// template's default.
    pub locale: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub max_body_bytes: usize,
    /// A client must send a request's headers within this, and an idle kept-alive connection
    /// is closed after it.
    pub header_timeout_seconds: u64,
    /// A request's body must arrive whole within this, plus a second for every 64 KiB it
    /// declares (api/body.rs), else `408`.
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
    fn from_table(
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
    /// defaults and checks the result: every problem at once, not the first.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigProblems> {
        let (config, problems) = Config::read(path, env)?;
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigProblems(problems))
        }
    }

    /// [`Config::load`] that keeps going past problems: the config as far as it could be read
    /// (a broken part left out or at its default), and every problem found. Fails at once only
    /// where there is nothing to read (no such file, not TOML).
    pub fn read(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(Config, Vec<String>), ConfigProblems> {
        let mut table = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ConfigProblems(vec![format!("cannot read {}: {e}", path.display())])
                })?;
                toml::from_str::<toml::Table>(&text).map_err(|e| {
                    ConfigProblems(vec![format!(
                        "{} is not valid TOML: {}",
                        path.display(),
                        e.to_string().trim_end()
                    )])
                })?
            }
            None => toml::Table::new(),
        };
        let mut loader = Loader {
            origins: Origins {
                file: path.map(Path::to_path_buf),
                env: BTreeMap::new(),
            },
            problems: Vec::new(),
            broken_routes: Vec::new(),
        };
        apply_env_overrides(&mut table, env, &mut loader);
        let dispatch: DispatchConfig = loader.section(&mut table, "dispatch");
        let strict_locales = strict_locales(&mut table, &mut loader);
        let mut config = Config {
            server: loader.section(&mut table, "server"),
            database: loader.section(&mut table, "database"),
            tokens: Vec::new(),
            routes: BTreeMap::new(),
            channels: loader.section(&mut table, "channels"),
            dispatch,
            templates: loader.section(&mut table, "templates"),
            strict_locales,
            categories: loader.section(&mut table, "categories"),
            unsubscribe: loader.section(&mut table, "unsubscribe"),
            attachments: loader.section(&mut table, "attachments"),
            relay: loader.section(&mut table, "relay"),
            retention: loader.section(&mut table, "retention"),
            review: loader.section(&mut table, "review"),
            sinks: BTreeMap::new(),
            inbox: loader.section(&mut table, "inbox"),
            events: BTreeMap::new(),
            origins: Origins::default(),
        };
        // Tokens, routes, sinks and events one by one: each names its own problems.
        match table.remove("tokens") {
            Some(toml::Value::Array(tokens)) => {
                for (i, token) in tokens.into_iter().enumerate() {
                    config
                        .tokens
                        .extend(loader.parse(&format!("tokens[{i}]"), token));
                }
            }
            Some(_) => loader.push("tokens", "must be an array of tables ([[tokens]])"),
            None => {}
        }
        for (name, route) in loader.named(&mut table, "routes") {
            let toml::Value::Table(route) = route else {
                loader.push(&format!("routes.{name}"), "must be a table");
                continue;
            };
            match RouteConfig::from_table(&name, route, &config.dispatch, &mut loader) {
                Some(route) => {
                    config.routes.insert(name, route);
                }
                None => loader.broken_routes.push(name),
            }
        }
        for (name, sink) in loader.named(&mut table, "sinks") {
            let key = format!("sinks.{name}");
            let toml::Value::Table(sink) = sink else {
                loader.push(&key, "must be a table");
                continue;
            };
            if let Some(sink) = loader.parse_tagged(&key, "kind", sink, &[]) {
                config.sinks.insert(name, sink);
            }
        }
        for (event_type, mappings) in loader.named(&mut table, "events") {
            let mappings = match mappings {
                toml::Value::Array(many) => many,
                one => vec![one],
            };
            let key = format!("events.\"{event_type}\"");
            let parsed: Vec<EventMapping> = mappings
                .into_iter()
                .filter_map(|m| loader.parse(&key, m))
                .collect();
            config.events.insert(event_type, parsed);
        }
        for unknown in table.keys() {
            loader.push(
                unknown,
                "unknown section (expected server, database, tokens, routes, channels, \
                 dispatch, templates, categories, unsubscribe, attachments, relay, retention, review, \
                 sinks, inbox or events)",
            );
        }
        if config.routes.is_empty() && !loader.problems.iter().any(|p| p.starts_with("routes.")) {
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
        config.check(&mut loader);
        config.origins = loader.origins;
        Ok((config, loader.problems))
    }

    /// Each fallback is a configured route that carries every channel of the route it serves,
    /// lets in every tenant and sender that route lets in, and never leads back to where it
    /// started.
    fn check_fallbacks(&self, loader: &mut Loader) {
        for (name, route) in &self.routes {
            let Some(fallback) = &route.fallback else {
                continue;
            };
            let key = format!("routes.{name}.fallback");
            if !route.provider.settings().one_destination() {
                // What one receiver answers says nothing of the route, and a receiver must not
                // be able to move a send onto another route: one that reaches private networks
                // (only webhook routes do), say.
                loader.push(
                    &key,
                    "a route whose sends each go to their own receiver (a webhook route) never \
                     fails over: a receiver's answer must not choose the route",
                );
                continue;
            }
            let Some(target) = self.routes.get(fallback) else {
                if loader.unknown_route(&self.routes, fallback) {
                    loader.push(&key, format!("names unknown route `{fallback}`"));
                }
                continue;
            };
            let missing: Vec<&str> = route
                .provider
                .settings()
                .channels()
                .iter()
                .filter(|c| !target.provider.settings().channels().contains(c))
                .map(|c| c.as_str())
                .collect();
            if !missing.is_empty() {
                loader.push(
                    &key,
                    format!(
                        "route `{fallback}` does not carry {} as `{name}` does",
                        missing.join(", ")
                    ),
                );
            }
            if let Some(allowed) = &target.tenants {
                let shut_out = match &route.tenants {
                    None => true,
                    Some(tenants) => tenants.iter().any(|t| !allowed.contains(t)),
                };
                if shut_out {
                    loader.push(
                        &key,
                        format!(
                            "route `{fallback}` names its tenants; it must allow every tenant \
                             `{name}` allows"
                        ),
                    );
                }
            }
            let unlisted: Vec<&str> = route
                .allowed_from
                .iter()
                .filter(|sender| !crate::domain::grants_sender(&target.allowed_from, sender))
                .map(String::as_str)
                .collect();
            if !unlisted.is_empty() {
                loader.push(
                    &key,
                    format!(
                        "route `{fallback}` must also list in allowed_from what `{name}` lists: {}",
                        unlisted.join(", ")
                    ),
                );
            }
            let mut seen = vec![name.as_str()];
            let mut next = Some(fallback);
            while let Some(hop) = next {
                if seen.contains(&hop.as_str()) {
                    seen.push(hop);
                    loader.push(&key, format!("the chain loops: {}", seen.join(" → ")));
                    break;
                }
                seen.push(hop);
                next = self.routes.get(hop).and_then(|r| r.fallback.as_ref());
            }
        }
    }

    /// Which tenants may use which routes: tokens name their routes where tenants share one
    /// herald, and a route that may reach private networks names its tenants.
    fn check_route_grants(&self, loader: &mut Loader) {
        let tenants: std::collections::BTreeSet<&str> =
            self.tokens.iter().map(|t| t.tenant.as_str()).collect();
        for (i, token) in self.tokens.iter().enumerate() {
            let key = format!("tokens[{i}].routes");
            match &token.routes {
                None if tenants.len() > 1 => loader.push(
                    &key,
                    format!(
                        "token `{}`: with several tenants, each token names the routes it may \
                         send through (routes = [\"mail\", …], or [\"*\"] for every route)",
                        token.name
                    ),
                ),
                None => {}
                Some(routes) => {
                    for route in routes.iter().filter(|r| *r != "*") {
                        if loader.unknown_route(&self.routes, route) {
                            loader.push(
                                &key,
                                format!("token `{}` names unknown route `{route}`", token.name),
                            );
                        }
                    }
                }
            }
        }
        for (name, route) in &self.routes {
            let private = route.provider.settings().reaches_private_networks();
            if private && route.tenants.is_none() && !self.tokens.is_empty() {
                loader.push(
                    &format!("routes.{name}.tenants"),
                    "the route may reach private networks: name the tenants allowed to use it \
                     (tenants = [\"…\"])",
                );
            }
            for tenant in route.tenants.iter().flatten() {
                if !tenants.contains(tenant.as_str()) && !self.tokens.is_empty() {
                    loader.push(
                        &format!("routes.{name}.tenants"),
                        format!("names `{tenant}`, which no token has"),
                    );
                }
            }
            if let Some(operator) = &route.operated_by {
                let key = format!("routes.{name}.operated_by");
                if !tenants.contains(operator.as_str()) && !self.tokens.is_empty() {
                    loader.push(&key, format!("names `{operator}`, which no token has"));
                } else if route
                    .tenants
                    .as_ref()
                    .is_some_and(|t| !t.contains(operator))
                {
                    loader.push(
                        &key,
                        format!("names `{operator}`, which is not among the route's tenants"),
                    );
                }
            }
        }
    }

    /// Every duration and count within a range herald can run with: a time added to now, or
    /// a count of slots, that overflows or is zero panics or stops serving long after
    /// `check-config` said the file was valid.
    fn check_bounds(&self, loader: &mut Loader) {
        const HOUR: u64 = 3600;
        const DAY: u64 = 24 * HOUR;
        let (d, r, s) = (&self.dispatch, &self.relay, &self.server);
        let mut bounded: Vec<(String, u64, u64, u64)> = [
            ("dispatch.lease_seconds", d.lease_seconds, 1, DAY),
            (
                "dispatch.poll_interval_ms",
                d.poll_interval_ms,
                1,
                HOUR * 1000,
            ),
            ("dispatch.retry_base_ms", d.retry_base_ms, 1, DAY * 1000),
            (
                "dispatch.retry_max_seconds",
                d.retry_max_seconds,
                1,
                30 * DAY,
            ),
            ("relay.lease_seconds", r.lease_seconds, 1, DAY),
            ("relay.poll_interval_ms", r.poll_interval_ms, 1, HOUR * 1000),
            ("relay.retry_base_ms", r.retry_base_ms, 1, DAY * 1000),
            ("relay.retry_max_seconds", r.retry_max_seconds, 1, 30 * DAY),
            (
                "relay.retention_seconds",
                r.retention_seconds,
                0,
                MAX_RETENTION_SECONDS,
            ),
            (
                "server.header_timeout_seconds",
                s.header_timeout_seconds,
                1,
                HOUR,
            ),
            (
                "server.body_timeout_seconds",
                s.body_timeout_seconds,
                1,
                HOUR,
            ),
            (
                "server.shutdown_grace_seconds",
                s.shutdown_grace_seconds,
                0,
                HOUR,
            ),
            (
                "server.max_connections",
                s.max_connections as u64,
                1,
                1_000_000,
            ),
            ("dispatch.concurrency", d.concurrency as u64, 1, 100_000),
            ("dispatch.batch_size", u64::from(d.batch_size), 1, 100_000),
            ("dispatch.max_attempts", u64::from(d.max_attempts), 1, 1000),
            ("relay.batch_size", u64::from(r.batch_size), 1, 100_000),
            ("relay.prune_batch", u64::from(r.prune_batch), 1, 1_000_000),
            (
                "server.max_body_bytes",
                s.max_body_bytes as u64,
                1024,
                1 << 30,
            ),
            (
                "database.max_connections",
                u64::from(self.database.max_connections),
                1,
                10_000,
            ),
        ]
        .into_iter()
        .map(|(key, value, min, max)| (key.to_owned(), value, min, max))
        .collect();
        for (name, sink) in &self.sinks {
            if let SinkConfig::Nats {
                timeout_seconds, ..
            }
            | SinkConfig::Webhook {
                timeout_seconds, ..
            } = sink
            {
                bounded.push((
                    format!("sinks.{name}.timeout_seconds"),
                    *timeout_seconds,
                    1,
                    HOUR,
                ));
            }
        }
        for (name, route) in &self.routes {
            bounded.extend([
                (
                    format!("routes.{name}.timeout_seconds"),
                    route.timeout.as_secs(),
                    1,
                    HOUR,
                ),
                (
                    format!("routes.{name}.concurrency"),
                    route.concurrency as u64,
                    1,
                    100_000,
                ),
                (
                    format!("routes.{name}.max_attempts"),
                    u64::from(route.max_attempts),
                    1,
                    1000,
                ),
                (
                    format!("routes.{name}.burst"),
                    u64::from(route.burst),
                    1,
                    1_000_000,
                ),
                (
                    format!("routes.{name}.max_age_seconds"),
                    route.max_age.as_secs(),
                    1,
                    MAX_RETENTION_SECONDS,
                ),
                (
                    format!("routes.{name}.circuit_open_seconds"),
                    route.circuit_open.as_secs(),
                    1,
                    DAY,
                ),
                (
                    format!("routes.{name}.callback_rate_limit_per_second"),
                    route.callback_rate_limit_per_second.into(),
                    1,
                    1_000_000,
                ),
                (
                    format!("routes.{name}.callback_burst"),
                    route.callback_burst.into(),
                    1,
                    1_000_000,
                ),
            ]);
        }
        for (key, value, min, max) in bounded {
            if !(min..=max).contains(&value) {
                loader.push(
                    &key,
                    format!("{value} is out of range: must be from {min} to {max}"),
                );
            }
        }
    }

    /// Category names a path and a header can carry; links where a category has them.
    fn check_categories(&self, loader: &mut Loader) {
        for name in self.categories.keys() {
            let fits = (1..=64).contains(&name.len())
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
            if !fits {
                loader.push(
                    &format!("categories.{name}"),
                    "a category's name is 1 to 64 of a-z, 0-9, `_` and `-`",
                );
            }
        }
        let Some(first) = self.categories.iter().find(|(_, c)| c.unsubscribe) else {
            return;
        };
        let u = &self.unsubscribe;
        match u.public_url.as_deref().map(url::Url::parse) {
            None => loader.push(
                "unsubscribe.public_url",
                format!(
                    "is required: category `{}` has unsubscribe links, which start with it",
                    first.0
                ),
            ),
            Some(Ok(url)) if matches!(url.scheme(), "https" | "http") && url.host().is_some() => {}
            Some(_) => loader.push(
                "unsubscribe.public_url",
                "must be an http(s) URL, e.g. https://herald.example.com",
            ),
        }
        if u.secrets.is_empty() {
            loader.push(
                "unsubscribe.secrets",
                format!(
                    "at least one is required: category `{}` has unsubscribe links, signed with it",
                    first.0
                ),
            );
        }
    }

    fn check(&self, loader: &mut Loader) {
        for (channel, route) in &self.channels {
            let key = format!("channels.{channel}");
            match self.routes.get(route) {
                None if loader.unknown_route(&self.routes, route) => {
                    loader.push(&key, format!("names unknown route `{route}`"));
                }
                None => {}
                Some(r) if !r.provider.settings().channels().contains(channel) => {
                    loader.push(&key, format!("route `{route}` does not carry {channel}"));
                }
                Some(_) => {}
            }
        }
        self.check_fallbacks(loader);
        self.check_bounds(loader);
        // Each template compiles, and each of its locales renders from the default's data.
        if let Err(problem) = Templates::new(self.templates.clone()).check() {
            loader.push("templates", problem);
        }
        self.check_categories(loader);
        self.attachments.check(loader);
        let lease = Duration::from_secs(self.dispatch.lease_seconds);
        for (name, route) in &self.routes {
            if route.timeout.saturating_add(LEASE_MARGIN) > lease {
                loader.push(
                    &format!("routes.{name}.timeout_seconds"),
                    format!(
                        "{} must be at least {} s below dispatch.lease_seconds ({})",
                        route.timeout.as_secs(),
                        LEASE_MARGIN.as_secs(),
                        lease.as_secs()
                    ),
                );
            }
        }
        for (i, token) in self.tokens.iter().enumerate() {
            if token.scopes.is_empty() {
                loader.push(
                    &format!("tokens[{i}].scopes"),
                    format!("token `{}` has no scopes", token.name),
                );
            }
            if let Some(rate) = token.rate_limit_per_second
                && !(MIN_RATE..=MAX_RATE).contains(&rate)
            {
                loader.push(
                    &format!("tokens[{i}].rate_limit_per_second"),
                    format!("{rate} is out of range: must be from {MIN_RATE} to {MAX_RATE}"),
                );
            }
            match token.burst {
                Some(_) if token.rate_limit_per_second.is_none() => loader.push(
                    &format!("tokens[{i}].burst"),
                    "is only used with rate_limit_per_second",
                ),
                Some(burst) if !(1..=1_000_000).contains(&burst) => loader.push(
                    &format!("tokens[{i}].burst"),
                    format!("{burst} is out of range: must be from 1 to 1000000"),
                ),
                _ => {}
            }
        }
        self.check_route_grants(loader);
        let retention = &self.retention;
        if retention.idempotency_seconds < MIN_IDEMPOTENCY_SECONDS {
            loader.push(
                "retention.idempotency_seconds",
                format!("must be at least {MIN_IDEMPOTENCY_SECONDS}"),
            );
        }
        if retention.finished_seconds != 0
            && retention.finished_seconds < retention.idempotency_seconds
        {
            loader.push(
                "retention.finished_seconds",
                "must be 0 (keep for ever) or at least retention.idempotency_seconds, so that \
                 a key is answered for its whole window",
            );
        }
        for (key, seconds) in [
            ("idempotency_seconds", retention.idempotency_seconds),
            ("finished_seconds", retention.finished_seconds),
        ] {
            if seconds > MAX_RETENTION_SECONDS {
                loader.push(
                    &format!("retention.{key}"),
                    format!("must be at most {MAX_RETENTION_SECONDS} (3650 days)"),
                );
            }
        }
        if retention.batch_size == 0 {
            loader.push("retention.batch_size", "must be at least 1");
        }
        for (name, sink) in &self.sinks {
            if let SinkConfig::Nats { subject_prefix, .. } = sink
                && (subject_prefix.is_empty()
                    || subject_prefix
                        .split('.')
                        .any(|t| t.is_empty() || t.contains(['*', '>', ' '])))
            {
                loader.push(
                    &format!("sinks.{name}.subject_prefix"),
                    "must be NATS subject tokens without wildcards",
                );
            }
            if let SinkConfig::Webhook {
                secret, secrets, ..
            } = sink
                && secret.is_none()
                && secrets.is_empty()
            {
                loader.push(
                    &format!("sinks.{name}"),
                    "needs a `secret` (whsec_ followed by base64) to sign with",
                );
            }
        }
        if let Some(nats) = &self.inbox.nats {
            if nats.subjects.is_empty() {
                loader.push("inbox.nats.subjects", "must name at least one subject");
            }
            if nats.tenant.is_none()
                && let Err(err) = self.inbox_tenant()
            {
                loader.push("inbox.nats.tenant", err);
            }
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

/// `HERALD_DATABASE__URL=…` sets `database.url`; `HERALD_ROUTES__MAIL__PORT=2525` sets
/// `routes.mail.port`. A value that parses as a TOML value (a number, a boolean, an array) is
/// taken as one; anything else is a string.
fn apply_env_overrides(
    table: &mut toml::Table,
    env: impl IntoIterator<Item = (String, String)>,
    loader: &mut Loader,
) {
    'vars: for (name, raw) in env {
        let Some(path) = name.strip_prefix("HERALD_") else {
            continue;
        };
        if !path.contains("__") {
            continue; // HERALD_CONFIG, HERALD_DEV_TOKEN, HERALD_URL … are not config keys
        }
        let keys: Vec<String> = path.split("__").map(str::to_lowercase).collect();
        loader.origins.env.insert(keys.join("."), name.clone());
        let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or(toml::Value::String(raw));
        let (last, parents) = keys.split_last().expect("split yields at least one key");
        let mut node = &mut *table;
        for (depth, key) in parents.iter().enumerate() {
            let entry = node
                .entry(key.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let Some(inner) = entry.as_table_mut() else {
                loader.push(
                    &keys[..=depth].join("."),
                    "is not a table, so it has no keys to set",
                );
                continue 'vars;
            };
            node = inner;
        }
        node.insert(last.clone(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml_text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigProblems> {
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
    fn a_webhook_route_never_fails_over() {
        let secret = "whsec_YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE=";
        let text = format!(
            "[routes.public]\nprovider = \"webhook\"\nsecrets = [\"{secret}\"]\n\
             fallback = \"internal\"\n\
             [routes.internal]\nprovider = \"webhook\"\nsecrets = [\"{secret}\"]\n\
             allow_private_networks = true\ntenants = [\"acme\"]\n"
        );
        let problems = load(&text, &[]).unwrap_err().to_string();
        assert!(
            problems.contains("routes.public.fallback")
                && problems.contains("a receiver's answer must not choose the route"),
            "{problems}"
        );
    }

    #[test]
    fn durations_and_counts_that_would_overflow_or_stop_serving_are_refused() {
        for (text, key) in [
            (
                "[dispatch]\nlease_seconds = 9223372036854775807\n",
                "dispatch.lease_seconds",
            ),
            (
                "[relay]\nretention_seconds = 9223372036854775807\n",
                "relay.retention_seconds",
            ),
            (
                "[server]\nheader_timeout_seconds = 9223372036854775807\n",
                "server.header_timeout_seconds",
            ),
            ("[server]\nmax_connections = 0\n", "server.max_connections"),
            (
                "[routes.r]\nprovider = \"sandbox\"\nmax_age_seconds = 9223372036854775807\n",
                "routes.r.max_age_seconds",
            ),
            (
                "[routes.r]\nprovider = \"sandbox\"\ncallback_rate_limit_per_second = 0\n",
                "routes.r.callback_rate_limit_per_second",
            ),
        ] {
            let problems = load(text, &[]).unwrap_err().to_string();
            assert!(
                problems.contains(key) && problems.contains("out of range"),
                "{key}: {problems}"
            );
        }
        load("", &[]).expect("the defaults are in range");
    }

    /// A pace that a token bucket cannot keep (NaN, infinite, negative, or so slow that the
    /// wait for one token overflows a clock) was taken and panicked at the first paced send,
    /// leaving the route's lock poisoned: it is refused, by name.
    #[test]
    fn a_pace_no_clock_can_keep_is_refused_by_name() {
        let route = |rate: &str| {
            format!("[routes.r]\nprovider = \"sandbox\"\nrate_limit_per_second = {rate}\n")
        };
        for rate in ["1e-300", "-1", "nan", "inf", "-inf", "0.0001", "1e7"] {
            let problems = load(&route(rate), &[]).unwrap_err().to_string();
            assert!(
                problems.contains("routes.r.rate_limit_per_second")
                    && problems.contains("out of range"),
                "{rate}: {problems}"
            );
        }
        for rate in ["0", "0.001", "2.5", "1000000"] {
            load(&route(rate), &[]).unwrap_or_else(|e| panic!("{rate}: {e}"));
        }
    }

    #[test]
    fn a_vendor_with_a_documented_rate_paces_its_routes_unless_they_say_otherwise() {
        let route = |pace: &str| {
            format!("[routes.ops]\nprovider = \"slack\"\nbot_token = \"xoxb-1\"\n{pace}")
        };
        let paced =
            |pace: &str| load(&route(pace), &[]).unwrap().routes["ops"].rate_limit_per_second;
        assert_eq!(paced(""), Some(1.0), "Slack's one post a second");
        assert_eq!(paced("rate_limit_per_second = 5\n"), Some(5.0));
        assert_eq!(paced("rate_limit_per_second = 0\n"), None, "0 turns it off");
        let unpaced = "[routes.mail]\nprovider = \"resend\"\napi_key = \"k\"\nfrom = \"a@b.io\"\n";
        assert_eq!(
            load(unpaced, &[]).unwrap().routes["mail"].rate_limit_per_second,
            None
        );
    }

    #[test]
    fn the_example_config_documents_valid_keys() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/herald.example.toml"))
                .unwrap();
        let config = load(&text, &[]).unwrap();
        assert_eq!(config.tokens.len(), 2);
        for provider in ProviderConfig::NAMES {
            assert!(
                config
                    .routes
                    .values()
                    .any(|r| r.provider.name() == *provider),
                "herald.example.toml has no route with provider = \"{provider}\""
            );
        }
        assert_eq!(config.channels[&Channel::Webhook], "sandbox");
        assert!(config.templates.contains_key("export-ready"));
        assert_eq!(config.sinks.len(), 3, "one sink of each kind");
        assert_eq!(config.events["ExportCompleted"].len(), 1);
        assert_eq!(config.inbox_tenant().unwrap(), "acme");
    }

    #[test]
    fn retention_keeps_keys_an_hour_at_least_and_finished_notifications_no_shorter() {
        let config = load("", &[]).unwrap();
        assert_eq!(config.retention.idempotency_seconds, 7 * 86_400);
        assert_eq!(
            config.retention.finished_seconds,
            30 * 86_400,
            "kept 30 days by default"
        );
        let config = load(
            "[retention]\nidempotency_seconds = 86400\nfinished_seconds = 0\n",
            &[],
        )
        .unwrap();
        assert_eq!(config.retention.finished_seconds, 0, "for ever, when asked");

        let err = load(
            "[retention]\nidempotency_seconds = 60\nfinished_seconds = 30\nbatch_size = 0\n",
            &[],
        )
        .unwrap_err();
        let problems = err.0.join("\n");
        for expected in [
            "retention.idempotency_seconds: must be at least 3600",
            "retention.finished_seconds: must be 0 (keep for ever) or at least \
             retention.idempotency_seconds",
            "retention.batch_size: must be at least 1",
        ] {
            assert!(
                problems.contains(expected),
                "{expected:?} not in:\n{problems}"
            );
        }
        let err = load("[retention]\nfinished_seconds = 9223372036854775807\n", &[]).unwrap_err();
        assert_eq!(err.0.len(), 1, "{err}");
        assert!(
            err.0[0]
                .starts_with("retention.finished_seconds: must be at most 315360000 (3650 days)"),
            "{err}"
        );
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
            &config.routes["box"].provider,
            ProviderConfig::Sandbox(settings) if settings.visibility_lag_ms == 250
        ));
    }

    #[test]
    fn every_vendor_refuses_an_unknown_key_and_names_a_bad_value() {
        for provider in ProviderConfig::NAMES {
            let err = load(
                &format!("[routes.a]\nprovider = \"{provider}\"\nhots = \"x\"\n"),
                &[],
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("routes.a.hots"), "{provider}: {err}");
        }
        let err = load("[routes.a]\nprovider = \"carrier-pigeon\"\n", &[]).unwrap_err();
        assert!(
            err.to_string()
                .contains("routes.a: unknown provider `carrier-pigeon`"),
            "{err}"
        );
        let err = load(
            "[routes.mail]\nprovider = \"smtp\"\nhost = \"h\"\nfrom = \"a@b.example\"\ntls = \"ssl\"\n\
             [routes.box]\nprovider = \"sandbox\"\nprofile = \"sometimes\"\n",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("routes.mail.tls: unknown variant `ssl`"),
            "{err}"
        );
        assert!(
            err.contains(
                "routes.box.profile: unknown sandbox profile `sometimes`: expected idempotent, \
                 queryable or plain"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named_but_never_quoted() {
        let err = load(
            "[routes.hooks]\nprovider = \"webhook\"\nsecrets = [{ env = \"S\" }]\n",
            &[("HERALD_ROUTES__HOOKS__SECRETS", "\"whsec_canary7f3a\"")],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("routes.hooks.secrets: invalid type: a string, expected a sequence"),
            "{err}"
        );
        assert!(!err.contains("canary7f3a"), "{err}");
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
    fn a_sandbox_route_may_stand_in_for_some_channels_only() {
        let mail = "[routes.mail]\nprovider = \"sandbox\"\nchannels = [\"email\"]\n";
        let config = load(&format!("{mail}[channels]\nemail = \"mail\"\n"), &[]).unwrap();
        assert_eq!(
            config.routes["mail"].provider.settings().channels(),
            [Channel::Email]
        );
        let err = load(&format!("{mail}[channels]\nsms = \"mail\"\n"), &[]).unwrap_err();
        assert!(
            err.to_string()
                .contains("channels.sms: route `mail` does not carry sms"),
            "{err}"
        );
        let err = load(
            "[routes.mail]\nprovider = \"sandbox\"\nchannels = [\"fax\"]\n",
            &[],
        )
        .unwrap_err();
        assert!(err.to_string().contains("routes.mail.channels"), "{err}");
    }

    #[test]
    fn strict_locales_is_a_setting_beside_the_templates_it_governs() {
        let template = "[templates.code]\ntext = \"{{ code }}\"\n";
        let config = load(
            &format!("[templates]\nstrict_locales = true\n{template}"),
            &[],
        )
        .unwrap();
        assert!(config.strict_locales);
        assert_eq!(config.templates.keys().collect::<Vec<_>>(), ["code"]);
        assert!(!load(template, &[]).unwrap().strict_locales);
        let err = load("[templates]\nstrict_locales = \"yes\"\n", &[]).unwrap_err();
        assert!(
            err.to_string()
                .contains("templates.strict_locales: must be true or false"),
            "{err}"
        );
    }

    #[test]
    fn every_unknown_key_of_every_table_is_named_with_the_nearest_valid_key() {
        let err = load(
            "[server]\nlistn = \"127.0.0.1:1\"\nmax_body_byte = 3\n\
             [routes.mail]\nprovider = \"smtp\"\nhots = \"smtp.example\"\nprot = 25\n\
             rate_limit_per_secnd = 2\nzzz = 1\n\
             [[tokens]]\nname = \"a\"\ntenant = \"t\"\nscope = [\"send\"]\nsecret = \"x\"\n",
            &[],
        )
        .unwrap_err();
        let problems = err.0.join("\n");
        for expected in [
            "server.listn: unknown field `listn`, did you mean `listen`?",
            "server.max_body_byte: unknown field `max_body_byte`, did you mean `max_body_bytes`?",
            "routes.mail.hots: unknown field `hots`, did you mean `host`?",
            "routes.mail.prot: unknown field `prot`, did you mean `port`?",
            // A key every provider takes is weighed as much as the vendor's own.
            "routes.mail.rate_limit_per_secnd: unknown field `rate_limit_per_secnd`, did you mean \
             `rate_limit_per_second`?",
            "tokens[0].scope: unknown field `scope`, did you mean `scopes`?",
        ] {
            assert!(
                problems.contains(expected),
                "{expected:?} not in:\n{problems}"
            );
        }
        // Nothing is near: every key of the table is listed instead.
        assert!(
            problems.contains(
                "routes.mail.zzz: unknown field `zzz`, expected one of `allowed_from`, `burst`"
            ),
            "{problems}"
        );
        // `host` and `scopes` are missing too, which their misspellings already say.
        assert_eq!(err.0.len(), 7, "{problems}");
        // A missing key no unknown one is near is named as missing.
        let err = load("[routes.mail]\nprovider = \"smtp\"\nzzz = 1\n", &[]).unwrap_err();
        assert!(
            err.to_string()
                .contains("routes.mail: missing field `host`"),
            "{err}"
        );
    }

    #[test]
    fn every_problem_is_reported_at_once_with_its_key_and_where_it_came_from() {
        let err = load(
            "[server]\nlistn = 3\n\
             [routes.mail]\nprovider = \"smtp\"\nhots = \"smtp.example\"\n\
             [routes.box]\nprovider = \"sandbox\"\n\
             [channels]\nsms = \"nowhere\"\n\
             [dispatch]\nbatch_size = 0\n",
            &[
                ("HERALD_ROUTES__BOX__VISIBILITY_LAG_MS", "\"soon\""),
                ("HERALD_DATABASE__MAX_CONECTIONS", "5"),
            ],
        )
        .unwrap_err();
        let problems = err.0.join("\n");
        for expected in [
            "server.listn: unknown field `listn`",
            "routes.mail.hots: unknown field `hots`",
            "routes.box.visibility_lag_ms: invalid type: a string, expected u64",
            "set by HERALD_ROUTES__BOX__VISIBILITY_LAG_MS",
            "database.max_conections: unknown field `max_conections`",
            "set by HERALD_DATABASE__MAX_CONECTIONS",
            "channels.sms: names unknown route `nowhere`",
            "dispatch.batch_size: 0 is out of range: must be from 1 to 100000",
        ] {
            assert!(
                problems.contains(expected),
                "{expected:?} not in:\n{problems}"
            );
        }
        assert_eq!(err.0.len(), 6, "{problems}");
        assert!(
            err.0[0].starts_with("server.listn") && err.0[0].ends_with("herald.toml)"),
            "a problem in the file names the file: {problems}"
        );
    }

    #[test]
    fn allowed_from_takes_addresses_and_domains_on_email_routes_only() {
        let config = load(
            "[routes.mail]\nprovider = \"sandbox\"\nallowed_from = [\"a@acme.example\", \"@news.acme.example\"]\n",
            &[],
        )
        .unwrap();
        assert_eq!(config.routes["mail"].allowed_from.len(), 2);
        let err = load(
            "[routes.mail]\nprovider = \"sandbox\"\nallowed_from = [\"acme.example\", \"@\"]\n\
             [routes.texts]\nprovider = \"twilio\"\naccount_sid = \"AC1\"\nauth_token = \"t\"\n\
             from = \"+14155550100\"\nallowed_from = [\"@acme.example\"]\n",
            &[],
        )
        .unwrap_err();
        let problems = err.0.join("\n");
        for expected in [
            "routes.mail.allowed_from: `acme.example` is neither an email address nor an @domain",
            "routes.mail.allowed_from: `@` is neither an email address nor an @domain",
            "routes.texts.allowed_from: is only used on a route that sends email",
        ] {
            assert!(
                problems.contains(expected),
                "{expected:?} not in:\n{problems}"
            );
        }
    }

    #[test]
    fn a_fallback_is_a_route_that_carries_the_same_channels_without_a_loop() {
        let config = load(
            "[routes.a]\nprovider = \"sandbox\"\nfallback = \"b\"\ncircuit_failures = 2\n\
             circuit_open_seconds = 9\nallowed_from = [\"Billing@Acme.example\"]\n\
             [routes.b]\nprovider = \"sandbox\"\nallowed_from = [\"@acme.example\"]\n",
            &[],
        )
        .unwrap();
        let a = &config.routes["a"];
        assert_eq!(a.fallback.as_deref(), Some("b"));
        assert_eq!(
            (a.circuit_failures, a.circuit_open),
            (2, Duration::from_secs(9))
        );
        assert_eq!(config.routes["b"].circuit_failures, 5, "the default");
        let err = load(
            "[routes.a]\nprovider = \"sandbox\"\nfallback = \"b\"\n\
             [routes.b]\nprovider = \"sandbox\"\nfallback = \"a\"\n\
             [routes.c]\nprovider = \"sandbox\"\nfallback = \"nowhere\"\n\
             [routes.d]\nprovider = \"sandbox\"\nfallback = \"texts\"\n\
             [routes.e]\nprovider = \"sandbox\"\nfallback = \"f\"\nallowed_from = [\"@acme.example\"]\n\
             [routes.f]\nprovider = \"sandbox\"\ntenants = [\"acme\"]\n\
             [routes.texts]\nprovider = \"twilio\"\naccount_sid = \"AC1\"\nauth_token = \"t\"\n\
             from = \"+14155550100\"\n",
            &[],
        )
        .unwrap_err();
        let problems = err.0.join("\n");
        for expected in [
            "routes.a.fallback: the chain loops: a → b → a",
            "routes.b.fallback: the chain loops: b → a → b",
            "routes.c.fallback: names unknown route `nowhere`",
            "routes.d.fallback: route `texts` does not carry email, push, webhook, chat as `d` does",
            "routes.e.fallback: route `f` names its tenants; it must allow every tenant `e` allows",
            "routes.e.fallback: route `f` must also list in allowed_from what `e` lists: @acme.example",
        ] {
            assert!(
                problems.contains(expected),
                "{expected:?} not in:\n{problems}"
            );
        }
    }

    #[test]
    fn a_routes_operator_is_a_tenant_that_may_use_it() {
        let tokens = "[[tokens]]\nname = \"a\"\ntenant = \"acme\"\nscopes = [\"operate\"]\n\
             secret = \"acme-0123456789abcdef0123456789abcdef\"\nroutes = [\"*\"]\n\
             [[tokens]]\nname = \"g\"\ntenant = \"globex\"\nscopes = [\"send\"]\n\
             secret = \"globex-0123456789abcdef0123456789abcdef\"\nroutes = [\"*\"]\n";
        let config = load(
            &format!("{tokens}[routes.shared]\nprovider = \"sandbox\"\noperated_by = \"acme\"\n"),
            &[],
        )
        .unwrap();
        assert_eq!(config.routes["shared"].operated_by.as_deref(), Some("acme"));
        let err = load(
            &format!(
                "{tokens}[routes.x]\nprovider = \"sandbox\"\noperated_by = \"initech\"\n\
                 [routes.y]\nprovider = \"sandbox\"\ntenants = [\"acme\"]\noperated_by = \"globex\"\n"
            ),
            &[],
        )
        .unwrap_err();
        let problems = err.0.join("\n");
        for expected in [
            "routes.x.operated_by: names `initech`, which no token has",
            "routes.y.operated_by: names `globex`, which is not among the route's tenants",
        ] {
            assert!(
                problems.contains(expected),
                "{expected:?} not in:\n{problems}"
            );
        }
    }

    #[test]
    fn attachments_take_a_bounded_size_and_mime_types() {
        let config = load(
            "[attachments]\nmax_total_bytes = 2048\ncontent_types = [\"Application/PDF\"]\n",
            &[],
        )
        .unwrap();
        let rules = config.attachments.rules();
        assert_eq!(rules.max_total_bytes, 2048);
        assert_eq!(
            rules.content_types.into_iter().collect::<Vec<_>>(),
            ["application/pdf"]
        );
        let err = load(
            "[attachments]\nmax_total_bytes = 0\ncontent_types = [\"pdf\", \"text/plain\", \"a/b c\"]\n",
            &[],
        )
        .unwrap_err();
        let problems = err.0.join("\n");
        for expected in [
            "attachments.max_total_bytes: must be 1 to 67108864",
            "attachments.content_types[0]: `pdf` is not a MIME type",
            "attachments.content_types[2]: `a/b c` is not a MIME type",
        ] {
            assert!(
                problems.contains(expected),
                "{expected:?} not in:\n{problems}"
            );
        }
        assert!(!problems.contains("content_types[1]"), "{problems}");
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
        let literal = SecretSource::Literal(secrecy::SecretString::from("canary-secret-1"));
        assert!(!format!("{literal:?}").contains("canary-secret-1"));
    }
}
