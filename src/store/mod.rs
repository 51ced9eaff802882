//! The only place with SQL. One interface, [`Store`], implemented once in [`sql`] above a
//! narrow dialect seam, which [`sqlite`] (the embedded default: WAL, one writer) and
//! [`postgres`] (any number of herald processes) fill in with only what differs between them.
//! The conformance suite in `tests/store.rs` runs the same cases against both.
//!
//! Every state change writes its outbox event in the same transaction as the change itself.

mod claims;
mod evidence;
mod group;
mod many;
mod outbox;
mod postgres;
mod previews;
mod receipts;
mod retention;
mod review;
mod routes;
mod rows;
mod seam;
mod sql;
mod sqlite;
mod timestamp;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::domain::{
    Attempt, Certainty, Channel, Decision, File, IdempotencyKey, Notification, NotificationId,
    Receipt, Resolution, RoutePause, Sibling, State, Suppression, TraceParent,
};
use crate::review::{Change, Outcome, PermanentRefusals, Reason, Then};
pub use group::{Accepts, GroupCommit, Records};
use herald_provider::Request;
use herald_provider::callback::CallbackEvent;
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

/// What [`Store::record`] did.
#[derive(Debug, Clone)]
pub enum Recorded {
    Applied(Box<Notification>),
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

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Ok when the database answers, its migrations are the ones this build expects and a write
    /// commits (recorded as the time of the check).
    async fn check_ready(&self, now: OffsetDateTime) -> StoreResult<()>;
    /// How many write transactions the database commits in parallel (SQLite: one writer).
    fn writers(&self) -> usize;
    /// Closes every connection and waits until they are closed (SQLite checkpoints its log
    /// then), and only then lets another process have the database. Nothing uses the store
    /// after.
    async fn close(&self);

    /// Commits each new notification with its idempotency record and `accepted` event, all in
    /// one transaction; keys already used are answered from their record instead.
    async fn accept(&self, items: &[NewAccept]) -> StoreResult<Vec<AcceptOutcome>>;

    async fn notification(
        &self,
        tenant: &str,
        id: NotificationId,
    ) -> StoreResult<NotificationDetail>;

    /// Newest first, each with its attempts and resolutions, as [`Store::notification`] shows
    /// one: the API lists notifications in the shape it shows one in.
    async fn list(&self, tenant: &str, filter: &ListFilter)
    -> StoreResult<Vec<NotificationDetail>>;

    /// `queued` → `cancelled`; `Conflict` from any other state.
    async fn cancel(
        &self,
        tenant: &str,
        id: NotificationId,
        now: OffsetDateTime,
    ) -> StoreResult<Notification>;

    /// Every `queued` notification of the tenant's that `key` names → `cancelled`, each with
    /// its event, in one transaction; the others it names are answered as they stand. A key
    /// that names none answers two empty lists.
    async fn cancel_by_key(
        &self,
        tenant: &str,
        key: &CancelKey,
        now: OffsetDateTime,
    ) -> StoreResult<Cancellation>;

