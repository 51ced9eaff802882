//! The rows the store reads, the columns each statement selects for them, the statement
//! templates each dialect fills in, and the reads and writes every area of the store shares (a
//! notification's attempts, an outbox event).

use serde_json::{Map, Value};
use sqlx::FromRow;
use sqlx::types::Json;
use uuid::Uuid;

use super::many::Rows;
use super::seam::Tx;
use super::seam::{Arg, Conn, Dialect};
use super::{
    AcceptOutcome, ClaimedEvent, EventType, OutboxEvent, StoreError, StoreResult, Timestamp,
};
use crate::domain::{
    Attempt, AttemptResult, Certainty, Channel, Content, Contradiction, Delivery, Notification,
    NotificationId, Resolution, SettledBy, Sibling, State, TraceParent,
};
use herald_provider::Request;

macro_rules! notification_columns {
    () => {
        "id, tenant, channel, recipient, route, delivery, content, metadata, state, certainty, \
         acknowledged, cancellation_key, category, send_at, expires_at, due_at, created_at, \
         updated_at, key_epoch, failovers, late_evidence, contradiction, contradicted_at, \
         traceparent"
    };
}

/// The columns of a [`ClaimedRow`]: a notification with what dispatch and review need of it.
macro_rules! claimed_columns {
    () => {
        concat!(
            "generation, attempt_count, provider_request, budget_from, budget_since, ",
            $crate::store::rows::notification_columns!()
        )
    };
}
pub(super) use {claimed_columns, notification_columns};

macro_rules! look_alike_columns {
    () => {
        "a.notification_id, n.created_at AS notification_created_at, a.n, a.route, \
         a.provider_idempotency_key, a.started_at, a.send_deadline, a.finished_at, a.result, \
         a.permanent, a.provider_ref, a.settled_by, a.evidence"
    };
}
pub(super) use look_alike_columns;

macro_rules! attempt_columns {
    () => {
        "n, route, provider_idempotency_key, started_at, send_deadline, finished_at, result, \
         permanent, provider_ref, settled_by, evidence"
    };
}
pub(super) use attempt_columns;

macro_rules! resolution_columns {
    () => {
        "principal, outcome, then_action, note, created_at, state_before, certainty_before, \
         state_after, certainty_after, forced, key_renewed"
    };
}
pub(super) use resolution_columns;

/// Outbox events, as many as a statement is given.
static INSERT_EVENTS: Rows = Rows::new(
    "INSERT INTO outbox (id, tenant, notification_id, type, data, created_at, traceparent)
     VALUES ",
    "($1, $2, $3, $4, $5, $6, $7)",
    7,
    "",
);

/// Every attempt of notification `id`, oldest first.
pub(super) async fn attempts_of<D: Dialect>(
    conn: &mut impl Conn,
    id: NotificationId,
) -> StoreResult<Vec<Attempt>> {
    let rows: Vec<AttemptWithOwner> = conn
        .fetch_all(D::ATTEMPTS_OF_MANY, vec![Arg::Uuids(vec![id.as_uuid()])])
        .await?;
    rows.into_iter().map(|row| row.attempt.try_into()).collect()
}

pub(super) async fn insert_event<D: Dialect>(
    tx: &mut Tx<D>,
    event: &OutboxEvent,
) -> StoreResult<()> {
    insert_events(tx, std::slice::from_ref(event)).await
}

/// Outbox events, a few statements for all of them; the transaction's commit wakes the relay.
pub(super) async fn insert_events<D: Dialect>(
    tx: &mut Tx<D>,
    events: &[OutboxEvent],
) -> StoreResult<()> {
    if !events.is_empty() {
        tx.wrote_events();
    }
    INSERT_EVENTS
        .execute(&mut **tx, events, |event, args| {
            args.extend([
                Arg::from(event.id),
                Arg::from(&event.tenant),
                Arg::from(event.notification_id),
                Arg::from(event.event_type.as_str()),
                Arg::json(&event.data),
                Arg::from(event.created_at),
                Arg::from(event.trace_parent.as_ref().map(TraceParent::as_str)),
            ])
        })
        .await
}

