//! The SQLite store: the embedded default for one herald process. WAL lets readers run beside
//! the one writer; all writes go through a pool of exactly one connection, so they queue in
//! the pool (in order) instead of spinning in SQLite's busy handler. `synchronous = FULL`: an
//! acknowledged notification survives a power cut, not only a crash.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::types::Json;
use sqlx::{Sqlite, SqlitePool, Transaction};
use time::OffsetDateTime;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{
    AcceptOutcome, AttemptRow, Claim, ClaimMode, ClaimedRow, EventType, IdempotencyRow,
    LOOK_ALIKES, ListFilter, NewAccept, NotificationDetail, NotificationRow, OutboxEvent, Prepare,
    QueueStats, Recorded, ResolutionRow, SiblingRow, Store, StoreError, StoreResult, Timestamp,
    event_for, findings_evidence, first_unsettled, late_evidence, lease_expired_evidence,
    next_columns, rows_into, settlement_evidence,
};
use crate::domain::{Attempt, Decision, Notification, NotificationId, Sibling};

const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "initial",
        include_str!("../../migrations/sqlite/0001_initial.sql"),
    ),
    (
        2,
        "provider_requests",
        include_str!("../../migrations/sqlite/0002_provider_requests.sql"),
    ),
];

const READERS: u32 = 4;

/// Settles every unsettled ambiguous attempt but this step's own; the vendor reference that
/// settled them, if any, goes on the earliest.
const SETTLE: &str = "UPDATE attempts
     SET settled_by = $3, evidence = json_patch(evidence, $4),
         provider_ref = CASE WHEN n = $6 THEN coalesce($5, provider_ref) ELSE provider_ref END
     WHERE notification_id = $1 AND result = 'ambiguous' AND settled_by IS NULL AND n <> $2";

const ATTEMPTS_OF: &str =
    "SELECT n, route, provider_idempotency_key, started_at, finished_at, result,
        permanent, provider_ref, settled_by, evidence
     FROM attempts WHERE notification_id = $1 ORDER BY n";

pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    /// Held for the life of the process: a second herald on the same file refuses to start,
    /// because two dispatchers without `SKIP LOCKED` would claim the same rows.
    _lock: Option<std::fs::File>,
}

macro_rules! notification_columns {
    () => {
        "id, tenant, channel, recipient, route, delivery, content, metadata, state, certainty, \
         acknowledged, send_at, due_at, created_at, updated_at"
    };
}