    /// Claims up to `limit` due notifications in one transaction: `queued` ones get an
    /// `in_flight` attempt (the intent, committed before any call) with its send deadline,
    /// `sending` ones past their lease have their `in_flight` attempt marked `ambiguous`. Each
    /// gets a new generation and a lease until `now + lease`. Only notifications on `routes` are
    /// claimed, no more of each than its slot takes: the routes this process has configured and
    /// can start work on now. A notification without a provider request gets one from
    /// `prepare`, stored in the same transaction: it is fixed before anything is sent.
    async fn claim(
        &self,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
        routes: &[RouteSlot],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>>;

    /// Queued notifications on the routes `held` back (paused, circuit open, waiting out a
    /// vendor's pause) whose expiry has passed, up to `limit`, claimed as [`Store::claim`]
    /// does: an expiry wins over every hold, and the worker ends them without a vendor call.
    async fn claim_expired(
        &self,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
        held: &[String],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>>;

    /// The attempts on the claimed notification's route of its look-alikes: other notifications
    /// to its recipient, created since `created_since`, on that route with the same provider
    /// request, or failed over from it with the same content.
    async fn look_alikes(
        &self,
        claim: &Claim,
        created_since: OffsetDateTime,
    ) -> StoreResult<Vec<Sibling>>;

    /// Commits a new `in_flight` attempt for a claimed notification (a replay or a resend),
    /// whose call must start by `send_deadline`, and renews the lease; `None` if the claim was
    /// lost.
    async fn start_attempt(
        &self,
        claim: &Claim,
        now: OffsetDateTime,
        lease: Duration,
        send_deadline: OffsetDateTime,
    ) -> StoreResult<Option<Attempt>>;

    /// Commits a decision for a claimed notification, with its outbox event if it finished.
    /// `Conflict` when its settlement attributes a vendor message that another notification's
    /// settlement already holds: nothing is changed, and the worker looks again. A claim that
    /// was lost changes nothing but its attempt's evidence (`late_result`); either way,
    /// evidence that contradicts what is recorded reopens the notification
    /// ([`crate::domain::reopen`]).
    async fn record(
        &self,
        claim: &Claim,
        decision: &Decision,
        now: OffsetDateTime,
    ) -> StoreResult<Recorded> {
        let mut recorded = self
            .record_all(&[(claim.clone(), decision.clone())], now)
            .await?;
        recorded
            .pop()
            .ok_or_else(|| StoreError::Internal(anyhow::anyhow!("record answered nothing")))
    }

    /// [`Store::record`] of several claims in one transaction (group commit), each fenced by
    /// its own claim, answered in order. Any error undoes them all.
    async fn record_all(
        &self,
        items: &[(Claim, Decision)],
        now: OffsetDateTime,
    ) -> StoreResult<Vec<Recorded>>;

    /// A requery's decision for a notification in review (`unknown`), fenced by the
    /// generation the claim was read with, which it moves on: `Fenced` if anything changed
    /// the notification since. A resend it decides starts a fresh budget.
    async fn record_in_review(
        &self,
        claim: &Claim,
        decision: &Decision,
        now: OffsetDateTime,
    ) -> StoreResult<Recorded>;

    /// Notifications in review, oldest first, with their attempts and resolutions.
    async fn review(
        &self,
        tenant: &str,
        filter: &ReviewFilter,
    ) -> StoreResult<Vec<NotificationDetail>>;

    /// Applies a resolution to the notification read at `generation`, with its audit record
    /// and `resolved` event; `Conflict` if the notification changed since (another resolution,
    /// a worker), and nothing is applied.
    async fn resolve(
        &self,
        tenant: &str,
        id: NotificationId,
        generation: i64,
        resolution: &NewResolution,
        now: OffsetDateTime,
    ) -> StoreResult<Notification>;

    /// Stores a bulk resolution's dry run, and deletes every preview that expired before it.
    async fn save_review_preview(&self, preview: &ReviewPreview) -> StoreResult<()>;

    /// The tenant's preview stored under `token_hash`, expired or not; `NotFound` if none
    /// (never made, another tenant's, confirmed already, or deleted after it expired).
    async fn review_preview(&self, tenant: &str, token_hash: &[u8]) -> StoreResult<ReviewPreview>;

    /// Takes the preview for its confirmation: `Conflict` if another confirmation took it
    /// first, so that a preview is applied once.
    async fn use_review_preview(&self, tenant: &str, token_hash: &[u8]) -> StoreResult<()>;

    /// When the earliest `queued` or `sending` notification falls due.
    async fn next_due(&self) -> StoreResult<Option<OffsetDateTime>>;

    async fn queue_stats(&self, now: OffsetDateTime) -> StoreResult<QueueStats>;

    /// Signals `wake` whenever another process commits due work (PostgreSQL `LISTEN`); returns
    /// at once where only this process writes (SQLite).
    async fn listen_for_work(
        &self,
        wake: Arc<tokio::sync::Notify>,
        shutdown: tokio_util::sync::CancellationToken,
    );

    /// Claims up to `limit` events that `sink` has not published, oldest first, each leased to
    /// this relay until `now + lease` (`SKIP LOCKED` on PostgreSQL, so that relays in several
    /// processes share the work). Only the earliest unpublished event of each notification is
    /// taken, so that one notification's events reach a sink in order; events held back after a
    /// failure wait until their hold ends.
    async fn claim_events(
        &self,
        sink: &str,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
    ) -> StoreResult<Vec<ClaimedEvent>>;

    /// Records that `sink` published `events`, and sets the events that every one of `sinks`
    /// (all the configured sinks) has now published as done, for the retention to delete.
    async fn mark_published(
        &self,
        sink: &str,
        events: &[Uuid],
        sinks: &[String],
        now: OffsetDateTime,
    ) -> StoreResult<()>;

    /// Holds `events` back from `sink` until `until` after a failed publish, counting the
    /// failure and keeping its reason.
    async fn hold_back(
        &self,
        sink: &str,
        events: &[Uuid],
        until: OffsetDateTime,
        error: &str,
    ) -> StoreResult<()>;

    /// How many events `sink` has not published yet, and when the oldest of them was written.
    async fn outbox_backlog(&self, sink: &str) -> StoreResult<Backlog>;

    /// Deletes up to `limit` events that every sink published before `published_before`;
    /// returns how many went.
    async fn prune_outbox(&self, published_before: OffsetDateTime, limit: u32) -> StoreResult<u64>;

    /// Deletes up to `limit` idempotency records of notifications created before `before`, and
    /// as many upstream events' inbox records received before it: a key or an event id seen
    /// again after that is new. Returns how many records went.
    async fn forget_keys(&self, before: OffsetDateTime, limit: u32) -> StoreResult<u64>;

    /// Deletes up to `limit` notifications that finished (`delivered`, `cancelled`, `failed`
    /// and closed by a person, or refused for good where `refusals` are final) before `before`
    /// and whose events every sink has published, with their attempts, review audit,
    /// idempotency records and events; returns how many went. A notification in review
    /// (`unknown`, a dead letter nobody closed, an unacknowledged `duplicate_possible`) or
    /// still to be sent is never deleted.
    async fn forget_finished(
        &self,
        before: OffsetDateTime,
        limit: u32,
        refusals: PermanentRefusals,
    ) -> StoreResult<u64>;

    /// Commits one event of herald's own (a route's circuit changed in this process).
    async fn add_event(&self, event: &OutboxEvent) -> StoreResult<()>;

    /// Deletes up to `limit` attachment contents that no notification names any more and that
    /// no enqueue named since `before`; returns how many went.
    async fn forget_files(&self, before: OffsetDateTime, limit: u32) -> StoreResult<u64>;

    /// The stored contents of these attachments (by SHA-256), for a send; a file not stored is
    /// absent from the answer.
    async fn files(&self, sha256: &[&str]) -> StoreResult<BTreeMap<String, Vec<u8>>>;

    /// Records an upstream event (`tenant`, `source`, `id`) and commits the notifications it
    /// maps to, each with its `accepted` event, in one transaction; an event recorded before
    /// creates nothing and answers the notification ids it created then.
    async fn receive_event(&self, event: &NewInboxEvent) -> StoreResult<InboxOutcome>;

    /// Takes a route's callback events in one transaction. Each event is recorded once per
    /// (route, event id), in the same transaction as its effects: a receipt step with its
    /// `receipt` event where it moves the receipt forward, a suppression where it suppresses,
    /// and the settlement of the ambiguous attempts it proves (`settled_by = callback`), which
    /// finishes a notification in review or waiting to be sent again as `delivered`/`known`.
    /// Events that name no message sent on the route are left alone and counted; `NotFound`
    /// (and nothing stored) if no event names one.
    async fn receive_callbacks(&self, callbacks: &NewCallbacks) -> StoreResult<CallbacksTaken>;

    /// Pauses `pause.route` for every process, with its audit record: the pause that stands
    /// (an earlier one, where it was paused already).
    async fn pause_route(&self, pause: &RoutePause) -> StoreResult<RoutePause>;

    /// Lifts the route's pause, audited as `by` says (who, why, when): the pause lifted, `None`
    /// where it was not paused.
    async fn resume_route(&self, by: &RoutePause) -> StoreResult<Option<RoutePause>>;

    /// Every standing pause, by route.
    async fn route_pauses(&self) -> StoreResult<Vec<RoutePause>>;

    /// Whether the tenant's `recipient` (as [`crate::domain::suppression_recipient`] writes it)
    /// is suppressed on `channel`.
    async fn suppressed(
        &self,
        tenant: &str,
        channel: Channel,
        recipient: &str,
        category: Option<&str>,
    ) -> StoreResult<bool>;

    async fn suppressions(
        &self,
        tenant: &str,
        filter: &SuppressionFilter,
    ) -> StoreResult<Vec<Suppression>>;

    /// Adds a suppression with its audit record; `false` (and nothing written) if the recipient
    /// was suppressed already.
    async fn suppress(&self, new: &NewSuppression) -> StoreResult<bool>;

    /// Lifts a suppression with its audit record, answering what was lifted; `NotFound` if
    /// there was none.
    async fn lift_suppression(&self, lift: &LiftSuppression) -> StoreResult<Suppression>;
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

/// Opens the database named by `url` (`sqlite:` or `postgres:`), applying migrations.
pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<Arc<dyn Store>> {
    use anyhow::Context;
    Ok(match Backend::of(url)? {
        Backend::Sqlite => Arc::new(seam::SqlStore::new(
            sqlite::Sqlite::connect(url)
                .await
                .with_context(|| opening(url))?,
        )),
        Backend::Postgres => Arc::new(seam::SqlStore::new(
            postgres::Postgres::connect(url, max_connections)
                .await
                .with_context(|| opening(url))?,
        )),
    })
}

/// Whether the database named by `url` can be opened, without migrating or creating anything.
pub async fn reach(url: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    match Backend::of(url)? {
        Backend::Sqlite => sqlite::Sqlite::reach(url),
        Backend::Postgres => postgres::Postgres::reach(url).await,
    }
    .with_context(|| opening(url))
}

/// How many bytes the database named by `url` takes on disk (for `herald bench`).
pub async fn database_bytes(url: &str) -> anyhow::Result<u64> {
    match Backend::of(url)? {
        Backend::Sqlite => sqlite::Sqlite::size_bytes(url),
        Backend::Postgres => postgres::Postgres::size_bytes(url).await,
    }
}

/// Brings the planner's statistics up to date, as autovacuum does on PostgreSQL within a minute
/// of a table filling (SQLite plans without them): `herald bench` measures a deployment whose
/// planner knows its tables, not the first minute of a new database.
pub async fn analyze(url: &str) -> anyhow::Result<()> {
    match Backend::of(url)? {
        Backend::Sqlite => Ok(()),
        Backend::Postgres => postgres::Postgres::analyze(url).await,
    }
}

enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn of(url: &str) -> anyhow::Result<Backend> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Ok(Backend::Postgres)
        } else {
            anyhow::bail!(
                "database.url must start with sqlite: or postgres: (got `{}`)",
                redact_url(url)
            )
        }
    }
}

