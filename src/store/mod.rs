//! The only place with SQL. One interface per area of the store, each a trait that [`SqlStore`]
//! implements once in the area's own file above a narrow dialect seam (`seam`), which `sqlite`
//! (the embedded default: WAL, one writer) and `postgres` (any number of herald processes) fill
//! in with only what differs between them; [`Store`] requires them all. The areas:
//! `notifications`, `claims`, `records`, `receipts` (with `evidence`), `review`, `outbox`,
//! `retention`, `routes` (pauses). A caller that needs one area takes only its trait. The
//! conformance suite in `tests/store.rs` (one file per area under `tests/store/`) runs the
//! same cases against both databases.
//!
//! Every state change writes its outbox event in the same transaction as the change itself.

mod claims;
mod events;
mod evidence;
mod group;
mod many;
mod notifications;
mod open;
mod outbox;
mod postgres;
mod receipts;
mod records;
mod retention;
mod review;
mod routes;
mod rows;
mod seam;
mod sqlite;
mod timestamp;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use herald_provider::Request;
use herald_provider::callback::CallbackEvent;
use serde_json::Value;
use time::OffsetDateTime;

use crate::domain::{
    Attempt, Certainty, Channel, File, IdempotencyKey, Notification, NotificationId, Receipt,
    Resolution, State, Suppression,
};
use crate::review::{Change, Outcome, Reason, Then};

pub use claims::Claims;
pub use events::{EventType, OutboxEvent};
pub use group::{Accepts, GroupCommit, Records};
pub use notifications::Notifications;
pub use open::{analyze, connect, database_bytes, reach, redact_url, statement_time};
pub use outbox::Outbox;
pub use receipts::Receipts;
pub use records::Recording;
pub use retention::Retention;
pub use review::Review;
pub use routes::RoutePauses;
pub use timestamp::Timestamp;

/// Errors that callers branch on; everything else is `Internal`, with its context.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    /// The row exists but is in a state that forbids the change.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The database refuses work right now, for a cause that may clear; worth retrying later.
    #[error("the database is unavailable ({0}): {1}")]
    Unavailable(Outage, String),
    /// The write would record more certainty than the evidence holds — `known` beside a send
    /// that may have reached a vendor — and the database refused it (migration 0022's trigger:
    /// herald's rule of certainty, `domain::certainty`, in SQL). A defect in the caller.
    #[error("refused: {0}")]
    Unjustified(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// Why the database refuses work: what an answer names, and what an operator fixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    /// It cannot be reached, refuses connections or credentials, or is not there.
    Unreachable,
    /// It is there but has no room for more work now: locks, connections, memory.
    Busy,
    DiskFull,
    /// Its storage refuses writes: a read-only file system or a standby.
    ReadOnly,
    /// Its storage fails: I/O errors.
    Storage,
    /// Its schema is not the one this build expects.
    Schema,
}

impl std::fmt::Display for Outage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Outage::Unreachable => "unreachable",
            Outage::Busy => "busy",
            Outage::DiskFull => "disk full",
            Outage::ReadOnly => "read-only",
            Outage::Storage => "storage fault",
            Outage::Schema => "schema mismatch",
        })
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        let outage = match &err {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Protocol(_) => Some(Outage::Unreachable),
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                return StoreError::Conflict(db.message().to_owned());
            }
            sqlx::Error::Database(db) if db.message().contains(KNOWN_REFUSED) => {
                return StoreError::Unjustified(db.message().to_owned());
            }
            sqlx::Error::Database(db) => match db.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
                Some(_) => db.code().and_then(|code| sqlite_outage(&code)),
                None => db.code().and_then(|code| postgres_outage(&code)),
            },
            _ => None,
        };
        match outage {
            Some(outage) => StoreError::Unavailable(outage, err.to_string()),
            None => StoreError::Internal(anyhow::Error::new(err)),
        }
    }
}

/// What the database says where it refuses a `known` the evidence does not hold (both
/// dialects' migration 0022 raise it).
const KNOWN_REFUSED: &str = "herald: a known certainty refused";

/// SQLite's primary result codes (the low byte of an extended one) that may clear by themselves
/// or by an operator's hand.
fn sqlite_outage(code: &str) -> Option<Outage> {
    match code.parse::<i32>().ok()? & 0xff {
        5 | 6 => Some(Outage::Busy),
        8 => Some(Outage::ReadOnly),
        10 => Some(Outage::Storage),
        13 => Some(Outage::DiskFull),
        _ => None,
    }
}

