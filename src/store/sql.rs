//! Every transaction of the store, written once. [`SqlStore`] implements [`Store`] above two
//! narrow seams that each backend fills in: [`Conn`], which runs one statement with its
//! arguments ([`Arg`]) on a connection, and [`Dialect`], which holds what truly differs — how a
//! write transaction begins, the claim's statements (`FOR UPDATE SKIP LOCKED` and arrays on
//! PostgreSQL, one writer and `json_each` on SQLite), the list's test of metadata, waking other
//! processes, and listening.
//! Every statement here is the same text in both dialects.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::types::Json;
use sqlx::{Database, FromRow, Transaction};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::receipts::ReceiptWithOwner;
use super::{
    AcceptOutcome, Backlog, CallbacksTaken, Claim, ClaimMode, ClaimedEvent, EventType,
    InboxOutcome, LiftSuppression, ListFilter, NewAccept, NewCallbacks, NewInboxEvent,
    NewResolution, NewSuppression, NotificationDetail, Outage, OutboxEvent, Prepare, QueueStats,
    Recorded, ReviewFilter, ReviewPreview, RouteSlot, Store, StoreError, StoreResult,
    SuppressionFilter, Timestamp,
};
use crate::domain::{
    Attempt, AttemptResult, Certainty, Channel, Content, Contradiction, Decision, Delivery, Next,
    Notification, NotificationId, Resolution, SettledBy, Settlement, Sibling, State, Suppression,
};
use crate::review::{PermanentRefusals, Reason};
use herald_provider::Request;

/// A request a claim fixes, as `CLAIM_FIX_REQUESTS` reads it. Serialized as it is, never through
/// a `Value` (which orders keys its own way): SQLite stores the text, and look-alikes compare it
/// with the request serialized directly.
#[derive(Serialize)]
struct FixedRequest {
    id: Uuid,
    request: Request,
}

/// An attempt a claim starts, as `CLAIM_START_ATTEMPTS` reads it.
#[derive(Serialize)]
struct StartedAttempt {
    id: Uuid,
    n: i32,
    generation: i64,
    route: String,
    key: String,
    send_deadline: Timestamp,
}

/// The smallest UUIDv7 of `t`'s millisecond: a notification id (a UUIDv7) below it was made
/// before `t`, so the primary key and the key index find old rows without an index on time.
fn first_id_at(t: OffsetDateTime) -> Uuid {
    let millis = u64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
    uuid::Builder::from_unix_timestamp_millis(millis, &[0; 10]).into_uuid()
}

/// A value bound to a statement: the few kinds herald stores, the same in both dialects.
pub(super) enum Arg {
    Uuid(Option<Uuid>),
    Text(Option<String>),
    I32(Option<i32>),
    I64(Option<i64>),
    Bool(Option<bool>),
    Bytes(Vec<u8>),
    Time(Option<Timestamp>),
    Json(Result<Box<RawValue>, String>),
    /// A list, for the dialects' own list syntax (`= ANY($n)` or `json_each($n)`).
    Uuids(Vec<Uuid>),
    Texts(Vec<String>),
}

impl Arg {
    pub(super) fn json(value: &impl Serialize) -> Arg {
        Arg::Json(serde_json::value::to_raw_value(value).map_err(|err| err.to_string()))
    }
}

impl From<Uuid> for Arg {
    fn from(v: Uuid) -> Self {
        Arg::Uuid(Some(v))
    }
}
impl From<Option<Uuid>> for Arg {
    fn from(v: Option<Uuid>) -> Self {
        Arg::Uuid(v)
    }
}
impl From<NotificationId> for Arg {
    fn from(v: NotificationId) -> Self {
        Arg::Uuid(Some(v.as_uuid()))
    }
}
impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_owned()))
    }
}
impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Arg::Text(Some(v.clone()))
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}
impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_owned))
    }
}
impl From<&Option<String>> for Arg {
    fn from(v: &Option<String>) -> Self {
        Arg::Text(v.clone())
    }
}
impl From<i32> for Arg {
    fn from(v: i32) -> Self {
        Arg::I32(Some(v))
    }
}
impl From<Option<i32>> for Arg {
    fn from(v: Option<i32>) -> Self {
        Arg::I32(v)
    }
}
impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::I64(Some(v))
    }
}
impl From<Option<bool>> for Arg {
    fn from(v: Option<bool>) -> Self {
        Arg::Bool(v)
    }
}
impl From<OffsetDateTime> for Arg {
    fn from(v: OffsetDateTime) -> Self {
        Arg::Time(Some(Timestamp::from(v)))
    }
}
impl From<Option<OffsetDateTime>> for Arg {
    fn from(v: Option<OffsetDateTime>) -> Self {
        Arg::Time(v.map(Timestamp::from))
    }
}

/// The arguments of one statement, in order: `args![a, b, c]`.
macro_rules! args {
    ($($arg:expr),* $(,)?) => { vec![$(Arg::from($arg)),*] };
}
pub(super) use args;

/// A row type both dialects can decode (`#[derive(FromRow)]` gives both).
pub(super) trait Row:
    for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin + 'static
{
}
impl<T> Row for T where
    T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin + 'static
{
}

/// One connection of a backend, in or out of a transaction: runs a statement with its
/// arguments. Each backend binds [`Arg`]s its own way and nothing else.
#[async_trait]
pub(super) trait Conn: Send {
    async fn execute(&mut self, sql: &'static str, args: Vec<Arg>) -> StoreResult<u64>;
    async fn fetch_all<R: Row>(&mut self, sql: &'static str, args: Vec<Arg>)
    -> StoreResult<Vec<R>>;

    async fn fetch_optional<R: Row>(
        &mut self,
        sql: &'static str,
        args: Vec<Arg>,
    ) -> StoreResult<Option<R>> {
        Ok(self.fetch_all(sql, args).await?.into_iter().next())
    }

    async fn fetch_one<R: Row>(&mut self, sql: &'static str, args: Vec<Arg>) -> StoreResult<R> {
        self.fetch_optional(sql, args)
            .await?
            .ok_or_else(|| StoreError::Internal(anyhow::anyhow!("a statement returned no row")))
    }
}

/// Implements [`Conn`] for a backend's connection type: binds each [`Arg`] (lists through
/// `$list`, the backend's own list encoding) and runs the statement.
macro_rules! conn {
    ($connection:ty, $arguments:ty, |$v:ident| $list:expr) => {
        fn arguments(args: Vec<$crate::store::sql::Arg>) -> $crate::store::StoreResult<$arguments> {
            use sqlx::Arguments;
            use $crate::store::sql::Arg;
            let mut out = <$arguments>::default();
            for arg in args {
                let added = match arg {
                    Arg::Uuid(v) => out.add(v),
                    Arg::Text(v) => out.add(v),
                    Arg::I32(v) => out.add(v),
                    Arg::I64(v) => out.add(v),
                    Arg::Bool(v) => out.add(v),
                    Arg::Bytes(v) => out.add(v),
                    Arg::Time(v) => out.add(v),
                    Arg::Json(v) => v
                        .map_err(Into::into)
                        .and_then(|raw| out.add(sqlx::types::Json(raw))),
                    Arg::Uuids($v) => out.add($list),
                    Arg::Texts($v) => out.add($list),
                };
                added.map_err(|err| {
                    $crate::store::StoreError::Internal(anyhow::anyhow!(
                        "cannot bind an argument: {err}"
                    ))
                })?;
            }
            Ok(out)
        }

        #[async_trait::async_trait]
        impl $crate::store::sql::Conn for $connection {
            async fn execute(
                &mut self,
                sql: &'static str,
                args: Vec<$crate::store::sql::Arg>,
            ) -> $crate::store::StoreResult<u64> {
                let done = sqlx::query_with(sql, arguments(args)?)
                    .execute(self)
                    .await?;
                Ok(done.rows_affected())
            }

            async fn fetch_all<R: $crate::store::sql::Row>(
                &mut self,
                sql: &'static str,
                args: Vec<$crate::store::sql::Arg>,
            ) -> $crate::store::StoreResult<Vec<R>> {
                Ok(sqlx::query_as_with(sql, arguments(args)?)
                    .fetch_all(self)
                    .await?)
            }
        }
    };
}
pub(super) use conn;

/// What differs between the backends. Everything else is [`SqlStore`]'s, written once.
#[async_trait]
pub(super) trait Dialect: Send + Sync + 'static {
    type Db: Database<Connection: Conn>;

    /// The newest migration this build applies.
    const LATEST_MIGRATION: i64;
    /// Write transactions worth running at once (see [`Store::writers`]).
    const WRITERS: usize;

    /// `$1` now, `$2` limit, `$3` routes, `$4` a JSON array of `{route, take}` → `(id, state)`
    /// of due notifications, tenants taking turns (each one's oldest due first) and no route
    /// given more than its `take`, each locked against other claimers until the
    /// transaction ends. It reads at most `$2` rows of each tenant with work (through
    /// [`due_tenants!`]), whatever the backlog: sorting every due row made each claim cost as
    /// much as the whole backlog (47 ms at 20,000 queued on SQLite, against 1 ms now).
    const CLAIM_DUE: &'static str;
    /// `$1` now, `$2` lease end, `$3` ids, `$4` the ids that were queued → [`ClaimedRow`]s.
    const CLAIM_TAKE: &'static str;
    /// `$1` ids, `$2` now, `$3` evidence: their `in_flight` attempts become `ambiguous`.
    const CLAIM_EXPIRE: &'static str;
    /// `$1` a JSON array of `{id, request}`: each notification's provider request, fixed.
    const CLAIM_FIX_REQUESTS: &'static str;
    /// `$1` a JSON array of `{id, n, generation, route, key, send_deadline}`, `$2` now: an
    /// `in_flight` attempt each. (One statement for a whole claim, not two per notification: a claim of 64
    /// made 128 round trips while it held its rows.)
    const CLAIM_START_ATTEMPTS: &'static str;
    /// `$1` ids → every attempt of those notifications, as [`AttemptWithOwner`].
    const ATTEMPTS_OF_MANY: &'static str;
    /// `$1` ids → every resolution of those notifications, as [`ResolutionWithOwner`].
    const RESOLUTIONS_OF_MANY: &'static str;
    /// `$1` ids → every receipt step of those notifications, as [`ReceiptWithOwner`].
    const RECEIPTS_OF_MANY: &'static str;
    /// `GET /v1/notifications`: written once in [`list_statement!`], with the dialect's test of
    /// metadata put in.
    const LIST: &'static str;
    /// The relay's statements: written once in [`relay_statements!`], with the dialect's list
    /// syntax and row locks put in.
    const RELAY: RelayStatements;
    /// Retention's deletes: written once in [`retention_statements!`].
    const RETENTION: RetentionStatements;

    /// Begins a write transaction.
    async fn begin(&self) -> StoreResult<Transaction<'static, Self::Db>>;
    /// A connection for reads outside any transaction.
    async fn read(&self) -> StoreResult<PoolConnection<Self::Db>>;
    /// A read-only transaction whose statements all see one snapshot of the database.
    async fn snapshot(&self) -> StoreResult<Transaction<'static, Self::Db>>;
    /// Tells other herald processes, once `tx` commits, that work is due.
    async fn wake_others(tx: &mut <Self::Db as Database>::Connection) -> StoreResult<()>;
    /// See [`Store::listen_for_work`].
    async fn listen_for_work(&self, wake: Arc<tokio::sync::Notify>, shutdown: CancellationToken);
    /// Whether a failed transaction collided with another and may simply run again.
    fn retryable(err: &StoreError) -> bool;
}

/// How often an enqueue that collided with a concurrent one runs again.
pub(super) const ACCEPT_TRIES: usize = 3;

/// `tenants(tenant)`: each tenant with queued or sending notifications, found by skipping
/// through `notifications_due_by_tenant` one tenant at a time (the last row is NULL).
macro_rules! due_tenants {
    () => {
        "WITH RECURSIVE tenants(tenant) AS (
             SELECT min(tenant) FROM notifications WHERE state IN ('queued', 'sending')
             UNION ALL
             SELECT (SELECT min(n.tenant) FROM notifications n
                     WHERE n.state IN ('queued', 'sending') AND n.tenant > tenants.tenant)
             FROM tenants WHERE tenants.tenant IS NOT NULL
         ) "
    };
}
pub(super) use due_tenants;

