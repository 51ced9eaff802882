//! The dispatcher's claims: due work chosen fairly and leased, the attempt a send starts (its
//! request stored before any call), what a claim cannot read set aside, and the look-alikes a
//! look-up must not attribute twice.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use time::OffsetDateTime;
use tracing::field::Empty;
use uuid::Uuid;

use super::QueueStats;
use super::rows::{AttemptRow, AttemptWithOwner, ClaimedRow, SiblingRow, rows_into};
use super::rows::{attempt_columns, claimed_columns, look_alike_columns};
use super::rows::{corrupt, refused_for_good};
use super::seam::{Arg, Conn, Dialect, SqlStore, Tx, args};
use super::{Claim, ClaimMode, Prepare, RouteSlot, StoreError, StoreResult, Timestamp};
use crate::domain::{Attempt, Notification, Sibling, suppression_recipient};
use crate::review::Reason;
use herald_provider::Request;
use std::sync::Arc;

use async_trait::async_trait;

/// The dispatcher's claims of due work, the attempts they start, and what the queue holds.
#[async_trait]
pub trait Claims: Send + Sync {
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
    /// vendor's pause) whose expiry has passed, up to `limit`, claimed as [`Claims::claim`]
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

    /// When the earliest `queued` or `sending` notification falls due.
    async fn next_due(&self) -> StoreResult<Option<OffsetDateTime>>;

    /// Signals `wake` whenever another process commits due work (PostgreSQL `LISTEN`); returns
    /// at once where only this process writes (SQLite).
    async fn listen_for_work(
        &self,
        wake: Arc<tokio::sync::Notify>,
        shutdown: tokio_util::sync::CancellationToken,
    );

    async fn queue_stats(&self, now: OffsetDateTime) -> StoreResult<QueueStats>;
}

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

const INSERT_ATTEMPT: &str = concat!(
    "INSERT INTO attempts (notification_id, n, generation, route, provider_idempotency_key,
                           started_at, send_deadline, result, evidence)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'in_flight', '{}')
     RETURNING ",
    attempt_columns!()
);

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

/// A send whose recipient a claim looks up, as `CLAIM_SUPPRESSED` reads it: the recipient as
/// [`suppression_recipient`] writes it, so that it is compared as a suppression is stored, not
/// as SQL would fold it.
#[derive(Serialize)]
struct Recipient<'a> {
    id: Uuid,
    tenant: &'a str,
    channel: &'a str,
    recipient: String,
    category: Option<&'a str>,
}

/// A request a claim fixes, as `CLAIM_TAKE` reads it. Serialized as it is, never through
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

impl<D: Dialect> SqlStore<D> {
    /// [`Claims::claim`]'s transaction.
    pub(super) async fn claim_once(
        &self,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
        routes: &[RouteSlot],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
        let mut tx = self.begin().await?;
        match Self::claim_in(&mut tx, now, lease, limit, routes, prepare).await {
            Ok(claims) => {
                tx.commit().await?;
                Ok(claims)
            }
            // Rolled back now, not whenever the dropped transaction's connection is next used:
            // until then its rows stay locked, and the claim that sets an unreadable one aside
            // next would skip it as locked (seen: a claim that failed, then set nothing aside).
            Err(err) => {
                if let Err(rollback) = tx.rollback().await {
                    tracing::warn!(%rollback, "cannot roll a failed claim back; its connection will");
                }
                Err(err)
            }
        }
    }

    /// [`SqlStore::claim_once`] in `tx`: chooses, leases and reads the claims; commits nothing.
    pub(super) async fn claim_in(
        tx: &mut Tx<D>,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
        routes: &[RouteSlot],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
        let due: Vec<ClaimedRow> = tx
            .fetch_all(D::CLAIM_DUE, claim_due_args(now, limit, routes))
            .await?;
        Self::take(tx, due, now, lease, routes, prepare).await
    }

    /// Leases the `due` notifications (as chosen and locked) and reads them as claims: a
    /// queued one starts an attempt, by a send deadline within its route's send window (in
    /// `routes`; none for a route held back), with its provider request fixed if it had none;
    /// a `sending` one is reconciled.
    async fn take(
        tx: &mut Tx<D>,
        due: Vec<ClaimedRow>,
        now: OffsetDateTime,
        lease: Duration,
        routes: &[RouteSlot],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = due.iter().map(|row| row.notification.id).collect();
        let was_queued: Vec<Uuid> = due
            .iter()
            .filter(|row| row.notification.state == "queued")
            .map(|row| row.notification.id)
            .collect();
        let fixed = Self::requests_to_fix(due, prepare)?;
        let rows: Vec<ClaimedRow> = tx
            .fetch_all(
                D::CLAIM_TAKE,
                vec![
                    Arg::from(now),
                    Arg::from(now + lease),
                    Arg::Uuids(ids),
                    Arg::Uuids(was_queued.clone()),
                    Arg::json(&fixed),
                ],
            )
            .await?;
        // A row taken for its first attempt has no attempt before it (`attempt_count` counts
        // them, and the take has just added the one this claim starts): nothing of it can be in
        // flight, and the attempt started below is its only one. So attempts are expired and
        // read only for the other rows: two statements fewer on most claims, and two scans of
        // `attempts` fewer where PostgreSQL's statistics still call the table empty (a bench's
        // drain on a new database read 22,000,000 attempt rows for 16,000 notifications).
        let earlier: Vec<Uuid> = rows
            .iter()
            .filter(|row| row.attempt_count > 1 || !was_queued.contains(&row.notification.id))
            .map(|row| row.notification.id)
            .collect();
        if !earlier.is_empty() {
            tx.execute(
                D::CLAIM_EXPIRE,
                vec![
                    Arg::Uuids(earlier.clone()),
                    Arg::from(now),
                    Arg::json(&lease_expired_evidence(now)),
                ],
            )
            .await?;
        }
        let (mut claims, started) = Self::claims_of(rows, &was_queued, now, routes)?;
        Self::mark_suppressed(tx, &mut claims).await?;
        Self::read_attempts(tx, &mut claims, &started, earlier, now).await?;
        Ok(claims)
    }

