//! The outbox's area of the store: the relay's claims of due events per sink, their marks once
//! published, holds after a failure, the backlog, and pruning what every sink has published.

use std::time::Duration;

use time::OffsetDateTime;
use tracing::field::Empty;
use uuid::Uuid;

use super::rows::EventRow;
use super::seam::{Arg, Conn, Dialect, SqlStore, args};
use super::{Backlog, ClaimedEvent, StoreResult, Timestamp};

impl<D: Dialect> SqlStore<D> {
    #[tracing::instrument(skip_all, fields(sink, limit, idle = Empty))]
    pub(super) async fn claim_events(
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
            // A poll that found nothing is not traced (crate::traces::IDLE).
            tracing::Span::current().record("idle", true);
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

    pub(super) async fn mark_published(
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

    pub(super) async fn hold_back(
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

    pub(super) async fn outbox_backlog(&self, sink: &str) -> StoreResult<Backlog> {
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

    pub(super) async fn prune_outbox(
        &self,
        published_before: OffsetDateTime,
        limit: u32,
    ) -> StoreResult<u64> {
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
}
