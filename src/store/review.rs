//! Review's area of the store: the queue of what waits for a person, a person's resolution
//! (fenced by the generation they read, with its audit record and event), and the queue's
//! figures for the gauges.

use time::OffsetDateTime;

use super::rows::{ClaimedRow, NotificationRow, SETTLE, attempts_of, corrupt, insert_event};
use super::rows::{claimed_columns, notification_columns, refused_for_good};
use super::seam::{Arg, Conn, Dialect, SqlStore, args};
use super::{
    EventType, NewResolution, NotificationDetail, OutboxEvent, QueueStats, ReviewFilter,
    StoreError, StoreResult, Timestamp,
};
use crate::domain::{
    Notification, NotificationId, REVIEWED, SettledBy, Settlement, State, left_late,
};
use crate::review::Reason;

/// A person's resolution, fenced by the generation they read. A resend is due now, with a
/// fresh budget, a renewed key forgets the request prepared under the old one, and a resend
/// forced past its expiry forgets the expiry.
const RESOLVE: &str = concat!(
    "UPDATE notifications
     SET state = $4, certainty = $5, acknowledged = $6, finished_at = $7, updated_at = $8,
         due_at = CASE WHEN $9 THEN $8 ELSE due_at END,
         budget_from = CASE WHEN $9 THEN attempt_count ELSE budget_from END,
         budget_since = CASE WHEN $9 THEN $8 ELSE budget_since END,
         key_epoch = key_epoch + CASE WHEN $10 THEN 1 ELSE 0 END,
         provider_request = CASE WHEN $10 THEN NULL ELSE provider_request END,
         expires_at = CASE WHEN $11 THEN NULL ELSE expires_at END,
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
       AND (($6 AND state = 'unknown' AND (contradiction IS NULL OR acknowledged))
         OR ($7 AND state = 'delivered' AND certainty = 'duplicate_possible' AND NOT acknowledged
             AND contradiction IS NULL)
         OR ($11 AND contradiction IS NOT NULL AND NOT acknowledged)
         OR ($12 AND state = 'cancelled' AND certainty = 'unknown'
             AND (contradiction IS NULL OR acknowledged))
         OR ($8 AND state = 'failed' AND NOT acknowledged AND NOT ",
    refused_for_good!(),
    ")
         OR ($9 AND state = 'failed' AND NOT acknowledged AND ",
    refused_for_good!(),
    "))
     ORDER BY id LIMIT $10"
);

/// A resolution's answer where the notification changed since the person read it.
fn changed() -> StoreError {
    StoreError::Conflict(
        "the notification changed while it was being resolved (another resolution, or \
         dispatch); read it again"
            .to_owned(),
    )
}

impl<D: Dialect> SqlStore<D> {
    pub(super) async fn review(
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
                    Arg::from(Some(reasons.contains(&Reason::MayHaveSent))),
                ],
            )
            .await?;
        self.details(rows).await
    }

    pub(super) async fn resolve(
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
        let lift_expiry = change.resend.is_some_and(|r| r.lift_expiry);
        let mut tx = self.0.begin().await?;
        // The person's word is written before the state that rests on it (the store refuses a
        // `known` beside an ambiguity nothing settled): the fence is tested, and the row taken,
        // first.
        let held: Option<(uuid::Uuid,)> = tx
            .fetch_optional(
                "UPDATE notifications SET updated_at = $4
                 WHERE tenant = $1 AND id = $2 AND generation = $3 RETURNING id",
                vec![
                    Arg::from(tenant),
                    Arg::from(id),
                    Arg::I64(Some(generation)),
                    Arg::from(now),
                ],
            )
            .await?;
        if held.is_none() {
            return Err(changed());
        }
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
        // A request that may have left late was the person's to weigh: not held against their
        // word again.
        let weighed = serde_json::json!({ REVIEWED: true });
        for a in attempts_of::<D>(&mut *tx, id).await? {
            if left_late(&a) {
                tx.execute(
                    super::claims::ANNOTATE_ATTEMPT,
                    vec![Arg::from(id), Arg::from(a.n), Arg::json(&weighed)],
                )
                .await?;
            }
        }
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
                    Arg::from(Some(lift_expiry)),
                ],
            )
            .await?;
        let Some(row) = row else {
            return Err(changed());
        };
        let notification: Notification = row.try_into()?;
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

    pub(super) async fn queue_stats(&self, now: OffsetDateTime) -> StoreResult<QueueStats> {
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
