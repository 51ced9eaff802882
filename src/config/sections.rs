//! The sections of a config other than its routes and tokens, with their defaults.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use herald_provider::settings::SecretSource;
use serde::Deserialize;

use super::load::Loader;
use crate::domain::{AttachmentRules, Channel, Delivery};
use crate::review::{PermanentRefusals, Policy};

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

    pub(super) fn check(&self, loader: &mut Loader) {
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
pub(super) const MIN_IDEMPOTENCY_SECONDS: u64 = 3600;
/// The tenant of the development token (`serve` without tokens).
pub const DEV_TENANT: &str = "dev";
/// The longest retention: ten years, far inside the dates the clock can subtract to.
pub(super) const MAX_RETENTION_SECONDS: u64 = 3650 * 86_400;
/// The slowest pace a route may keep: one send in about 17 minutes.
pub(super) const MIN_RATE: f64 = 0.001;
/// The fastest pace a route may keep.
pub(super) const MAX_RATE: f64 = 1_000_000.0;
/// A route's vendor callbacks per second, and burst, by default: well above what a vendor
/// reports of a busy route (a few events per message), well below what a flood of forged
/// requests could make the process verify.
pub(super) const DEFAULT_CALLBACK_RATE: u32 = 500;
pub(super) const DEFAULT_CALLBACK_BURST: u32 = 2000;

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