pub(super) fn rows_into<R, T>(rows: Vec<R>) -> StoreResult<Vec<T>>
where
    T: TryFrom<R, Error = StoreError>,
{
    rows.into_iter().map(T::try_from).collect()
}

/// A text column holds a name this build does not know: the database was written by another
/// version, or by hand.
pub(super) fn corrupt(column: &str, value: &str) -> StoreError {
    StoreError::Internal(anyhow::anyhow!(
        "unexpected {column} `{value}` in the database"
    ))
}

#[derive(FromRow)]
pub(super) struct NotificationRow {
    pub(super) id: Uuid,
    pub(super) tenant: String,
    pub(super) channel: String,
    pub(super) recipient: String,
    pub(super) route: String,
    pub(super) delivery: String,
    pub(super) content: Json<Content>,
    pub(super) metadata: Json<Map<String, Value>>,
    pub(super) state: String,
    pub(super) certainty: Option<String>,
    pub(super) acknowledged: bool,
    pub(super) cancellation_key: Option<String>,
    pub(super) category: Option<String>,
    pub(super) send_at: Option<Timestamp>,
    pub(super) expires_at: Option<Timestamp>,
    pub(super) due_at: Timestamp,
    pub(super) created_at: Timestamp,
    pub(super) updated_at: Timestamp,
    pub(super) key_epoch: i32,
    pub(super) failovers: i32,
    pub(super) late_evidence: bool,
    pub(super) contradiction: Option<String>,
    pub(super) contradicted_at: Option<Timestamp>,
    pub(super) traceparent: Option<String>,
}

impl TryFrom<NotificationRow> for Notification {
    type Error = StoreError;

    fn try_from(row: NotificationRow) -> Result<Self, StoreError> {
        let state = State::parse(&row.state).ok_or_else(|| corrupt("state", &row.state))?;
        let certainty = match row.certainty.as_deref() {
            None => None,
            Some(c) => Some(Certainty::parse(c).ok_or_else(|| corrupt("certainty", c))?),
        };
        Ok(Notification {
            id: NotificationId::from_uuid(row.id),
            tenant: row.tenant,
            channel: Channel::parse(&row.channel)
                .ok_or_else(|| corrupt("channel", &row.channel))?,
            to: row.recipient,
            route: row.route,
            delivery: Delivery::parse(&row.delivery)
                .ok_or_else(|| corrupt("delivery", &row.delivery))?,
            state,
            certainty,
            acknowledged: row.acknowledged,
            content: row.content.0,
            metadata: row.metadata.0,
            cancellation_key: row.cancellation_key,
            category: row.category,
            send_at: row.send_at.map(Timestamp::into_inner),
            expires_at: row.expires_at.map(Timestamp::into_inner),
            next_attempt_at: (state == State::Queued).then(|| row.due_at.into_inner()),
            created_at: row.created_at.into_inner(),
            updated_at: row.updated_at.into_inner(),
            key_epoch: row.key_epoch,
            failovers: row.failovers,
            late_evidence: row.late_evidence,
            contradiction: match (row.contradiction, row.contradicted_at) {
                (Some(why), Some(at)) => Some(Contradiction {
                    why,
                    at: at.into_inner(),
                }),
                _ => None,
            },
            // Written only after parsing: a value that does not parse now was written by hand,
            // and is a link lost, not a notification that cannot be sent.
            trace_parent: row.traceparent.as_deref().and_then(TraceParent::parse),
        })
    }
}

/// A notification row as a claim returns it, with the columns only dispatch needs.
#[derive(FromRow)]
pub(super) struct ClaimedRow {
    pub(super) generation: i64,
    pub(super) attempt_count: i32,
    pub(super) provider_request: Option<Json<Request>>,
    pub(super) budget_from: i32,
    pub(super) budget_since: Option<Timestamp>,
    #[sqlx(flatten)]
    pub(super) notification: NotificationRow,
}

