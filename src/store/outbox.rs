//! The outbox's area of the store: the relay's claims of due events per sink, their marks once
//! published, holds after a failure, the backlog, events written outside a state change, and
//! pruning what every sink has published.

use std::time::Duration;

use time::OffsetDateTime;
use tracing::field::Empty;
use uuid::Uuid;

use super::OutboxEvent;
use super::rows::EventRow;
use super::rows::insert_event;
use super::seam::{Arg, Conn, Dialect, SqlStore, args};
use super::{Backlog, ClaimedEvent, StoreResult, Timestamp};

use async_trait::async_trait;

/// The relay's work: due events per sink, leased, marked once published, held back after a
/// failure.
#[async_trait]
pub trait Outbox: Send + Sync {
    /// Changes each time this store (one per process) commits outbox events, whoever wrote
    /// them (see `seam::EventsWritten`): the relay claims them at once rather than at its next
    /// poll.
    fn events_written(&self) -> tokio::sync::watch::Receiver<()>;

    /// Deletes up to `limit` events that every sink published before `published_before`;
    /// returns how many went.
    async fn prune_outbox(&self, published_before: OffsetDateTime, limit: u32) -> StoreResult<u64>;

    /// Claims up to `limit` events that `sink` has not published, oldest first, each leased to
    /// this relay until `now + lease` (`SKIP LOCKED` on PostgreSQL, so that relays in several
    /// processes share the work). Only the earliest unpublished event of each notification is
    /// taken, so that one notification's events reach a sink in order; events held back after a
    /// failure wait until their hold ends.
    async fn claim_events(
        &self,
        sink: &str,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
    ) -> StoreResult<Vec<ClaimedEvent>>;

    /// Records that `sink` published `events`, and sets the events that every one of `sinks`
    /// (all the configured sinks) has now published as done, for the retention to delete.
    async fn mark_published(
        &self,
        sink: &str,
        events: &[Uuid],
        sinks: &[String],
        now: OffsetDateTime,
    ) -> StoreResult<()>;

    /// Holds `events` back from `sink` until `until` after a failed publish, counting the
    /// failure and keeping its reason.
    async fn hold_back(
        &self,
        sink: &str,
        events: &[Uuid],
        until: OffsetDateTime,
        error: &str,
    ) -> StoreResult<()>;

    /// How many events `sink` has not published yet, and when the oldest of them was written.
    async fn outbox_backlog(&self, sink: &str) -> StoreResult<Backlog>;

    /// Commits one event of herald's own (a route's circuit changed in this process).
    async fn add_event(&self, event: &OutboxEvent) -> StoreResult<()>;
}

#[async_trait]
impl<D: Dialect> Outbox for SqlStore<D> {
    fn events_written(&self) -> tokio::sync::watch::Receiver<()> {
        self.2.subscribe()
    }

    async fn prune_outbox(&self, published_before: OffsetDateTime, limit: u32) -> StoreResult<u64> {
        let mut tx = self.begin().await?;
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

    #[tracing::instrument(skip_all, fields(sink, limit, idle = Empty))]
    async fn claim_events(
        &self,
        sink: &str,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
    ) -> StoreResult<Vec<ClaimedEvent>> {
        let mut tx = self.begin().await?;
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
        let mut tx = self.begin().await?;
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
        let mut tx = self.begin().await?;
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

    async fn add_event(&self, event: &OutboxEvent) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        insert_event(&mut tx, event).await?;
        tx.commit().await?;
        Ok(())
    }
}
