//! The store's side of bulk resolution previews: what a dry run showed, kept under the hash of
//! the token it answered until its confirmation uses it or it expires. Same text in both
//! dialects, as in `sql`.

use serde_json::Value;
use sqlx::FromRow;
use sqlx::types::Json;
use uuid::Uuid;

use super::seam::{Arg, Conn, Dialect, SqlStore, args};
use super::{ReviewPreview, StoreError, StoreResult, Timestamp};
use crate::domain::NotificationId;

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

impl<D: Dialect> SqlStore<D> {
    /// Stores `preview`, and deletes every preview that expired before it was made.
    pub(super) async fn save_preview(&self, preview: &ReviewPreview) -> StoreResult<()> {
        let items: Vec<(Uuid, i64)> = preview
            .items
            .iter()
            .map(|(id, generation)| (id.as_uuid(), *generation))
            .collect();
        let mut tx = self.0.begin().await?;
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
    pub(super) async fn find_preview(
        &self,
        tenant: &str,
        token_hash: &[u8],
    ) -> StoreResult<ReviewPreview> {
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
    pub(super) async fn take_preview(&self, tenant: &str, token_hash: &[u8]) -> StoreResult<()> {
        let mut tx = self.0.begin().await?;
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