fn opening(url: &str) -> String {
    format!("cannot open database {}", redact_url(url))
}

/// A database URL fit for an error message: any password replaced.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

/// The migrations of one backend, embedded at build time (no `migrate!` macro: it would need
/// sqlx's compile-time machinery for two databases).
fn migrator(sources: &[(i64, &'static str, &'static str)]) -> sqlx::migrate::Migrator {
    use sqlx::migrate::{Migration, MigrationType, Migrator};
    use std::borrow::Cow;
    let migrations = sources
        .iter()
        .map(|(version, description, sql)| {
            Migration::new(
                *version,
                Cow::Borrowed(*description),
                MigrationType::Simple,
                sqlx::SqlStr::from_static(sql),
                false,
            )
        })
        .collect::<Vec<_>>();
    Migrator {
        migrations: Cow::Owned(migrations),
        ..Migrator::DEFAULT
    }
}

/// CloudEvents `type`s of the outbox (docs/api.md, "Events").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Accepted,
    Delivered,
    Failed,
    Unknown,
    Resolved,
    Cancelled,
    /// The receipt moved forward on a vendor's callback.
    Receipt,
    /// Later evidence contradicted what was recorded: the notification is delivered after all,
    /// may have been delivered twice, or may have been delivered where the record said it was
    /// not (`unknown`), and waits in review.
    Reopened,
    /// An operator paused a route, in every process.
    RoutePaused,
    /// An operator resumed a paused route.
    RouteResumed,
    /// A route's circuit breaker opened in one process: its sends failed in a row.
    CircuitOpened,
    /// A route's circuit breaker closed again in that process: a probe found the vendor working.
    CircuitClosed,
}

