//! The store's side of vendor callbacks: the callback inbox, receipts, the settlements they
//! prove, and suppressions with their audit trail. Same text in both dialects.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::FromRow;
use sqlx::types::Json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::rows::{ClaimedRow, corrupt};
use super::seam::{Arg, Conn, Dialect, SqlStore, Tx, args};
use super::{
    CallbacksTaken, Claim, EventType, LiftSuppression, NewCallbacks, NewSuppression, OutboxEvent,
    StoreError, StoreResult, SuppressionFilter, Timestamp,
};
use crate::domain::certainty;
use crate::domain::{
    Attempt, AttemptResult, Certainty, Channel, Decision, Notification, NotificationId, Receipt,
    ReceiptStatus, SettledBy, Settlement, State, Suppression, SuppressionReason, messages_proven,
    settled_by_callback, suppression_recipient,
};
use herald_provider::callback::{CallbackEvent, CallbackRef};

use async_trait::async_trait;

/// Vendors' reports and the tenant's suppression list.
#[async_trait]
pub trait Receipts: Send + Sync {
    /// Takes a route's callback events in one transaction. Each event is recorded once per
    /// (route, event id), in the same transaction as its effects: a receipt step with its
    /// `receipt` event where it moves the receipt forward, a suppression where it suppresses,
    /// and the settlement of the ambiguous attempts it proves (`settled_by = callback`), which
    /// finishes a notification in review or waiting to be sent again as `delivered`/`known`.
    /// Events that name no message sent on the route are left alone and counted; `NotFound`
    /// (and nothing stored) if no event names one.
    async fn receive_callbacks(&self, callbacks: &NewCallbacks) -> StoreResult<CallbacksTaken>;

    /// Whether the tenant's `recipient` (as [`crate::domain::suppression_recipient`] writes it)
    /// is suppressed on `channel`.
    async fn suppressed(
        &self,
        tenant: &str,
        channel: Channel,
        recipient: &str,
        category: Option<&str>,
    ) -> StoreResult<bool>;

    async fn suppressions(
        &self,
        tenant: &str,
        filter: &SuppressionFilter,
    ) -> StoreResult<Vec<Suppression>>;

    /// Adds a suppression with its audit record; `false` (and nothing written) if the recipient
    /// was suppressed already.
    async fn suppress(&self, new: &NewSuppression) -> StoreResult<bool>;

    /// Lifts a suppression with its audit record, answering what was lifted; `NotFound` if
    /// there was none.
    async fn lift_suppression(&self, lift: &LiftSuppression) -> StoreResult<Suppression>;
}

const RECORD_CALLBACK: &str = "INSERT INTO callbacks
         (route, event_id, notification_id, provider_key, status, received_at, provider_ref)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (route, event_id) DO NOTHING";

/// The attempt on route `$1` whose key is `$3`, of notification `$2`: a key names its
/// notification (it starts with the notification's id), and only a message sent on this route
/// is this route's vendor's to report.
const SENT_UNDER_KEY: &str = "SELECT notification_id FROM attempts
     WHERE notification_id = $2 AND route = $1 AND provider_idempotency_key = $3 LIMIT 1";

const SENT_AS_REF: &str = "SELECT notification_id FROM attempts
     WHERE route = $1 AND provider_ref = $2 LIMIT 1";

/// Takes the notification's row lock before reading it, and marks that a vendor's report came
/// (a worker holding the notification holds its record against it): two callbacks about one
/// notification, or a callback and a worker's record, then apply one after the other on
/// PostgreSQL, each on what the other committed. SQLite has one writer anyway.
const LOCK: &str = "UPDATE notifications SET late_evidence = true WHERE id = $1";

const FIND_BY_ID: &str = concat!(
    "SELECT ",
    super::rows::claimed_columns!(),
    " FROM notifications WHERE id = $1"
);

const RECEIPT_RANK: &str = "SELECT coalesce(max(rank), 0) FROM receipts WHERE notification_id = $1";

