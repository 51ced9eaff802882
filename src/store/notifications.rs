//! The store's notifications area: an enqueue (once per idempotency key), a read, a list, a
//! cancel (by id or by key), an upstream event's notifications, and the files they carry. A
//! statement that is the same text in both dialects lives here; one that differs, in each
//! [`Dialect`]'s tables.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use async_trait::async_trait;
use sqlx::types::Json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::many::Rows;
use super::receipts::ReceiptWithOwner;
use super::rows::{
    AttemptWithOwner, ClaimedRow, IdempotencyRow, KeyRow, NotificationRow, ResolutionWithOwner,
    corrupt, insert_event, insert_events,
};
use super::rows::{by_idempotency_key, claimed_columns, notification_columns};
use super::seam::{ACCEPT_TRIES, Arg, Conn, Dialect, SqlStore, Tx, args};
use super::{
    AcceptOutcome, CancelKey, Cancellation, EventType, InboxOutcome, ListFilter, NewAccept,
    NewInboxEvent, NotificationDetail, Outage, OutboxEvent, StoreError, StoreResult,
};
use crate::domain::certainty;
use crate::domain::{Attempt, Certainty, File, Notification, NotificationId, State};

/// Enqueued notifications: their acceptance (once per idempotency key), reads, lists and
/// cancellations, an upstream event's notifications, and their stored files.
#[async_trait]
pub trait Notifications: Send + Sync {
    /// Commits each new notification with its idempotency record and `accepted` event, all in
    /// one transaction; keys already used are answered from their record instead.
    async fn accept(&self, items: &[NewAccept]) -> StoreResult<Vec<AcceptOutcome>>;

    async fn notification(
        &self,
        tenant: &str,
        id: NotificationId,
    ) -> StoreResult<NotificationDetail>;

    /// Newest first, each with its attempts and resolutions, as [`Notifications::notification`] shows
    /// one: the API lists notifications in the shape it shows one in.
    async fn list(&self, tenant: &str, filter: &ListFilter)
    -> StoreResult<Vec<NotificationDetail>>;

    /// `queued` → `cancelled`; `Conflict` from any other state.
    async fn cancel(
        &self,
        tenant: &str,
        id: NotificationId,
        now: OffsetDateTime,
    ) -> StoreResult<Notification>;

    /// Every `queued` notification of the tenant's that `key` names → `cancelled`, each with
    /// its event, in one transaction; the others it names are answered as they stand. A key
    /// that names none answers two empty lists.
    async fn cancel_by_key(
        &self,
        tenant: &str,
        key: &CancelKey,
        now: OffsetDateTime,
    ) -> StoreResult<Cancellation>;

    /// Records an upstream event (`tenant`, `source`, `id`) and commits the notifications it
    /// maps to, each with its `accepted` event, in one transaction; an event recorded before
    /// creates nothing and answers the notification ids it created then.
    async fn receive_event(&self, event: &NewInboxEvent) -> StoreResult<InboxOutcome>;

    /// The stored contents of these attachments (by SHA-256), for a send; a file not stored is
    /// absent from the answer.
    async fn files(&self, sha256: &[&str]) -> StoreResult<BTreeMap<String, Vec<u8>>>;
}

const FIND: &str = concat!(
    "SELECT ",
    claimed_columns!(),
    " FROM notifications WHERE tenant = $1 AND id = $2"
);