    /// The provider requests of the chosen notifications taken for their first send that have
    /// none yet: fixed now, in the transaction that commits the intent, before any call.
    fn requests_to_fix(
        due: Vec<ClaimedRow>,
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<FixedRequest>> {
        let mut fixed = Vec::new();
        for row in due {
            if row.notification.state != "queued" || row.provider_request.is_some() {
                continue;
            }
            let notification: Notification = row.notification.try_into()?;
            if let Some(request) = prepare(&notification) {
                fixed.push(FixedRequest {
                    id: notification.id.as_uuid(),
                    request,
                });
            }
        }
        Ok(fixed)
    }

    /// The leased rows as claims, and for the ones taken for a send the attempts to start
    /// (written by the caller).
    fn claims_of(
        rows: Vec<ClaimedRow>,
        was_queued: &[Uuid],
        now: OffsetDateTime,
        routes: &[RouteSlot],
    ) -> StoreResult<(Vec<Claim>, Vec<StartedAttempt>)> {
        let mut claims = Vec::with_capacity(rows.len());
        let mut started = Vec::new();
        for row in rows {
            let notification: Notification = row.notification.try_into()?;
            let first = was_queued.contains(&notification.id.as_uuid());
            let request = row.provider_request.map(|r| r.0);
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
                    suppressed: false,
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
        Ok((claims, started))
    }

    /// Starts the claim's attempts and reads every claim's history into it: the attempt just
    /// started, and for the rows that had attempts before (`earlier`), all of them.
    async fn read_attempts(
        tx: &mut Tx<D>,
        claims: &mut [Claim],
        started: &[StartedAttempt],
        earlier: Vec<Uuid>,
        now: OffsetDateTime,
    ) -> StoreResult<()> {
        let mut attempts: Vec<AttemptWithOwner> = match started.is_empty() {
            true => Vec::new(),
            false => {
                tx.fetch_all(
                    D::CLAIM_START_ATTEMPTS,
                    vec![Arg::json(&started), Arg::from(now)],
                )
                .await?
            }
        };
        if !earlier.is_empty() {
            // Their whole history, the attempt just started included.
            attempts.retain(|a| !earlier.contains(&a.notification_id));
            attempts.extend(
                tx.fetch_all::<AttemptWithOwner>(D::ATTEMPTS_OF_MANY, vec![Arg::Uuids(earlier)])
                    .await?,
            );
        }
        // Read before the commit: a row that cannot be read leaves nothing claimed.
        for row in attempts {
            if let Some(claim) = claims
                .iter_mut()
                .find(|c| c.notification.id.as_uuid() == row.notification_id)
            {
                claim.attempts.push(row.attempt.try_into()?);
            }
        }
        Ok(())
    }

    /// Marks the sends among `claims` whose recipient the tenant has suppressed: one statement
    /// for the whole claim, in its transaction, rather than one per send.
    async fn mark_suppressed(tx: &mut Tx<D>, claims: &mut [Claim]) -> StoreResult<()> {
        let sends: Vec<Recipient> = claims
            .iter()
            .filter(|c| matches!(c.mode, ClaimMode::Send { .. }))
            .map(|c| {
                let n = &c.notification;
                Recipient {
                    id: n.id.as_uuid(),
                    tenant: &n.tenant,
                    channel: n.channel.as_str(),
                    recipient: suppression_recipient(n.channel, &n.to),
                    category: n.category.as_deref(),
                }
            })
            .collect();
        if sends.is_empty() {
            return Ok(());
        }
        let found: Vec<(String,)> = tx
            .fetch_all(D::CLAIM_SUPPRESSED, vec![Arg::json(&sends)])
            .await?;
        let found: Vec<Uuid> = found
            .iter()
            .map(|(id,)| Uuid::parse_str(id))
            .collect::<Result<_, _>>()
            .map_err(|err| StoreError::Internal(anyhow::anyhow!("a claimed id: {err}")))?;
        for claim in claims {
            if let ClaimMode::Send { suppressed, .. } = &mut claim.mode {
                *suppressed = found.contains(&claim.notification.id.as_uuid());
            }
        }
        Ok(())
    }

    /// Finds the due notifications a claim cannot read (a stored value this build cannot decode:
    /// written before herald bounded it, or by hand) and sets each aside for
    /// [`UNREADABLE_SET_ASIDE`], logged at ERROR with its id and counted, so that a claim goes on
    /// with the rest. Nothing is lost: it is due again after that, and goes out as soon as it
    /// can be read. Returns how many were set aside.
    pub(super) async fn set_aside_unreadable(
        &self,
        now: OffsetDateTime,
        limit: u32,
        routes: &[RouteSlot],
    ) -> StoreResult<usize> {
        let mut tx = self.begin().await?;
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
}

#[async_trait]
impl<D: Dialect> Claims for SqlStore<D> {
    #[tracing::instrument(skip_all, fields(limit, claimed = Empty, idle = Empty))]
    async fn claim(
        &self,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
        routes: &[RouteSlot],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
        let claimed = match self.claim_once(now, lease, limit, routes, prepare).await {
            // One row that cannot be read must not stop delivery for every tenant.
            Err(err @ StoreError::Internal(_)) => {
                if self.set_aside_unreadable(now, limit, routes).await? == 0 {
                    return Err(err);
                }
                self.claim_once(now, lease, limit, routes, prepare).await
            }
            claimed => claimed,
        };
        if let Ok(claims) = &claimed {
            let span = tracing::Span::current();
            span.record("claimed", claims.len());
            // A poll that found nothing is not traced (crate::traces::IDLE).
            span.record("idle", claims.is_empty());
        }
        claimed
    }

    /// [`Claims::claim_expired`]: the held routes' queued work whose expiry passed, leased as
    /// a claim is, for the worker to end without a vendor call.
    async fn claim_expired(
        &self,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
        held: &[String],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
        let mut tx = self.begin().await?;
        let due: Vec<ClaimedRow> = tx
            .fetch_all(
                D::CLAIM_EXPIRED,
                vec![
                    Arg::from(now),
                    Arg::from(i64::from(limit)),
                    Arg::Texts(held.to_vec()),
                ],
            )
            .await?;
        let claims = Self::take(&mut tx, due, now, lease, &[], prepare).await?;
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
        let mut tx = self.begin().await?;
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

    /// The earliest due time of work a dispatcher may take: a paused route's waits for its
    /// operator, not for the clock (unless the pause sends it to the fallback), but for its
    /// expiry, which ends it all the same.
    async fn next_due(&self) -> StoreResult<Option<OffsetDateTime>> {
        let (due,): (Option<Timestamp>,) = self
            .0
            .read()
            .await?
            .fetch_one(
                "SELECT min(at) FROM (
                     SELECT min(due_at) AS at FROM notifications
                     WHERE state IN ('queued', 'sending')
                       AND route NOT IN (SELECT route FROM route_pauses WHERE NOT to_fallback)
                     UNION ALL
                     SELECT min(expires_at) FROM notifications
                     WHERE state = 'queued' AND expires_at IS NOT NULL
                       AND route IN (SELECT route FROM route_pauses WHERE NOT to_fallback)
                 ) due",
                args![],
            )
            .await?;
        Ok(due.map(Timestamp::into_inner))
    }

    async fn listen_for_work(
        &self,
        wake: Arc<tokio::sync::Notify>,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        self.0.listen_for_work(wake, shutdown).await;
    }

    async fn queue_stats(&self, now: OffsetDateTime) -> StoreResult<QueueStats> {
        let mut conn = self.0.read().await?;
        let (queued, sending, oldest_due): (i64, i64, Option<Timestamp>) = conn
            .fetch_one(
                "SELECT
                     (SELECT count(*) FROM notifications WHERE state = 'queued'),
                     (SELECT count(*) FROM notifications WHERE state = 'sending'),
                     (SELECT min(due_at) FROM notifications
                       WHERE state = 'queued' AND due_at <= $1
                         AND route NOT IN (SELECT route FROM route_pauses WHERE NOT to_fallback))",
                args![now],
            )
            .await?;
        // The filter is the predicates of notifications_review, notifications_failed,
        // notifications_contradicted and notifications_may_have_sent, so that each partial
        // index answers its part; as
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
                         WHEN state = 'cancelled' THEN 'may_have_sent'
                         WHEN state = 'delivered' THEN 'duplicate_possible'
                         WHEN ",
                    refused_for_good!(),
                    " THEN 'rejected'
                         ELSE 'exhausted' END AS reason, count(*), min(finished_at)
                     FROM notifications
                     WHERE ((state = 'unknown'
                             OR (certainty = 'duplicate_possible' AND NOT acknowledged))
                            OR state = 'failed'
                            OR (contradiction IS NOT NULL AND NOT acknowledged)
                            OR (state = 'cancelled' AND certainty = 'unknown'))
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
}
