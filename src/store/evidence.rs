//! Later evidence held against the record: after a lost claim's late answer, a vendor's report,
//! or a record made while either came, the store reads what it now knows of the notification
//! and applies what [`crate::domain::reopen`] makes of it, in the same transaction.

use time::OffsetDateTime;

use super::rows::{NotificationRow, attempts_of, insert_event};
use super::seam::{Arg, Conn, Dialect, Tx, args};
use super::{EventType, OutboxEvent, StoreResult};
use crate::domain::{Notification, NotificationId, Reported, reopen};

/// The messages vendors reported of notification `$1`, as (route, provider key, the vendor's id
/// where the report named one): each report with a receipt says that route's vendor took the
/// message sent under that key.
const REPORTED: &str = "SELECT DISTINCT route, provider_key, provider_ref FROM callbacks
     WHERE notification_id = $1 AND provider_key IS NOT NULL AND status <> 'none'";
/// Reopens a notification as later evidence makes it (delivered after all or perhaps twice, or
/// perhaps sent), in review until a person acknowledges it, under a new generation so that a
/// resolution read before is refused.
const REOPEN: &str = concat!(
    "UPDATE notifications
     SET state = $2, certainty = $3, acknowledged = false, contradiction = $4,
         contradicted_at = $5, finished_at = $5, updated_at = $5, generation = generation + 1
     WHERE id = $1
     RETURNING ",
    super::rows::notification_columns!()
);

/// Holds `n` (as it stands in this transaction, its row locked) against every piece of evidence
/// stored about it, and reopens it where the evidence contradicts it, with its `reopened` event.
/// The notification as reopened, if it was.
pub(super) async fn hold_against_evidence<D: Dialect>(
    tx: &mut Tx<D>,
    n: Notification,
    now: OffsetDateTime,
) -> StoreResult<Option<Notification>> {
    let attempts = attempts_of::<D>(&mut **tx, n.id).await?;
    let reported = reported(&mut **tx, n.id).await?;
    let Some(reopen) = reopen(&n, &attempts, &reported) else {
        return Ok(None);
    };
    let row: NotificationRow = tx
        .fetch_one(
            REOPEN,
            args![
                n.id,
                reopen.state.as_str(),
                reopen.certainty.as_str(),
                reopen.why.as_str(),
                now
            ],
        )
        .await?;
    let reopened: Notification = row.try_into()?;
    // Reopened while it waited to be sent again: this is its first final state, and those who
    // wait for one hear it as from any other record, then why.
    if !n.state.is_final()
        && let Some(final_state) = EventType::of_final(reopened.state)
    {
        let event = OutboxEvent::for_notification(&reopened, final_state, now);
        insert_event(tx, &event).await?;
    }
    let mut event = OutboxEvent::for_notification(&reopened, EventType::Reopened, now);
    event.data["contradiction"] = reopen.why.clone().into();
    insert_event(tx, &event).await?;
    tracing::warn!(
        notification_id = %n.id,
        route = %n.route,
        before = %n.state,
        certainty = %reopen.certainty,
        why = %reopen.why,
        "later evidence contradicts the record; reopened for review"
    );
    metrics::counter!("herald_reopened_total", "route" => n.route.clone(), "cause" => reopen.cause)
        .increment(1);
    if reopen.duplicate {
        metrics::counter!("herald_duplicates_total", "route" => n.route.clone(), "cause" => reopen.cause)
            .increment(1);
    }
    Ok(Some(reopened))
}

/// The messages vendors reported of notification `id`.
pub(super) async fn reported(
    conn: &mut impl Conn,
    id: NotificationId,
) -> StoreResult<Vec<Reported>> {
    let rows: Vec<(String, String, Option<String>)> = conn.fetch_all(REPORTED, args![id]).await?;
    Ok(rows
        .into_iter()
        .map(|(route, key, message)| Reported {
            route,
            key,
            message,
        })
        .collect())
}