/// `queued` → `cancelled`, each row `(id, certainty, now)` at the certainty herald's rule gives
/// it: the rows as they now stand. A claimed notification is `sending`, so a cancellation never
/// races a send it could not stop.
static CANCEL_QUEUED: Rows = Rows::new(
    "UPDATE notifications
     SET state = 'cancelled', certainty = r_certainty, updated_at = r_now, finished_at = r_now
     FROM (SELECT column1 AS r_id, column2 AS r_certainty, column3 AS r_now FROM (VALUES ",
    "($1, $2, $3)",
    3,
    concat!(
        ") AS given) AS r
     WHERE id = r_id AND state || '' = 'queued'
     RETURNING ",
        notification_columns!()
    ),
);

/// New notifications, as many as a statement is given.
static INSERT_NOTIFICATIONS: Rows = Rows::new(
    "INSERT INTO notifications
         (id, tenant, channel, recipient, route, delivery, content, metadata, state,
          send_at, due_at, created_at, updated_at, cancellation_key, expires_at, category,
          traceparent)
     VALUES ",
    "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13, $14, $15, $16)",
    16,
    "",
);

/// Idempotency keys, each claimed for its notification unless taken: the ids of the
/// notifications whose keys this statement inserted.
static CLAIM_KEYS: Rows = Rows::new(
    "INSERT INTO idempotency_keys
         (tenant, key, request_hash, response_status, response_body, notification_id, created_at)
     VALUES ",
    "($1, $2, $3, 202, $4, $5, $6)",
    6,
    " ON CONFLICT (tenant, key) DO NOTHING RETURNING notification_id",
);

/// Idempotency keys as they stand, by tenant and key. A join, not `(tenant, key) IN (VALUES
/// …)`: SQLite answers that by scanning every key, and this by the primary key.
static FIND_KEYS: Rows = Rows::new(
    "SELECT tenant, key, request_hash, response_status, response_body
     FROM (SELECT column1 AS r_tenant, column2 AS r_key FROM (VALUES ",
    "($1, $2)",
    2,
    ") AS given) AS r
     JOIN idempotency_keys ON tenant = r_tenant AND key = r_key",
);

impl<D: Dialect> SqlStore<D> {
    async fn find(&self, tenant: &str, id: NotificationId) -> StoreResult<ClaimedRow> {
        let row: Option<ClaimedRow> = self
            .0
            .read()
            .await?
            .fetch_optional(FIND, args![tenant, id])
            .await?;
        row.ok_or(StoreError::NotFound)
    }

    /// Notifications with their attempts and resolutions, as [`Notifications::notification`] shows one.
    pub(super) async fn details(
        &self,
        rows: Vec<ClaimedRow>,
    ) -> StoreResult<Vec<NotificationDetail>> {
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

    async fn try_accept(&self, items: &[NewAccept]) -> StoreResult<Vec<AcceptOutcome>> {
        let mut tx = self.begin().await?;
        let mut outcomes: Vec<Option<AcceptOutcome>> = items.iter().map(|_| None).collect();
        // A batch to many recipients often carries one file: it is written once (per tenant:
        // a group may hold several tenants' enqueues, and each stores its own).
        let mut written = HashSet::new();
        // The unique key decides who created a notification, not a prior read: on PostgreSQL
        // the insert waits for a concurrent transaction holding the same key and then does
        // nothing if it committed; on SQLite the one writer has already committed. So a
        // request never meets its key "in progress": it waits for the first and is answered
        // as its replay. The whole group is written a few statements per table.
        let mut pending: Vec<usize> = (0..items.len()).collect();
        while !pending.is_empty() {
            let asked: Vec<&NewAccept> = pending.iter().map(|&i| &items[i]).collect();
            let created: Vec<(Uuid,)> = CLAIM_KEYS
                .fetch_all(&mut *tx, &asked, |item, args| {
                    let n = &item.notification;
                    args.extend([
                        Arg::from(&n.tenant),
                        Arg::from(item.key.as_str()),
                        Arg::Bytes(item.request_hash.clone()),
                        Arg::json(&item.response),
                        Arg::from(n.id),
                        Arg::from(n.created_at),
                    ])
                })
                .await?;
            let created: HashSet<Uuid> = created.into_iter().map(|(id,)| id).collect();
            // An item whose key another request holds, or an earlier item of this group.
            let (new, taken): (Vec<usize>, Vec<usize>) = pending
                .iter()
                .partition(|&&i| created.contains(&items[i].notification.id.as_uuid()));
            let notifications: Vec<&Notification> =
                new.iter().map(|&i| &items[i].notification).collect();
            insert_notifications(&mut tx, &notifications).await?;
            for &i in &new {
                let item = &items[i];
                let files: Vec<&File> = item
                    .files
                    .iter()
                    .filter(|file| {
                        written.insert((item.notification.tenant.as_str(), file.sha256.as_str()))
                    })
                    .collect();
                store_files(&mut *tx, &item.notification, &files).await?;
                outcomes[i] = Some(AcceptOutcome::Created);
            }
            let taken_keys: Vec<(&str, &str)> = taken
                .iter()
                .map(|&i| (items[i].notification.tenant.as_str(), items[i].key.as_str()))
                .collect();
            let found: Vec<KeyRow> = FIND_KEYS
                .fetch_all(&mut *tx, &taken_keys, |(tenant, key), args| {
                    args.extend([Arg::from(*tenant), Arg::from(*key)])
                })
                .await?;
            let found: HashMap<(String, String), IdempotencyRow> = found
                .into_iter()
                .map(|row| ((row.tenant, row.key), row.held))
                .collect();
            // A key gone between the two statements (its window ended and retention swept
            // it) is free again: that item claims it on the next round.
            pending = taken
                .into_iter()
                .filter(|&i| {
                    let item = &items[i];
                    let key = (
                        item.notification.tenant.clone(),
                        item.key.as_str().to_owned(),
                    );
                    match found.get(&key) {
                        Some(row) => {
                            outcomes[i] = Some(row.outcome_for(&item.request_hash));
                            false
                        }
                        None => true,
                    }
                })
                .collect();
        }
        let outcomes: Vec<AcceptOutcome> = outcomes.into_iter().flatten().collect();
        if outcomes.contains(&AcceptOutcome::Created) {
            D::wake_others(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    async fn try_receive_event(&self, event: &NewInboxEvent) -> StoreResult<Option<InboxOutcome>> {
        let mut tx = self.begin().await?;
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
        let notifications: Vec<&Notification> = event.notifications.iter().collect();
        insert_notifications(&mut tx, &notifications).await?;
        if !event.notifications.is_empty() {
            D::wake_others(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(Some(InboxOutcome::Created))
    }
}

impl<D: Dialect> SqlStore<D> {
    /// One try at [`Notifications::cancel_by_key`].
    async fn try_cancel_by_key(
        &self,
        tenant: &str,
        key: &CancelKey,
        now: OffsetDateTime,
    ) -> StoreResult<Cancellation> {
        let (candidates, named, value) = match key {
            CancelKey::Cancellation(value) => (
                D::CANCEL.by_cancellation_key,
                concat!(
                    "SELECT id, state FROM notifications ",
                    "WHERE tenant = $1 AND cancellation_key = $2 ORDER BY id"
                ),
                value,
            ),
            CancelKey::Idempotency(value) => (
                D::CANCEL.by_idempotency_key,
                concat!(
                    "SELECT id, state FROM notifications WHERE tenant = $1 AND ",
                    by_idempotency_key!(),
                    " ORDER BY id"
                ),
                value,
            ),
        };
        let mut tx = self.begin().await?;
        let mut cancelled: Vec<NotificationId> =
            Self::cancel_in(&mut tx, candidates, args![tenant, value], now)
                .await?
                .iter()
                .map(|n| n.id)
                .collect();
        cancelled.sort_by_key(|id| id.as_uuid());
        let named: Vec<(Uuid, String)> = tx.fetch_all(named, args![tenant, value]).await?;
        let now_cancelled: HashSet<NotificationId> = cancelled.iter().copied().collect();
        let mut not_cancelled = Vec::new();
        for (id, state) in named {
            let id = NotificationId::from_uuid(id);
            if !now_cancelled.contains(&id) {
                let state = State::parse(&state).ok_or_else(|| corrupt("state", &state))?;
                not_cancelled.push((id, state));
            }
        }
        tx.commit().await?;
        Ok(Cancellation {
            cancelled,
            not_cancelled,
        })
    }

    /// Cancels, in `tx`, the queued notifications that `candidates` (one of the dialect's
    /// [`Dialect::CANCEL`] statements, with its `args`) names and locks, each with its event. A
    /// notification that tried before may have left a message its vendor holds: herald's rule
    /// ([`certainty::end`]) over its attempts says whether its cancellation is `known` or
    /// `unknown` (then it waits in review). The ones cancelled, as they now stand.
    async fn cancel_in(
        tx: &mut Tx<D>,
        candidates: &'static str,
        args: Vec<Arg>,
        now: OffsetDateTime,
    ) -> StoreResult<Vec<Notification>> {
        let candidates: Vec<(Uuid, i32)> = tx.fetch_all(candidates, args).await?;
        let tried: Vec<Uuid> = candidates
            .iter()
            .filter(|(_, attempts)| *attempts > 0)
            .map(|(id, _)| *id)
            .collect();
        let mut history: HashMap<Uuid, Vec<Attempt>> = HashMap::new();
        if !tried.is_empty() {
            let rows: Vec<AttemptWithOwner> = tx
                .fetch_all(D::ATTEMPTS_OF_MANY, vec![Arg::Uuids(tried)])
                .await?;
            for row in rows {
                history
                    .entry(row.notification_id)
                    .or_default()
                    .push(row.attempt.try_into()?);
            }
        }
        let ends: Vec<(Uuid, Certainty)> = candidates
            .iter()
            .map(|(id, _)| {
                let attempts = history.get(id).map_or(&[][..], Vec::as_slice);
                let (_, certainty) = certainty::end(State::Cancelled, Certainty::Known, attempts);
                (*id, certainty)
            })
            .collect();
        let rows: Vec<NotificationRow> = CANCEL_QUEUED
            .fetch_all(&mut **tx, &ends, |(id, certainty), args| {
                args.extend([
                    Arg::Uuid(Some(*id)),
                    Arg::from(certainty.as_str()),
                    Arg::from(now),
                ])
            })
            .await?;
        let mut cancelled = Vec::with_capacity(rows.len());
        for row in rows {
            let notification: Notification = row.try_into()?;
            insert_event(
                tx,
                &OutboxEvent::for_notification(&notification, EventType::Cancelled, now),
            )
            .await?;
            cancelled.push(notification);
        }
        Ok(cancelled)
    }
}

/// New `queued` notifications with their `accepted` events.
async fn insert_notifications<D: Dialect>(tx: &mut Tx<D>, ns: &[&Notification]) -> StoreResult<()> {
    INSERT_NOTIFICATIONS
        .execute(&mut **tx, ns, |n, args| {
            args.extend([
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
                Arg::from(n.cancellation_key.as_deref()),
                Arg::from(n.expires_at),
                Arg::from(n.category.as_deref()),
                Arg::from(n.trace_parent.as_ref().map(|t| t.as_str())),
            ])
        })
        .await?;
    let events: Vec<OutboxEvent> = ns
        .iter()
        .map(|n| OutboxEvent::for_notification(n, EventType::Accepted, n.created_at))
        .collect();
    insert_events(tx, &events).await
}

/// The attachment contents of a new notification not yet written in this transaction, and the
/// notification's names for all of its files, as its tenant's (migration 0023). A file the
/// tenant stored already is not written again, only marked used now, which keeps it from a
/// sweep that runs meanwhile (see migration 0018).
async fn store_files(conn: &mut impl Conn, n: &Notification, new: &[&File]) -> StoreResult<()> {
    for file in new {
        conn.execute(
            "INSERT INTO attachments (tenant, sha256, content, last_used_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (tenant, sha256) DO UPDATE SET last_used_at = excluded.last_used_at",
            vec![
                Arg::from(&n.tenant),
                Arg::from(&file.sha256),
                Arg::Bytes(file.bytes.clone()),
                Arg::from(n.created_at),
            ],
        )
        .await?;
    }
    let named: BTreeSet<&str> = n
        .content
        .email
        .attachments
        .iter()
        .map(|a| a.sha256.as_str())
        .collect();
    for sha256 in named {
        conn.execute(
            "INSERT INTO notification_attachments (notification_id, tenant, sha256)
             VALUES ($1, $2, $3)",
            args![n.id, &n.tenant, sha256],
        )
        .await?;
    }
    Ok(())
}

#[async_trait]
impl<D: Dialect> Notifications for SqlStore<D> {
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
        let mut tx = self.begin().await?;
        let cancelled = Self::cancel_in(&mut tx, D::CANCEL.by_id, args![tenant, id], now).await?;
        let Some(notification) = cancelled.into_iter().next() else {
            drop(tx);
            let current = self.find(tenant, id).await?;
            return Err(StoreError::Conflict(format!(
                "only a queued notification can be cancelled; this one is {}",
                current.notification.state
            )));
        };
        tx.commit().await?;
        Ok(notification)
    }

    async fn cancel_by_key(
        &self,
        tenant: &str,
        key: &CancelKey,
        now: OffsetDateTime,
    ) -> StoreResult<Cancellation> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.try_cancel_by_key(tenant, key, now).await {
                // The rows are locked in the key's index order, the worker's group commit locks
                // them in id order: a deadlock between the two aborts this one, which runs again.
                Err(err) if tries < ACCEPT_TRIES && D::retryable(&err) => {
                    tracing::debug!(%err, "a cancellation collided with another transaction; retrying");
                }
                outcome => return outcome,
            }
        }
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

    async fn files(&self, sha256: &[&str]) -> StoreResult<BTreeMap<String, Vec<u8>>> {
        let mut conn = self.0.read().await?;
        let mut files = BTreeMap::new();
        for sha256 in sha256 {
            let found: Option<(Vec<u8>,)> = conn
                .fetch_optional(
                    "SELECT content FROM attachments WHERE sha256 = $1 LIMIT 1",
                    args![*sha256],
                )
                .await?;
            if let Some((content,)) = found {
                files.insert((*sha256).to_owned(), content);
            }
        }
        Ok(files)
    }
}