const INSERT_RECEIPT: &str = "INSERT INTO receipts
         (notification_id, seq, status, rank, at, source, vendor_status, event_id, received_at)
     VALUES ($1, (SELECT coalesce(max(seq), 0) + 1 FROM receipts WHERE notification_id = $1),
             $2, $3, $4, $5, $6, $7, $8)";

const SETTLE_ATTEMPT: &str = "UPDATE attempts
     SET settled_by = 'callback', evidence = json_patch(evidence, $3)
     WHERE notification_id = $1 AND n = $2 AND result = 'ambiguous' AND settled_by IS NULL";

/// A notification in review, or waiting to be sent again after an ambiguity, whose every
/// ambiguous attempt is now settled by the vendors' reports: delivered, `known` where they
/// prove one message, `duplicate_possible` where several.
const FINISH_DELIVERED: &str = concat!(
    "UPDATE notifications
     SET state = 'delivered', certainty = $3, acknowledged = false, finished_at = $2,
         updated_at = $2, generation = generation + 1
     WHERE id = $1 AND state IN ('unknown', 'queued')
     RETURNING ",
    super::rows::notification_columns!()
);

// A suppression's `category` is '' where it holds for every notification (in the key, which
// cannot be NULL), and a category's name where it holds for that category only.
const INSERT_SUPPRESSION: &str = "INSERT INTO suppressions
         (tenant, channel, recipient, reason, source, evidence, note, created_at, category)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (tenant, channel, recipient, category) DO NOTHING";

const LOG_SUPPRESSION: &str = "INSERT INTO suppression_log
         (tenant, channel, recipient, action, reason, principal, note, evidence, at, category)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

/// Suppressed for every notification, or for the notification's category (`$4`, NULL for none).
const SUPPRESSED: &str = "SELECT 1 FROM suppressions
     WHERE tenant = $1 AND channel = $2 AND recipient = $3 AND (category = '' OR category = $4)";

const SUPPRESSIONS: &str = "SELECT channel, recipient, category, reason, source, evidence, note,
         created_at
     FROM suppressions
     WHERE tenant = $1 AND ($2 IS NULL OR channel = $2) AND ($6 IS NULL OR recipient = $6)
       AND ($3 IS NULL OR channel > $3
            OR (channel = $3 AND (recipient > $4 OR (recipient = $4 AND category > $7))))
     ORDER BY channel, recipient, category LIMIT $5";

const LIFT: &str = "DELETE FROM suppressions
     WHERE tenant = $1 AND channel = $2 AND recipient = $3 AND category = $4
     RETURNING channel, recipient, category, reason, source, evidence, note, created_at";

/// What one event did, within its transaction.
enum Taken {
    Repeat,
    New { settled: bool },
}

impl<D: Dialect> SqlStore<D> {
    /// One try at [`Receipts::receive_callbacks`]. Every event's notification is found first and
    /// they are taken in notification order: row locks taken in id order, as the worker's
    /// group commit takes them, cannot deadlock with it.
    async fn try_take_callbacks(&self, callbacks: &NewCallbacks) -> StoreResult<CallbacksTaken> {
        let mut tx = self.begin().await?;
        let mut taken = CallbacksTaken::default();
        let mut known = Vec::with_capacity(callbacks.events.len());
        for event in &callbacks.events {
            match sent_on_route(&mut *tx, &callbacks.route, &event.reference).await {
                Ok(id) => known.push((id, event)),
                // A vendor account may send for others than herald: such an event is not ours.
                Err(StoreError::NotFound) => taken.unknown += 1,
                Err(err) => return Err(err),
            }
        }
        if known.is_empty() && taken.unknown > 0 {
            return Err(StoreError::NotFound);
        }
        // Stable: one notification's events keep the order the vendor sent them in.
        known.sort_by_key(|(id, _)| id.as_uuid());
        for (id, event) in known {
            match take_one::<D>(&mut tx, callbacks, event, id).await? {
                Taken::Repeat => taken.repeats += 1,
                Taken::New { settled } => {
                    taken.new += 1;
                    if settled && !taken.settled.contains(&id) {
                        taken.settled.push(id);
                    }
                }
            }
        }
        tx.commit().await?;
        Ok(taken)
    }
}