/// PostgreSQL's SQLSTATEs of the same kind: 08 connection exception, 28 refused credentials,
/// 3D000 no such database, 55 not in a state to serve (a database that refuses connections), 57P
/// shutdown / crash / cannot connect now, 53 insufficient resources (53100: disk full), 25006 a
/// write on a standby, 58030 an I/O error.
fn postgres_outage(code: &str) -> Option<Outage> {
    match code {
        "53100" => Some(Outage::DiskFull),
        "25006" => Some(Outage::ReadOnly),
        "58030" => Some(Outage::Storage),
        _ if code.starts_with("53") => Some(Outage::Busy),
        _ if ["08", "28", "55", "57P"]
            .iter()
            .any(|class| code.starts_with(class))
            || code == "3D000" =>
        {
            Some(Outage::Unreachable)
        }
        _ => None,
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// What `POST /v1/notifications/cancel` names: notifications of one tenant, by a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelKey {
    /// Every notification enqueued with this `cancellation_key`.
    Cancellation(String),
    /// The notification enqueued under this `Idempotency-Key`.
    Idempotency(String),
}

/// What a cancellation by key did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cancellation {
    /// Were queued, now cancelled; in id order.
    pub cancelled: Vec<NotificationId>,
    /// Named by the key but not cancelled now, with the state each stands in; in id order.
    /// Gone on (claimed, ended) or cancelled before; on PostgreSQL also one enqueued under the
    /// key while the cancellation ran, shown `queued`.
    pub not_cancelled: Vec<(NotificationId, State)>,
}

/// One enqueue: the notification, its idempotency record and its `accepted` event, which the
/// store commits together.
#[derive(Debug, Clone)]
pub struct NewAccept {
    pub key: IdempotencyKey,
    /// SHA-256 of the canonical request, to tell a replay from a reused key.
    pub request_hash: Vec<u8>,
    pub notification: Notification,
    /// The contents of its attachments, stored once each by their SHA-256.
    pub files: Vec<File>,
    /// The answer to store for replays.
    pub response: Value,
}

/// What became of one [`NewAccept`].
#[derive(Debug, Clone, PartialEq)]
pub enum AcceptOutcome {
    Created,
    /// The key was used before with the same request: answer what was answered then.
    Replayed {
        status: u16,
        body: Value,
    },
    /// The key was used before with another request.
    KeyReused,
}

/// A notification with its history, as `GET /v1/notifications/{id}` shows it.
#[derive(Debug, Clone)]
pub struct NotificationDetail {
    pub notification: Notification,
    pub attempts: Vec<Attempt>,
    pub resolutions: Vec<Resolution>,
    /// The fencing token as read: a resolution or a requery applies only if it is unchanged.
    pub generation: i64,
    /// The provider request fixed at its first attempt, if it had one.
    pub request: Option<Request>,
    /// Attempts up to this number were spent before a person's last resend.
    pub budget_from: i32,
    /// Its receipt history from vendor callbacks, oldest first; the last is its receipt.
    pub receipts: Vec<Receipt>,
}

/// `GET /v1/review` filters; results are oldest first, strictly newer than `after`.
#[derive(Debug, Clone, Default)]
pub struct ReviewFilter {
    pub route: Option<String>,
    /// The reasons listed (none: nothing); a closed item has none.
    pub reasons: Vec<Reason>,
    /// When the notification ended in review, from `since` (inclusive) to `until` (exclusive).
    pub since: Option<OffsetDateTime>,
    pub until: Option<OffsetDateTime>,
    pub after: Option<NotificationId>,
    pub limit: u32,
}

/// A bulk resolution's dry run, kept so that its confirmation applies exactly what it showed.
#[derive(Debug, Clone)]
pub struct ReviewPreview {
    /// SHA-256 of the token the dry run answered; the token itself is not stored.
    pub token_hash: Vec<u8>,
    pub tenant: String,
    /// Who asked for the dry run.
    pub principal: String,
    /// What it was made for (outcome, then, force, filter and max), as the API wrote it.
    pub request: Value,
    /// The notifications it would change, each with the generation it was read at.
    pub items: Vec<(NotificationId, i64)>,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

/// A resolution to apply: what changes, and the audit record that says who decided what.
#[derive(Debug, Clone)]
pub struct NewResolution {
    pub principal: String,
    pub outcome: Outcome,
    pub then: Option<Then>,
    pub note: String,
    pub change: Change,
    pub before: (State, Option<Certainty>),
}

/// `GET /v1/notifications` filters, all of which must hold; results are newest first, strictly
/// older than `before`.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub state: Option<State>,
    pub certainty: Option<Certainty>,
    pub channel: Option<Channel>,
    pub route: Option<String>,
    /// Created from `created_after` (inclusive) to `created_before` (exclusive): adjacent
    /// windows neither overlap nor leave a gap.
    pub created_after: Option<OffsetDateTime>,
    pub created_before: Option<OffsetDateTime>,
    /// Every pair must be in the notification's metadata, the value equal as a string.
    pub metadata: BTreeMap<String, String>,
    pub before: Option<NotificationId>,
    pub limit: u32,
}