impl EventType {
    pub const ALL: [EventType; 12] = [
        EventType::Accepted,
        EventType::Delivered,
        EventType::Failed,
        EventType::Unknown,
        EventType::Resolved,
        EventType::Cancelled,
        EventType::Receipt,
        EventType::Reopened,
        EventType::RoutePaused,
        EventType::RouteResumed,
        EventType::CircuitOpened,
        EventType::CircuitClosed,
    ];

    pub fn parse(s: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Accepted => "dev.herald.notification.accepted",
            EventType::Delivered => "dev.herald.notification.delivered",
            EventType::Failed => "dev.herald.notification.failed",
            EventType::Unknown => "dev.herald.notification.unknown",
            EventType::Resolved => "dev.herald.notification.resolved",
            EventType::Cancelled => "dev.herald.notification.cancelled",
            EventType::Receipt => "dev.herald.notification.receipt",
            EventType::Reopened => "dev.herald.notification.reopened",
            EventType::RoutePaused => "dev.herald.route.paused",
            EventType::RouteResumed => "dev.herald.route.resumed",
            EventType::CircuitOpened => "dev.herald.route.circuit_opened",
            EventType::CircuitClosed => "dev.herald.route.circuit_closed",
        }
    }
}

/// An outbox row: the event's stable id and its `data`, fixed when the state changed. A route's
/// event belongs to no tenant (`tenant` is empty) and stands in `notification_id` with a UUID
/// fixed by the route's name: the relay publishes the events of one id in order, so a route's
/// pause is never published after its resume.
#[derive(Debug, Clone)]
pub struct OutboxEvent {
    pub id: Uuid,
    pub tenant: String,
    pub notification_id: NotificationId,
    pub event_type: EventType,
    pub data: Value,
    pub created_at: OffsetDateTime,
    /// The trace its notification was enqueued in: the relay's publish links to it, and the
    /// published event carries it (CloudEvents' distributed-tracing extension).
    pub trace_parent: Option<TraceParent>,
}