/// The notification a callback event is about, if a message it names was sent on `route`.
async fn sent_on_route(
    conn: &mut impl Conn,
    route: &str,
    reference: &CallbackRef,
) -> StoreResult<NotificationId> {
    let row: Option<(Uuid,)> = match reference {
        CallbackRef::Key(key) => match NotificationId::of_provider_key(key) {
            Some(id) => {
                conn.fetch_optional(SENT_UNDER_KEY, args![route, id, key.as_str()])
                    .await?
            }
            None => None,
        },
        CallbackRef::ProviderRef(provider_ref) => {
            conn.fetch_optional(SENT_AS_REF, args![route, provider_ref.as_str()])
                .await?
        }
    };
    row.map(|(id,)| NotificationId::from_uuid(id))
        .ok_or(StoreError::NotFound)
}

/// One new event's effects, or nothing for a repeat.
async fn take_one<D: Dialect>(
    tx: &mut Tx<D>,
    callbacks: &NewCallbacks,
    event: &CallbackEvent,
    id: NotificationId,
) -> StoreResult<Taken> {
    let now = callbacks.received_at;
    let route = callbacks.route.as_str();
    let key = match &event.reference {
        CallbackRef::Key(key) => Some(key.as_str()),
        CallbackRef::ProviderRef(_) => None,
    };
    let recorded = tx
        .execute(
            RECORD_CALLBACK,
            args![
                route,
                event.event_id.as_str(),
                id,
                key,
                event.status.as_str(),
                now,
                event.message.as_deref()
            ],
        )
        .await?;
    if recorded == 0 {
        return Ok(Taken::Repeat);
    }
    tx.execute(LOCK, args![id]).await?;
    let row: ClaimedRow = tx.fetch_one(FIND_BY_ID, args![id]).await?;
    let notification: Notification = row.notification.try_into()?;
    let source = format!("callback:{route}");
    if event.status != ReceiptStatus::None {
        record_receipt(tx, &notification, event, &source, now).await?;
    }
    if event.suppress {
        suppress_recipient(tx, &notification, event, &source, now).await?;
    }
    let (settled, finished) = settle::<D>(tx, id, route, callbacks.idempotency_window, now).await?;
    let settled = settled || finished.is_some();
    let reopened =
        super::evidence::hold_against_evidence::<D>(tx, finished.unwrap_or(notification), now)
            .await?;
    Ok(Taken::New {
        settled: settled || reopened.is_some(),
    })
}

/// Keeps the event's receipt, and its `receipt` event, where it is further along than the
/// notification's receipt so far (a `delivered` that arrives after its `bounced` changes
/// nothing).
async fn record_receipt<D: Dialect>(
    tx: &mut Tx<D>,
    notification: &Notification,
    event: &CallbackEvent,
    source: &str,
    now: OffsetDateTime,
) -> StoreResult<()> {
    let id = notification.id;
    let (rank,): (i32,) = tx.fetch_one(RECEIPT_RANK, args![id]).await?;
    if i32::from(event.status.rank()) > rank {
        let receipt = Receipt {
            status: event.status,
            at: event.at.unwrap_or(now),
            source: source.to_owned(),
            vendor_status: event.vendor_status.clone(),
        };
        tx.execute(
            INSERT_RECEIPT,
            vec![
                Arg::from(id),
                Arg::from(receipt.status.as_str()),
                Arg::from(i32::from(receipt.status.rank())),
                Arg::from(receipt.at),
                Arg::from(&receipt.source),
                Arg::from(&receipt.vendor_status),
                Arg::from(event.event_id.as_str()),
                Arg::from(now),
            ],
        )
        .await?;
        let mut outbox = OutboxEvent::for_notification(notification, EventType::Receipt, now);
        outbox.data["receipt"] = serde_json::to_value(&receipt).unwrap_or(Value::Null);
        super::rows::insert_event(tx, &outbox).await?;
    }
    Ok(())
}