/// Why a notification was claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimMode {
    /// It was `queued`: attempt `n` is committed `in_flight`, to be sent now — unless
    /// `suppressed`: its recipient was on the tenant's suppression list when it was claimed
    /// (read in the claim's transaction, for the whole claim at once).
    Send { n: i32, suppressed: bool },
    /// It was `sending` past its lease (a crashed or stalled worker, whose `in_flight` attempt is
    /// now `ambiguous`) or parked for reconciliation: settle its ambiguity.
    Reconcile,
}

impl ClaimMode {
    /// The step that takes it, as its trace span is named.
    pub fn name(&self) -> &'static str {
        match self {
            ClaimMode::Send { .. } => "attempt",
            ClaimMode::Reconcile => "reconcile",
        }
    }
}

/// A notification claimed by one worker until its lease ends. `generation` fences every later
/// write: once another claim bumps it, this worker's writes change nothing but its own
/// attempt's evidence.
#[derive(Debug, Clone)]
pub struct Claim {
    pub notification: Notification,
    pub generation: i64,
    pub mode: ClaimMode,
    /// Every attempt, oldest first, including one this claim started.
    pub attempts: Vec<Attempt>,
    /// The provider request fixed at the notification's first attempt; every later send and
    /// query uses it. `None` only where the route could not prepare one (the send then fails
    /// with the route's reason).
    pub request: Option<Request>,
    /// Attempts up to this number were spent before a person's last resend: the route's caps
    /// count from the next one, and its age cap from `budget_since`.
    pub budget_from: i32,
    pub budget_since: Option<OffsetDateTime>,
}

impl Claim {
    /// A person's requery of a notification in review, as it was read: fenced by the
    /// generation it was read with, as a worker's claim is by its own.
    pub fn in_review(detail: NotificationDetail) -> Claim {
        Claim {
            notification: detail.notification,
            generation: detail.generation,
            mode: ClaimMode::Reconcile,
            attempts: detail.attempts,
            request: detail.request,
            budget_from: detail.budget_from,
            budget_since: None,
        }
    }
}

/// A route a claim may take work for, and how much.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteSlot {
    pub route: String,
    /// At most this many of its notifications: the sends it can start before their deadline.
    pub take: u32,
    /// How long after the claim an attempt may still start its call (its send deadline): far
    /// enough inside the lease that the call, cut at the route's timeout, ends before the
    /// lease does.
    pub send_window: Duration,
}

/// Prepares the provider request of a notification claimed for the first time (pure: the
/// route's adapter builds it from the notification, without I/O). `None` where it cannot.
pub type Prepare<'a> = &'a (dyn Fn(&Notification) -> Option<Request> + Send + Sync);

/// What [`Recording::record`] did.
#[derive(Debug, Clone)]
pub enum Recorded {
    Applied {
        notification: Box<Notification>,
        /// A vendor's report, taken while the attempt was in flight, settled what the step left
        /// ambiguous, in the same transaction (the step's own settlement is in its decision).
        settled_by_report: bool,
    },
    /// The claim was lost (its lease expired and another worker claimed the notification).
    Fenced,
}

/// Gauges for `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct QueueStats {
    pub queued: i64,
    pub sending: i64,
    /// The oldest `queued` notification that is already due, on a route no operator paused
    /// (without sending its work to the fallback): paused work waits on purpose, and is not late.
    pub oldest_due: Option<OffsetDateTime>,
    /// Items in review by reason (dead letters and permanent refusals included, closed ones
    /// not), and when the oldest of those that always wait for a person ([`Reason::WAITING`])
    /// ended there.
    pub review: Vec<(Reason, i64)>,
    pub review_oldest: Option<OffsetDateTime>,
    /// Failed notifications no person has closed, by route and cause (`exhausted` or
    /// `rejected`).
    pub dead_letters: Vec<(String, Reason, i64)>,
}

/// The whole store: every area, and the database's own readiness and lifetime.
#[async_trait]
pub trait Store:
    Notifications
    + Claims
    + Recording
    + Receipts
    + Review
    + Outbox
    + Retention
    + RoutePauses
    + Send
    + Sync
    + 'static
{
    /// Ok when the database answers, its migrations are the ones this build expects and a write
    /// commits (recorded as the time of the check).
    async fn check_ready(&self, now: OffsetDateTime) -> StoreResult<()>;

    /// How many write transactions the database commits in parallel (SQLite: one writer).
    fn writers(&self) -> usize;

    /// Closes every connection and waits until they are closed (SQLite checkpoints its log
    /// then), and only then lets another process have the database. Nothing uses the store
    /// after.
    async fn close(&self);
}

