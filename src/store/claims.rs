//! The dispatcher's area of the store: the claim (with what it cannot read set aside), the
//! attempt a send starts, the record of what it did (fenced by the claim's generation, with
//! later evidence held against it), a requery's record in review, and the look-alikes a
//! look-up must not attribute twice.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use sqlx::Transaction;
use time::OffsetDateTime;
use tracing::field::Empty;
use uuid::Uuid;

use super::many::Rows;
use super::rows::{
    AttemptRow, AttemptWithOwner, ClaimedRow, NotificationRow, SETTLE, SiblingRow, insert_event,
    insert_events, rows_into,
};
use super::rows::{attempt_columns, claimed_columns, look_alike_columns, notification_columns};
use super::seam::{Arg, Conn, Dialect, SqlStore, args};
use super::{
    Claim, ClaimMode, EventType, OutboxEvent, Prepare, Recorded, RouteSlot, StoreError,
    StoreResult, Timestamp,
};
use crate::domain::{
    Attempt, AttemptOutcome, AttemptResult, Certainty, Decision, Next, Notification,
    NotificationId, Sibling, State, suppression_recipient,
};
use herald_provider::Request;

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
/// [`RECORD`] for many plain records at once (no failover, nothing withdrawn): each row
/// `(id, generation, state, certainty, due_at, finished_at, now)`, each fenced by its own
/// claim. The `VALUES` columns are named apart from the table's, so that `RETURNING` names
/// only the notification's.
static RECORD_PLAIN: Rows = Rows::new(
    "UPDATE notifications
     SET state = r_state, certainty = r_certainty, due_at = r_due_at,
         finished_at = r_finished_at, updated_at = r_now
     FROM (SELECT column1 AS r_id, column2 AS r_generation, column3 AS r_state,
                  column4 AS r_certainty, column5 AS r_due_at, column6 AS r_finished_at,
                  column7 AS r_now
           FROM (VALUES ",
    "($1, $2, $3, $4, $5, $6, $7)",
    7,
    concat!(
        ") AS given) AS r
     WHERE id = r_id AND generation = r_generation AND state || '' = 'sending'
     RETURNING ",
        notification_columns!()
    ),
);
/// Attempts' results: each row `(notification id, n, result, permanent, provider_ref,
/// evidence, finished_at)`.
static FINISH_ATTEMPTS: Rows = Rows::new(
    "UPDATE attempts
     SET result = r_result, permanent = r_permanent, provider_ref = r_provider_ref,
         evidence = r_evidence, finished_at = r_finished_at
     FROM (SELECT column1 AS r_id, column2 AS r_n, column3 AS r_result, column4 AS r_permanent,
                  column5 AS r_provider_ref, column6 AS r_evidence, column7 AS r_finished_at
           FROM (VALUES ",
    "($1, $2, $3, $4, $5, $6, $7)",
    7,
    ") AS given) AS r
     WHERE notification_id = r_id AND n = r_n",
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
/// Takes a record's notification (`$1`) where its fence still holds — the claim's generation
/// (`$2`), and state `$4` (`sending` for a worker's, `unknown` for a requery's) — before it
/// writes a settlement.
const FENCE: &str = "UPDATE notifications SET updated_at = $3
     WHERE id = $1 AND generation = $2 AND state || '' = $4 RETURNING id";
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
pub(super) const ANNOTATE_ATTEMPT: &str = "UPDATE attempts SET evidence = json_patch(evidence, $3)
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
pub(super) fn event_for(state: State) -> Option<EventType> {
    match state {
        State::Delivered => Some(EventType::Delivered),
        State::Failed => Some(EventType::Failed),
        State::Unknown => Some(EventType::Unknown),
        State::Cancelled => Some(EventType::Cancelled),
        State::Queued | State::Sending => None,
    }
}
/// A row of [`FINISH_ATTEMPTS`]: attempt `a` of notification `id`, finished `now`.
fn finished_attempt(
    args: &mut Vec<Arg>,
    id: NotificationId,
    a: &AttemptOutcome,
    now: OffsetDateTime,
) {
    args.extend([
        Arg::from(id),
        Arg::from(a.n),
        Arg::from(a.result.as_str()),
        Arg::from(a.permanent),
        Arg::from(&a.provider_ref),
        Arg::json(&a.evidence),
        Arg::from(now),
    ])
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

impl<D: Dialect> SqlStore<D> {
    #[tracing::instrument(skip_all, fields(limit, claimed = Empty, idle = Empty))]
    pub(super) async fn claim(
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

    pub(super) async fn look_alikes(
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

    pub(super) async fn start_attempt(
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
    pub(super) async fn record_all(
        &self,
        items: &[(Claim, Decision)],
        now: OffsetDateTime,
    ) -> StoreResult<Vec<Recorded>> {
        let mut tx = self.0.begin().await?;
        let mut applied = Self::record_plain(&mut tx, items, now).await?;
        let mut recorded = Vec::with_capacity(items.len());
        for (claim, decision) in items {
            let mut outcome = match applied.remove(&claim.notification.id.as_uuid()) {
                Some(n) => Recorded::Applied(Box::new(n)),
                // Any other record, and a plain one its claim no longer holds (whose answer
                // may still be late evidence), one at a time.
                None => Self::record_in(&mut tx, RECORD, false, claim, decision, now).await?,
            };
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

    /// The group's plain records — an attempt's result and the state it leads to, nothing
    /// settled, annotated, handed over or withdrawn — written a table at a time (one statement
    /// per power-of-two chunk of them, see [`Rows`]): what [`SqlStore::record_in`] does one at
    /// a time, each still fenced by its own claim. The notifications their claims still held,
    /// as they now stand, by id.
    async fn record_plain(
        tx: &mut Transaction<'static, D::Db>,
        items: &[(Claim, Decision)],
        now: OffsetDateTime,
    ) -> StoreResult<HashMap<Uuid, Notification>> {
        // A notification twice in one group (a claim this process lost while it was sending,
        // and the one that took it back) is left to `record_in`, which tells them apart by
        // generation one at a time.
        let mut seen = HashMap::new();
        for (claim, _) in items {
            *seen.entry(claim.notification.id.as_uuid()).or_insert(0) += 1;
        }
        let plain: Vec<(&Claim, &Decision, &AttemptOutcome)> = items
            .iter()
            .filter_map(|(claim, decision)| {
                let attempt = decision.attempt.as_ref()?;
                let plain = seen[&claim.notification.id.as_uuid()] == 1
                    && decision.settle.is_none()
                    && decision.findings.is_none()
                    && matches!(
                        decision.next,
                        Next::Finish { .. } | Next::Retry { .. } | Next::Reconcile { .. }
                    )
                    && !super::receipts::leaves_unsettled(claim, decision);
                plain.then_some((claim, decision, attempt))
            })
            .collect();
        if plain.is_empty() {
            return Ok(HashMap::new());
        }
        let rows: Vec<NotificationRow> = RECORD_PLAIN
            .fetch_all(&mut **tx, &plain, |(claim, decision, _), args| {
                let (state, certainty, due_at, finished_at) = next_columns(&decision.next, now);
                args.extend([
                    Arg::from(claim.notification.id),
                    Arg::from(claim.generation),
                    Arg::from(state.as_str()),
                    Arg::from(certainty.map(|c| c.as_str())),
                    Arg::from(due_at),
                    Arg::from(finished_at),
                    Arg::from(now),
                ])
            })
            .await?;
        let applied: HashMap<Uuid, Notification> = rows
            .into_iter()
            .map(|row| {
                let n: Notification = row.try_into()?;
                Ok((n.id.as_uuid(), n))
            })
            .collect::<StoreResult<_>>()?;
        let held: Vec<&(&Claim, &Decision, &AttemptOutcome)> = plain
            .iter()
            .filter(|(claim, ..)| applied.contains_key(&claim.notification.id.as_uuid()))
            .collect();
        FINISH_ATTEMPTS
            .execute(&mut **tx, &held, |(claim, _, a), args| {
                finished_attempt(args, claim.notification.id, a, now)
            })
            .await?;
        let events: Vec<OutboxEvent> = held
            .iter()
            .filter_map(|(claim, ..)| {
                let n = &applied[&claim.notification.id.as_uuid()];
                event_for(n.state).map(|kind| OutboxEvent::for_notification(n, kind, now))
            })
            .collect();
        insert_events(&mut **tx, &events).await?;
        if applied.values().any(|n| n.state == State::Queued) {
            D::wake_others(tx).await?;
        }
        Ok(applied)
    }

    #[tracing::instrument(skip_all, fields(notification_id = %claim.notification.id))]
    pub(super) async fn record_in_review(
        &self,
        claim: &Claim,
        decision: &Decision,
        now: OffsetDateTime,
    ) -> StoreResult<Recorded> {
        let mut tx = self.0.begin().await?;
        let mut recorded =
            Self::record_in(&mut tx, RECORD_IN_REVIEW, true, claim, decision, now).await?;
        // What its look-up found is held against what came late, as a worker's record is.
        if let Recorded::Applied(n) = &recorded
            && n.late_evidence
            && let Some(reopened) =
                super::evidence::hold_against_evidence::<D>(&mut tx, (**n).clone(), now).await?
        {
            recorded = Recorded::Applied(Box::new(reopened));
        }
        tx.commit().await?;
        Ok(recorded)
    }

    /// The earliest due time of work a dispatcher may take: a paused route's waits for its
    /// operator, not for the clock (unless the pause sends it to the fallback), but for its
    /// expiry, which ends it all the same.
    pub(super) async fn next_due(&self) -> StoreResult<Option<OffsetDateTime>> {
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

    /// [`Store::claim`]'s transaction.
    pub(super) async fn claim_once(
        &self,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
        routes: &[RouteSlot],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
        let mut tx = self.0.begin().await?;
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

    /// [`Store::claim_expired`]: the held routes' queued work whose expiry passed, leased as
    /// a claim is, for the worker to end without a vendor call.
    pub(super) async fn claim_expired(
        &self,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
        held: &[String],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
        let mut tx = self.0.begin().await?;
        let due: Vec<(Uuid, String)> = tx
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

    /// [`SqlStore::claim_once`] in `tx`: chooses, leases and reads the claims; commits nothing.
    pub(super) async fn claim_in(
        tx: &mut Transaction<'static, D::Db>,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
        routes: &[RouteSlot],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
        let due: Vec<(Uuid, String)> = tx
            .fetch_all(D::CLAIM_DUE, claim_due_args(now, limit, routes))
            .await?;
        Self::take(tx, due, now, lease, routes, prepare).await
    }

    /// Leases the `due` notifications (`(id, state)` as chosen) and reads them as claims: a
    /// queued one starts an attempt, by a send deadline within its route's send window (in
    /// `routes`; none for a route held back), a `sending` one is reconciled.
    async fn take(
        tx: &mut Transaction<'static, D::Db>,
        due: Vec<(Uuid, String)>,
        now: OffsetDateTime,
        lease: Duration,
        routes: &[RouteSlot],
        prepare: Prepare<'_>,
    ) -> StoreResult<Vec<Claim>> {
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
                    Arg::Uuids(ids),
                    Arg::Uuids(was_queued.clone()),
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
        Self::mark_suppressed(tx, &mut claims).await?;
        if !fixed.is_empty() {
            tx.execute(D::CLAIM_FIX_REQUESTS, vec![Arg::json(&fixed)])
                .await?;
        }
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
        Ok(claims)
    }

    /// Marks the sends among `claims` whose recipient the tenant has suppressed: one statement
    /// for the whole claim, in its transaction, rather than one per send.
    async fn mark_suppressed(
        tx: &mut Transaction<'static, D::Db>,
        claims: &mut [Claim],
    ) -> StoreResult<()> {
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

    /// One decision, within `tx`; the caller commits. The worker's record and a requery's in
    /// review differ only in `update`, the statement that moves the notification (fenced by
    /// generation either way).
    pub(super) async fn record_in(
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
        // A settlement stands before the state that rests on it: the store refuses a `known`
        // beside an ambiguity still unsettled. So where this step settles, the fence is tested
        // (and the row taken) first, and nothing is settled where the record is fenced out.
        let held = match &decision.settle {
            None => true,
            Some(settle) => {
                let fence = if in_review { "unknown" } else { "sending" };
                let held: Option<(Uuid,)> = tx
                    .fetch_optional(FENCE, args![id, claim.generation, now, fence])
                    .await?;
                if held.is_some() {
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
                held.is_some()
            }
        };
        let row: Option<NotificationRow> = match held {
            true => tx.fetch_optional(update, args).await?,
            false => None,
        };
        let Some(row) = row else {
            if let Some((n, late)) = decision.late_evidence(now) {
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
            FINISH_ATTEMPTS
                .execute(&mut **tx, &[a], |a, args| {
                    finished_attempt(args, id, a, now)
                })
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
        // A vendor's report may have come while the attempt was in flight, before there was
        // an ambiguity to settle. Settled by it now, in this transaction, no crash can leave a
        // proven send in review; where that finishes it, the state recorded above was never
        // seen, and the report's `delivered` is its event.
        if !in_review
            && let Some(finished) =
                super::receipts::settle_recorded::<D>(tx, claim, decision, now).await?
        {
            return Ok(Recorded::Applied(Box::new(finished)));
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
}