/// Suppresses the recipient on this channel for the tenant: the event says they asked not to
/// get more, or cannot (a hard bounce, a complaint, an unsubscribe).
async fn suppress_recipient<D: Dialect>(
    tx: &mut Tx<D>,
    notification: &Notification,
    event: &CallbackEvent,
    source: &str,
    now: OffsetDateTime,
) -> StoreResult<()> {
    let suppression = Suppression {
        channel: notification.channel,
        recipient: suppression_recipient(notification.channel, &notification.to),
        category: None,
        reason: SuppressionReason::of_receipt(event.status),
        source: source.to_owned(),
        evidence: json!({"notification_id": notification.id, "event_id": event.event_id,
                         "vendor_status": event.vendor_status}),
        note: None,
        created_at: now,
    };
    let new = NewSuppression {
        tenant: notification.tenant.clone(),
        suppression,
        principal: source.to_owned(),
    };
    suppress(&mut **tx, &new).await?;
    Ok(())
}

/// Settles the ambiguous attempts that the stored vendor reports prove (any receipt means that
/// route's vendor took the message sent under the key it names; `idempotency_window` is
/// `route`'s, and the other routes' reports are read without one), and finishes the
/// notification if a report proved an attempt, nothing is left unsettled, and it was in review
/// or waiting to be sent again: `delivered`, `known` where exactly one message is proven,
/// `duplicate_possible` where more may be. A notification being sent (`sending`) keeps its
/// state here: the worker holding it records its own decision, and settles by the reports in
/// that record's transaction (later evidence held against it afterwards may still reopen it).
/// Whether anything was settled, and the notification if it finished.
async fn settle<D: Dialect>(
    tx: &mut Tx<D>,
    id: NotificationId,
    route: &str,
    idempotency_window: Option<Duration>,
    now: OffsetDateTime,
) -> StoreResult<(bool, Option<Notification>)> {
    let reported = super::evidence::reported(&mut **tx, id).await?;
    if reported.is_empty() {
        return Ok((false, None));
    }
    let attempts = super::rows::attempts_of::<D>(&mut **tx, id).await?;
    let keys: BTreeSet<(&str, &str)> = reported
        .iter()
        .map(|r| (r.route.as_str(), r.key.as_str()))
        .collect();
    let mut settled = Vec::new();
    for (on, key) in keys {
        let window = idempotency_window.filter(|_| on == route);
        for n in settled_by_callback(&attempts, on, key, window) {
            let settlement = Settlement {
                by: SettledBy::Callback,
                accepted: true,
                evidence: json!({"stage": "callback", "route": on,
                    "detail": format!("route `{on}`'s vendor reported the message sent under key {key}")}),
                provider_ref: None,
            };
            tx.execute(
                SETTLE_ATTEMPT,
                args![id, n, Arg::json(&settlement.record(now))],
            )
            .await?;
            settled.push(n);
        }
    }
    // Settled now, or earlier while a worker held it (whose record then left it in review).
    let proven = !settled.is_empty()
        || attempts
            .iter()
            .any(|a| a.settled_by == Some(SettledBy::Callback));
    let mut finished = None;
    if let (true, Some(messages)) = (proven, messages_proven(&attempts, &settled, &reported)) {
        let proven = if messages == 1 {
            Certainty::Known
        } else {
            Certainty::DuplicatePossible
        };
        // As the reports leave the attempts: herald's rule says what the delivery may claim
        // (a send that may have left late stays a possible second message).
        let after: Vec<Attempt> = attempts
            .iter()
            .cloned()
            .map(|mut a| {
                if settled.contains(&a.n) {
                    a.settled_by = Some(SettledBy::Callback);
                    a.evidence["settlement"]["outcome"] = "accepted".into();
                }
                a
            })
            .collect();
        let (_, certainty) = certainty::end(State::Delivered, proven, &after);
        let row: Option<super::rows::NotificationRow> = tx
            .fetch_optional(FINISH_DELIVERED, args![id, now, certainty.as_str()])
            .await?;
        if let Some(row) = row {
            let n: Notification = row.try_into()?;
            let event = OutboxEvent::for_notification(&n, EventType::Delivered, now);
            super::rows::insert_event(tx, &event).await?;
            finished = Some(n);
        }
    }
    Ok((!settled.is_empty(), finished))
}