/// The list of `GET /v1/notifications`, newest first: `$1` tenant, `$2` state, `$3` certainty,
/// `$4` channel, `$5` route, `$6` created at or after, `$7` created before (each ignored when
/// null), `$8` a JSON object of metadata pairs (empty: any), `$9` strictly older than this id,
/// `$10` limit. `$metadata_holds` is the dialect's test that the row's `metadata` holds every
/// pair of `$8`.
///
/// `notifications_by_tenant` (tenant, id DESC) serves the order and the cursor; the other
/// filters are tested on the rows it walks, and the walk stops at the limit. That is cheap while
/// matches are common among a tenant's newest rows (channels and routes are few); a rare match
/// walks the tenant's history, which an index per filter would avoid at a cost to every
/// enqueue.
macro_rules! list_statement {
    ($metadata_holds:literal) => {
        concat!(
            "SELECT ",
            $crate::store::sql::claimed_columns!(),
            " FROM notifications
             WHERE tenant = $1
               AND ($2 IS NULL OR state = $2)
               AND ($3 IS NULL OR certainty = $3)
               AND ($4 IS NULL OR channel = $4)
               AND ($5 IS NULL OR route = $5)
               AND ($6 IS NULL OR created_at >= $6)
               AND ($7 IS NULL OR created_at < $7)
               AND ",
            $metadata_holds,
            " AND ($9 IS NULL OR id < $9)
             ORDER BY id DESC LIMIT $10"
        )
    };
}
pub(super) use list_statement;

/// The relay's statements that differ by dialect; see [`relay_statements!`].
pub(super) struct RelayStatements {
    /// `$1` sink, `$2` now, `$3` limit → [`EventRow`]s: unpublished by the sink, not held, and
    /// the earliest unpublished event of their notification; locked against other claimers.
    pub due: &'static str,
    /// `$1` ids, `$2` sink, `$3` lease end, `$4` now → the ids leased now (a lease another relay
    /// took meanwhile is left alone).
    pub lease: &'static str,
    /// `$1` ids, `$2` sink, `$3` now: published (the sink joins each event's `published_to`).
    pub published: &'static str,
    /// `$1` ids, `$2` sink, `$3` now: when the sink took them, kept per sink.
    pub history: &'static str,
    /// `$1` ids, `$2` sink: their leases end.
    pub release: &'static str,
    /// `$1` ids, `$2` sinks, `$3` now, `$4` how many sinks: done where every sink published.
    pub done: &'static str,
    /// `$1` ids, `$2` sink, `$3` hold end, `$4` error: one more failure, held back.
    pub hold: &'static str,
    /// `$1` sink → how many events it has not published, and the oldest one's time.
    pub backlog: &'static str,
}

/// The relay's statements, written once, with the dialect's pieces put in:
/// `$in_ids!("column", n)` tests a column against the list of ids bound as `$n`; `$has!("column", n)` tests whether a `published_to` list holds the sink `$n`;
/// `$append!("column", n)` is that list with the sink `$n` added; `$count_in!("column", n)`
/// counts the list's sinks that are in the list `$n`; `$lock` is the row lock of claims.
///
/// Which sinks published an event is kept on its own row (`published_to`), so that the claim
/// and the backlog read one index and the rows it points to, never a join whose plan depends
/// on how fresh the table statistics are; `outbox_published` keeps when each sink took it.
macro_rules! relay_statements {
    ($in_ids:ident, $has:ident, $append:ident, $count_in:ident, $lock:literal) => {
        $crate::store::sql::RelayStatements {
            due: concat!(
                "SELECT o.id, o.tenant, o.notification_id, o.type, o.data, o.created_at,
                        coalesce(l.failures, 0) AS failures
                 FROM outbox o LEFT JOIN outbox_leases l ON l.event_id = o.id AND l.sink = $1
                 WHERE o.published_at IS NULL
                   AND (l.held_until IS NULL OR l.held_until <= $2)
                   AND NOT ",
                $has!("o.published_to", 1),
                " AND NOT EXISTS (
                       SELECT 1 FROM outbox e
                       WHERE e.notification_id = o.notification_id AND e.seq < o.seq
                         AND e.published_at IS NULL AND NOT ",
                $has!("e.published_to", 1),
                ") ORDER BY o.seq LIMIT $3 ",
                $lock
            ),
            lease: concat!(
                "INSERT INTO outbox_leases (event_id, sink, held_until)
                 SELECT id, $2, $3 FROM outbox WHERE ",
                $in_ids!("id", 1),
                " ON CONFLICT (event_id, sink) DO UPDATE SET held_until = excluded.held_until
                 WHERE outbox_leases.held_until <= $4
                 RETURNING event_id"
            ),
            published: concat!(
                "UPDATE outbox SET published_to = ",
                $append!("published_to", 2),
                " WHERE ",
                $in_ids!("id", 1),
                " AND NOT ",
                $has!("published_to", 2),
                " RETURNING id"
            ),
            history: concat!(
                "INSERT INTO outbox_published (event_id, sink, published_at)
                 SELECT id, $2, $3 FROM outbox WHERE ",
                $in_ids!("id", 1),
                " ON CONFLICT (event_id, sink) DO NOTHING"
            ),
            release: concat!(
                "DELETE FROM outbox_leases WHERE sink = $2 AND ",
                $in_ids!("event_id", 1)
            ),
            done: concat!(
                "UPDATE outbox SET published_at = $3
                 WHERE published_at IS NULL AND ",
                $in_ids!("id", 1),
                " AND ",
                $count_in!("published_to", 2),
                " = $4"
            ),
            hold: concat!(
                "UPDATE outbox_leases SET held_until = $3, failures = failures + 1, last_error = $4
                 WHERE sink = $2 AND ",
                $in_ids!("event_id", 1)
            ),
            backlog: concat!(
                "SELECT count(*), min(o.created_at) FROM outbox o
                 WHERE o.published_at IS NULL AND NOT ",
                $has!("o.published_to", 1)
            ),
        }
    };
}
pub(super) use relay_statements;

