//! The store's conformance suite: every case calls [`Store`] directly and runs on SQLite and on
//! PostgreSQL, so that the two backends are held to one behaviour (the transactions are written
//! once; this proves the dialects underneath agree). One file per area of the store, as
//! `src/store/` has them, under `tests/store/`; the rig and the builders they share are here.

mod support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, json};
use time::OffsetDateTime;

use herald::domain::certainty;
use herald::domain::transitions::{Mover, TRANSITIONS, Transition, allowed};
use herald::domain::{
    AttemptOutcome, AttemptResult, Certainty, Channel, Content, Decision, Delivery, HoldReason,
    IdempotencyKey, Next, Notification, NotificationId, SettledBy, Settlement, State, Suppression,
    SuppressionReason, TraceParent,
};
use herald::review::{Ask, Change, Outcome, PermanentRefusals, Reason, Resend, Then};
use herald::store::{
    AcceptOutcome, Backlog, CancelKey, Cancellation, Claim, ClaimMode, ClaimedEvent, EventType,
    InboxOutcome, ListFilter, NewAccept, NewCallbacks, NewInboxEvent, NewResolution,
    NewSuppression, Recorded, ReviewFilter, ReviewPreview, RouteSlot, Store, StoreError,
};
use herald_provider::Request;
use herald_provider::callback::{CallbackEvent, CallbackRef, ReceiptStatus};
use support::{Backend, TestDb};
#[path = "store/claims.rs"]
mod claims;
#[path = "store/inbox.rs"]
mod inbox;
#[path = "store/migrations.rs"]
mod migrations;
#[path = "store/notifications.rs"]
mod notifications;
#[path = "store/outbox.rs"]
mod outbox;
#[path = "store/receipts.rs"]
mod receipts;
#[path = "store/records.rs"]
mod records;
#[path = "store/retention.rs"]
mod retention;
#[path = "store/review.rs"]
mod review;
#[path = "store/transitions.rs"]
mod transitions;

const LEASE: Duration = Duration::from_secs(30);
/// How long after a claim its sends may start their calls.
const SEND_WINDOW: Duration = Duration::from_secs(19);

struct Rig {
    db: TestDb,
    store: Arc<dyn Store>,
}

async fn rig(backend: Backend) -> Option<Rig> {
    support::install_crypto();
    let db = TestDb::new(backend).await?;
    let store = herald::store::connect(&db.url, 8)
        .await
        .expect("the store opens");
    Some(Rig { db, store })
}

fn now() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    // Both stores keep microseconds.
    now.replace_nanosecond(now.nanosecond() / 1000 * 1000)
        .unwrap()
}

fn notification(
    tenant: &str,
    route: &str,
    to: &str,
    text: &str,
    at: OffsetDateTime,
) -> Notification {
    Notification {
        id: NotificationId::new(),
        tenant: tenant.to_owned(),
        channel: Channel::Sms,
        to: to.to_owned(),
        route: route.to_owned(),
        delivery: Delivery::AtMostOnce,
        state: State::Queued,
        certainty: None,
        acknowledged: false,
        content: Content {
            text: Some(text.to_owned()),
            ..Content::default()
        },
        metadata: Map::new(),
        cancellation_key: None,
        category: None,
        send_at: None,
        expires_at: None,
        next_attempt_at: Some(at),
        created_at: at,
        updated_at: at,
        key_epoch: 0,
        failovers: 0,
        late_evidence: false,
        contradiction: None,
        trace_parent: None,
    }
}

fn accept_of(key: &str, n: Notification, hash: u8) -> NewAccept {
    NewAccept {
        key: IdempotencyKey::parse("Idempotency-Key", key).unwrap(),
        request_hash: vec![hash; 32],
        response: json!({"id": n.id, "answer": key}),
        notification: n,
        files: Vec::new(),
    }
}

/// The tenant's notifications, up to 100.
async fn listed_of(store: &dyn Store, tenant: &str) -> Vec<herald::store::NotificationDetail> {
    let all = ListFilter {
        limit: 100,
        ..ListFilter::default()
    };
    store.list(tenant, &all).await.unwrap()
}

/// Accepts one notification under its own key and returns it.
async fn accepted(store: &dyn Store, n: Notification) -> Notification {
    let key = format!("key-{}", n.id);
    let outcomes = store
        .accept(&[accept_of(&key, n.clone(), 1)])
        .await
        .unwrap();
    assert_eq!(outcomes, [AcceptOutcome::Created]);
    n
}

/// Slots on `names` that take as much as a claim asks for.
fn routes(names: &[&str]) -> Vec<RouteSlot> {
    names
        .iter()
        .map(|r| RouteSlot {
            route: (*r).to_owned(),
            take: 1000,
            send_window: SEND_WINDOW,
        })
        .collect()
}

async fn claim(store: &dyn Store, at: OffsetDateTime, limit: u32, on: &[&str]) -> Vec<Claim> {
    store
        .claim(at, LEASE, limit, &routes(on), &|n| {
            Some(Request::new(format!(
                "to={}&text={}",
                n.to,
                n.content.text.as_deref().unwrap_or("")
            )))
        })
        .await
        .unwrap()
}

fn decision(next: Next) -> Decision {
    Decision {
        attempt: None,
        settle: None,
        findings: None,
        next,
    }
}