impl OutboxEvent {
    /// A route's event: `data` says what happened, and holds the route's name as `route`.
    pub fn for_route(route: &str, event_type: EventType, data: Value, now: OffsetDateTime) -> Self {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(format!("herald route {route}"));
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        let mut data = data;
        data["route"] = json!(route);
        OutboxEvent {
            id: Uuid::now_v7(),
            tenant: String::new(),
            notification_id: NotificationId::from_uuid(
                uuid::Builder::from_custom_bytes(bytes).into_uuid(),
            ),
            event_type,
            data,
            created_at: now,
            // A route's event belongs to no one request's trace.
            trace_parent: None,
        }
    }

    /// What the event is about, as its CloudEvent's `subject`: the notification's id, or the
    /// route's name.
    pub fn subject(&self) -> String {
        match self.data.get("route").and_then(Value::as_str) {
            Some(route) if self.tenant.is_empty() => route.to_owned(),
            _ => self.notification_id.to_string(),
        }
    }

    pub fn for_notification(n: &Notification, event_type: EventType, now: OffsetDateTime) -> Self {
        let mut data = json!({
            "id": n.id,
            "state": n.state,
            "certainty": n.certainty,
            // After a failover, the fallback: the route that sent it (or last tried to).
            "route": n.route,
            "metadata": n.metadata,
        });
        if let Some(key) = &n.cancellation_key {
            data["cancellation_key"] = json!(key);
        }
        if let Some(category) = &n.category {
            data["category"] = json!(category);
        }
        if let Some(locale) = &n.content.locale {
            data["locale"] = json!(locale);
        }
        if let Some(at) = n.expires_at.and_then(|at| at.format(&Rfc3339).ok()) {
            data["expires_at"] = json!(at);
        }
        if !n.content.email.attachments.is_empty() {
            data["attachments"] = json!(n.content.email.attachments);
        }
        OutboxEvent {
            id: Uuid::now_v7(),
            tenant: n.tenant.clone(),
            notification_id: n.id,
            event_type,
            data,
            created_at: now,
            trace_parent: n.trace_parent.clone(),
        }
    }
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