/// Retention's deletes of finished notifications by id, children first; see
/// [`retention_statements!`].
pub(super) struct RetentionStatements {
    /// `$1` the first id at `$2`, `$2` finished before, `$3` limit, `$4` whether permanent
    /// refusals are final → ids of notifications retention may delete: finished and out of
    /// review (a failed one a person has closed, or a permanent refusal where those are final;
    /// any other stays for a person to settle), every event published; locked against a resend
    /// or an acknowledgement that would change that meanwhile.
    pub finished: &'static str,
    /// Each `$1` ids: the rows that belong to those notifications, in an order the foreign
    /// keys allow (an event's publication history goes with it, by cascade).
    pub children: [&'static str; 6],
    /// `$1` ids: the notifications themselves.
    pub notifications: &'static str,
}

/// Retention's statements, written once, with the dialect's `$in_ids!("column", n)` and row
/// lock put in.
macro_rules! retention_statements {
    ($in_ids:ident, $lock:literal) => {
        $crate::store::sql::RetentionStatements {
            // Oldest first by id: what was created after `$2` cannot have finished before it,
            // so the walk stops there.
            finished: concat!(
                "SELECT id FROM notifications
                 WHERE id < $1 AND finished_at < $2
                   AND (state = 'cancelled'
                        OR (state = 'delivered'
                            AND (acknowledged
                                 OR (certainty <> 'duplicate_possible' AND contradiction IS NULL)))
                        OR (state = 'failed'
                            AND (acknowledged OR ($4 AND ",
                $crate::store::sql::refused_for_good!(),
                "))))
                   AND NOT EXISTS (SELECT 1 FROM outbox o
                                   WHERE o.notification_id = notifications.id
                                     AND o.published_at IS NULL)
                 ORDER BY id LIMIT $3 ",
                $lock
            ),
            children: [
                concat!(
                    "DELETE FROM attempts WHERE ",
                    $in_ids!("notification_id", 1)
                ),
                concat!(
                    "DELETE FROM resolutions WHERE ",
                    $in_ids!("notification_id", 1)
                ),
                concat!(
                    "DELETE FROM idempotency_keys WHERE ",
                    $in_ids!("notification_id", 1)
                ),
                concat!("DELETE FROM outbox WHERE ", $in_ids!("notification_id", 1)),
                concat!(
                    "DELETE FROM receipts WHERE ",
                    $in_ids!("notification_id", 1)
                ),
                concat!(
                    "DELETE FROM callbacks WHERE ",
                    $in_ids!("notification_id", 1)
                ),
            ],
            notifications: concat!("DELETE FROM notifications WHERE ", $in_ids!("id", 1)),
        }
    };
}
pub(super) use retention_statements;

/// The store, above a dialect.
pub(super) struct SqlStore<D>(pub(super) D, LastOutage);

impl<D> SqlStore<D> {
    pub(super) fn new(dialect: D) -> Self {
        Self(dialect, LastOutage::default())
    }
}

/// How long a write refused for an outage keeps `/readyz` unready when no write has succeeded
/// since: readiness's own probe is a one-row write, which can succeed where an enqueue cannot
/// (SQLite reuses the WAL space a failed transaction took), so the probe alone would call a full
/// disk ready between two refusals.
const OUTAGE_REMEMBERED: Duration = Duration::from_secs(10);

/// The outage that last refused an accept, until an accept succeeds or it grows old.
#[derive(Default)]
pub(super) struct LastOutage(std::sync::Mutex<Option<(Outage, String, std::time::Instant)>>);

impl LastOutage {
    fn note<T>(&self, result: StoreResult<T>) -> StoreResult<T> {
        let mut last = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &result {
            Ok(_) => *last = None,
            Err(StoreError::Unavailable(outage, cause)) => {
                *last = Some((*outage, cause.clone(), std::time::Instant::now()));
            }
            Err(_) => {}
        }
        result
    }

    fn recent(&self) -> Option<StoreError> {
        let last = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        last.as_ref()
            .filter(|(_, _, at)| at.elapsed() < OUTAGE_REMEMBERED)
            .map(|(outage, cause, _)| StoreError::Unavailable(*outage, cause.clone()))
    }
}

macro_rules! notification_columns {
    () => {
        "id, tenant, channel, recipient, route, delivery, content, metadata, state, certainty, \
         acknowledged, send_at, due_at, created_at, updated_at, key_epoch, failovers, \
         late_evidence, contradiction, contradicted_at"
    };
}

/// The columns of a [`ClaimedRow`]: a notification with what dispatch and review need of it.
macro_rules! claimed_columns {
    () => {
        concat!(
            "generation, attempt_count, provider_request, budget_from, budget_since, ",
            $crate::store::sql::notification_columns!()
        )
    };
}
pub(super) use {claimed_columns, notification_columns};

macro_rules! look_alike_columns {
    () => {
        "a.notification_id, n.created_at AS notification_created_at, a.n, a.route, \
         a.provider_idempotency_key, a.started_at, a.send_deadline, a.finished_at, a.result, \
         a.permanent, a.provider_ref, a.settled_by, a.evidence"
    };
}

macro_rules! attempt_columns {
    () => {
        "n, route, provider_idempotency_key, started_at, send_deadline, finished_at, result, \
         permanent, provider_ref, settled_by, evidence"
    };
}
pub(super) use attempt_columns;

macro_rules! resolution_columns {
    () => {
        "principal, outcome, then_action, note, created_at, state_before, certainty_before, \
         state_after, certainty_after, forced, key_renewed"
    };
}
pub(super) use resolution_columns;

const FIND: &str = concat!(
    "SELECT ",
    claimed_columns!(),
    " FROM notifications WHERE tenant = $1 AND id = $2"
);
/// A notification row by id alone, for the claim's search for rows it cannot read.
const READ_BY_ID: &str = concat!(
    "SELECT ",
    claimed_columns!(),
    " FROM notifications WHERE id = $1"
);
const SET_ASIDE: &str = "UPDATE notifications SET due_at = $2 WHERE id = $1";
/// How long a notification a claim cannot read waits before it is tried (and reported) again:
/// long enough not to fill the log, short enough that a repaired row goes out the same hour.
const UNREADABLE_SET_ASIDE: Duration = Duration::from_secs(60 * 60);
const INSERT_EVENT: &str =
    "INSERT INTO outbox (id, tenant, notification_id, type, data, created_at)
     VALUES ($1, $2, $3, $4, $5, $6)";
const CLAIM_KEY: &str = "INSERT INTO idempotency_keys
         (tenant, key, request_hash, response_status, response_body, notification_id, created_at)
     VALUES ($1, $2, $3, 202, $4, $5, $6)
     ON CONFLICT (tenant, key) DO NOTHING";
const FIND_KEY: &str = "SELECT request_hash, response_status, response_body
     FROM idempotency_keys WHERE tenant = $1 AND key = $2";
const INSERT_NOTIFICATION: &str = "INSERT INTO notifications
         (id, tenant, channel, recipient, route, delivery, content, metadata, state,
          send_at, due_at, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)";
const INSERT_ATTEMPT: &str = concat!(
    "INSERT INTO attempts (notification_id, n, generation, route, provider_idempotency_key,
                           started_at, send_deadline, result, evidence)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'in_flight', '{}')
     RETURNING ",
    attempt_columns!()
);
/// Settles every unsettled ambiguous attempt but this step's own (`$2`) on route `$7` (only its
/// own vendor speaks for a route's sends; NULL, a person's word, settles every route's); the
/// vendor reference that settled them, if any, goes on the earliest (`$6`).
const SETTLE: &str = "UPDATE attempts
     SET settled_by = $3, evidence = json_patch(evidence, $4),
         provider_ref = CASE WHEN n = $6 THEN coalesce($5, provider_ref) ELSE provider_ref END
     WHERE notification_id = $1 AND result = 'ambiguous' AND settled_by IS NULL AND n <> $2
       AND ($7 IS NULL OR route = $7)";
/// A worker's record: only while its claim holds. A failover (`$8`, the fallback) moves it to
/// that route with a fresh budget and forgets the request prepared for the route it leaves; a
/// hold gives back the number of the attempt it withdraws (`$9`).
///
/// The fences here, in `start_attempt` and in `cancel` test `state || ''`, not `state`: the same test, but
/// one PostgreSQL cannot answer from a partial index on state. Given `state = 'sending'` it chose
/// `notifications_due` (whose statistics, taken when nothing was queued, call it empty) and
/// scanned the whole backlog for the id on every record: with 1,000,000 finished notifications
/// stored, the drain fell from 637/s to 236/s. The id's primary key is the plan wanted.
const RECORD: &str = concat!(
    "UPDATE notifications
     SET state = $3, certainty = $4, due_at = $5, finished_at = $6, updated_at = $7,
         route = coalesce($8, route),
         failovers = failovers + CASE WHEN $8 IS NULL THEN 0 ELSE 1 END,
         provider_request = CASE WHEN $8 IS NULL THEN provider_request ELSE NULL END,
         budget_from = CASE WHEN $8 IS NULL THEN budget_from ELSE attempt_count END,
         budget_since = CASE WHEN $8 IS NULL THEN budget_since ELSE $7 END,
         attempt_count = attempt_count - CASE WHEN $9 IS NULL THEN 0 ELSE 1 END
     WHERE id = $1 AND generation = $2 AND state || '' = 'sending'
     RETURNING ",
    notification_columns!()
);
/// A requery's record in review: only if nothing changed the notification since it was read;
/// it moves the generation on, a resend starts a fresh budget, and a failover (`$8`) moves it
/// as a worker's record does.
const RECORD_IN_REVIEW: &str = concat!(
    "UPDATE notifications
     SET state = $3, certainty = $4, due_at = $5, finished_at = $6, updated_at = $7,
         generation = generation + 1,
         route = coalesce($8, route),
         failovers = failovers + CASE WHEN $8 IS NULL THEN 0 ELSE 1 END,
         provider_request = CASE WHEN $8 IS NULL THEN provider_request ELSE NULL END,
         budget_from = CASE WHEN $3 = 'queued' THEN attempt_count ELSE budget_from END,
         budget_since = CASE WHEN $3 = 'queued' THEN $7 ELSE budget_since END
     WHERE id = $1 AND generation = $2 AND state || '' = 'unknown'
     RETURNING ",
    notification_columns!()
);
/// A person's resolution, fenced by the generation they read. A resend is due now, with a
/// fresh budget, and a renewed key forgets the request prepared under the old one.
const RESOLVE: &str = concat!(
    "UPDATE notifications
     SET state = $4, certainty = $5, acknowledged = $6, finished_at = $7, updated_at = $8,
         due_at = CASE WHEN $9 THEN $8 ELSE due_at END,
         budget_from = CASE WHEN $9 THEN attempt_count ELSE budget_from END,
         budget_since = CASE WHEN $9 THEN $8 ELSE budget_since END,
         key_epoch = key_epoch + CASE WHEN $10 THEN 1 ELSE 0 END,
         provider_request = CASE WHEN $10 THEN NULL ELSE provider_request END,
         generation = generation + 1
     WHERE tenant = $1 AND id = $2 AND generation = $3
     RETURNING ",
    notification_columns!()
);
/// Whether a failed notification's last attempt was refused for good.
macro_rules! refused_for_good {
    () => {
        "EXISTS (SELECT 1 FROM attempts a WHERE a.notification_id = notifications.id
                 AND a.n = notifications.attempt_count AND a.result = 'rejected' AND a.permanent)"
    };
}
pub(super) use refused_for_good;
const REVIEW: &str = concat!(
    "SELECT ",
    claimed_columns!(),
    " FROM notifications
     WHERE tenant = $1 AND ($2 IS NULL OR route = $2)
       AND ($3 IS NULL OR finished_at >= $3) AND ($4 IS NULL OR finished_at < $4)
       AND ($5 IS NULL OR id > $5)
       AND (($6 AND state = 'unknown')
         OR ($7 AND state = 'delivered' AND certainty = 'duplicate_possible' AND NOT acknowledged
             AND contradiction IS NULL)
         OR ($11 AND contradiction IS NOT NULL AND NOT acknowledged)
         OR ($8 AND state = 'failed' AND NOT acknowledged AND NOT ",
    refused_for_good!(),
    ")
         OR ($9 AND state = 'failed' AND NOT acknowledged AND ",
    refused_for_good!(),
    "))
     ORDER BY id LIMIT $10"
);
/// Marks that evidence came from outside the holder's step, and takes the row's lock.
const MARK_LATE_EVIDENCE: &str = concat!(
    "UPDATE notifications SET late_evidence = true WHERE id = $1 RETURNING ",
    notification_columns!()
);
/// The attempt a hold withdraws: it never called the vendor.
const WITHDRAW_ATTEMPT: &str =
    "DELETE FROM attempts WHERE notification_id = $1 AND n = $2 AND result = 'in_flight'";
const ANNOTATE_UNSETTLED: &str = "UPDATE attempts SET evidence = json_patch(evidence, $2)
     WHERE notification_id = $1 AND result = 'ambiguous' AND settled_by IS NULL AND route = $3";
const ANNOTATE_ATTEMPT: &str = "UPDATE attempts SET evidence = json_patch(evidence, $3)
     WHERE notification_id = $1 AND n = $2";

/// Look-alike attempts on route `$1`: those of notifications still on it with the same request,
/// and those of notifications that failed over from it with the same content (their request
/// there is forgotten, but a message they left on its vendor may look like this one).
const LOOK_ALIKES: &str = concat!(
    "SELECT ",
    look_alike_columns!(),
    " FROM notifications n JOIN attempts a ON a.notification_id = n.id
     WHERE n.route = $1 AND n.recipient = $2 AND n.id <> $3 AND n.created_at >= $4
       AND n.provider_request = $5 AND a.route = $1
     UNION ALL SELECT ",
    look_alike_columns!(),
    " FROM notifications n JOIN attempts a ON a.notification_id = n.id
     WHERE n.failovers > 0 AND n.recipient = $2 AND n.id <> $3 AND n.created_at >= $4
       AND n.route <> $1 AND n.content = $6 AND a.route = $1
     ORDER BY notification_created_at, notification_id, n"
);

impl<D: Dialect> SqlStore<D> {
    /// [`Store::claim`]'s transaction.
    async fn claim_once(
        &self,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
        routes: &[RouteSlot],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
        let mut tx = self.0.begin().await?;
        let due: Vec<(Uuid, String)> = tx
            .fetch_all(D::CLAIM_DUE, claim_due_args(now, limit, routes))
            .await?;
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = due.iter().map(|(id, _)| *id).collect();
        let was_queued: Vec<Uuid> = due
            .iter()
            .filter(|(_, state)| state == "queued")
            .map(|(id, _)| *id)
            .collect();
        let rows: Vec<ClaimedRow> = tx
            .fetch_all(
                D::CLAIM_TAKE,
                vec![
                    Arg::from(now),
                    Arg::from(now + lease),
                    Arg::Uuids(ids.clone()),
                    Arg::Uuids(was_queued.clone()),
                ],
            )
            .await?;
        tx.execute(
            D::CLAIM_EXPIRE,
            vec![
                Arg::Uuids(ids.clone()),
                Arg::from(now),
                Arg::json(&lease_expired_evidence(now)),
            ],
        )
        .await?;
        let mut claims = Vec::with_capacity(rows.len());
        let (mut fixed, mut started) = (Vec::new(), Vec::new());
        for row in rows {
            let notification: Notification = row.notification.try_into()?;
            let first = was_queued.contains(&notification.id.as_uuid());
            let mut request = row.provider_request.map(|r| r.0);
            if request.is_none() && first {
                // Fixed now, in the transaction that commits the intent: before any call.
                request = prepare(&notification);
                if let Some(prepared) = &request {
                    fixed.push(FixedRequest {
                        id: notification.id.as_uuid(),
                        request: prepared.clone(),
                    });
                }
            }
            let mode = if first {
                let window = routes
                    .iter()
                    .find(|slot| slot.route == notification.route)
                    .map_or(Duration::ZERO, |slot| slot.send_window);
                started.push(StartedAttempt {
                    id: notification.id.as_uuid(),
                    n: row.attempt_count,
                    generation: row.generation,
                    route: notification.route.clone(),
                    key: notification.provider_key(),
                    send_deadline: (now + window).into(),
                });
                ClaimMode::Send {
                    n: row.attempt_count,
                }
            } else {
                ClaimMode::Reconcile
            };
            claims.push(Claim {
                notification,
                generation: row.generation,
                mode,
                attempts: Vec::new(),
                request,
                budget_from: row.budget_from,
                budget_since: row.budget_since.map(Timestamp::into_inner),
            });
        }
        if !fixed.is_empty() {
            tx.execute(D::CLAIM_FIX_REQUESTS, vec![Arg::json(&fixed)])
                .await?;
        }
        if !started.is_empty() {
            tx.execute(
                D::CLAIM_START_ATTEMPTS,
                vec![Arg::json(&started), Arg::from(now)],
            )
            .await?;
        }
        let attempts: Vec<AttemptWithOwner> = tx
            .fetch_all(D::ATTEMPTS_OF_MANY, vec![Arg::Uuids(ids)])
            .await?;
        // Read before the commit: a row that cannot be read leaves nothing claimed.
        for row in attempts {
            if let Some(claim) = claims
                .iter_mut()
                .find(|c| c.notification.id.as_uuid() == row.notification_id)
            {
                claim.attempts.push(row.attempt.try_into()?);
            }
        }
        tx.commit().await?;
        Ok(claims)
    }

    /// Finds the due notifications a claim cannot read (a stored value this build cannot decode:
    /// written before herald bounded it, or by hand) and sets each aside for
    /// [`UNREADABLE_SET_ASIDE`], logged at ERROR with its id and counted, so that a claim goes on
    /// with the rest. Nothing is lost: it is due again after that, and goes out as soon as it
    /// can be read. Returns how many were set aside.
    async fn set_aside_unreadable(
        &self,
        now: OffsetDateTime,
        limit: u32,
        routes: &[RouteSlot],
    ) -> StoreResult<usize> {
        let mut tx = self.0.begin().await?;
        let due: Vec<(Uuid, String)> = tx
            .fetch_all(D::CLAIM_DUE, claim_due_args(now, limit, routes))
            .await?;
        let mut unreadable = 0;
        for (id, _) in due {
            let read = async {
                let rows: Vec<ClaimedRow> = tx.fetch_all(READ_BY_ID, args![id]).await?;
                for row in rows {
                    Notification::try_from(row.notification)?;
                }
                let attempts: Vec<AttemptWithOwner> = tx
                    .fetch_all(D::ATTEMPTS_OF_MANY, vec![Arg::Uuids(vec![id])])
                    .await?;
                for row in attempts {
                    Attempt::try_from(row.attempt)?;
                }
                StoreResult::Ok(())
            };
            let Err(err) = read.await else {
                continue;
            };
            tracing::error!(
                notification_id = %id,
                %err,
                set_aside_for = ?UNREADABLE_SET_ASIDE,
                "a due notification cannot be read; set aside so that delivery goes on"
            );
            tx.execute(SET_ASIDE, args![id, now + UNREADABLE_SET_ASIDE])
                .await?;
            metrics::counter!("herald_unreadable_notifications_total").increment(1);
            unreadable += 1;
        }
        tx.commit().await?;
        Ok(unreadable)
    }

    async fn find(&self, tenant: &str, id: NotificationId) -> StoreResult<ClaimedRow> {
        let row: Option<ClaimedRow> = self
            .0
            .read()
            .await?
            .fetch_optional(FIND, args![tenant, id])
            .await?;
        row.ok_or(StoreError::NotFound)
    }

    /// Notifications with their attempts and resolutions, as [`Store::notification`] shows one.
    async fn details(&self, rows: Vec<ClaimedRow>) -> StoreResult<Vec<NotificationDetail>> {
        Self::details_on(&mut *self.0.read().await?, rows).await
    }

    /// [`SqlStore::details`], read on `conn`.
    async fn details_on(
        conn: &mut impl Conn,
        rows: Vec<ClaimedRow>,
    ) -> StoreResult<Vec<NotificationDetail>> {
        let ids: Vec<Uuid> = rows.iter().map(|r| r.notification.id).collect();
        let attempts: Vec<AttemptWithOwner> = conn
            .fetch_all(D::ATTEMPTS_OF_MANY, vec![Arg::Uuids(ids.clone())])
            .await?;
        let resolutions: Vec<ResolutionWithOwner> = conn
            .fetch_all(D::RESOLUTIONS_OF_MANY, vec![Arg::Uuids(ids.clone())])
            .await?;
        let receipts: Vec<ReceiptWithOwner> = conn
            .fetch_all(D::RECEIPTS_OF_MANY, vec![Arg::Uuids(ids)])
            .await?;
        let mut details = rows
            .into_iter()
            .map(|row| {
                Ok(NotificationDetail {
                    generation: row.generation,
                    request: row.provider_request.map(|r| r.0),
                    budget_from: row.budget_from,
                    notification: row.notification.try_into()?,
                    attempts: Vec::new(),
                    resolutions: Vec::new(),
                    receipts: Vec::new(),
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        for row in attempts {
            if let Some(d) = details
                .iter_mut()
                .find(|d| d.notification.id.as_uuid() == row.notification_id)
            {
                d.attempts.push(row.attempt.try_into()?);
            }
        }
        for row in resolutions {
            if let Some(d) = details
                .iter_mut()
                .find(|d| d.notification.id.as_uuid() == row.notification_id)
            {
                d.resolutions.push(row.resolution.try_into()?);
            }
        }
        for row in receipts {
            if let Some(d) = details
                .iter_mut()
                .find(|d| d.notification.id.as_uuid() == row.notification_id)
            {
                d.receipts.push(row.try_into()?);
            }
        }
        Ok(details)
    }

    /// One decision, within `tx`; the caller commits. The worker's record and a requery's in
    /// review differ only in `update`, the statement that moves the notification (fenced by
    /// generation either way).
    async fn record_in(
        tx: &mut Transaction<'static, D::Db>,
        update: &'static str,
        in_review: bool,
        claim: &Claim,
        decision: &Decision,
        now: OffsetDateTime,
    ) -> StoreResult<Recorded> {
        let id = claim.notification.id;
        let (state, certainty, due_at, finished_at) = next_columns(&decision.next, now);
        let failover = match &decision.next {
            Next::Failover { route, .. } => Some(route.as_str()),
            _ => None,
        };
        let withdrawn = match &decision.next {
            Next::Hold { attempt, .. } => Some(*attempt),
            _ => None,
        };
        let mut args = args![
            id,
            claim.generation,
            state.as_str(),
            certainty.map(|c| c.as_str()),
            due_at,
            finished_at,
            now,
            failover,
        ];
        if !in_review {
            args.push(Arg::from(withdrawn));
        }
        let row: Option<NotificationRow> = tx.fetch_optional(update, args).await?;
        let Some(row) = row else {
            if let Some((n, late)) = decision.late_evidence() {
                // Marked first: the mark waits for whoever holds the notification now to
                // commit, and their record, made later, sees it.
                let row: NotificationRow = tx.fetch_one(MARK_LATE_EVIDENCE, args![id]).await?;
                tx.execute(
                    ANNOTATE_ATTEMPT,
                    vec![Arg::from(id), Arg::from(n), Arg::json(&late)],
                )
                .await?;
                super::evidence::hold_against_evidence::<D>(tx, row.try_into()?, now).await?;
            }
            return Ok(Recorded::Fenced);
        };
        let notification: Notification = row.try_into()?;
        if let Some(n) = withdrawn {
            tx.execute(WITHDRAW_ATTEMPT, args![id, n]).await?;
        }
        if let Some(a) = &decision.attempt {
            tx.execute(
                "UPDATE attempts
                 SET result = $3, permanent = $4, provider_ref = $5, evidence = $6, finished_at = $7
                 WHERE notification_id = $1 AND n = $2",
                vec![
                    Arg::from(id),
                    Arg::from(a.n),
                    Arg::from(a.result.as_str()),
                    Arg::from(a.permanent),
                    Arg::from(&a.provider_ref),
                    Arg::json(&a.evidence),
                    Arg::from(now),
                ],
            )
            .await?;
        }
        if let Some(settle) = &decision.settle {
            tx.execute(
                SETTLE,
                vec![
                    Arg::from(id),
                    Arg::from(decision.attempt.as_ref().map_or(0, |a| a.n)),
                    Arg::from(settle.by.as_str()),
                    Arg::json(&settle.record(now)),
                    Arg::from(&settle.provider_ref),
                    Arg::from(first_unsettled(claim, decision)),
                    Arg::from(&claim.notification.route),
                ],
            )
            .await?;
        }
        if let Some(findings) = decision.findings_evidence(now) {
            tx.execute(
                ANNOTATE_UNSETTLED,
                vec![
                    Arg::from(id),
                    Arg::json(&findings),
                    Arg::from(&claim.notification.route),
                ],
            )
            .await?;
        }
        // The timeline shows the switch on the attempt that caused it.
        let caused_by = match &decision.attempt {
            Some(outcome) => Some(outcome.n),
            None => claim.attempts.last().map(|a| a.n),
        };
        if let (Some(record), Some(n)) = (
            decision.failover_evidence(&claim.notification.route, now),
            caused_by,
        ) {
            tx.execute(
                ANNOTATE_ATTEMPT,
                vec![Arg::from(id), Arg::from(n), Arg::json(&record)],
            )
            .await?;
        }
        // In review, a requery that settles nothing leaves it `unknown`: no state changed.
        let changed = !(in_review && notification.state == State::Unknown);
        if let Some(event_type) = event_for(notification.state).filter(|_| changed) {
            insert_event(
                &mut **tx,
                &OutboxEvent::for_notification(&notification, event_type, now),
            )
            .await?;
        }
        if notification.state == State::Queued {
            D::wake_others(tx).await?;
        }
        Ok(Recorded::Applied(Box::new(notification)))
    }

    async fn try_accept(&self, items: &[NewAccept]) -> StoreResult<Vec<AcceptOutcome>> {
        let mut tx = self.0.begin().await?;
        let mut outcomes = Vec::with_capacity(items.len());
        for item in items {
            let n = &item.notification;
            // The unique key decides who created the notification, not a prior read: on
            // PostgreSQL the insert waits for a concurrent transaction holding the same key and
            // then does nothing if it committed; on SQLite the one writer has already committed.
            // So a request never meets its key "in progress": it waits for the first and is
            // answered as its replay.
            let outcome = loop {
                let claimed = tx
                    .execute(
                        CLAIM_KEY,
                        vec![
                            Arg::from(&n.tenant),
                            Arg::from(item.key.as_str()),
                            Arg::Bytes(item.request_hash.clone()),
                            Arg::json(&item.response),
                            Arg::from(n.id),
                            Arg::from(n.created_at),
                        ],
                    )
                    .await?
                    == 1;
                if claimed {
                    insert_notification(&mut *tx, n).await?;
                    break AcceptOutcome::Created;
                }
                let existing: Option<IdempotencyRow> = tx
                    .fetch_optional(FIND_KEY, args![&n.tenant, item.key.as_str()])
                    .await?;
                // Gone between the two statements: its window ended and retention swept it,
                // so the key is free again.
                if let Some(row) = existing {
                    break row.outcome_for(&item.request_hash);
                }
            };
            outcomes.push(outcome);
        }
        if outcomes.contains(&AcceptOutcome::Created) {
            D::wake_others(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    async fn try_receive_event(&self, event: &NewInboxEvent) -> StoreResult<Option<InboxOutcome>> {
        let mut tx = self.0.begin().await?;
        let ids: Vec<Uuid> = event.notifications.iter().map(|n| n.id.as_uuid()).collect();
        // The key decides, as for idempotency keys: on PostgreSQL the insert waits for a
        // concurrent transaction holding the same event and does nothing if that one commits.
        let recorded = tx
            .execute(
                "INSERT INTO inbox (tenant, source, event_id, notification_ids, received_at)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (tenant, source, event_id) DO NOTHING",
                vec![
                    Arg::from(&event.tenant),
                    Arg::from(&event.source),
                    Arg::from(&event.id),
                    Arg::json(&ids),
                    Arg::from(event.received_at),
                ],
            )
            .await?
            == 1;
        if !recorded {
            let earlier: Option<(Json<Vec<Uuid>>,)> = tx
                .fetch_optional(
                    "SELECT notification_ids FROM inbox
                     WHERE tenant = $1 AND source = $2 AND event_id = $3",
                    args![&event.tenant, &event.source, &event.id],
                )
                .await?;
            // `None`: the row that stopped the insert is gone again (its transaction rolled
            // back after all); the caller runs this again.
            return Ok(earlier.map(|(ids,)| {
                InboxOutcome::Duplicate(ids.0.into_iter().map(NotificationId::from_uuid).collect())
            }));
        }
        for n in &event.notifications {
            insert_notification(&mut *tx, n).await?;
        }
        if !event.notifications.is_empty() {
            D::wake_others(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(Some(InboxOutcome::Created))
    }
}

/// A new `queued` notification with its `accepted` event.
async fn insert_notification(conn: &mut impl Conn, n: &Notification) -> StoreResult<()> {
    conn.execute(
        INSERT_NOTIFICATION,
        vec![
            Arg::from(n.id),
            Arg::from(&n.tenant),
            Arg::from(n.channel.as_str()),
            Arg::from(&n.to),
            Arg::from(&n.route),
            Arg::from(n.delivery.as_str()),
            Arg::json(&n.content),
            Arg::json(&n.metadata),
            Arg::from(n.state.as_str()),
            Arg::from(n.send_at),
            Arg::from(n.next_attempt_at.unwrap_or(n.created_at)),
            Arg::from(n.created_at),
        ],
    )
    .await?;
    insert_event(
        conn,
        &OutboxEvent::for_notification(n, EventType::Accepted, n.created_at),
    )
    .await
}

/// Every attempt of notification `id`, oldest first.
pub(super) async fn attempts_of<D: Dialect>(
    conn: &mut impl Conn,
    id: NotificationId,
) -> StoreResult<Vec<Attempt>> {
    let rows: Vec<AttemptWithOwner> = conn
        .fetch_all(D::ATTEMPTS_OF_MANY, vec![Arg::Uuids(vec![id.as_uuid()])])
        .await?;
    rows.into_iter().map(|row| row.attempt.try_into()).collect()
}

pub(super) async fn insert_event(conn: &mut impl Conn, event: &OutboxEvent) -> StoreResult<()> {
    conn.execute(
        INSERT_EVENT,
        vec![
            Arg::from(event.id),
            Arg::from(&event.tenant),
            Arg::from(event.notification_id),
            Arg::from(event.event_type.as_str()),
            Arg::json(&event.data),
            Arg::from(event.created_at),
        ],
    )
    .await?;
    Ok(())
}

#[async_trait]
impl<D: Dialect> Store for SqlStore<D> {
    fn writers(&self) -> usize {
        D::WRITERS
    }

    async fn check_ready(&self, now: OffsetDateTime) -> StoreResult<()> {
        let (applied,): (Option<i64>,) = self
            .0
            .read()
            .await?
            .fetch_one(
                "SELECT max(version) FROM _sqlx_migrations WHERE success",
                args![],
            )
            .await?;
        if applied != Some(D::LATEST_MIGRATION) {
            return Err(StoreError::Unavailable(
                Outage::Schema,
                format!(
                    "migrations are at {applied:?}, this build expects {}",
                    D::LATEST_MIGRATION
                ),
            ));
        }
        if let Some(refused) = self.1.recent() {
            return Err(refused);
        }
        // Reads can go on while writes fail (a full disk, a read-only file system, a standby):
        // ready means a write commits.
        let mut tx = self.0.begin().await?;
        tx.execute(
            "UPDATE readiness SET checked_at = $1 WHERE id = 1",
            args![now],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    #[tracing::instrument(skip_all, fields(items = items.len()))]
    async fn accept(&self, items: &[NewAccept]) -> StoreResult<Vec<AcceptOutcome>> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.try_accept(items).await {
                Err(err) if tries < ACCEPT_TRIES && D::retryable(&err) => {
                    tracing::debug!(%err, "accept collided with a concurrent batch; retrying");
                }
                result => return self.1.note(result),
            }
        }
    }

    async fn notification(
        &self,
        tenant: &str,
        id: NotificationId,
    ) -> StoreResult<NotificationDetail> {
        // One snapshot: a row read before a change committed and attempts read after it would
        // show what the database never held (an `unknown` notification whose sends are all
        // settled), and a resolution or requery would be refused for a reason that is not so.
        let mut tx = self.0.snapshot().await?;
        let row: ClaimedRow = tx
            .fetch_optional(FIND, args![tenant, id])
            .await?
            .ok_or(StoreError::NotFound)?;
        let mut details = Self::details_on(&mut *tx, vec![row]).await?;
        tx.commit().await?;
        details.pop().ok_or(StoreError::NotFound)
    }

    async fn list(
        &self,
        tenant: &str,
        filter: &ListFilter,
    ) -> StoreResult<Vec<NotificationDetail>> {
        let rows: Vec<ClaimedRow> = self
            .0
            .read()
            .await?
            .fetch_all(
                D::LIST,
                vec![
                    Arg::from(tenant),
                    Arg::from(filter.state.map(|s| s.as_str())),
                    Arg::from(filter.certainty.map(|c| c.as_str())),
                    Arg::from(filter.channel.map(|c| c.as_str())),
                    Arg::from(&filter.route),
                    Arg::from(filter.created_after),
                    Arg::from(filter.created_before),
                    Arg::json(&filter.metadata),
                    Arg::from(filter.before.map(|id| id.as_uuid())),
                    Arg::from(i64::from(filter.limit)),
                ],
            )
            .await?;
        self.details(rows).await
    }

    async fn cancel(
        &self,
        tenant: &str,
        id: NotificationId,
        now: OffsetDateTime,
    ) -> StoreResult<Notification> {
        let mut tx = self.0.begin().await?;
        let row: Option<NotificationRow> = tx
            .fetch_optional(
                concat!(
                    "UPDATE notifications
                     SET state = 'cancelled', certainty = 'known', updated_at = $3, finished_at = $3
                     WHERE tenant = $1 AND id = $2 AND state || '' = 'queued'
                     RETURNING ",
                    notification_columns!()
                ),
                args![tenant, id, now],
            )
            .await?;
        let Some(row) = row else {
            drop(tx);
            let current = self.find(tenant, id).await?;
            return Err(StoreError::Conflict(format!(
                "only a queued notification can be cancelled; this one is {}",
                current.notification.state
            )));
        };
        let notification: Notification = row.try_into()?;
        insert_event(
            &mut *tx,
            &OutboxEvent::for_notification(&notification, EventType::Cancelled, now),
        )
        .await?;
        tx.commit().await?;
        Ok(notification)
    }

    #[tracing::instrument(skip_all, fields(limit))]
    async fn claim(
        &self,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
        routes: &[RouteSlot],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
        match self.claim_once(now, lease, limit, routes, prepare).await {
            // One row that cannot be read must not stop delivery for every tenant.
            Err(err @ StoreError::Internal(_)) => {
                if self.set_aside_unreadable(now, limit, routes).await? == 0 {
                    return Err(err);
                }
                self.claim_once(now, lease, limit, routes, prepare).await
            }
            claimed => claimed,
        }
    }

    async fn look_alikes(
        &self,
        claim: &Claim,
        created_since: OffsetDateTime,
    ) -> StoreResult<Vec<Sibling>> {
        let Some(request) = &claim.request else {
            return Ok(Vec::new());
        };
        let n = &claim.notification;
        let rows: Vec<SiblingRow> = self
            .0
            .read()
            .await?
            .fetch_all(
                LOOK_ALIKES,
                vec![
                    Arg::from(&n.route),
                    Arg::from(&n.to),
                    Arg::from(n.id),
                    Arg::from(created_since),
                    Arg::json(request),
                    Arg::json(&n.content),
                ],
            )
            .await?;
        rows_into(rows)
    }

    async fn start_attempt(
        &self,
        claim: &Claim,
        now: OffsetDateTime,
        lease: Duration,
        send_deadline: OffsetDateTime,
    ) -> StoreResult<Option<Attempt>> {
        let n = &claim.notification;
        let mut tx = self.0.begin().await?;
        let next: Option<(i32,)> = tx
            .fetch_optional(
                "UPDATE notifications
                 SET attempt_count = attempt_count + 1, due_at = $3, updated_at = $4
                 WHERE id = $1 AND generation = $2 AND state || '' = 'sending'
                 RETURNING attempt_count",
                args![n.id, claim.generation, now + lease, now],
            )
            .await?;
        let Some((number,)) = next else {
            return Ok(None);
        };
        let row: AttemptRow = tx
            .fetch_one(
                INSERT_ATTEMPT,
                args![
                    n.id,
                    number,
                    claim.generation,
                    &n.route,
                    n.provider_key(),
                    now,
                    send_deadline
                ],
            )
            .await?;
        tx.commit().await?;
        Ok(Some(row.try_into()?))
    }

    #[tracing::instrument(skip_all, fields(records = items.len()))]
    async fn record_all(
        &self,
        items: &[(Claim, Decision)],
        now: OffsetDateTime,
    ) -> StoreResult<Vec<Recorded>> {
        let mut tx = self.0.begin().await?;
        let mut recorded = Vec::with_capacity(items.len());
        for (claim, decision) in items {
            let mut outcome = Self::record_in(&mut tx, RECORD, false, claim, decision, now).await?;
            if let Recorded::Applied(_) = outcome
                && let Some(finished) =
                    super::receipts::settle_recorded::<D>(&mut tx, claim, decision, now).await?
            {
                outcome = Recorded::Applied(Box::new(finished));
            }
            // Evidence came while it was being sent: hold this record against it.
            if let Recorded::Applied(n) = &outcome
                && n.late_evidence
                && let Some(reopened) =
                    super::evidence::hold_against_evidence::<D>(&mut tx, (**n).clone(), now).await?
            {
                outcome = Recorded::Applied(Box::new(reopened));
            }
            recorded.push(outcome);
        }
        tx.commit().await?;
        Ok(recorded)
    }

    #[tracing::instrument(skip_all, fields(notification_id = %claim.notification.id))]
    async fn record_in_review(
        &self,
        claim: &Claim,
        decision: &Decision,
        now: OffsetDateTime,
    ) -> StoreResult<Recorded> {
        let mut tx = self.0.begin().await?;
        let recorded =
            Self::record_in(&mut tx, RECORD_IN_REVIEW, true, claim, decision, now).await?;
        tx.commit().await?;
        Ok(recorded)
    }

    async fn review(
        &self,
        tenant: &str,
        filter: &ReviewFilter,
    ) -> StoreResult<Vec<NotificationDetail>> {
        let reasons = &filter.reasons;
        let rows: Vec<ClaimedRow> = self
            .0
            .read()
            .await?
            .fetch_all(
                REVIEW,
                vec![
                    Arg::from(tenant),
                    Arg::Text(filter.route.clone()),
                    Arg::from(filter.since),
                    Arg::from(filter.until),
                    Arg::Uuid(filter.after.map(|id| id.as_uuid())),
                    Arg::from(Some(reasons.contains(&Reason::Unknown))),
                    Arg::from(Some(reasons.contains(&Reason::DuplicatePossible))),
                    Arg::from(Some(reasons.contains(&Reason::Exhausted))),
                    Arg::from(Some(reasons.contains(&Reason::Rejected))),
                    Arg::from(i64::from(filter.limit)),
                    Arg::from(Some(reasons.contains(&Reason::Contradicted))),
                ],
            )
            .await?;
        self.details(rows).await
    }

    async fn resolve(
        &self,
        tenant: &str,
        id: NotificationId,
        generation: i64,
        resolution: &NewResolution,
        now: OffsetDateTime,
    ) -> StoreResult<Notification> {
        let change = &resolution.change;
        let finished = matches!(change.state, State::Queued | State::Sending)
            .then_some(None)
            .unwrap_or(Some(now));
        let resend = change.resend.is_some();
        let renew = change.resend.is_some_and(|r| r.renew_key);
        let mut tx = self.0.begin().await?;
        let row: Option<NotificationRow> = tx
            .fetch_optional(
                RESOLVE,
                vec![
                    Arg::from(tenant),
                    Arg::from(id),
                    Arg::I64(Some(generation)),
                    Arg::from(change.state.as_str()),
                    Arg::from(change.certainty.map(|c| c.as_str())),
                    Arg::from(Some(change.acknowledged)),
                    Arg::from(finished),
                    Arg::from(now),
                    Arg::from(Some(resend)),
                    Arg::from(Some(renew)),
                ],
            )
            .await?;
        let Some(row) = row else {
            return Err(StoreError::Conflict(
                "the notification changed while it was being resolved (another resolution, or \
                 dispatch); read it again"
                    .to_owned(),
            ));
        };
        let notification: Notification = row.try_into()?;
        if let Some(accepted) = change.settle {
            let settlement = Settlement {
                by: SettledBy::Review,
                accepted,
                evidence: serde_json::json!({"principal": resolution.principal, "note": resolution.note}),
                provider_ref: None,
            };
            tx.execute(
                SETTLE,
                vec![
                    Arg::from(id),
                    Arg::from(0),
                    Arg::from(SettledBy::Review.as_str()),
                    Arg::json(&settlement.record(now)),
                    Arg::Text(None),
                    Arg::I32(None),
                    // A person settles the notification's ambiguity on every route it was sent.
                    Arg::Text(None),
                ],
            )
            .await?;
        }
        tx.execute(
            "INSERT INTO resolutions
                 (notification_id, seq, principal, outcome, then_action, note, created_at,
                  state_before, certainty_before, state_after, certainty_after, forced, key_renewed)
             VALUES ($1, (SELECT coalesce(max(seq), 0) + 1 FROM resolutions WHERE notification_id = $1),
                     $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            vec![
                Arg::from(id),
                Arg::from(&resolution.principal),
                Arg::from(resolution.outcome.as_str()),
                Arg::from(resolution.then.map(|t| t.as_str())),
                Arg::from(&resolution.note),
                Arg::from(now),
                Arg::from(resolution.before.0.as_str()),
                Arg::from(resolution.before.1.map(|c| c.as_str())),
                Arg::from(notification.state.as_str()),
                Arg::from(notification.certainty.map(|c| c.as_str())),
                Arg::from(Some(change.forced)),
                Arg::from(Some(renew)),
            ],
        )
        .await?;
        insert_event(
            &mut *tx,
            &OutboxEvent::for_notification(&notification, EventType::Resolved, now),
        )
        .await?;
        if resend {
            D::wake_others(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(notification)
    }

    async fn save_review_preview(&self, preview: &ReviewPreview) -> StoreResult<()> {
        self.save_preview(preview).await
    }

    async fn review_preview(&self, tenant: &str, token_hash: &[u8]) -> StoreResult<ReviewPreview> {
        self.find_preview(tenant, token_hash).await
    }

    async fn use_review_preview(&self, tenant: &str, token_hash: &[u8]) -> StoreResult<()> {
        self.take_preview(tenant, token_hash).await
    }

    async fn next_due(&self) -> StoreResult<Option<OffsetDateTime>> {
        let (due,): (Option<Timestamp>,) = self
            .0
            .read()
            .await?
            .fetch_one(
                "SELECT min(due_at) FROM notifications WHERE state IN ('queued', 'sending')",
                args![],
            )
            .await?;
        Ok(due.map(Timestamp::into_inner))
    }

    async fn queue_stats(&self, now: OffsetDateTime) -> StoreResult<QueueStats> {
        let mut conn = self.0.read().await?;
        let (queued, sending, oldest_due): (i64, i64, Option<Timestamp>) = conn
            .fetch_one(
                "SELECT
                     (SELECT count(*) FROM notifications WHERE state = 'queued'),
                     (SELECT count(*) FROM notifications WHERE state = 'sending'),
                     (SELECT min(due_at) FROM notifications WHERE state = 'queued' AND due_at <= $1)",
                args![now],
            )
            .await?;
        // The filter is the predicates of notifications_review, notifications_failed and
        // notifications_contradicted, so that each partial index answers its part; as
        // `state IN ('unknown', 'failed') OR …` PostgreSQL read the whole table instead (354 ms
        // with 1,000,000 stored, every 5 s).
        // A dead letter a person closed is read and left out: closed ones are few next to
        // what retention deletes.
        let by_reason: Vec<(String, String, i64, Option<Timestamp>)> = conn
            .fetch_all(
                concat!(
                    "SELECT route, CASE
                         WHEN contradiction IS NOT NULL AND NOT acknowledged THEN 'contradicted'
                         WHEN state = 'unknown' THEN 'unknown'
                         WHEN state = 'delivered' THEN 'duplicate_possible'
                         WHEN ",
                    refused_for_good!(),
                    " THEN 'rejected'
                         ELSE 'exhausted' END AS reason, count(*), min(finished_at)
                     FROM notifications
                     WHERE ((state = 'unknown'
                             OR (certainty = 'duplicate_possible' AND NOT acknowledged))
                            OR state = 'failed'
                            OR (contradiction IS NOT NULL AND NOT acknowledged))
                       AND NOT (state = 'failed' AND acknowledged)
                     GROUP BY 1, 2"
                ),
                args![],
            )
            .await?;
        let mut review: Vec<(Reason, i64)> = Reason::ALL.iter().map(|r| (*r, 0)).collect();
        let mut review_oldest: Option<OffsetDateTime> = None;
        let mut dead_letters = Vec::new();
        for (route, reason, count, oldest) in by_reason {
            let reason = Reason::parse(&reason).ok_or_else(|| corrupt("reason", &reason))?;
            if let Some(slot) = review.iter_mut().find(|(r, _)| *r == reason) {
                slot.1 += count;
            }
            if let Some(oldest) = oldest.filter(|_| Reason::WAITING.contains(&reason)) {
                let oldest = oldest.into_inner();
                review_oldest = Some(review_oldest.map_or(oldest, |o| o.min(oldest)));
            }
            if matches!(reason, Reason::Exhausted | Reason::Rejected) {
                dead_letters.push((route, reason, count));
            }
        }
        Ok(QueueStats {
            queued,
            sending,
            oldest_due: oldest_due.map(Timestamp::into_inner),
            review,
            review_oldest,
            dead_letters,
        })
    }

    async fn listen_for_work(
        &self,
        wake: Arc<tokio::sync::Notify>,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        self.0.listen_for_work(wake, shutdown).await;
    }

    #[tracing::instrument(skip_all, fields(sink, limit))]
    async fn claim_events(
        &self,
        sink: &str,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
    ) -> StoreResult<Vec<ClaimedEvent>> {
        let mut tx = self.0.begin().await?;
        let due: Vec<EventRow> = tx
            .fetch_all(D::RELAY.due, args![sink, now, i64::from(limit)])
            .await?;
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let ids = due.iter().map(|row| row.id).collect();
        let leased: Vec<(Uuid,)> = tx
            .fetch_all(
                D::RELAY.lease,
                vec![
                    Arg::Uuids(ids),
                    Arg::from(sink),
                    Arg::from(now + lease),
                    Arg::from(now),
                ],
            )
            .await?;
        tx.commit().await?;
        due.into_iter()
            .filter(|row| leased.iter().any(|(id,)| *id == row.id))
            .map(ClaimedEvent::try_from)
            .collect()
    }

    async fn mark_published(
        &self,
        sink: &str,
        events: &[Uuid],
        sinks: &[String],
        now: OffsetDateTime,
    ) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let ids = || Arg::Uuids(events.to_vec());
        let mut tx = self.0.begin().await?;
        let newly: Vec<(Uuid,)> = tx
            .fetch_all(
                D::RELAY.published,
                vec![ids(), Arg::from(sink), Arg::from(now)],
            )
            .await?;
        if !newly.is_empty() {
            tx.execute(
                D::RELAY.history,
                vec![
                    Arg::Uuids(newly.into_iter().map(|(id,)| id).collect()),
                    Arg::from(sink),
                    Arg::from(now),
                ],
            )
            .await?;
        }
        tx.execute(D::RELAY.release, vec![ids(), Arg::from(sink)])
            .await?;
        tx.execute(
            D::RELAY.done,
            vec![
                ids(),
                Arg::Texts(sinks.to_vec()),
                Arg::from(now),
                Arg::from(sinks.len() as i64),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn hold_back(
        &self,
        sink: &str,
        events: &[Uuid],
        until: OffsetDateTime,
        error: &str,
    ) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut tx = self.0.begin().await?;
        tx.execute(
            D::RELAY.hold,
            vec![
                Arg::Uuids(events.to_vec()),
                Arg::from(sink),
                Arg::from(until),
                Arg::from(error),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn outbox_backlog(&self, sink: &str) -> StoreResult<Backlog> {
        let (events, oldest): (i64, Option<Timestamp>) = self
            .0
            .read()
            .await?
            .fetch_one(D::RELAY.backlog, args![sink])
            .await?;
        Ok(Backlog {
            events,
            oldest: oldest.map(Timestamp::into_inner),
        })
    }

    async fn prune_outbox(&self, published_before: OffsetDateTime, limit: u32) -> StoreResult<u64> {
        let mut tx = self.0.begin().await?;
        let deleted = tx
            .execute(
                "DELETE FROM outbox WHERE seq IN (
                     SELECT seq FROM outbox
                     WHERE published_at IS NOT NULL AND published_at < $1
                     ORDER BY published_at LIMIT $2)",
                args![published_before, i64::from(limit)],
            )
            .await?;
        tx.commit().await?;
        Ok(deleted)
    }

    async fn forget_keys(&self, before: OffsetDateTime, limit: u32) -> StoreResult<u64> {
        let mut tx = self.0.begin().await?;
        let keys = tx
            .execute(
                "DELETE FROM idempotency_keys WHERE (tenant, key) IN (
                     SELECT tenant, key FROM idempotency_keys
                     WHERE notification_id < $1 LIMIT $2)",
                args![first_id_at(before), i64::from(limit)],
            )
            .await?;
        let events = tx
            .execute(
                "DELETE FROM inbox WHERE (tenant, source, event_id) IN (
                     SELECT tenant, source, event_id FROM inbox WHERE received_at < $1 LIMIT $2)",
                args![before, i64::from(limit)],
            )
            .await?;
        tx.commit().await?;
        Ok(keys + events)
    }

    async fn forget_finished(
        &self,
        before: OffsetDateTime,
        limit: u32,
        refusals: PermanentRefusals,
    ) -> StoreResult<u64> {
        let mut tx = self.0.begin().await?;
        let refusals_final = refusals == PermanentRefusals::Final;
        let ids: Vec<(Uuid,)> = tx
            .fetch_all(
                D::RETENTION.finished,
                args![
                    first_id_at(before),
                    before,
                    i64::from(limit),
                    Some(refusals_final)
                ],
            )
            .await?;
        if ids.is_empty() {
            return Ok(0);
        }
        let ids = || Arg::Uuids(ids.iter().map(|(id,)| *id).collect());
        for statement in D::RETENTION.children {
            tx.execute(statement, vec![ids()]).await?;
        }
        let deleted = tx.execute(D::RETENTION.notifications, vec![ids()]).await?;
        tx.commit().await?;
        Ok(deleted)
    }

    async fn receive_callbacks(&self, callbacks: &NewCallbacks) -> StoreResult<CallbacksTaken> {
        self.take_callbacks(callbacks).await
    }

    async fn suppressed(
        &self,
        tenant: &str,
        channel: Channel,
        recipient: &str,
    ) -> StoreResult<bool> {
        self.is_suppressed(tenant, channel, recipient).await
    }

    async fn suppressions(
        &self,
        tenant: &str,
        filter: &SuppressionFilter,
    ) -> StoreResult<Vec<Suppression>> {
        self.list_suppressions(tenant, filter).await
    }

    async fn suppress(&self, new: &NewSuppression) -> StoreResult<bool> {
        self.add_suppression(new).await
    }

    async fn lift_suppression(&self, lift: &LiftSuppression) -> StoreResult<Suppression> {
        self.lift(lift).await
    }

    #[tracing::instrument(skip_all, fields(source = %event.source, id = %event.id))]
    async fn receive_event(&self, event: &NewInboxEvent) -> StoreResult<InboxOutcome> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.try_receive_event(event).await {
                Ok(Some(outcome)) => return Ok(outcome),
                Ok(None) if tries < ACCEPT_TRIES => {}
                Ok(None) => {
                    return Err(StoreError::Unavailable(
                        Outage::Busy,
                        "the inbox record of this event keeps changing; retry".into(),
                    ));
                }
                Err(err) if tries < ACCEPT_TRIES && D::retryable(&err) => {
                    tracing::debug!(%err, "receiving collided with a concurrent one; retrying");
                }
                Err(err) => return Err(err),
            }
        }
    }
}

/// The attempt a settlement's vendor reference goes on: the earliest one it settles.
fn first_unsettled(claim: &Claim, decision: &Decision) -> Option<i32> {
    let own = decision.attempt.as_ref().map(|a| a.n);
    claim
        .attempts
        .iter()
        .filter(|a| {
            a.result == AttemptResult::Ambiguous
                && a.settled_by.is_none()
                && Some(a.n) != own
                && a.route == claim.notification.route
        })
        .map(|a| a.n)
        .min()
}

/// The event type of a final state.
fn event_for(state: State) -> Option<EventType> {
    match state {
        State::Delivered => Some(EventType::Delivered),
        State::Failed => Some(EventType::Failed),
        State::Unknown => Some(EventType::Unknown),
        State::Cancelled => Some(EventType::Cancelled),
        State::Queued | State::Sending => None,
    }
}

/// The columns a decision sets on the notification: state, certainty, due time, finish time.
fn next_columns(
    next: &Next,
    now: OffsetDateTime,
) -> (
    State,
    Option<Certainty>,
    OffsetDateTime,
    Option<OffsetDateTime>,
) {
    match next {
        Next::Finish { state, certainty } => (*state, Some(*certainty), now, Some(now)),
        Next::Retry { at } => (State::Queued, None, *at, None),
        Next::Reconcile { at } => (State::Sending, None, *at, None),
        Next::Failover { .. } => (State::Queued, None, now, None),
        Next::Hold {
            at, reconciling, ..
        } => {
            let state = if *reconciling {
                State::Sending
            } else {
                State::Queued
            };
            (state, None, *at, None)
        }
    }
}

/// [`Dialect::CLAIM_DUE`]'s arguments.
fn claim_due_args(now: OffsetDateTime, limit: u32, routes: &[RouteSlot]) -> Vec<Arg> {
    let takes: Vec<Value> = routes
        .iter()
        .map(|slot| serde_json::json!({"route": slot.route, "take": slot.take}))
        .collect();
    vec![
        Arg::from(now),
        Arg::from(i64::from(limit)),
        Arg::Texts(routes.iter().map(|slot| slot.route.clone()).collect()),
        Arg::json(&takes),
    ]
}

/// What a claim writes on an attempt it found `in_flight` past its lease.
fn lease_expired_evidence(now: OffsetDateTime) -> Value {
    serde_json::json!({"stage": "lease_expired", "detail": "the worker's lease ended before it recorded a result (crashed or stalled); the provider may or may not have the message",
           "at": now.format(&time::format_description::well_known::Rfc3339).ok()})
}

fn rows_into<R, T>(rows: Vec<R>) -> StoreResult<Vec<T>>
where
    T: TryFrom<R, Error = StoreError>,
{
    rows.into_iter().map(T::try_from).collect()
}

/// A text column holds a name this build does not know: the database was written by another
/// version, or by hand.
pub(super) fn corrupt(column: &str, value: &str) -> StoreError {
    StoreError::Internal(anyhow::anyhow!(
        "unexpected {column} `{value}` in the database"
    ))
}

#[derive(FromRow)]
pub(super) struct NotificationRow {
    id: Uuid,
    tenant: String,
    channel: String,
    recipient: String,
    route: String,
    delivery: String,
    content: Json<Content>,
    metadata: Json<Map<String, Value>>,
    state: String,
    certainty: Option<String>,
    acknowledged: bool,
    send_at: Option<Timestamp>,
    due_at: Timestamp,
    created_at: Timestamp,
    updated_at: Timestamp,
    key_epoch: i32,
    failovers: i32,
    late_evidence: bool,
    contradiction: Option<String>,
    contradicted_at: Option<Timestamp>,
}

impl TryFrom<NotificationRow> for Notification {
    type Error = StoreError;

    fn try_from(row: NotificationRow) -> Result<Self, StoreError> {
        let state = State::parse(&row.state).ok_or_else(|| corrupt("state", &row.state))?;
        let certainty = match row.certainty.as_deref() {
            None => None,
            Some(c) => Some(Certainty::parse(c).ok_or_else(|| corrupt("certainty", c))?),
        };
        Ok(Notification {
            id: NotificationId::from_uuid(row.id),
            tenant: row.tenant,
            channel: Channel::parse(&row.channel)
                .ok_or_else(|| corrupt("channel", &row.channel))?,
            to: row.recipient,
            route: row.route,
            delivery: Delivery::parse(&row.delivery)
                .ok_or_else(|| corrupt("delivery", &row.delivery))?,
            state,
            certainty,
            acknowledged: row.acknowledged,
            content: row.content.0,
            metadata: row.metadata.0,
            send_at: row.send_at.map(Timestamp::into_inner),
            next_attempt_at: (state == State::Queued).then(|| row.due_at.into_inner()),
            created_at: row.created_at.into_inner(),
            updated_at: row.updated_at.into_inner(),
            key_epoch: row.key_epoch,
            failovers: row.failovers,
            late_evidence: row.late_evidence,
            contradiction: match (row.contradiction, row.contradicted_at) {
                (Some(why), Some(at)) => Some(Contradiction {
                    why,
                    at: at.into_inner(),
                }),
                _ => None,
            },
        })
    }
}

/// A notification row as a claim returns it, with the columns only dispatch needs.
#[derive(FromRow)]
pub(super) struct ClaimedRow {
    generation: i64,
    attempt_count: i32,
    provider_request: Option<Json<Request>>,
    budget_from: i32,
    budget_since: Option<Timestamp>,
    #[sqlx(flatten)]
    pub(super) notification: NotificationRow,
}

#[derive(FromRow)]
pub(super) struct AttemptRow {
    n: i32,
    route: String,
    provider_idempotency_key: String,
    started_at: Timestamp,
    send_deadline: Timestamp,
    finished_at: Option<Timestamp>,
    result: String,
    permanent: Option<bool>,
    provider_ref: Option<String>,
    settled_by: Option<String>,
    evidence: Json<Value>,
}

impl TryFrom<AttemptRow> for Attempt {
    type Error = StoreError;

    fn try_from(row: AttemptRow) -> Result<Self, StoreError> {
        let settled_by = match row.settled_by.as_deref() {
            None => None,
            Some(s) => Some(SettledBy::parse(s).ok_or_else(|| corrupt("settled_by", s))?),
        };
        Ok(Attempt {
            n: row.n,
            route: row.route,
            provider_idempotency_key: row.provider_idempotency_key,
            started_at: row.started_at.into_inner(),
            send_deadline: row.send_deadline.into_inner(),
            finished_at: row.finished_at.map(Timestamp::into_inner),
            result: AttemptResult::parse(&row.result)
                .ok_or_else(|| corrupt("result", &row.result))?,
            permanent: row.permanent,
            provider_ref: row.provider_ref,
            settled_by,
            evidence: row.evidence.0,
        })
    }
}

/// An attempt with the notification it belongs to, as a claim of many reads them.
#[derive(FromRow)]
pub(super) struct AttemptWithOwner {
    notification_id: Uuid,
    #[sqlx(flatten)]
    pub(super) attempt: AttemptRow,
}

/// An attempt of a look-alike, with its notification's id and age.
#[derive(FromRow)]
struct SiblingRow {
    notification_id: Uuid,
    notification_created_at: Timestamp,
    #[sqlx(flatten)]
    attempt: AttemptRow,
}

impl TryFrom<SiblingRow> for Sibling {
    type Error = StoreError;

    fn try_from(row: SiblingRow) -> Result<Self, StoreError> {
        Ok(Sibling {
            notification: NotificationId::from_uuid(row.notification_id),
            created_at: row.notification_created_at.into_inner(),
            attempt: row.attempt.try_into()?,
        })
    }
}

#[derive(FromRow)]
struct ResolutionRow {
    principal: String,
    outcome: String,
    then_action: Option<String>,
    note: String,
    created_at: Timestamp,
    state_before: Option<String>,
    certainty_before: Option<String>,
    state_after: Option<String>,
    certainty_after: Option<String>,
    forced: bool,
    key_renewed: bool,
}

/// A resolution with the notification it belongs to.
#[derive(FromRow)]
pub(super) struct ResolutionWithOwner {
    notification_id: Uuid,
    #[sqlx(flatten)]
    resolution: ResolutionRow,
}

impl TryFrom<ResolutionRow> for Resolution {
    type Error = StoreError;

    fn try_from(row: ResolutionRow) -> Result<Self, StoreError> {
        let state = |s: Option<String>| match s {
            None => Ok(None),
            Some(s) => State::parse(&s)
                .map(Some)
                .ok_or_else(|| corrupt("state", &s)),
        };
        let certainty = |c: Option<String>| match c {
            None => Ok(None),
            Some(c) => Certainty::parse(&c)
                .map(Some)
                .ok_or_else(|| corrupt("certainty", &c)),
        };
        Ok(Resolution {
            principal: row.principal,
            outcome: row.outcome,
            then: row.then_action,
            note: row.note,
            at: row.created_at.into_inner(),
            state_before: state(row.state_before)?,
            certainty_before: certainty(row.certainty_before)?,
            state_after: state(row.state_after)?,
            certainty_after: certainty(row.certainty_after)?,
            forced: row.forced,
            key_renewed: row.key_renewed,
        })
    }
}

/// An outbox row as a relay claim reads it.
#[derive(FromRow)]
pub(super) struct EventRow {
    id: Uuid,
    tenant: String,
    notification_id: Uuid,
    #[sqlx(rename = "type")]
    event_type: String,
    data: Json<Value>,
    created_at: Timestamp,
    failures: i32,
}

impl TryFrom<EventRow> for ClaimedEvent {
    type Error = StoreError;

    fn try_from(row: EventRow) -> Result<Self, StoreError> {
        Ok(ClaimedEvent {
            event: OutboxEvent {
                id: row.id,
                tenant: row.tenant,
                notification_id: NotificationId::from_uuid(row.notification_id),
                event_type: EventType::parse(&row.event_type)
                    .ok_or_else(|| corrupt("event type", &row.event_type))?,
                data: row.data.0,
                created_at: row.created_at.into_inner(),
            },
            failures: row.failures,
        })
    }
}

#[derive(FromRow)]
struct IdempotencyRow {
    request_hash: Vec<u8>,
    response_status: i32,
    response_body: Json<Value>,
}

impl IdempotencyRow {
    /// A key found already taken: the same request is a replay, another one a reuse.
    fn outcome_for(self, request_hash: &[u8]) -> AcceptOutcome {
        if self.request_hash == request_hash {
            AcceptOutcome::Replayed {
                status: u16::try_from(self.response_status).unwrap_or(500),
                body: self.response_body.0,
            }
        } else {
            AcceptOutcome::KeyReused
        }
    }
}