fn outcome(n: i32, result: AttemptResult, provider_ref: Option<&str>) -> AttemptOutcome {
    AttemptOutcome {
        n,
        result,
        permanent: None,
        provider_ref: provider_ref.map(str::to_owned),
        evidence: json!({"stage": "response"}),
    }
}

fn finish(state: State, certainty: Certainty) -> Next {
    Next::Finish { state, certainty }
}

async fn applied(
    store: &dyn Store,
    claim: &Claim,
    d: &Decision,
    at: OffsetDateTime,
) -> Notification {
    match store.record(claim, d, at).await.unwrap() {
        Recorded::Applied { notification, .. } => *notification,
        Recorded::Fenced => panic!("the claim was not expected to be lost"),
    }
}

fn inbox_event(source: &str, id: &str, notifications: Vec<Notification>) -> NewInboxEvent {
    NewInboxEvent {
        tenant: "acme".into(),
        source: source.into(),
        id: id.into(),
        notifications,
        received_at: now(),
    }
}

async fn claim_events(store: &dyn Store, sink: &str, at: OffsetDateTime) -> Vec<ClaimedEvent> {
    store.claim_events(sink, at, LEASE, 100).await.unwrap()
}

fn sinks() -> Vec<String> {
    vec![BUS.to_owned(), HOOK.to_owned()]
}

/// A vendor's report that it delivered the message sent under `key` (with its own id for it).
fn delivered_report(event_id: &str, key: &str, message: Option<&str>) -> CallbackEvent {
    CallbackEvent {
        event_id: event_id.to_owned(),
        reference: CallbackRef::Key(key.to_owned()),
        message: message.map(str::to_owned),
        status: ReceiptStatus::Delivered,
        vendor_status: "delivered".into(),
        at: None,
        suppress: false,
    }
}

async fn take_reports(
    store: &dyn Store,
    route: &str,
    events: Vec<CallbackEvent>,
    t: OffsetDateTime,
) {
    store
        .receive_callbacks(&NewCallbacks {
            route: route.to_owned(),
            events,
            idempotency_window: None,
            received_at: t,
        })
        .await
        .unwrap();
}

/// Publishes every event, then sweeps a week after `t` with finished notifications kept for
/// seven days and permanent refusals final: what remains is what a keep rule holds.
async fn sweep_a_week_on(store: &dyn Store, t: OffsetDateTime) -> herald::retention::Swept {
    let retention = herald::retention::Settings {
        idempotency: Duration::from_secs(30 * 86_400),
        finished: Some(Duration::from_secs(7 * 86_400)),
        batch_size: 10,
        refusals: PermanentRefusals::Final,
    };
    let awake = tokio_util::sync::CancellationToken::new();
    publish_everything(store, t).await;
    herald::retention::sweep(
        store,
        &retention,
        t + Duration::from_secs(8 * 86_400),
        &awake,
    )
    .await
    .unwrap()
}

fn change(
    state: State,
    certainty: Option<Certainty>,
    settle: Option<bool>,
    resend: Option<Resend>,
) -> Change {
    Change {
        state,
        certainty,
        acknowledged: false,
        settle,
        resend,
        forced: false,
    }
}

fn count_in(stats: &herald::store::QueueStats) -> impl Fn(Reason) -> i64 + '_ {
    |r| stats.review.iter().find(|(x, _)| *x == r).unwrap().1
}

/// Claims `n` and ends it as `next` says, with attempt 1 ambiguous or refused as `result`.
async fn ended(
    store: &dyn Store,
    n: Notification,
    result: AttemptResult,
    permanent: Option<bool>,
    next: Next,
) -> Notification {
    let route = n.route.clone();
    let n = accepted(store, n).await;
    let c = claim(store, n.created_at, 100, &[&route])
        .await
        .into_iter()
        .find(|c| c.notification.id == n.id)
        .unwrap();
    applied(
        store,
        &c,
        &Decision {
            attempt: Some(AttemptOutcome {
                permanent,
                ..outcome(1, result, None)
            }),
            ..decision(next)
        },
        n.created_at,
    )
    .await
}

fn resolution(
    outcome: Outcome,
    then: Option<Then>,
    change: Change,
    before: &Notification,
) -> NewResolution {
    NewResolution {
        principal: "on-call".into(),
        outcome,
        then,
        note: "checked the vendor's dashboard".into(),
        change,
        before: (before.state, before.certainty),
    }
}

fn review_filter(reasons: &[Reason]) -> ReviewFilter {
    ReviewFilter {
        reasons: reasons.to_vec(),
        limit: 100,
        ..ReviewFilter::default()
    }
}

/// A notification whose only attempt was ambiguous and nothing settled: `unknown`.
async fn unknown(store: &dyn Store, t: OffsetDateTime) -> Notification {
    ended(
        store,
        notification("acme", "a", "+1", "u", t),
        AttemptResult::Ambiguous,
        None,
        finish(State::Unknown, Certainty::Unknown),
    )
    .await
}

const BUS: &str = "bus";
const HOOK: &str = "hook";

async fn publish_everything(store: &dyn Store, at: OffsetDateTime) {
    for sink in sinks() {
        loop {
            let claimed = claim_events(store, &sink, at).await;
            if claimed.is_empty() {
                break;
            }
            let ids: Vec<uuid::Uuid> = claimed.iter().map(|c| c.event.id).collect();
            store
                .mark_published(&sink, &ids, &sinks(), at)
                .await
                .unwrap();
        }
    }
}
