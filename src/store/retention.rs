//! Retention's area of the store: expired idempotency keys and upstream event ids, and finished
//! notifications past their time, and their files: a batch at a time, never what a keep rule
//! holds.

use time::OffsetDateTime;
use uuid::Uuid;

use super::StoreResult;
use super::seam::{Arg, Conn, Dialect, SqlStore, args};
use crate::review::PermanentRefusals;

use async_trait::async_trait;

/// What retention forgets, a batch at a time.
#[async_trait]
pub trait Retention: Send + Sync {
    /// Deletes up to `limit` idempotency records of notifications created before `before`, and
    /// as many upstream events' inbox records received before it: a key or an event id seen
    /// again after that is new. Returns how many records went.
    async fn forget_keys(&self, before: OffsetDateTime, limit: u32) -> StoreResult<u64>;

    /// Deletes up to `limit` notifications that finished (`delivered`, `cancelled`, `failed`
    /// and closed by a person, or refused for good where `refusals` are final) before `before`
    /// and whose events every sink has published, with their attempts, review audit,
    /// idempotency records and events; returns how many went. A notification in review
    /// (`unknown`, a dead letter nobody closed, an unacknowledged `duplicate_possible`) or
    /// still to be sent is never deleted.
    async fn forget_finished(
        &self,
        before: OffsetDateTime,
        limit: u32,
        refusals: PermanentRefusals,
    ) -> StoreResult<u64>;

    /// Deletes up to `limit` attachment contents that no notification names any more and that
    /// no enqueue named since `before`; returns how many went.
    async fn forget_files(&self, before: OffsetDateTime, limit: u32) -> StoreResult<u64>;
}

/// The smallest UUIDv7 of `t`'s millisecond: a notification id (a UUIDv7) below it was made
/// before `t`, so the primary key and the key index find old rows without an index on time.
fn first_id_at(t: OffsetDateTime) -> Uuid {
    let millis = u64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
    uuid::Builder::from_unix_timestamp_millis(millis, &[0; 10]).into_uuid()
}

#[async_trait]
impl<D: Dialect> Retention for SqlStore<D> {
    async fn forget_keys(&self, before: OffsetDateTime, limit: u32) -> StoreResult<u64> {
        let mut tx = self.begin().await?;
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
        let mut tx = self.begin().await?;
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

    async fn forget_files(&self, before: OffsetDateTime, limit: u32) -> StoreResult<u64> {
        let mut tx = self.begin().await?;
        // The time is checked again outside the subquery: on PostgreSQL a delete that waited for
        // an enqueue's row lock rechecks the row as that enqueue left it (marked used now), where
        // the subquery's answer stays as it was when the delete began.
        let deleted = tx
            .execute(
                "DELETE FROM attachments WHERE last_used_at < $1 AND (tenant, sha256) IN (
                     SELECT a.tenant, a.sha256 FROM attachments a
                     WHERE a.last_used_at < $1
                       AND NOT EXISTS (SELECT 1 FROM notification_attachments n
                                       WHERE n.tenant = a.tenant AND n.sha256 = a.sha256)
                     LIMIT $2)",
                args![before, i64::from(limit)],
            )
            .await?;
        tx.commit().await?;
        Ok(deleted)
    }
}
