//! Review's area of the store: the queue of what waits for a person, a person's resolution
//! (fenced by the generation they read, with its audit record and event), and bulk
//! resolutions' previews: what a dry run showed, kept under the hash of the token it answered
//! until its confirmation uses it or it expires.

use time::OffsetDateTime;

use super::rows::{ClaimedRow, NotificationRow, SETTLE, attempts_of, insert_event};
use super::rows::{claimed_columns, notification_columns, refused_for_good};
use super::seam::{Arg, Conn, Dialect, SqlStore, Tx, args};
use super::{
    EventType, NewResolution, NotificationDetail, OutboxEvent, ReviewFilter, StoreError,
    StoreResult, Timestamp,
};
use crate::domain::{
    Notification, NotificationId, REVIEWED, SettledBy, Settlement, State, left_late,
};
use crate::review::Reason;

use super::ReviewPreview;
use serde_json::Value;
use sqlx::FromRow;
use sqlx::types::Json;
use uuid::Uuid;

use async_trait::async_trait;

/// What waits for a person, their resolutions, and the previews of bulk ones.
#[async_trait]
pub trait Review: Send + Sync {
    /// Notifications in review, oldest first, with their attempts and resolutions.
    async fn review(
        &self,
        tenant: &str,
        filter: &ReviewFilter,
    ) -> StoreResult<Vec<NotificationDetail>>;

    /// Applies a resolution to the notification read at `generation`, with its audit record
    /// and `resolved` event; `Conflict` if the notification changed since (another resolution,
    /// a worker), and nothing is applied.
    async fn resolve(
        &self,
        tenant: &str,
        id: NotificationId,
        generation: i64,
        resolution: &NewResolution,
        now: OffsetDateTime,
    ) -> StoreResult<Notification>;

    /// Stores a bulk resolution's dry run, and deletes every preview that expired before it.
    async fn save_review_preview(&self, preview: &ReviewPreview) -> StoreResult<()>;

    /// The tenant's preview stored under `token_hash`, expired or not; `NotFound` if none
    /// (never made, another tenant's, confirmed already, or deleted after it expired).
    async fn review_preview(&self, tenant: &str, token_hash: &[u8]) -> StoreResult<ReviewPreview>;

    /// Takes the preview for its confirmation: `Conflict` if another confirmation took it
    /// first, so that a preview is applied once.
    async fn use_review_preview(&self, tenant: &str, token_hash: &[u8]) -> StoreResult<()>;
}

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

#[derive(FromRow)]
struct PreviewRow {
    token_hash: Vec<u8>,
    tenant: String,
    principal: String,
    request: Json<Value>,
    items: Json<Vec<(Uuid, i64)>>,
    created_at: Timestamp,
    expires_at: Timestamp,
}

impl From<PreviewRow> for ReviewPreview {
    fn from(row: PreviewRow) -> Self {
        ReviewPreview {
            token_hash: row.token_hash,
            tenant: row.tenant,
            principal: row.principal,
            request: row.request.0,
            items: row
                .items
                .0
                .into_iter()
                .map(|(id, generation)| (NotificationId::from_uuid(id), generation))
                .collect(),
            created_at: row.created_at.into_inner(),
            expires_at: row.expires_at.into_inner(),
        }
    }
}

