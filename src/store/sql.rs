//! Every transaction of the store, written once: [`SqlStore`] implements [`Store`] above the
//! seam in [`super::seam`], with the statements that are the same text in both dialects here
//! and the ones that differ in each [`Dialect`]'s tables.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use sqlx::Transaction;
use sqlx::types::Json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::receipts::ReceiptWithOwner;
use super::rows::{
    AttemptRow, AttemptWithOwner, ClaimedRow, EventRow, IdempotencyRow, NotificationRow,
    ResolutionWithOwner, SiblingRow, corrupt, insert_event, rows_into,
};
use super::rows::{
    attempt_columns, claimed_columns, look_alike_columns, notification_columns, refused_for_good,
};
use super::seam::{ACCEPT_TRIES, Arg, Conn, Dialect, SqlStore, args};
use super::{
    AcceptOutcome, Backlog, CallbacksTaken, Claim, ClaimMode, ClaimedEvent, EventType,
    InboxOutcome, LiftSuppression, ListFilter, NewAccept, NewCallbacks, NewInboxEvent,
    NewResolution, NewSuppression, NotificationDetail, Outage, OutboxEvent, Prepare, QueueStats,
    Recorded, ReviewFilter, ReviewPreview, RouteSlot, Store, StoreError, StoreResult,
    SuppressionFilter, Timestamp,
};
use crate::domain::{
    Attempt, AttemptResult, Certainty, Channel, Decision, Next, Notification, NotificationId,
    SettledBy, Settlement, Sibling, State, Suppression,
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
    async fn claim_in(
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
