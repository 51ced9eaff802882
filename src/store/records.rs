//! The record of what a step did: fenced by its claim's generation, with later evidence held
//! against it, its certainty from the one rule, its event in the same transaction; and a
//! requery's record in review.

use std::collections::HashMap;

use time::OffsetDateTime;
use uuid::Uuid;

use super::many::Rows;
use super::rows::notification_columns;
use super::rows::{NotificationRow, SETTLE, insert_event, insert_events};
use super::seam::{Arg, Conn, Dialect, SqlStore, Tx, args};
use super::{Claim, EventType, OutboxEvent, Recorded, StoreError, StoreResult};
use crate::domain::{
    AttemptOutcome, AttemptResult, Certainty, Decision, Next, Notification, NotificationId, State,
};

use async_trait::async_trait;

/// The record of what a step did, fenced by its claim.
#[async_trait]
pub trait Recording: Send + Sync {
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

    /// [`Recording::record`] of several claims in one transaction (group commit), each fenced by
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
}

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

impl<D: Dialect> SqlStore<D> {
    /// The group's plain records — an attempt's result and the state it leads to, nothing
    /// settled, annotated, handed over or withdrawn — written a table at a time (one statement
    /// per power-of-two chunk of them, see [`Rows`]): what [`SqlStore::record_in`] does one at
    /// a time, each still fenced by its own claim. The notifications their claims still held,
    /// as they now stand, by id.
    async fn record_plain(
        tx: &mut Tx<D>,
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
                EventType::of_final(n.state).map(|kind| OutboxEvent::for_notification(n, kind, now))
            })
            .collect();
        insert_events(tx, &events).await?;
        if applied.values().any(|n| n.state == State::Queued) {
            D::wake_others(tx).await?;
        }
        Ok(applied)
    }

    /// One decision, within `tx`; the caller commits. The worker's record and a requery's in
    /// review differ only in `update`, the statement that moves the notification (fenced by
    /// generation either way).
    pub(super) async fn record_in(
        tx: &mut Tx<D>,
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
        let held = Self::settle_first(tx, in_review, claim, decision, now).await?;
        let row: Option<NotificationRow> = match held {
            true => tx.fetch_optional(update, args).await?,
            false => None,
        };
        let Some(row) = row else {
            Self::keep_late_answer(tx, decision, id, now).await?;
            return Ok(Recorded::Fenced);
        };
        let notification: Notification = row.try_into()?;
        Self::write_attempts(tx, claim, decision, withdrawn, now).await?;
        // A vendor's report may have come while the attempt was in flight, before there was
        // an ambiguity to settle. Settled by it now, in this transaction, no crash can leave a
        // proven send in review; where that finishes it, the state recorded above was never
        // seen, and the report's `delivered` is its event.
        let (settled_by_report, finished) = if in_review {
            (false, None)
        } else {
            super::receipts::settle_recorded::<D>(tx, claim, decision, now).await?
        };
        if let Some(finished) = finished {
            return Ok(Recorded::Applied {
                notification: Box::new(finished),
                settled_by_report,
            });
        }
        // In review, a requery that settles nothing leaves it `unknown`: no state changed.
        let changed = !(in_review && notification.state == State::Unknown);
        if let Some(event_type) = EventType::of_final(notification.state).filter(|_| changed) {
            insert_event(
                tx,
                &OutboxEvent::for_notification(&notification, event_type, now),
            )
            .await?;
        }
        if notification.state == State::Queued {
            D::wake_others(tx).await?;
        }
        Ok(Recorded::Applied {
            notification: Box::new(notification),
            settled_by_report,
        })
    }

    /// A settlement stands before the state that rests on it: the store refuses a `known`
    /// beside an ambiguity still unsettled. So where this step settles, the fence is tested
    /// (and the row taken) first, and nothing is settled where the record is fenced out.
    /// Whether the fence holds.
    async fn settle_first(
        tx: &mut Tx<D>,
        in_review: bool,
        claim: &Claim,
        decision: &Decision,
        now: OffsetDateTime,
    ) -> StoreResult<bool> {
        let Some(settle) = &decision.settle else {
            return Ok(true);
        };
        let id = claim.notification.id;
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
        Ok(held.is_some())
    }

    /// A record its claim no longer holds keeps the answer it carried, as late evidence on its
    /// attempt, and holds the notification against it.
    async fn keep_late_answer(
        tx: &mut Tx<D>,
        decision: &Decision,
        id: NotificationId,
        now: OffsetDateTime,
    ) -> StoreResult<()> {
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
        Ok(())
    }

    /// The attempts as the step leaves them: the one a hold withdraws, the one it finished,
    /// what a look-up found on those still unsettled, and a failover's note on the attempt
    /// that caused it (the timeline shows the switch there).
    async fn write_attempts(
        tx: &mut Tx<D>,
        claim: &Claim,
        decision: &Decision,
        withdrawn: Option<i32>,
        now: OffsetDateTime,
    ) -> StoreResult<()> {
        let id = claim.notification.id;
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
        Ok(())
    }
}

#[async_trait]
impl<D: Dialect> Recording for SqlStore<D> {
    #[tracing::instrument(skip_all, fields(records = items.len()))]
    async fn record_all(
        &self,
        items: &[(Claim, Decision)],
        now: OffsetDateTime,
    ) -> StoreResult<Vec<Recorded>> {
        let mut tx = self.begin().await?;
        let mut applied = Self::record_plain(&mut tx, items, now).await?;
        let mut recorded = Vec::with_capacity(items.len());
        for (claim, decision) in items {
            let mut outcome = match applied.remove(&claim.notification.id.as_uuid()) {
                Some(n) => Recorded::Applied {
                    notification: Box::new(n),
                    settled_by_report: false,
                },
                // Any other record, and a plain one its claim no longer holds (whose answer
                // may still be late evidence), one at a time.
                None => Self::record_in(&mut tx, RECORD, false, claim, decision, now).await?,
            };
            // Evidence came while it was being sent: hold this record against it.
            if let Recorded::Applied { notification, .. } = &mut outcome
                && notification.late_evidence
                && let Some(reopened) = super::evidence::hold_against_evidence::<D>(
                    &mut tx,
                    (**notification).clone(),
                    now,
                )
                .await?
            {
                **notification = reopened;
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
        let mut tx = self.begin().await?;
        let mut recorded =
            Self::record_in(&mut tx, RECORD_IN_REVIEW, true, claim, decision, now).await?;
        // What its look-up found is held against what came late, as a worker's record is.
        if let Recorded::Applied { notification, .. } = &mut recorded
            && notification.late_evidence
            && let Some(reopened) =
                super::evidence::hold_against_evidence::<D>(&mut tx, (**notification).clone(), now)
                    .await?
        {
            **notification = reopened;
        }
        tx.commit().await?;
        Ok(recorded)
    }
}
