//! The PostgreSQL store: any number of herald processes share one database. Claims use
//! `FOR UPDATE SKIP LOCKED`, so processes never wait on each other's rows.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::types::Json;
use sqlx::{PgPool, Postgres, Transaction};
use time::OffsetDateTime;

use std::sync::Arc;

use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{
    AcceptOutcome, AttemptRow, Claim, ClaimMode, ClaimedRow, EventType, IdempotencyRow,
    LOOK_ALIKES, ListFilter, NewAccept, NotificationDetail, NotificationRow, OutboxEvent, Prepare,
    QueueStats, Recorded, ResolutionRow, SiblingRow, Store, StoreError, StoreResult, Timestamp,
    event_for, findings_evidence, first_unsettled, late_evidence, lease_expired_evidence,
    next_columns, rows_into, settlement_evidence,
};
use crate::domain::{Attempt, Decision, Notification, NotificationId, Sibling, State};

/// The channel on which a commit that made work due wakes every herald process.
const WAKE_CHANNEL: &str = "herald_due";

const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "initial",
        include_str!("../../migrations/postgres/0001_initial.sql"),
    ),
    (
        2,
        "provider_requests",
        include_str!("../../migrations/postgres/0002_provider_requests.sql"),
    ),
];

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
        // One direct connection first: a pool would report only "timed out", not the cause.
        use sqlx::Connection;
        sqlx::PgConnection::connect_with(&options)
            .await?
            .close()
            .await?;
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
        if outcomes.contains(&AcceptOutcome::Created) {
            // Delivered to listeners only if the transaction commits.
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(WAKE_CHANNEL)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    async fn attempts(&self, id: NotificationId) -> StoreResult<Vec<Attempt>> {
        let rows: Vec<AttemptRow> = sqlx::query_as(
            "SELECT n, route, provider_idempotency_key, started_at, finished_at, result, permanent,
                    provider_ref, settled_by, evidence
             FROM attempts WHERE notification_id = $1 ORDER BY n",
        )
        .bind(id.as_uuid())
        .fetch_all(&self.pool)
        .await?;
        rows_into(rows)
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
    async fn accept(&self, items: &[NewAccept]) -> StoreResult<Vec<AcceptOutcome>> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.try_accept(items).await {
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
        let attempts = self.attempts(id).await?;
        let resolutions: Vec<ResolutionRow> = sqlx::query_as(
            "SELECT principal, outcome, then_action, note, created_at
             FROM resolutions WHERE notification_id = $1 ORDER BY seq",
        )
        .bind(id.as_uuid())
        .fetch_all(&self.pool)
        .await?;
        Ok(NotificationDetail {
            notification,
            attempts,
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

    #[tracing::instrument(skip_all, fields(limit))]
    async fn claim(
        &self,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
        routes: &[String],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
        let mut tx = self.pool.begin().await?;
        // SKIP LOCKED: rows another process is claiming right now are simply not due for us.
        let due: Vec<(Uuid, String)> = sqlx::query_as(
            "SELECT id, state FROM notifications
             WHERE state IN ('queued', 'sending') AND due_at <= $1
               AND route = ANY($3)
             ORDER BY due_at LIMIT $2
             FOR UPDATE SKIP LOCKED",
        )
        .bind(Timestamp::from(now))
        .bind(i64::from(limit))
        .bind(routes)
        .fetch_all(&mut *tx)
        .await?;
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = due.iter().map(|(id, _)| *id).collect();
        let was_queued: Vec<Uuid> = due
            .iter()
            .filter(|(_, s)| s == "queued")
            .map(|(id, _)| *id)
            .collect();
        let rows: Vec<ClaimedRow> = sqlx::query_as(concat!(
            "UPDATE notifications
             SET state = 'sending', generation = generation + 1, due_at = $2, updated_at = $1,
                 attempt_count = attempt_count + CASE WHEN id = ANY($4) THEN 1 ELSE 0 END
             WHERE id = ANY($3)
             RETURNING generation, attempt_count, provider_request, ",
            notification_columns!()
        ))
        .bind(Timestamp::from(now))
        .bind(Timestamp::from(now + lease))
        .bind(&ids)
        .bind(&was_queued)
        .fetch_all(&mut *tx)
        .await?;
        // First claims fix their provider request, all in one statement.
        let mut prepared_ids = Vec::new();
        let mut prepared = Vec::new();
        sqlx::query(
            "UPDATE attempts SET result = 'ambiguous', finished_at = $2, evidence = evidence || $3
             WHERE notification_id = ANY($1) AND result = 'in_flight'",
        )
        .bind(&ids)
        .bind(Timestamp::from(now))
        .bind(Json(lease_expired_evidence(now)))
        .execute(&mut *tx)
        .await?;
        let mut claims = Vec::with_capacity(rows.len());
        for row in rows {
            let generation = row.generation;
            let attempt_count = row.attempt_count;
            let notification: Notification = row.notification.try_into()?;
            let mut request = row.provider_request.map(|r| r.0);
            let first = was_queued.contains(&notification.id.as_uuid());
            if request.is_none() && first {
                request = prepare(&notification);
                if let Some(r) = &request {
                    prepared_ids.push(notification.id.as_uuid());
                    prepared.push(Json(r.clone()));
                }
            }
            let mode = if was_queued.contains(&notification.id.as_uuid()) {
                sqlx::query(
                    "INSERT INTO attempts (notification_id, n, generation, route,
                         provider_idempotency_key, started_at, result, evidence)
                     VALUES ($1, $2, $3, $4, $5, $6, 'in_flight', '{}')",
                )
                .bind(notification.id.as_uuid())
                .bind(attempt_count)
                .bind(generation)
                .bind(&notification.route)
                .bind(notification.provider_key())
                .bind(Timestamp::from(now))
                .execute(&mut *tx)
                .await?;
                ClaimMode::Send { n: attempt_count }
            } else {
                ClaimMode::Reconcile
            };
            claims.push(Claim {
                notification,
                generation,
                mode,
                attempts: Vec::new(),
                request,
            });
        }
        if !prepared_ids.is_empty() {
            sqlx::query(
                "UPDATE notifications SET provider_request = fixed.request
                 FROM unnest($1::uuid[], $2::jsonb[]) AS fixed (id, request)
                 WHERE notifications.id = fixed.id",
            )
            .bind(&prepared_ids)
            .bind(&prepared)
            .execute(&mut *tx)
            .await?;
        }
        let attempts: Vec<AttemptWithOwner> = sqlx::query_as(
            "SELECT notification_id, n, route, provider_idempotency_key, started_at, finished_at,
                    result, permanent, provider_ref, settled_by, evidence
             FROM attempts WHERE notification_id = ANY($1) ORDER BY notification_id, n",
        )
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        for row in attempts {
            if let Some(claim) = claims
                .iter_mut()
                .find(|c| c.notification.id.as_uuid() == row.notification_id)
            {
                claim.attempts.push(row.attempt.try_into()?);
            }
        }
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
            .fetch_all(&self.pool)
            .await?;
        rows_into(rows)
    }

    async fn start_attempt(
        &self,
        claim: &Claim,
        now: OffsetDateTime,
        lease: Duration,
    ) -> StoreResult<Option<Attempt>> {
        let mut tx = self.pool.begin().await?;
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
        let mut tx = self.pool.begin().await?;
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
                    "UPDATE attempts SET evidence = evidence || $3
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
            sqlx::query(
                "UPDATE attempts
                 SET settled_by = $3, evidence = evidence || $4,
                     provider_ref = CASE WHEN n = $6 THEN coalesce($5, provider_ref)
                                         ELSE provider_ref END
                 WHERE notification_id = $1 AND result = 'ambiguous' AND settled_by IS NULL
                   AND n <> $2",
            )
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
                "UPDATE attempts SET evidence = evidence || $2
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
        if notification.state == State::Queued {
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(WAKE_CHANNEL)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(Recorded::Applied(Box::new(notification)))
    }

    async fn next_due(&self) -> StoreResult<Option<OffsetDateTime>> {
        let due: Option<Timestamp> = sqlx::query_scalar(
            "SELECT min(due_at) FROM notifications WHERE state IN ('queued', 'sending')",
        )
        .fetch_one(&self.pool)
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
        .fetch_one(&self.pool)
        .await?;
        Ok(QueueStats {
            queued,
            sending,
            oldest_due: oldest_due.map(Timestamp::into_inner),
            review_open,
        })
    }

    async fn listen_for_work(&self, wake: Arc<tokio::sync::Notify>, shutdown: CancellationToken) {
        loop {
            let listener = async {
                let mut listener = PgListener::connect_with(&self.pool).await?;
                listener.listen(WAKE_CHANNEL).await?;
                // A notification sent while no listener was connected was missed: look now.
                wake.notify_one();
                loop {
                    listener.recv().await?;
                    wake.notify_one();
                }
                #[allow(unreachable_code)]
                Ok::<(), sqlx::Error>(())
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                result = listener => {
                    if let Err(err) = result {
                        tracing::warn!(%err, "LISTEN connection lost; polling until it is back");
                    }
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }
}

#[derive(sqlx::FromRow)]
struct AttemptWithOwner {
    notification_id: Uuid,
    #[sqlx(flatten)]
    attempt: AttemptRow,
}