#[derive(FromRow)]
pub(super) struct AttemptRow {
    pub(super) n: i32,
    pub(super) route: String,
    pub(super) provider_idempotency_key: String,
    pub(super) started_at: Timestamp,
    pub(super) send_deadline: Timestamp,
    pub(super) finished_at: Option<Timestamp>,
    pub(super) result: String,
    pub(super) permanent: Option<bool>,
    pub(super) provider_ref: Option<String>,
    pub(super) settled_by: Option<String>,
    pub(super) evidence: Json<Value>,
}

impl TryFrom<AttemptRow> for Attempt {
    type Error = StoreError;

    fn try_from(row: AttemptRow) -> Result<Self, StoreError> {
        let settled_by = match row.settled_by.as_deref() {
            None => None,
            Some(s) => Some(SettledBy::parse(s).ok_or_else(|| corrupt("settled_by", s))?),
        };
        Ok(Attempt {
            n: row.n,
            route: row.route,
            provider_idempotency_key: row.provider_idempotency_key,
            started_at: row.started_at.into_inner(),
            send_deadline: row.send_deadline.into_inner(),
            finished_at: row.finished_at.map(Timestamp::into_inner),
            result: AttemptResult::parse(&row.result)
                .ok_or_else(|| corrupt("result", &row.result))?,
            permanent: row.permanent,
            provider_ref: row.provider_ref,
            settled_by,
            evidence: row.evidence.0,
        })
    }
}

/// An attempt with the notification it belongs to, as a claim of many reads them.
#[derive(FromRow)]
pub(super) struct AttemptWithOwner {
    pub(super) notification_id: Uuid,
    #[sqlx(flatten)]
    pub(super) attempt: AttemptRow,
}

/// An attempt of a look-alike, with its notification's id and age.
#[derive(FromRow)]
pub(super) struct SiblingRow {
    pub(super) notification_id: Uuid,
    pub(super) notification_created_at: Timestamp,
    #[sqlx(flatten)]
    pub(super) attempt: AttemptRow,
}

impl TryFrom<SiblingRow> for Sibling {
    type Error = StoreError;

    fn try_from(row: SiblingRow) -> Result<Self, StoreError> {
        Ok(Sibling {
            notification: NotificationId::from_uuid(row.notification_id),
            created_at: row.notification_created_at.into_inner(),
            attempt: row.attempt.try_into()?,
        })
    }
}

#[derive(FromRow)]
pub(super) struct ResolutionRow {
    pub(super) principal: String,
    pub(super) outcome: String,
    pub(super) then_action: Option<String>,
    pub(super) note: String,
    pub(super) created_at: Timestamp,
    pub(super) state_before: Option<String>,
    pub(super) certainty_before: Option<String>,
    pub(super) state_after: Option<String>,
    pub(super) certainty_after: Option<String>,
    pub(super) forced: bool,
    pub(super) key_renewed: bool,
}

/// A resolution with the notification it belongs to.
#[derive(FromRow)]
pub(super) struct ResolutionWithOwner {
    pub(super) notification_id: Uuid,
    #[sqlx(flatten)]
    pub(super) resolution: ResolutionRow,
}

impl TryFrom<ResolutionRow> for Resolution {
    type Error = StoreError;

    fn try_from(row: ResolutionRow) -> Result<Self, StoreError> {
        let state = |s: Option<String>| match s {
            None => Ok(None),
            Some(s) => State::parse(&s)
                .map(Some)
                .ok_or_else(|| corrupt("state", &s)),
        };
        let certainty = |c: Option<String>| match c {
            None => Ok(None),
            Some(c) => Certainty::parse(&c)
                .map(Some)
                .ok_or_else(|| corrupt("certainty", &c)),
        };
        Ok(Resolution {
            principal: row.principal,
            outcome: row.outcome,
            then: row.then_action,
            note: row.note,
            at: row.created_at.into_inner(),
            state_before: state(row.state_before)?,
            certainty_before: certainty(row.certainty_before)?,
            state_after: state(row.state_after)?,
            certainty_after: certainty(row.certainty_after)?,
            forced: row.forced,
            key_renewed: row.key_renewed,
        })
    }
}