impl SqliteStore {
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let lock = Self::lock(options.get_filename())?;
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.clone())
            .await?;
        super::migrator(MIGRATIONS).run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(READERS)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.read_only(true))
            .await?;
        Ok(SqliteStore {
            writer,
            reader,
            _lock: lock,
        })
    }

    fn lock(database: &std::path::Path) -> anyhow::Result<Option<std::fs::File>> {
        if database.as_os_str() == ":memory:" {
            return Ok(None);
        }
        let mut path = database.as_os_str().to_owned();
        path.push(".lock");
        let path = std::path::PathBuf::from(path);
        let file = std::fs::File::create(&path)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
                "another herald process is using {}: SQLite serves one process; use PostgreSQL to run several",
                database.display()
            ),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(anyhow::anyhow!("cannot lock {}: {e}", path.display()))
            }
        }
    }

    /// `BEGIN IMMEDIATE` takes the write lock up front: a deferred transaction that reads first
    /// and writes later could find the lock taken by another process and fail mid-way.
    async fn begin_write(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }

    async fn insert_event(
        tx: &mut Transaction<'_, Sqlite>,
        event: &OutboxEvent,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO outbox (id, tenant, notification_id, type, data, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(event.id)
        .bind(&event.tenant)
        .bind(event.notification_id.as_uuid())
        .bind(event.event_type.as_str())
        .bind(Json(&event.data))
        .bind(Timestamp::from(event.created_at))
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    async fn find(&self, tenant: &str, id: NotificationId) -> StoreResult<Notification> {
        let row: Option<NotificationRow> = sqlx::query_as(concat!(
            "SELECT ",
            notification_columns!(),
            " FROM notifications WHERE tenant = $1 AND id = $2"
        ))
        .bind(tenant)
        .bind(id.as_uuid())
        .fetch_optional(&self.reader)
        .await?;
        row.ok_or(StoreError::NotFound)?.try_into()
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn check_ready(&self) -> StoreResult<()> {
        let applied: Option<i64> =
            sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
                .fetch_one(&self.reader)
                .await?;
        let expected = MIGRATIONS.last().map(|m| m.0);
        if applied != expected {
            return Err(StoreError::Unavailable(format!(
                "migrations are at {applied:?}, this build expects {expected:?}"
            )));
        }
        Ok(())
    }

    #[tracing::instrument(skip_all, fields(items = items.len()))]
    async fn accept(&self, items: &[NewAccept]) -> StoreResult<Vec<AcceptOutcome>> {
        // The single writer serialises transactions, so a key taken by another request is
        // always committed (and visible) by the time this one looks.
        let mut tx = self.begin_write().await?;
        let mut outcomes = Vec::with_capacity(items.len());
        for item in items {
            let n = &item.notification;
            let claimed = sqlx::query(
                "INSERT INTO idempotency_keys
                     (tenant, key, request_hash, response_status, response_body, notification_id, created_at)
                 VALUES ($1, $2, $3, 202, $4, $5, $6)
                 ON CONFLICT (tenant, key) DO NOTHING",
            )
            .bind(&n.tenant)
            .bind(item.key.as_str())
            .bind(&item.request_hash)
            .bind(Json(&item.response))
            .bind(n.id.as_uuid())
            .bind(Timestamp::from(n.created_at))
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if !claimed {
                let existing: Option<IdempotencyRow> = sqlx::query_as(
                    "SELECT request_hash, response_status, response_body
                     FROM idempotency_keys WHERE tenant = $1 AND key = $2",
                )
                .bind(&n.tenant)
                .bind(item.key.as_str())
                .fetch_optional(&mut *tx)
                .await?;
                outcomes.push(existing.map_or(AcceptOutcome::InProgress, |row| {
                    row.outcome_for(&item.request_hash)
                }));
                continue;
            }
            sqlx::query(
                "INSERT INTO notifications
                     (id, tenant, channel, recipient, route, delivery, content, metadata, state,
                      send_at, due_at, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)",
            )
            .bind(n.id.as_uuid())
            .bind(&n.tenant)
            .bind(n.channel.as_str())
            .bind(&n.to)
            .bind(&n.route)
            .bind(n.delivery.as_str())
            .bind(Json(&n.content))
            .bind(Json(&n.metadata))
            .bind(n.state.as_str())
            .bind(n.send_at.map(Timestamp::from))
            .bind(Timestamp::from(n.next_attempt_at.unwrap_or(n.created_at)))
            .bind(Timestamp::from(n.created_at))
            .execute(&mut *tx)
            .await?;
            Self::insert_event(
                &mut tx,
                &OutboxEvent::for_notification(n, EventType::Accepted, n.created_at),
            )
            .await?;
            outcomes.push(AcceptOutcome::Created);
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    async fn notification(
        &self,
        tenant: &str,
        id: NotificationId,
    ) -> StoreResult<NotificationDetail> {
        let notification = self.find(tenant, id).await?;
        let attempts: Vec<AttemptRow> = sqlx::query_as(ATTEMPTS_OF)
            .bind(id.as_uuid())
            .fetch_all(&self.reader)
            .await?;
        let resolutions: Vec<ResolutionRow> = sqlx::query_as(
            "SELECT principal, outcome, then_action, note, created_at
             FROM resolutions WHERE notification_id = $1 ORDER BY seq",
        )
        .bind(id.as_uuid())
        .fetch_all(&self.reader)
        .await?;
        Ok(NotificationDetail {
            notification,
            attempts: rows_into(attempts)?,
            resolutions: resolutions.into_iter().map(Into::into).collect(),
        })
    }

    async fn list(&self, tenant: &str, filter: &ListFilter) -> StoreResult<Vec<Notification>> {
        let rows: Vec<NotificationRow> = sqlx::query_as(concat!(
            "SELECT ",
            notification_columns!(),
            " FROM notifications
             WHERE tenant = $1
               AND ($2 IS NULL OR state = $2)
               AND ($3 IS NULL OR certainty = $3)
               AND ($4 IS NULL OR id < $4)
             ORDER BY id DESC LIMIT $5"
        ))
        .bind(tenant)
        .bind(filter.state.map(|s| s.as_str()))
        .bind(filter.certainty.map(|c| c.as_str()))
        .bind(filter.before.map(|id| id.as_uuid()))
        .bind(i64::from(filter.limit))
        .fetch_all(&self.reader)
        .await?;
        rows_into(rows)
    }

    async fn cancel(
        &self,
        tenant: &str,
        id: NotificationId,
        now: OffsetDateTime,
    ) -> StoreResult<Notification> {
        let mut tx = self.begin_write().await?;
        let row: Option<NotificationRow> = sqlx::query_as(concat!(
            "UPDATE notifications
             SET state = 'cancelled', certainty = 'known', updated_at = $3, finished_at = $3
             WHERE tenant = $1 AND id = $2 AND state = 'queued'
             RETURNING ",
            notification_columns!()
        ))
        .bind(tenant)
        .bind(id.as_uuid())
        .bind(Timestamp::from(now))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            drop(tx);
            let current = self.find(tenant, id).await?;
            return Err(StoreError::Conflict(format!(
                "only a queued notification can be cancelled; this one is {}",
                current.state
            )));
        };
        let notification: Notification = row.try_into()?;
        Self::insert_event(
            &mut tx,
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
        routes: &[String],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
        // The write lock makes this transaction the only claimer (one process, one writer).
        let mut tx = self.begin_write().await?;
        let due: Vec<(Uuid, String)> = sqlx::query_as(
            "SELECT id, state FROM notifications
             WHERE state IN ('queued', 'sending') AND due_at <= $1
               AND route IN (SELECT value FROM json_each($3))
             ORDER BY due_at LIMIT $2",
        )
        .bind(Timestamp::from(now))
        .bind(i64::from(limit))
        .bind(Json(routes))
        .fetch_all(&mut *tx)
        .await?;
        let mut claims = Vec::with_capacity(due.len());
        for (id, state) in due {
            let was_queued = state == "queued";
            let row: ClaimedRow = sqlx::query_as(concat!(
                "UPDATE notifications
                 SET state = 'sending', generation = generation + 1, due_at = $3, updated_at = $2,
                     attempt_count = attempt_count + $4
                 WHERE id = $1
                 RETURNING generation, attempt_count, provider_request, ",
                notification_columns!()
            ))
            .bind(id)
            .bind(Timestamp::from(now))
            .bind(Timestamp::from(now + lease))
            .bind(i32::from(was_queued))
            .fetch_one(&mut *tx)
            .await?;
            let notification: Notification = row.notification.try_into()?;
            let mut request = row.provider_request.map(|r| r.0);
            if request.is_none() && was_queued {
                request = prepare(&notification);
                if let Some(prepared) = &request {
                    sqlx::query("UPDATE notifications SET provider_request = $2 WHERE id = $1")
                        .bind(id)
                        .bind(Json(prepared))
                        .execute(&mut *tx)
                        .await?;
                }
            }
            let mode = if was_queued {
                sqlx::query(
                    "INSERT INTO attempts (notification_id, n, generation, route,
                         provider_idempotency_key, started_at, result, evidence)
                     VALUES ($1, $2, $3, $4, $5, $6, 'in_flight', '{}')",
                )
                .bind(id)
                .bind(row.attempt_count)
                .bind(row.generation)
                .bind(&notification.route)
                .bind(notification.provider_key())
                .bind(Timestamp::from(now))
                .execute(&mut *tx)
                .await?;
                ClaimMode::Send {
                    n: row.attempt_count,
                }
            } else {
                sqlx::query(
                    "UPDATE attempts SET result = 'ambiguous', finished_at = $2,
                         evidence = json_patch(evidence, $3)
                     WHERE notification_id = $1 AND result = 'in_flight'",
                )
                .bind(id)
                .bind(Timestamp::from(now))
                .bind(Json(lease_expired_evidence(now)))
                .execute(&mut *tx)
                .await?;
                ClaimMode::Reconcile
            };
            let attempts: Vec<AttemptRow> = sqlx::query_as(ATTEMPTS_OF)
                .bind(id)
                .fetch_all(&mut *tx)
                .await?;
            claims.push(Claim {
                notification,
                generation: row.generation,
                mode,
                attempts: rows_into(attempts)?,
                request,
            });
        }
        tx.commit().await?;
        Ok(claims)
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
        let rows: Vec<SiblingRow> = sqlx::query_as(LOOK_ALIKES)
            .bind(&n.route)
            .bind(&n.to)
            .bind(n.id.as_uuid())
            .bind(Timestamp::from(created_since))
            .bind(Json(request))
            .fetch_all(&self.reader)
            .await?;
        rows_into(rows)
    }

    async fn start_attempt(
        &self,
        claim: &Claim,
        now: OffsetDateTime,
        lease: Duration,
    ) -> StoreResult<Option<Attempt>> {
        let mut tx = self.begin_write().await?;
        let n: Option<i32> = sqlx::query_scalar(
            "UPDATE notifications SET attempt_count = attempt_count + 1, due_at = $3, updated_at = $4
             WHERE id = $1 AND generation = $2 AND state = 'sending'
             RETURNING attempt_count",
        )
        .bind(claim.notification.id.as_uuid())
        .bind(claim.generation)
        .bind(Timestamp::from(now + lease))
        .bind(Timestamp::from(now))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(n) = n else { return Ok(None) };
        let row: AttemptRow = sqlx::query_as(
            "INSERT INTO attempts (notification_id, n, generation, route, provider_idempotency_key,
                                   started_at, result, evidence)
             VALUES ($1, $2, $3, $4, $5, $6, 'in_flight', '{}')
             RETURNING n, route, provider_idempotency_key, started_at, finished_at, result,
                       permanent, provider_ref, settled_by, evidence",
        )
        .bind(claim.notification.id.as_uuid())
        .bind(n)
        .bind(claim.generation)
        .bind(&claim.notification.route)
        .bind(claim.notification.provider_key())
        .bind(Timestamp::from(now))
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(row.try_into()?))
    }

    #[tracing::instrument(skip_all, fields(notification_id = %claim.notification.id))]
    async fn record(
        &self,
        claim: &Claim,
        decision: &Decision,
        now: OffsetDateTime,
    ) -> StoreResult<Recorded> {
        let id = claim.notification.id.as_uuid();
        let (state, certainty, due_at, finished_at) = next_columns(&decision.next, now);
        let mut tx = self.begin_write().await?;
        let row: Option<NotificationRow> = sqlx::query_as(concat!(
            "UPDATE notifications
             SET state = $3, certainty = $4, due_at = $5, finished_at = $6, updated_at = $7
             WHERE id = $1 AND generation = $2 AND state = 'sending'
             RETURNING ",
            notification_columns!()
        ))
        .bind(id)
        .bind(claim.generation)
        .bind(state.as_str())
        .bind(certainty.map(|c| c.as_str()))
        .bind(Timestamp::from(due_at))
        .bind(finished_at.map(Timestamp::from))
        .bind(Timestamp::from(now))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            if let Some((n, late)) = late_evidence(decision) {
                sqlx::query(
                    "UPDATE attempts SET evidence = json_patch(evidence, $3)
                     WHERE notification_id = $1 AND n = $2",
                )
                .bind(id)
                .bind(n)
                .bind(Json(late))
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            return Ok(Recorded::Fenced);
        };
        let notification: Notification = row.try_into()?;
        if let Some(a) = &decision.attempt {
            sqlx::query(
                "UPDATE attempts
                 SET result = $3, permanent = $4, provider_ref = $5, evidence = $6, finished_at = $7
                 WHERE notification_id = $1 AND n = $2",
            )
            .bind(id)
            .bind(a.n)
            .bind(a.result.as_str())
            .bind(a.permanent)
            .bind(&a.provider_ref)
            .bind(Json(&a.evidence))
            .bind(Timestamp::from(now))
            .execute(&mut *tx)
            .await?;
        }
        if let (Some(settle), Some(evidence)) =
            (&decision.settle, settlement_evidence(decision, now))
        {
            sqlx::query(SETTLE)
                .bind(id)
                .bind(decision.attempt.as_ref().map_or(0, |a| a.n))
                .bind(settle.by.as_str())
                .bind(Json(evidence))
                .bind(&settle.provider_ref)
                .bind(first_unsettled(claim, decision))
                .execute(&mut *tx)
                .await?;
        }
        if let Some(findings) = findings_evidence(decision, now) {
            sqlx::query(
                "UPDATE attempts SET evidence = json_patch(evidence, $2)
                 WHERE notification_id = $1 AND result = 'ambiguous' AND settled_by IS NULL",
            )
            .bind(id)
            .bind(Json(findings))
            .execute(&mut *tx)
            .await?;
        }
        if let Some(event_type) = event_for(notification.state) {
            Self::insert_event(
                &mut tx,
                &OutboxEvent::for_notification(&notification, event_type, now),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(Recorded::Applied(Box::new(notification)))
    }

    async fn next_due(&self) -> StoreResult<Option<OffsetDateTime>> {
        let due: Option<Timestamp> = sqlx::query_scalar(
            "SELECT min(due_at) FROM notifications WHERE state IN ('queued', 'sending')",
        )
        .fetch_one(&self.reader)
        .await?;
        Ok(due.map(Timestamp::into_inner))
    }

    async fn queue_stats(&self, now: OffsetDateTime) -> StoreResult<QueueStats> {
        let (queued, sending, oldest_due, review_open): (i64, i64, Option<Timestamp>, i64) = sqlx::query_as(
            "SELECT
                 (SELECT count(*) FROM notifications WHERE state = 'queued'),
                 (SELECT count(*) FROM notifications WHERE state = 'sending'),
                 (SELECT min(due_at) FROM notifications WHERE state = 'queued' AND due_at <= $1),
                 (SELECT count(*) FROM notifications
                  WHERE state = 'unknown' OR (certainty = 'duplicate_possible' AND NOT acknowledged))",
        )
        .bind(Timestamp::from(now))
        .fetch_one(&self.reader)
        .await?;
        Ok(QueueStats {
            queued,
            sending,
            oldest_due: oldest_due.map(Timestamp::into_inner),
            review_open,
        })
    }

    /// One process writes an SQLite database, and it wakes its own dispatcher.
    async fn listen_for_work(&self, _wake: Arc<tokio::sync::Notify>, _shutdown: CancellationToken) {
    }
}