#[async_trait]
impl<D: Dialect> Review for SqlStore<D> {
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
                    Arg::from(Some(reasons.contains(&Reason::MayHaveSent))),
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
        let lift_expiry = change.resend.is_some_and(|r| r.lift_expiry);
        let mut tx = self.begin().await?;
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
            settle_by_review(&mut tx, id, resolution, accepted, now).await?;
        }
        mark_weighed(&mut tx, id).await?;
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
        insert_resolution(&mut tx, resolution, &notification, renew, now).await?;
        insert_event(
            &mut tx,
            &OutboxEvent::for_notification(&notification, EventType::Resolved, now),
        )
        .await?;
        if resend {
            D::wake_others(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(notification)
    }

    /// Stores `preview`, and deletes every preview that expired before it was made.
    async fn save_review_preview(&self, preview: &ReviewPreview) -> StoreResult<()> {
        let items: Vec<(Uuid, i64)> = preview
            .items
            .iter()
            .map(|(id, generation)| (id.as_uuid(), *generation))
            .collect();
        let mut tx = self.begin().await?;
        tx.execute(
            "DELETE FROM review_previews WHERE expires_at <= $1",
            args![preview.created_at],
        )
        .await?;
        tx.execute(
            "INSERT INTO review_previews
                 (token_hash, tenant, principal, request, items, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            vec![
                Arg::Bytes(preview.token_hash.clone()),
                Arg::from(&preview.tenant),
                Arg::from(&preview.principal),
                Arg::json(&preview.request),
                Arg::json(&items),
                Arg::from(preview.created_at),
                Arg::from(preview.expires_at),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The tenant's preview stored under `token_hash`, expired or not; `NotFound` if there is
    /// none (never made, another tenant's, used, or deleted after it expired).
    async fn review_preview(&self, tenant: &str, token_hash: &[u8]) -> StoreResult<ReviewPreview> {
        let row: Option<PreviewRow> = self
            .0
            .read()
            .await?
            .fetch_optional(
                "SELECT token_hash, tenant, principal, request, items, created_at, expires_at
                 FROM review_previews WHERE token_hash = $1 AND tenant = $2",
                vec![Arg::Bytes(token_hash.to_vec()), Arg::from(tenant)],
            )
            .await?;
        row.map(ReviewPreview::from).ok_or(StoreError::NotFound)
    }

    /// Deletes the preview: `Conflict` if it is gone already (another confirmation took it).
    async fn use_review_preview(&self, tenant: &str, token_hash: &[u8]) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        let deleted = tx
            .execute(
                "DELETE FROM review_previews WHERE token_hash = $1 AND tenant = $2",
                vec![Arg::Bytes(token_hash.to_vec()), Arg::from(tenant)],
            )
            .await?;
        tx.commit().await?;
        if deleted == 0 {
            return Err(StoreError::Conflict(
                "this preview was confirmed already".to_owned(),
            ));
        }
        Ok(())
    }
}

/// A person's word settles the notification's ambiguity on every route it was sent.
async fn settle_by_review<D: Dialect>(
    tx: &mut Tx<D>,
    id: NotificationId,
    resolution: &NewResolution,
    accepted: bool,
    now: OffsetDateTime,
) -> StoreResult<()> {
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
            Arg::Text(None),
        ],
    )
    .await?;
    Ok(())
}

/// A request that may have left late was the person's to weigh: not held against their word
/// again.
async fn mark_weighed<D: Dialect>(tx: &mut Tx<D>, id: NotificationId) -> StoreResult<()> {
    let weighed = serde_json::json!({ REVIEWED: true });
    for a in attempts_of::<D>(&mut **tx, id).await? {
        if left_late(&a) {
            tx.execute(
                super::records::ANNOTATE_ATTEMPT,
                vec![Arg::from(id), Arg::from(a.n), Arg::json(&weighed)],
            )
            .await?;
        }
    }
    Ok(())
}

/// The audit record of a resolution: who said what, and the state before and after it.
async fn insert_resolution<D: Dialect>(
    tx: &mut Tx<D>,
    resolution: &NewResolution,
    notification: &Notification,
    key_renewed: bool,
    now: OffsetDateTime,
) -> StoreResult<()> {
    tx.execute(
        "INSERT INTO resolutions
             (notification_id, seq, principal, outcome, then_action, note, created_at,
              state_before, certainty_before, state_after, certainty_after, forced, key_renewed)
         VALUES ($1, (SELECT coalesce(max(seq), 0) + 1 FROM resolutions WHERE notification_id = $1),
                 $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        vec![
            Arg::from(notification.id),
            Arg::from(&resolution.principal),
            Arg::from(resolution.outcome.as_str()),
            Arg::from(resolution.then.map(|t| t.as_str())),
            Arg::from(&resolution.note),
            Arg::from(now),
            Arg::from(resolution.before.0.as_str()),
            Arg::from(resolution.before.1.map(|c| c.as_str())),
            Arg::from(notification.state.as_str()),
            Arg::from(notification.certainty.map(|c| c.as_str())),
            Arg::from(Some(resolution.change.forced)),
            Arg::from(Some(key_renewed)),
        ],
    )
    .await?;
    Ok(())
}