/// An outbox row as a relay claim reads it.
#[derive(FromRow)]
pub(super) struct EventRow {
    pub(super) id: Uuid,
    pub(super) tenant: String,
    pub(super) notification_id: Uuid,
    #[sqlx(rename = "type")]
    pub(super) event_type: String,
    pub(super) data: Json<Value>,
    pub(super) created_at: Timestamp,
    pub(super) traceparent: Option<String>,
    pub(super) failures: i32,
}

impl TryFrom<EventRow> for ClaimedEvent {
    type Error = StoreError;

    fn try_from(row: EventRow) -> Result<Self, StoreError> {
        Ok(ClaimedEvent {
            event: OutboxEvent {
                id: row.id,
                tenant: row.tenant,
                notification_id: NotificationId::from_uuid(row.notification_id),
                event_type: EventType::parse(&row.event_type)
                    .ok_or_else(|| corrupt("event type", &row.event_type))?,
                data: row.data.0,
                created_at: row.created_at.into_inner(),
                trace_parent: row.traceparent.as_deref().and_then(TraceParent::parse),
            },
            failures: row.failures,
        })
    }
}

/// An idempotency key as it stands, named.
#[derive(FromRow)]
pub(super) struct KeyRow {
    pub(super) tenant: String,
    pub(super) key: String,
    #[sqlx(flatten)]
    pub(super) held: IdempotencyRow,
}

#[derive(FromRow)]
pub(super) struct IdempotencyRow {
    pub(super) request_hash: Vec<u8>,
    pub(super) response_status: i32,
    pub(super) response_body: Json<Value>,
}

impl IdempotencyRow {
    /// A key found already taken: the same request is a replay, another one a reuse.
    pub(super) fn outcome_for(&self, request_hash: &[u8]) -> AcceptOutcome {
        if self.request_hash == request_hash {
            AcceptOutcome::Replayed {
                status: u16::try_from(self.response_status).unwrap_or(500),
                body: self.response_body.0.clone(),
            }
        } else {
            AcceptOutcome::KeyReused
        }
    }
}

/// Whether a failed notification's last attempt was refused for good.
macro_rules! refused_for_good {
    () => {
        "EXISTS (SELECT 1 FROM attempts a WHERE a.notification_id = notifications.id
                 AND a.n = notifications.attempt_count AND a.result = 'rejected' AND a.permanent)"
    };
}
pub(super) use refused_for_good;

/// `tenants(tenant)`: each tenant with queued or sending notifications, found by skipping
/// through `notifications_due_by_tenant` one tenant at a time. The walk ends in a NULL row,
/// which `tenants` leaves out: a claim's search of a NULL tenant's due work matched nothing,
/// and PostgreSQL answered it by reading every due row (a claim during a bench's drain: 19.7 ms
/// with 16,000 due rows read and left, 1.5 ms without).
macro_rules! due_tenants {
    () => {
        "WITH RECURSIVE tenant_walk(tenant) AS (
             SELECT min(tenant) FROM notifications WHERE state IN ('queued', 'sending')
             UNION ALL
             SELECT (SELECT min(n.tenant) FROM notifications n
                     WHERE n.state IN ('queued', 'sending') AND n.tenant > tenant_walk.tenant)
             FROM tenant_walk WHERE tenant_walk.tenant IS NOT NULL
         ), tenants(tenant) AS (SELECT tenant FROM tenant_walk WHERE tenant IS NOT NULL) "
    };
}
pub(super) use due_tenants;

/// The list of `GET /v1/notifications`, newest first: `$1` tenant, `$2` state, `$3` certainty,
/// `$4` channel, `$5` route, `$6` created at or after, `$7` created before (each ignored when
/// null), `$8` a JSON object of metadata pairs (empty: any), `$9` strictly older than this id,
/// `$10` limit. `$metadata_holds` is the dialect's test that the row's `metadata` holds every
/// pair of `$8`.
///
/// `notifications_by_tenant` (tenant, id DESC) serves the order and the cursor; the other
/// filters are tested on the rows it walks, and the walk stops at the limit. That is cheap while
/// matches are common among a tenant's newest rows (channels and routes are few); a rare match
/// walks the tenant's history, which an index per filter would avoid at a cost to every
/// enqueue.
macro_rules! list_statement {
    ($metadata_holds:literal) => {
        concat!(
            "SELECT ",
            $crate::store::rows::claimed_columns!(),
            " FROM notifications
             WHERE tenant = $1
               AND ($2 IS NULL OR state = $2)
               AND ($3 IS NULL OR certainty = $3)
               AND ($4 IS NULL OR channel = $4)
               AND ($5 IS NULL OR route = $5)
               AND ($6 IS NULL OR created_at >= $6)
               AND ($7 IS NULL OR created_at < $7)
               AND ",
            $metadata_holds,
            " AND ($9 IS NULL OR id < $9)
             ORDER BY id DESC LIMIT $10"
        )
    };
}
pub(super) use list_statement;