/// An outbox event leased to one relay for one sink.
#[derive(Debug, Clone)]
pub struct ClaimedEvent {
    pub event: OutboxEvent,
    /// Failed publishes of this event to this sink so far.
    pub failures: i32,
}

/// A sink's backlog, for `herald_outbox_backlog` and `herald_outbox_oldest_seconds`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    pub events: i64,
    pub oldest: Option<OffsetDateTime>,
}

/// An upstream event and the notifications its mapping made of it.
#[derive(Debug, Clone)]
pub struct NewInboxEvent {
    pub tenant: String,
    /// The CloudEvents `source` and `id`: together, the event's identity.
    pub source: String,
    pub id: String,
    pub notifications: Vec<Notification>,
    pub received_at: OffsetDateTime,
}

/// What became of a [`NewInboxEvent`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboxOutcome {
    Created,
    /// The event was received before: nothing new was stored; these are the notifications it
    /// created then.
    Duplicate(Vec<NotificationId>),
}

/// A route's authenticated callback events, taken in one transaction.
#[derive(Debug, Clone)]
pub struct NewCallbacks {
    pub route: String,
    pub events: Vec<CallbackEvent>,
    /// The route's idempotency window, if its vendor deduplicates provider keys: decides which
    /// ambiguous attempts a report naming a key settles (`domain::settled_by_callback`).
    pub idempotency_window: Option<Duration>,
    pub received_at: OffsetDateTime,
}

/// What became of a [`NewCallbacks`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallbacksTaken {
    /// Events seen for the first time (their effects applied).
    pub new: usize,
    /// Events seen before: nothing changed for them.
    pub repeats: usize,
    /// Events about messages never sent on the route (a vendor account may also send for
    /// others): left alone.
    pub unknown: usize,
    /// Notifications whose ambiguity the callbacks settled, so that they left review or will
    /// not be sent again.
    pub settled: Vec<NotificationId>,
}

/// A suppression to add, with its audit record.
#[derive(Debug, Clone)]
pub struct NewSuppression {
    pub tenant: String,
    pub suppression: Suppression,
    /// Who added it: the token's principal, or the route whose vendor reported the recipient.
    pub principal: String,
}

/// `GET /v1/suppressions` filters; results in (channel, recipient, category) order, strictly
/// after `after`.
#[derive(Debug, Clone, Default)]
pub struct SuppressionFilter {
    pub channel: Option<Channel>,
    /// Only this recipient's (as `suppression_recipient` writes it).
    pub recipient: Option<String>,
    pub after: Option<(Channel, String, Option<String>)>,
    pub limit: u32,
}

/// A suppression to lift, with the audit record of who lifted it and why.
#[derive(Debug, Clone)]
pub struct LiftSuppression {
    pub tenant: String,
    pub channel: Channel,
    pub recipient: String,
    /// The category it holds for; `None`: the one for every notification.
    pub category: Option<String>,
    pub principal: String,
    pub note: String,
    pub at: OffsetDateTime,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_database_code_names_the_outage_an_operator_would_fix() {
        for (code, outage) in [
            ("5", Some(Outage::Busy)),
            ("517", Some(Outage::Busy)), // SQLITE_BUSY_SNAPSHOT
            ("6", Some(Outage::Busy)),
            ("8", Some(Outage::ReadOnly)),
            ("10", Some(Outage::Storage)),
            ("3850", Some(Outage::Storage)), // SQLITE_IOERR_LOCK
            ("13", Some(Outage::DiskFull)),
            ("19", None), // a constraint: the request's doing, not an outage
            ("1", None),
        ] {
            assert_eq!(sqlite_outage(code), outage, "SQLite {code}");
        }
        for (code, outage) in [
            ("53100", Some(Outage::DiskFull)),
            ("53300", Some(Outage::Busy)), // too many connections
            ("25006", Some(Outage::ReadOnly)),
            ("58030", Some(Outage::Storage)),
            ("08006", Some(Outage::Unreachable)),
            ("28P01", Some(Outage::Unreachable)),
            ("3D000", Some(Outage::Unreachable)),
            ("55000", Some(Outage::Unreachable)),
            ("57P01", Some(Outage::Unreachable)),
            ("23505", None),
            ("42P01", None),
        ] {
            assert_eq!(postgres_outage(code), outage, "PostgreSQL {code}");
        }
    }
}
