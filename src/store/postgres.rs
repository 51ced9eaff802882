//! The PostgreSQL store: any number of herald processes share one database. Claims use
//! `FOR UPDATE SKIP LOCKED`, so processes never wait on each other's rows.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::types::Json;
use sqlx::{PgPool, Postgres, Transaction};
use time::OffsetDateTime;

use super::{
    AcceptOutcome, AttemptRow, EventType, IdempotencyRow, ListFilter, NewAccept,
    NotificationDetail, NotificationRow, OutboxEvent, ResolutionRow, Store, StoreError,
    StoreResult, Timestamp, rows_into,
};
use crate::domain::{Notification, NotificationId, State};

const MIGRATIONS: &[(i64, &str, &str)] = &[(
    1,
    "initial",
    include_str!("../../migrations/postgres/0001_initial.sql"),
)];

/// PostgreSQL reports these when two transactions collide; the whole transaction may be retried.
const RETRYABLE_CODES: [&str; 2] = ["40001", "40P01"];
const ACCEPT_TRIES: usize = 3;

pub struct PgStore {
    pool: PgPool,
}

macro_rules! notification_columns {
    () => {
        "id, tenant, channel, recipient, route, delivery, content, metadata, state, certainty, \
         acknowledged, send_at, due_at, created_at, updated_at"
    };
}

impl PgStore {
    pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<Self> {
        let options: PgConnectOptions = url.parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            // A request waiting on a dead database answers 503 promptly instead of hanging.
            .acquire_timeout(Duration::from_secs(3))
            .connect_with(options)
            .await?;
        super::migrator(MIGRATIONS).run(&pool).await?;
        Ok(PgStore { pool })
    }

    async fn insert_event(
        tx: &mut Transaction<'_, Postgres>,
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

    async fn try_accept(&self, items: &[NewAccept]) -> StoreResult<Vec<AcceptOutcome>> {
        let mut tx = self.pool.begin().await?;
        let mut outcomes = Vec::with_capacity(items.len());
        for item in items {
            let n = &item.notification;
            // Waits for a concurrent transaction holding the same key, then does nothing if it
            // committed: the unique key, not a prior read, decides who created the notification.
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

    async fn find(&self, tenant: &str, id: NotificationId) -> StoreResult<Notification> {
        let row: Option<NotificationRow> = sqlx::query_as(concat!(
            "SELECT ",
            notification_columns!(),
            " FROM notifications WHERE tenant = $1 AND id = $2"
        ))
        .bind(tenant)
        .bind(id.as_uuid())
        .fetch_optional(&self.pool)
        .await?;
        row.ok_or(StoreError::NotFound)?.try_into()
    }
}

fn is_retryable(err: &StoreError) -> bool {
    match err {
        StoreError::Internal(e) => e
            .downcast_ref::<sqlx::Error>()
            .and_then(|e| e.as_database_error())
            .and_then(|db| db.code())
            .is_some_and(|code| RETRYABLE_CODES.contains(&code.as_ref())),
        _ => false,
    }
}

#[async_trait]
impl Store for PgStore {
    async fn check_ready(&self) -> StoreResult<()> {
        let applied: Option<i64> =
            sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
                .fetch_one(&self.pool)
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
        let mut tries = 0;
        loop {
            tries += 1;
            match self.try_accept(&items).await {
                Err(err) if tries < ACCEPT_TRIES && is_retryable(&err) => {
                    tracing::debug!(%err, "accept collided with a concurrent batch; retrying");
                }
                result => return result,
            }
        }
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
        .fetch_all(&self.pool)
        .await?;
        let resolutions: Vec<ResolutionRow> = sqlx::query_as(
            "SELECT principal, outcome, then_action, note, created_at
             FROM resolutions WHERE notification_id = $1 ORDER BY seq",
        )
        .bind(id.as_uuid())
        .fetch_all(&self.pool)
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
               AND ($2::text IS NULL OR state = $2)
               AND ($3::text IS NULL OR certainty = $3)
               AND ($4::uuid IS NULL OR id < $4)
             ORDER BY id DESC LIMIT $5"
        ))
        .bind(tenant)
        .bind(filter.state.map(|s| s.as_str()))
        .bind(filter.certainty.map(|c| c.as_str()))
        .bind(filter.before.map(|id| id.as_uuid()))
        .bind(i64::from(filter.limit))
        .fetch_all(&self.pool)
        .await?;
        rows_into(rows)
    }

    async fn cancel(
        &self,
        tenant: &str,
        id: NotificationId,
        now: OffsetDateTime,
    ) -> StoreResult<Notification> {
        let mut tx = self.pool.begin().await?;
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
        debug_assert_eq!(notification.state, State::Cancelled);
        Self::insert_event(
            &mut tx,
            &OutboxEvent::for_notification(&notification, EventType::Cancelled, now),
        )
        .await?;
        tx.commit().await?;
        Ok(notification)
    }
}