/// The relay's statements, written once, with the dialect's pieces put in:
/// `$in_ids!("column", n)` tests a column against the list of ids bound as `$n`; `$has!("column", n)` tests whether a `published_to` list holds the sink `$n`;
/// `$append!("column", n)` is that list with the sink `$n` added; `$count_in!("column", n)`
/// counts the list's sinks that are in the list `$n`; `$lock` is the row lock of claims.
///
/// Which sinks published an event is kept on its own row (`published_to`), so that the claim
/// and the backlog read one index and the rows it points to, never a join whose plan depends
/// on how fresh the table statistics are; `outbox_published` keeps when each sink took it.
macro_rules! relay_statements {
    ($in_ids:ident, $has:ident, $append:ident, $count_in:ident, $lock:literal) => {
        $crate::store::seam::RelayStatements {
            due: concat!(
                "SELECT o.id, o.tenant, o.notification_id, o.type, o.data, o.created_at,
                        o.traceparent, coalesce(l.failures, 0) AS failures
                 FROM outbox o LEFT JOIN outbox_leases l ON l.event_id = o.id AND l.sink = $1
                 WHERE o.published_at IS NULL
                   AND (l.held_until IS NULL OR l.held_until <= $2)
                   AND NOT ",
                $has!("o.published_to", 1),
                " AND NOT EXISTS (
                       SELECT 1 FROM outbox e
                       WHERE e.notification_id = o.notification_id AND e.seq < o.seq
                         AND e.published_at IS NULL AND NOT ",
                $has!("e.published_to", 1),
                ") ORDER BY o.seq LIMIT $3 ",
                $lock
            ),
            lease: concat!(
                "INSERT INTO outbox_leases (event_id, sink, held_until)
                 SELECT id, $2, $3 FROM outbox WHERE ",
                $in_ids!("id", 1),
                " ON CONFLICT (event_id, sink) DO UPDATE SET held_until = excluded.held_until
                 WHERE outbox_leases.held_until <= $4
                 RETURNING event_id"
            ),
            published: concat!(
                "UPDATE outbox SET published_to = ",
                $append!("published_to", 2),
                " WHERE ",
                $in_ids!("id", 1),
                " AND NOT ",
                $has!("published_to", 2),
                " RETURNING id"
            ),
            history: concat!(
                "INSERT INTO outbox_published (event_id, sink, published_at)
                 SELECT id, $2, $3 FROM outbox WHERE ",
                $in_ids!("id", 1),
                " ON CONFLICT (event_id, sink) DO NOTHING"
            ),
            release: concat!(
                "DELETE FROM outbox_leases WHERE sink = $2 AND ",
                $in_ids!("event_id", 1)
            ),
            done: concat!(
                "UPDATE outbox SET published_at = $3
                 WHERE published_at IS NULL AND ",
                $in_ids!("id", 1),
                " AND ",
                $count_in!("published_to", 2),
                " = $4"
            ),
            hold: concat!(
                "UPDATE outbox_leases SET held_until = $3, failures = failures + 1, last_error = $4
                 WHERE sink = $2 AND ",
                $in_ids!("event_id", 1)
            ),
            backlog: concat!(
                "SELECT count(*), min(o.created_at) FROM outbox o
                 WHERE o.published_at IS NULL AND NOT ",
                $has!("o.published_to", 1)
            ),
        }
    };
}
pub(super) use relay_statements;

