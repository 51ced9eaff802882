//! The seam between the store's transactions and its two backends: [`Arg`], a value bound to
//! a statement; [`Conn`], which runs one statement with its arguments on a connection; and
//! [`Dialect`], which holds what truly differs — how a write transaction begins, the claim's
//! statements (`FOR UPDATE SKIP LOCKED` and arrays on PostgreSQL, one writer and `json_each` on
//! SQLite), the list's test of metadata, waking other processes, and listening — and the
//! [`SqlStore`] that sits on them. The text that both dialects' statement tables share is in
//! [`super::rows`], as templates each dialect fills in where its SQL differs.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::Store;
use serde::Serialize;
use serde_json::value::RawValue;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Database, FromRow, Transaction};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{Outage, StoreError, StoreResult, Timestamp};
use crate::domain::NotificationId;

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

/// Counts one statement sent (`herald_store_statements_total`).
pub(super) fn counted() {
    metrics::counter!("herald_store_statements_total").increment(1);
}

/// Implements [`Conn`] for a backend's connection type: binds each [`Arg`] (lists through
/// `$list`, the backend's own list encoding) and runs the statement.
macro_rules! conn {
    ($connection:ty, $arguments:ty, |$v:ident| $list:expr) => {
        fn arguments(
            args: Vec<$crate::store::seam::Arg>,
        ) -> $crate::store::StoreResult<$arguments> {
            use sqlx::Arguments;
            use $crate::store::seam::Arg;
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
        impl $crate::store::seam::Conn for $connection {
            async fn execute(
                &mut self,
                sql: &'static str,
                args: Vec<$crate::store::seam::Arg>,
            ) -> $crate::store::StoreResult<u64> {
                $crate::store::seam::counted();
                let done = sqlx::query_with(sql, arguments(args)?)
                    .execute(self)
                    .await?;
                Ok(done.rows_affected())
            }

            async fn fetch_all<R: $crate::store::seam::Row>(
                &mut self,
                sql: &'static str,
                args: Vec<$crate::store::seam::Arg>,
            ) -> $crate::store::StoreResult<Vec<R>> {
                $crate::store::seam::counted();
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

    /// `$1` now, `$2` limit, `$3` routes, `$4` a JSON array of `{route, take}` → `id, state`
    /// and the [`ClaimedRow`] columns of due notifications (as locked, before their lease), tenants taking turns (each one's oldest due first) and no route
    /// given more than its `take`, each locked against other claimers until the
    /// transaction ends. It reads at most `$2` rows of each tenant with work (through
    /// [`due_tenants!`]), whatever the backlog: sorting every due row made each claim cost as
    /// much as the whole backlog (47 ms at 20,000 queued on SQLite, against 1 ms now).
    const CLAIM_DUE: &'static str;
    /// `$1` now, `$2` limit, `$3` routes held back (route names) → `id, state` and the
    /// [`ClaimedRow`] columns of queued notifications on those routes whose expiry has passed, oldest expiry first, locked
    /// against other claimers: a held route's expired work is ended without waiting for it.
    const CLAIM_EXPIRED: &'static str;
    /// `$1` now, `$2` lease end, `$3` ids, `$4` the ids that were queued, `$5` a JSON array of
    /// `{id, request}`: the provider requests fixed now, each set where none was → the leased
    /// [`ClaimedRow`]s. (Fixed in the lease's own update: a separate one wrote every first
    /// send's row twice.)
    const CLAIM_TAKE: &'static str;
    /// `$1` ids, `$2` now, `$3` evidence: their `in_flight` attempts become `ambiguous`.
    const CLAIM_EXPIRE: &'static str;
    /// `$1` a JSON array of `{id, n, generation, route, key, send_deadline}`, `$2` now: an
    /// `in_flight` attempt each, returned as [`AttemptWithOwner`]s. (One statement for a whole
    /// claim, not two per notification: a claim of 64 made 128 round trips while it held its
    /// rows.)
    const CLAIM_START_ATTEMPTS: &'static str;
    /// `$1` a JSON array of `{id, tenant, channel, recipient, category}` → the ids (as text) of
    /// those whose recipient the tenant has suppressed on the channel, for every category or
    /// for theirs.
    const CLAIM_SUPPRESSED: &'static str;
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
    /// A cancellation's candidates: written once in [`cancel_statements!`].
    const CANCEL: CancelStatements;

    /// Begins a write transaction.
    async fn begin(&self) -> StoreResult<Transaction<'static, Self::Db>>;
    /// A connection for reads outside any transaction.
    async fn read(&self) -> StoreResult<PoolConnection<Self::Db>>;
    /// A read-only transaction whose statements all see one snapshot of the database.
    async fn snapshot(&self) -> StoreResult<Transaction<'static, Self::Db>>;
    /// Tells other herald processes, once `tx` commits, that work is due.
    async fn wake_others(tx: &mut <Self::Db as Database>::Connection) -> StoreResult<()>;
    /// See [`Claims::listen_for_work`](super::Claims::listen_for_work).
    async fn listen_for_work(&self, wake: Arc<tokio::sync::Notify>, shutdown: CancellationToken);
    /// See [`Store::close`].
    async fn close(&self);
    /// Whether a failed transaction collided with another and may simply run again.
    fn retryable(err: &StoreError) -> bool;
}

/// Prepared statements each connection keeps: herald has some 150 statement texts (each
/// multi-row one, see [`super::many`], in eight sizes); sqlx's default of 100 would evict and
/// prepare again the ones a busy dispatcher uses.
pub(super) const STATEMENT_CACHE: usize = 256;

/// How often an enqueue that collided with a concurrent one runs again.
pub(super) const ACCEPT_TRIES: usize = 3;

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

/// A cancellation's look at what it may cancel, by what it names; see [`cancel_statements!`].
/// Each: `$1` tenant, `$2` the id or key → `(id, attempt_count)` of those still `queued`,
/// locked against a claim (and against later evidence) until the cancellation commits.
pub(super) struct CancelStatements {
    pub by_id: &'static str,
    pub by_cancellation_key: &'static str,
    pub by_idempotency_key: &'static str,
}

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
    pub children: [&'static str; 7],
    /// `$1` ids: the notifications themselves.
    pub notifications: &'static str,
}

/// The migrations of one backend, embedded at build time (no `migrate!` macro: it would need
/// sqlx's compile-time machinery for two databases).
pub(super) fn migrator(sources: &[(i64, &'static str, &'static str)]) -> sqlx::migrate::Migrator {
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

/// The store, above a dialect.
pub(super) struct SqlStore<D>(
    pub(super) D,
    pub(super) LastOutage,
    /// Raised by every commit that wrote outbox events (see [`Tx`]).
    pub(super) EventsWritten,
);

impl<D: Dialect> SqlStore<D> {
    pub(super) fn new(dialect: D) -> Self {
        Self(dialect, LastOutage::default(), EventsWritten::default())
    }

    /// Begins a write transaction whose commit says so when it wrote events.
    pub(super) async fn begin(&self) -> StoreResult<Tx<D>> {
        Ok(Tx {
            tx: self.0.begin().await?,
            wrote_events: false,
            written: self.2.clone(),
        })
    }
}

/// This process's signal that outbox events were committed: the relay's wake-up, raised by the
/// store itself so that no caller has to remember (a callback's receipt, a cancellation, a
/// person's resolution, a pause all write events). Other processes' relays hear of them at
/// their next poll.
#[derive(Clone)]
pub(super) struct EventsWritten(Arc<tokio::sync::watch::Sender<()>>);

impl Default for EventsWritten {
    fn default() -> Self {
        EventsWritten(Arc::new(tokio::sync::watch::channel(()).0))
    }
}

impl EventsWritten {
    pub(super) fn subscribe(&self) -> tokio::sync::watch::Receiver<()> {
        self.0.subscribe()
    }
}

/// A write transaction that knows whether it wrote outbox events ([`super::rows::insert_events`]
/// marks it), so that its commit, and only a commit, raises [`EventsWritten`]: a wake-up
/// before the commit could let the relay look before the events are there.
pub(super) struct Tx<D: Dialect> {
    tx: Transaction<'static, D::Db>,
    wrote_events: bool,
    written: EventsWritten,
}

impl<D: Dialect> Tx<D> {
    pub(super) fn wrote_events(&mut self) {
        self.wrote_events = true;
    }

    pub(super) async fn rollback(self) -> StoreResult<()> {
        Ok(self.tx.rollback().await?)
    }

    pub(super) async fn commit(self) -> StoreResult<()> {
        self.tx.commit().await?;
        if self.wrote_events {
            self.written.0.send_replace(());
        }
        Ok(())
    }
}

/// A transaction reads as its connection, as sqlx's own does.
impl<D: Dialect> std::ops::Deref for Tx<D> {
    type Target = <D::Db as Database>::Connection;
    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl<D: Dialect> std::ops::DerefMut for Tx<D> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
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
    pub(super) fn note<T>(&self, result: StoreResult<T>) -> StoreResult<T> {
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

    pub(super) fn recent(&self) -> Option<StoreError> {
        let last = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        last.as_ref()
            .filter(|(_, _, at)| at.elapsed() < OUTAGE_REMEMBERED)
            .map(|(outage, cause, _)| StoreError::Unavailable(*outage, cause.clone()))
    }
}

#[async_trait]
impl<D: Dialect> Store for SqlStore<D> {
    async fn close(&self) {
        self.0.close().await;
    }

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
        let mut tx = self.begin().await?;
        tx.execute(
            "UPDATE readiness SET checked_at = $1 WHERE id = 1",
            args![now],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