/// Within a worker's record, before its event: a vendor report may have come while the attempt
/// was in flight, before there was an ambiguity to settle; settle by it now that there is, so
/// that no crash between the two can leave a proven send in review. Conservative about keys
/// (no idempotency window: only a lone send under the key is proven). Whether the reports
/// settled an attempt now, and the notification as it ends if they finished it (with its
/// `delivered` event).
pub(super) async fn settle_recorded<D: Dialect>(
    tx: &mut Tx<D>,
    claim: &Claim,
    decision: &Decision,
    now: OffsetDateTime,
) -> StoreResult<(bool, Option<Notification>)> {
    if !leaves_unsettled(claim, decision) {
        return Ok((false, None));
    }
    settle::<D>(
        tx,
        claim.notification.id,
        &claim.notification.route,
        None,
        now,
    )
    .await
}

/// Whether the record leaves an ambiguous attempt unsettled, which a vendor's report that came
/// meanwhile may settle ([`settle_recorded`]).
pub(super) fn leaves_unsettled(claim: &Claim, decision: &Decision) -> bool {
    let own = decision.attempt.as_ref();
    decision.settle.is_none()
        && (own.is_some_and(|a| a.result == AttemptResult::Ambiguous)
            || claim
                .attempts
                .iter()
                .any(|a| a.result == AttemptResult::Ambiguous && a.settled_by.is_none()))
}

/// Adds a suppression and its audit record; `false` if the recipient was suppressed already.
async fn suppress(conn: &mut impl Conn, new: &NewSuppression) -> StoreResult<bool> {
    let s = &new.suppression;
    let added = conn
        .execute(
            INSERT_SUPPRESSION,
            vec![
                Arg::from(&new.tenant),
                Arg::from(s.channel.as_str()),
                Arg::from(&s.recipient),
                Arg::from(s.reason.as_str()),
                Arg::from(&s.source),
                Arg::json(&s.evidence),
                Arg::from(s.note.as_deref()),
                Arg::from(s.created_at),
                Arg::from(s.category.as_deref().unwrap_or_default()),
            ],
        )
        .await?
        == 1;
    if added {
        conn.execute(
            LOG_SUPPRESSION,
            vec![
                Arg::from(&new.tenant),
                Arg::from(s.channel.as_str()),
                Arg::from(&s.recipient),
                Arg::from("added"),
                Arg::from(s.reason.as_str()),
                Arg::from(&new.principal),
                Arg::from(s.note.as_deref()),
                Arg::json(&s.evidence),
                Arg::from(s.created_at),
                Arg::from(s.category.as_deref().unwrap_or_default()),
            ],
        )
        .await?;
    }
    Ok(added)
}

#[derive(FromRow)]
struct SuppressionRow {
    channel: String,
    recipient: String,
    category: String,
    reason: String,
    source: String,
    evidence: Json<Value>,
    note: Option<String>,
    created_at: Timestamp,
}

impl TryFrom<SuppressionRow> for Suppression {
    type Error = StoreError;

    fn try_from(row: SuppressionRow) -> Result<Self, StoreError> {
        Ok(Suppression {
            channel: Channel::parse(&row.channel)
                .ok_or_else(|| corrupt("channel", &row.channel))?,
            recipient: row.recipient,
            category: Some(row.category).filter(|c| !c.is_empty()),
            reason: SuppressionReason::parse(&row.reason)
                .ok_or_else(|| corrupt("reason", &row.reason))?,
            source: row.source,
            evidence: row.evidence.0,
            note: row.note,
            created_at: row.created_at.into_inner(),
        })
    }
}

