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

use super::{
    AcceptOutcome, AttemptRow, EventType, IdempotencyRow, ListFilter, NewAccept,
    NotificationDetail, NotificationRow, OutboxEvent, ResolutionRow, Store, StoreError,
    StoreResult, Timestamp, rows_into,
};
use crate::domain::{Notification, NotificationId};

const MIGRATIONS: &[(i64, &str, &str)] = &[(
    1,
    "initial",
    include_str!("../../migrations/sqlite/0001_initial.sql"),
)];

const READERS: u32 = 4;

pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
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
        Ok(SqliteStore { writer, reader })
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
    async fn accept(&self, items: Vec<NewAccept>) -> StoreResult<Vec<AcceptOutcome>> {
        // The single writer serialises transactions, so a key taken by another request is
        // always committed (and visible) by the time this one looks.
        let mut tx = self.begin_write().await?;
        let mut outcomes = Vec::with_capacity(items.len());
        for item in &items {
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
        let attempts: Vec<AttemptRow> = sqlx::query_as(
            "SELECT n, route, provider_idempotency_key, started_at, finished_at, result, permanent,
                    provider_ref, settled_by, evidence
             FROM attempts WHERE notification_id = $1 ORDER BY n",
        )
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
}