/// Retention's statements, written once, with the dialect's `$in_ids!("column", n)` and row
/// lock put in.
macro_rules! retention_statements {
    ($in_ids:ident, $lock:literal) => {
        $crate::store::seam::RetentionStatements {
            // Oldest first by id: what was created after `$2` cannot have finished before it,
            // so the walk stops there.
            finished: concat!(
                "SELECT id FROM notifications
                 WHERE id < $1 AND finished_at < $2
                   AND ((state = 'cancelled' AND certainty = 'known'
                         AND (acknowledged OR contradiction IS NULL))
                        OR (state = 'delivered'
                            AND (acknowledged
                                 OR (certainty <> 'duplicate_possible' AND contradiction IS NULL)))
                        OR (state = 'failed'
                            AND (acknowledged OR ($4 AND ",
                $crate::store::rows::refused_for_good!(),
                "))))
                   AND NOT EXISTS (SELECT 1 FROM outbox o
                                   WHERE o.notification_id = notifications.id
                                     AND o.published_at IS NULL)
                 ORDER BY id LIMIT $3 ",
                $lock
            ),
            children: [
                concat!(
                    "DELETE FROM attempts WHERE ",
                    $in_ids!("notification_id", 1)
                ),
                concat!(
                    "DELETE FROM resolutions WHERE ",
                    $in_ids!("notification_id", 1)
                ),
                concat!(
                    "DELETE FROM idempotency_keys WHERE ",
                    $in_ids!("notification_id", 1)
                ),
                concat!("DELETE FROM outbox WHERE ", $in_ids!("notification_id", 1)),
                concat!(
                    "DELETE FROM receipts WHERE ",
                    $in_ids!("notification_id", 1)
                ),
                concat!(
                    "DELETE FROM callbacks WHERE ",
                    $in_ids!("notification_id", 1)
                ),
                concat!(
                    "DELETE FROM notification_attachments WHERE ",
                    $in_ids!("notification_id", 1)
                ),
            ],
            notifications: concat!("DELETE FROM notifications WHERE ", $in_ids!("id", 1)),
        }
    };
}
pub(super) use retention_statements;

/// The notification enqueued under the idempotency key `$2` of the tenant `$1`.
macro_rules! by_idempotency_key {
    () => {
        "id IN (SELECT notification_id FROM idempotency_keys WHERE tenant = $1 AND key = $2)"
    };
}
pub(super) use by_idempotency_key;

/// A cancellation's statements, with the dialect's row lock (`$lock`): the tenant's (`$1`)
/// notifications still `queued` that it names, locked against a claim until it commits.
macro_rules! cancel_statements {
    ($lock:literal) => {
        $crate::store::seam::CancelStatements {
            by_id: concat!(
                "SELECT id, attempt_count FROM notifications
                 WHERE tenant = $1 AND id = $2 AND state || '' = 'queued' ",
                $lock
            ),
            by_cancellation_key: concat!(
                "SELECT id, attempt_count FROM notifications
                 WHERE tenant = $1 AND cancellation_key = $2 AND state || '' = 'queued'
                 ORDER BY id ",
                $lock
            ),
            by_idempotency_key: concat!(
                "SELECT id, attempt_count FROM notifications
                 WHERE tenant = $1 AND ",
                $crate::store::rows::by_idempotency_key!(),
                " AND state || '' = 'queued' ORDER BY id ",
                $lock
            ),
        }
    };
}
pub(super) use cancel_statements;

/// Settles every unsettled ambiguous attempt but this step's own (`$2`) on route `$7` (only its
/// own vendor speaks for a route's sends; NULL, a person's word, settles every route's); the
/// vendor reference that settled them, if any, goes on the earliest (`$6`).
pub(super) const SETTLE: &str = "UPDATE attempts
     SET settled_by = $3, evidence = json_patch(evidence, $4),
         provider_ref = CASE WHEN n = $6 THEN coalesce($5, provider_ref) ELSE provider_ref END
     WHERE notification_id = $1 AND result = 'ambiguous' AND settled_by IS NULL AND n <> $2
       AND ($7 IS NULL OR route = $7)";