#[derive(FromRow)]
pub(super) struct ReceiptWithOwner {
    pub(super) notification_id: Uuid,
    status: String,
    at: Timestamp,
    source: String,
    vendor_status: String,
}

impl TryFrom<ReceiptWithOwner> for Receipt {
    type Error = StoreError;

    fn try_from(row: ReceiptWithOwner) -> Result<Self, StoreError> {
        Ok(Receipt {
            status: ReceiptStatus::parse(&row.status)
                .ok_or_else(|| corrupt("receipt status", &row.status))?,
            at: row.at.into_inner(),
            source: row.source,
            vendor_status: row.vendor_status,
        })
    }
}

#[async_trait]
impl<D: Dialect> Receipts for SqlStore<D> {
    async fn receive_callbacks(&self, callbacks: &NewCallbacks) -> StoreResult<CallbacksTaken> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.try_take_callbacks(callbacks).await {
                Err(err) if tries < super::seam::ACCEPT_TRIES && D::retryable(&err) => {
                    tracing::debug!(%err, "taking callbacks collided with another transaction; retrying");
                }
                outcome => return outcome,
            }
        }
    }

    async fn suppressed(
        &self,
        tenant: &str,
        channel: Channel,
        recipient: &str,
        category: Option<&str>,
    ) -> StoreResult<bool> {
        let row: Option<(i32,)> = self
            .0
            .read()
            .await?
            .fetch_optional(
                SUPPRESSED,
                args![tenant, channel.as_str(), recipient, category],
            )
            .await?;
        Ok(row.is_some())
    }

    async fn suppressions(
        &self,
        tenant: &str,
        filter: &SuppressionFilter,
    ) -> StoreResult<Vec<Suppression>> {
        let (after_channel, after_recipient, after_category) = match &filter.after {
            Some((channel, recipient, category)) => (
                Some(channel.as_str()),
                Some(recipient.as_str()),
                Some(category.as_deref().unwrap_or_default()),
            ),
            None => (None, None, None),
        };
        let rows: Vec<SuppressionRow> = self
            .0
            .read()
            .await?
            .fetch_all(
                SUPPRESSIONS,
                args![
                    tenant,
                    filter.channel.map(Channel::as_str),
                    after_channel,
                    after_recipient,
                    i64::from(filter.limit),
                    filter.recipient.as_deref(),
                    after_category,
                ],
            )
            .await?;
        rows.into_iter().map(Suppression::try_from).collect()
    }

    async fn suppress(&self, new: &NewSuppression) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        let added = suppress(&mut *tx, new).await?;
        tx.commit().await?;
        Ok(added)
    }

    async fn lift_suppression(&self, lift: &LiftSuppression) -> StoreResult<Suppression> {
        let mut tx = self.begin().await?;
        let row: Option<SuppressionRow> = tx
            .fetch_optional(
                LIFT,
                args![
                    &lift.tenant,
                    lift.channel.as_str(),
                    &lift.recipient,
                    lift.category.as_deref().unwrap_or_default()
                ],
            )
            .await?;
        let lifted = Suppression::try_from(row.ok_or(StoreError::NotFound)?)?;
        tx.execute(
            LOG_SUPPRESSION,
            vec![
                Arg::from(&lift.tenant),
                Arg::from(lift.channel.as_str()),
                Arg::from(&lift.recipient),
                Arg::from("lifted"),
                Arg::from(lifted.reason.as_str()),
                Arg::from(&lift.principal),
                Arg::from(lift.note.as_str()),
                Arg::json(&lifted.evidence),
                Arg::from(lift.at),
                Arg::from(lift.category.as_deref().unwrap_or_default()),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(lifted)
    }
}
