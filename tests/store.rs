//! The store's conformance suite: every case calls [`Store`] directly and runs on SQLite and on
//! PostgreSQL, so that the two backends are held to one behaviour (the transactions are written
//! once; this proves the dialects underneath agree).

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

on_both_backends!(
    the_queues_oldest_due_leaves_out_a_route_an_operator_paused,
    the_attachments_by_tenant_migration_keeps_every_named_file_once_per_tenant,
    a_cancellation_key_cancels_what_is_queued_under_it_in_one_step,
    a_contradicted_notification_is_kept_until_a_person_acknowledges_it,
    reports_of_two_messages_while_it_waits_to_be_sent_again_end_it_with_its_final_event,
    a_possible_duplicate_is_kept_until_a_person_acknowledges_it,
    a_sweep_racing_a_resend_an_acknowledgement_and_a_claim_deletes_only_what_was_finished,
    a_new_key_creates_a_replay_answers_again_and_another_body_is_refused,
    concurrent_accepts_of_one_key_create_one_notification,
    a_batch_answers_each_item_in_order_and_commits_together,
    a_key_twice_in_one_batch_is_created_once_and_a_large_batch_whole,
    a_claim_takes_due_work_on_the_given_routes_up_to_its_limit,
    a_claim_fixes_the_provider_request_once,
    a_claim_marks_the_sends_whose_recipient_is_suppressed,
    a_row_a_claim_cannot_read_is_set_aside_and_the_rest_are_claimed,
    a_claim_takes_no_more_of_a_route_than_its_slot_and_fixes_each_send_deadline,
    a_hold_withdraws_its_attempt_spends_no_budget_and_writes_no_event,
    a_lease_that_ends_turns_the_attempt_ambiguous_for_reconciliation,
    a_lost_claim_changes_nothing_but_its_own_attempts_evidence,
    a_decision_settles_unsettled_attempts_and_attributes_the_message_once,
    records_sharing_a_transaction_are_each_fenced_by_their_own_claim_and_fail_together,
    findings_annotate_without_settling,
    a_retry_is_queued_without_an_event_and_a_finish_writes_one,
    only_a_queued_notification_can_be_cancelled,
    lists_are_newest_first_filtered_and_paged_by_cursor,
    a_list_filters_by_channel,
    a_list_filters_by_route,
    a_list_filters_by_creation_time_from_after_up_to_before,
    a_list_filters_by_every_metadata_pair_as_exact_text,
    list_filters_combine_and_page_by_cursor_within_one_tenant,
    look_alikes_are_the_same_request_on_the_same_route_only,
    a_tenant_never_reads_another_tenants_notification,
    review_lists_each_reason_oldest_first_and_filters,
    a_resolution_applies_once_with_its_audit_and_event,
    a_resend_renews_the_key_and_the_budget_when_asked,
    a_requery_in_review_is_fenced_and_emits_only_on_change,
    one_tenants_burst_does_not_delay_another_tenants_notification,
    the_relay_takes_each_notifications_events_in_order_per_sink,
    the_trace_a_notification_was_enqueued_in_comes_back_with_its_claim_and_its_events,
    a_lease_or_a_hold_that_ends_makes_an_event_due_again,
    relays_claiming_at_once_never_take_the_same_event,
    events_published_to_every_sink_are_pruned_after_the_retention,
    an_upstream_event_creates_its_notifications_once,
    an_upstream_event_received_at_once_twice_creates_once,
    keys_and_upstream_event_ids_are_forgotten_after_their_window_a_batch_at_a_time,
    finished_notifications_go_with_their_rows_once_published_and_past_retention,
    a_bulk_preview_is_kept_per_tenant_taken_once_and_expired_ones_go,
    every_guard_moves_only_as_the_transition_table_allows,
);

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

async fn a_new_key_creates_a_replay_answers_again_and_another_body_is_refused(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let n = notification("acme", "sms", "+14155550100", "hello", now());
    let first = rig
        .store
        .accept(&[accept_of("k-1", n.clone(), 1)])
        .await
        .unwrap();
    assert_eq!(first, [AcceptOutcome::Created]);

    let again = notification("acme", "sms", "+14155550100", "hello", now());
    let replay = rig
        .store
        .accept(&[accept_of("k-1", again.clone(), 1)])
        .await
        .unwrap();
    assert_eq!(
        replay,
        [AcceptOutcome::Replayed {
            status: 202,
            body: json!({"id": n.id, "answer": "k-1"}),
        }],
        "the first answer, not one about the second notification"
    );
    let reused = rig
        .store
        .accept(&[accept_of("k-1", again.clone(), 2)])
        .await
        .unwrap();
    assert_eq!(reused, [AcceptOutcome::KeyReused]);
    assert!(matches!(
        rig.store.notification("acme", again.id).await,
        Err(StoreError::NotFound)
    ));

    // Keys belong to a tenant: the same key elsewhere is new.
    let globex = notification("globex", "sms", "+14155550100", "hello", now());
    let other = rig
        .store
        .accept(&[accept_of("k-1", globex, 1)])
        .await
        .unwrap();
    assert_eq!(other, [AcceptOutcome::Created]);
}

async fn concurrent_accepts_of_one_key_create_one_notification(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let store = rig.store.clone();
            tokio::spawn(async move {
                let n = notification("acme", "sms", "+14155550100", "race", now());
                store
                    .accept(&[accept_of("race", n, 7)])
                    .await
                    .unwrap()
                    .remove(0)
            })
        })
        .collect();
    let mut created = 0;
    for task in tasks {
        match task.await.unwrap() {
            AcceptOutcome::Created => created += 1,
            AcceptOutcome::Replayed { status: 202, .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(created, 1);
    let listed = listed_of(&*rig.store, "acme").await;
    assert_eq!(listed.len(), 1);
}

async fn a_batch_answers_each_item_in_order_and_commits_together(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let old = accepted(&*rig.store, notification("acme", "sms", "+1", "old", now())).await;
    let old_key = format!("key-{}", old.id);
    let items = vec![
        accept_of("b-1", notification("acme", "sms", "+1", "a", now()), 1),
        accept_of(&old_key, notification("acme", "sms", "+1", "old", now()), 1),
        accept_of("b-2", notification("acme", "sms", "+1", "b", now()), 1),
        accept_of(
            &old_key,
            notification("acme", "sms", "+1", "other", now()),
            9,
        ),
    ];
    let outcomes = rig.store.accept(&items).await.unwrap();
    assert!(matches!(outcomes[0], AcceptOutcome::Created));
    assert!(matches!(outcomes[1], AcceptOutcome::Replayed { .. }));
    assert!(matches!(outcomes[2], AcceptOutcome::Created));
    assert_eq!(outcomes[3], AcceptOutcome::KeyReused);
    let listed = listed_of(&*rig.store, "acme").await;
    assert_eq!(listed.len(), 3);
}

/// A batch is written a few statements per table: the first item with a key creates, a later
/// one with the same key is its replay (or a reuse), and a batch larger than one statement's
/// rows is answered whole, in order.
async fn a_key_twice_in_one_batch_is_created_once_and_a_large_batch_whole(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let twice = vec![
        accept_of("twice", notification("acme", "sms", "+1", "a", now()), 1),
        accept_of("once", notification("acme", "sms", "+1", "b", now()), 1),
        accept_of("twice", notification("acme", "sms", "+1", "a", now()), 1),
        accept_of("twice", notification("acme", "sms", "+1", "c", now()), 9),
        accept_of("twice", notification("globex", "sms", "+1", "a", now()), 1),
    ];
    let outcomes = rig.store.accept(&twice).await.unwrap();
    assert_eq!(outcomes[0], AcceptOutcome::Created);
    assert_eq!(outcomes[1], AcceptOutcome::Created);
    assert_eq!(
        outcomes[2],
        AcceptOutcome::Replayed {
            status: 202,
            body: twice[0].response.clone()
        },
        "the first item's answer"
    );
    assert_eq!(outcomes[3], AcceptOutcome::KeyReused);
    assert_eq!(outcomes[4], AcceptOutcome::Created, "another tenant's key");
    let listed = listed_of(&*rig.store, "acme").await;
    assert_eq!(listed.len(), 2, "one notification per key");

    let large: Vec<NewAccept> = (0..301)
        .map(|i| {
            let n = notification("acme", "sms", "+1", &format!("large-{i}"), now());
            accept_of(&format!("large-{i}"), n, 1)
        })
        .collect();
    let outcomes = rig.store.accept(&large).await.unwrap();
    assert!(outcomes.iter().all(|o| *o == AcceptOutcome::Created));
    assert_eq!(outcomes.len(), 301);
    let again = rig.store.accept(&large).await.unwrap();
    for (item, outcome) in large.iter().zip(&again) {
        let answer = AcceptOutcome::Replayed {
            status: 202,
            body: item.response.clone(),
        };
        assert_eq!(*outcome, answer, "each item is answered its own");
    }
}

async fn a_claim_takes_due_work_on_the_given_routes_up_to_its_limit(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let on_a: Vec<_> = {
        let mut v = Vec::new();
        for i in 0..3 {
            v.push(accepted(store, notification("acme", "a", "+1", &format!("a{i}"), t)).await);
        }
        v
    };
    accepted(store, notification("acme", "b", "+1", "b", t)).await;
    let mut later = notification("acme", "a", "+1", "later", t);
    later.next_attempt_at = Some(t + Duration::from_secs(3600));
    accepted(store, later).await;

    let first = claim(store, t, 2, &["a"]).await;
    assert_eq!(first.len(), 2, "the limit holds");
    let second = claim(store, t, 10, &["a"]).await;
    assert_eq!(
        second.len(),
        1,
        "claimed work is not claimed again, future work waits"
    );
    let mut ids: Vec<_> = first
        .iter()
        .chain(&second)
        .map(|c| c.notification.id)
        .collect();
    ids.sort();
    let mut expected: Vec<_> = on_a.iter().map(|n| n.id).collect();
    expected.sort();
    assert_eq!(ids, expected, "only route a");
    for c in first.iter().chain(&second) {
        assert_eq!(
            c.mode,
            ClaimMode::Send {
                n: 1,
                suppressed: false
            }
        );
        assert_eq!(c.notification.state, State::Sending);
        assert_eq!(c.attempts.len(), 1);
        assert_eq!(c.attempts[0].result, AttemptResult::InFlight);
        assert_eq!(
            c.attempts[0].provider_idempotency_key,
            c.notification.provider_key()
        );
    }
    assert!(
        claim(store, t, 10, &[]).await.is_empty(),
        "no routes, no work"
    );
    assert_eq!(claim(store, t, 10, &["b"]).await.len(), 1);
    assert_eq!(
        store.next_due().await.unwrap(),
        Some(t + LEASE),
        "the earliest lease or due time"
    );
}

async fn a_claim_takes_no_more_of_a_route_than_its_slot_and_fixes_each_send_deadline(
    backend: Backend,
) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    for i in 0..4 {
        accepted(
            store,
            notification("acme", "slow", "+1", &format!("s{i}"), t),
        )
        .await;
        accepted(
            store,
            notification("acme", "fast", "+1", &format!("f{i}"), t),
        )
        .await;
    }
    let slots = [
        RouteSlot {
            route: "slow".into(),
            take: 1,
            send_window: Duration::from_secs(7),
        },
        RouteSlot {
            route: "fast".into(),
            take: 3,
            send_window: Duration::from_secs(2),
        },
    ];
    let claims = store.claim(t, LEASE, 64, &slots, &|_| None).await.unwrap();
    let on = |route: &str| {
        claims
            .iter()
            .filter(|c| c.notification.route == route)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (on("slow").len(), on("fast").len()),
        (1, 3),
        "each route gets its slot's worth, however much is due"
    );
    for (route, window) in [("slow", 7), ("fast", 2)] {
        for c in on(route) {
            assert_eq!(
                c.attempts[0].send_deadline,
                t + Duration::from_secs(window),
                "{route}: the call starts within the route's send window of the claim"
            );
        }
    }
    let detail = store
        .notification("acme", on("slow")[0].notification.id)
        .await
        .unwrap();
    assert_eq!(
        detail.attempts[0].send_deadline,
        t + Duration::from_secs(7),
        "the deadline is stored with the intent, for other workers' proofs"
    );
}

async fn a_hold_withdraws_its_attempt_spends_no_budget_and_writes_no_event(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let n = accepted(store, notification("acme", "a", "+1", "held", t)).await;
    let events = || {
        rig.db
            .scalar("SELECT count(*) FROM outbox WHERE type <> 'dev.herald.notification.accepted'")
    };

    // A first send held at its pace: no attempt left, due again when the route can take it.
    let c = claim(store, t, 10, &["a"]).await.remove(0);
    let due = t + Duration::from_secs(3);
    let held = |attempt, reconciling| {
        decision(Next::Hold {
            attempt,
            reason: HoldReason::Paced,
            at: due,
            reconciling,
        })
    };
    let after = applied(store, &c, &held(1, false), t).await;
    assert_eq!(after.state, State::Queued);
    assert_eq!(after.next_attempt_at, Some(due));
    let detail = store.notification("acme", n.id).await.unwrap();
    assert!(detail.attempts.is_empty(), "{:?}", detail.attempts);
    assert_eq!(events().await, 0, "a hold changes no state anyone sees");
    assert!(
        claim(store, t, 10, &["a"]).await.is_empty(),
        "not before it is due"
    );

    // Claimed again, it sends as attempt 1: the hold spent nothing.
    let c = claim(store, due, 10, &["a"]).await.remove(0);
    assert_eq!(
        c.mode,
        ClaimMode::Send {
            n: 1,
            suppressed: false
        }
    );
    let d = Decision {
        attempt: Some(outcome(1, AttemptResult::Ambiguous, None)),
        ..decision(Next::Reconcile { at: due })
    };
    applied(store, &c, &d, due).await;

    // A replay held while it is reconciled: withdrawn, and still reconciling.
    let c = claim(store, due, 10, &["a"]).await.remove(0);
    assert_eq!(c.mode, ClaimMode::Reconcile);
    let replay = store
        .start_attempt(&c, due, LEASE, due + SEND_WINDOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replay.n, 2);
    let later = due + Duration::from_secs(3);
    let after = applied(
        store,
        &c,
        &decision(Next::Hold {
            attempt: 2,
            reason: HoldReason::Deadline,
            at: later,
            reconciling: true,
        }),
        due,
    )
    .await;
    assert_eq!(after.state, State::Sending);
    let detail = store.notification("acme", n.id).await.unwrap();
    assert_eq!(
        detail
            .attempts
            .iter()
            .map(|a| (a.n, a.result))
            .collect::<Vec<_>>(),
        [(1, AttemptResult::Ambiguous)]
    );
    let c = claim(store, later, 10, &["a"]).await.remove(0);
    assert_eq!(c.mode, ClaimMode::Reconcile, "reconciled, not sent afresh");
    let next = store
        .start_attempt(&c, later, LEASE, later + SEND_WINDOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.n, 2, "the withdrawn number is given back");
    assert_eq!(events().await, 0);
}

/// `db` as an earlier herald left it: migrated up to, not including, `version`.
async fn migrated_before(db: &TestDb, version: i64) {
    let backend = match db.backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    let mut migrator = sqlx::migrate::Migrator::new(dir).await.unwrap();
    let older: Vec<_> = migrator
        .migrations
        .iter()
        .filter(|m| m.version < version)
        .cloned()
        .collect();
    migrator.migrations = older.into();
    match db.backend {
        Backend::Sqlite => {
            let options = format!("{}?mode=rwc", db.url)
                .parse::<sqlx::sqlite::SqliteConnectOptions>()
                .unwrap()
                .foreign_keys(true);
            let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
            migrator.run(&pool).await.unwrap();
            pool.close().await;
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
            migrator.run(&pool).await.unwrap();
            pool.close().await;
        }
    }
}

/// Migration 0021 rebuilds SQLite's `notifications` and `suppressions` (a CHECK cannot change
/// in place) while attempts refer to the first: a database in use keeps every row and every
/// reference, and takes the chat channel afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_migration_keeps_a_database_in_use_whole() {
    let Some(db) = TestDb::new(Backend::Sqlite).await else {
        return;
    };
    migrated_before(&db, 21).await;
    let pool = sqlx::SqlitePool::connect(&db.url).await.unwrap();
    sqlx::raw_sql(
        "INSERT INTO notifications (id, tenant, channel, recipient, route, delivery, content,
             metadata, state, due_at, created_at, updated_at, traceparent)
         VALUES (x'01', 'acme', 'sms', '+14155550100', 'sms', 'at_most_once', '{}', '{}',
             'queued', '2026-12-04T00:00:00Z', '2026-12-04T00:00:00Z', '2026-12-04T00:00:00Z',
             '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
         INSERT INTO attempts (notification_id, n, generation, route, provider_idempotency_key,
             started_at, result, evidence)
         VALUES (x'01', 1, 1, 'sms', 'k', '2026-12-04T00:00:00Z', 'in_flight', '{}');
         INSERT INTO suppressions (tenant, channel, recipient, reason, source, evidence,
             created_at)
         VALUES ('acme', 'sms', '+14155550100', 'manual', 'ops', '{}', '2026-12-04T00:00:00Z');",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let store = herald::store::connect(&db.url, 2).await.unwrap();
    let pool = sqlx::SqlitePool::connect(&db.url).await.unwrap();
    let count = |table: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM {table}"
            )))
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(
        (
            count("notifications").await,
            count("attempts").await,
            count("suppressions").await
        ),
        (1, 1, 1)
    );
    let orphans: Vec<(String,)> = sqlx::query_as("SELECT \"table\" FROM pragma_foreign_key_check")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(orphans.is_empty(), "{orphans:?}");
    let kept: String = sqlx::query_scalar("SELECT traceparent FROM notifications")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(kept.starts_with("00-0af7651916cd43dd"));
    let chat = Notification {
        channel: Channel::Chat,
        ..notification(
            "acme",
            "sandbox",
            "C0OPS",
            "Deploy done",
            OffsetDateTime::now_utc(),
        )
    };
    accepted(store.as_ref(), chat).await;
    assert_eq!(count("notifications").await, 2);
}

/// Migration 0023 gives each tenant its own rows of the files its notifications name (stored
/// once across tenants, a repeat enqueue was faster, which told one tenant what another sent):
/// a database in use keeps every named file, once for each tenant that names it, and the
/// references to them; a file no notification names is left behind, as retention would.
async fn the_attachments_by_tenant_migration_keeps_every_named_file_once_per_tenant(
    backend: Backend,
) {
    let Some(db) = TestDb::new(backend).await else {
        return;
    };
    let (ids, content) = match backend {
        Backend::Sqlite => (["x'01'", "x'02'"], "x'cafe'"),
        Backend::Postgres => (
            [
                "'00000000-0000-7000-8000-000000000001'",
                "'00000000-0000-7000-8000-000000000002'",
            ],
            "'\\xcafe'",
        ),
    };
    migrated_before(&db, 23).await;
    for (id, tenant) in ids.iter().zip(["acme", "globex"]) {
        db.execute(&format!(
            "INSERT INTO notifications (id, tenant, channel, recipient, route, delivery, content,
                 metadata, state, due_at, created_at, updated_at)
             VALUES ({id}, '{tenant}', 'email', 'ada@example.com', 'mail', 'at_most_once', '{{}}',
                 '{{}}', 'queued', '2026-12-04T00:00:00Z', '2026-12-04T00:00:00Z',
                 '2026-12-04T00:00:00Z')"
        ))
        .await;
    }
    db.execute(&format!(
        "INSERT INTO attachments (sha256, content, last_used_at) VALUES
             ('aa', {content}, '2026-12-04T00:00:00Z'), ('bb', {content}, '2026-12-04T00:00:00Z')"
    ))
    .await;
    db.execute(&format!(
        "INSERT INTO notification_attachments (notification_id, sha256)
         VALUES ({}, 'aa'), ({}, 'aa')",
        ids[0], ids[1]
    ))
    .await;

    herald::store::connect(&db.url, 2).await.unwrap();
    assert_eq!(
        db.texts("SELECT tenant || ' ' || sha256 FROM attachments ORDER BY tenant")
            .await,
        ["acme aa", "globex aa"]
    );
    assert_eq!(
        db.texts(
            "SELECT n.tenant || ' ' || a.tenant || ' ' || a.sha256 FROM notification_attachments a
             JOIN notifications n ON n.id = a.notification_id ORDER BY n.tenant"
        )
        .await,
        ["acme acme aa", "globex globex aa"]
    );
    if backend == Backend::Sqlite {
        let orphans = db
            .texts("SELECT \"table\" FROM pragma_foreign_key_check")
            .await;
        assert!(orphans.is_empty(), "{orphans:?}");
    }
}

/// Several processes claim from one PostgreSQL database: a claim must never take a row that
/// another claim committed while it was choosing its rows. It did once (a crash run on
/// PostgreSQL): the claim chose from its snapshot, then locked the row the other had just leased,
/// turned that live worker's in-flight attempt ambiguous and fenced it. PostgreSQL only: SQLite
/// admits one writer at a time, so no claim there reads while another commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_never_takes_a_row_another_claim_leased_while_it_chose() {
    let Some(rig) = rig(Backend::Postgres).await else {
        return;
    };
    let t = now();
    // Enough tenants that choosing takes a while: the other claim commits meanwhile.
    let tenants: Vec<NewAccept> = (0..20_000)
        .map(|i| {
            let n = notification(&format!("t{i:05}"), "a", "+1", "n", t);
            accept_of(&format!("key-{}", n.id), n, 1)
        })
        .collect();
    rig.store.accept(&tenants).await.unwrap();
    // The oldest due row: first in every claim.
    let mut first = notification("t00000", "a", "+1", "first", t - Duration::from_secs(1));
    first.next_attempt_at = Some(t - Duration::from_secs(1));
    let first = accepted(&*rig.store, first).await;

    let db = sqlx::PgPool::connect(&rig.db.url).await.unwrap();
    let store = rig.store.clone();
    let claiming = tokio::spawn(async move { claim(&*store, t, 10, &["a"]).await });
    // A statement shows `active` from its Bind, before it is planned and takes its snapshot
    // (seen once: the other commit below landed first, and the claim never saw the row due).
    // So it must have run a while, and still be running, when the other claim commits.
    let choosing = || async {
        let running: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND state = 'active'
               AND query LIKE 'WITH RECURSIVE tenants%'
               AND now() - query_start >= interval '20 milliseconds'",
        )
        .fetch_one(&db)
        .await
        .unwrap();
        running > 0
    };
    while !choosing().await {
        assert!(
            !claiming.is_finished(),
            "the claim chose before the other could commit: give it more tenants"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Another process's claim of that row commits now: `sending`, leased, its attempt in flight.
    sqlx::query(
        "UPDATE notifications SET state = 'sending', generation = generation + 1, due_at = $2
         WHERE id = $1",
    )
    .bind(first.id.as_uuid())
    .bind(t + LEASE)
    .execute(&db)
    .await
    .unwrap();
    assert!(
        choosing().await,
        "the claim chose before the other committed: give it more tenants"
    );
    let claims = claiming.await.unwrap();
    assert!(
        !claims.iter().any(|c| c.notification.id == first.id),
        "took a row under another claim's lease"
    );
    assert_eq!(claims.len(), 9, "the other nine it chose are its own");
    assert!(claims.iter().all(|c| c.mode
        == ClaimMode::Send {
            n: 1,
            suppressed: false
        }));
    db.close().await;
}

/// A stored value herald cannot read (written before it bounded times, or by hand) stops no
/// one else's delivery: the claim sets that notification aside for an hour and takes the rest;
/// nothing is lost, and once repaired it goes out.
async fn a_row_a_claim_cannot_read_is_set_aside_and_the_rest_are_claimed(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let older = t - Duration::from_secs(1);
    let unreadable = accepted(store, notification("legacy", "a", "+1", "old", older)).await;
    let fine = accepted(store, notification("acme", "a", "+1", "new", t)).await;
    // A year this build cannot hold, as a legacy row could carry.
    rig.db
        .execute(
            "UPDATE notifications SET send_at = '10000-01-01T00:00:00Z' WHERE tenant = 'legacy'",
        )
        .await;

    let claimed = claim(store, t, 10, &["a"]).await;
    let ids: Vec<_> = claimed.iter().map(|c| c.notification.id).collect();
    assert_eq!(ids, [fine.id], "the rest are claimed");
    assert_eq!(
        rig.db
            .texts("SELECT state FROM notifications WHERE tenant = 'legacy'")
            .await,
        ["queued"],
        "set aside, not lost"
    );
    let hour = Duration::from_secs(3600);
    assert!(
        claim(store, t + hour - Duration::from_secs(60), 10, &["a"])
            .await
            .iter()
            .all(|c| c.notification.id != unreadable.id),
        "set aside for an hour"
    );

    rig.db
        .execute("UPDATE notifications SET send_at = NULL WHERE tenant = 'legacy'")
        .await;
    let repaired = claim(store, t + hour, 10, &["a"]).await;
    assert!(
        repaired.iter().any(|c| c.notification.id == unreadable.id
            && c.mode
                == ClaimMode::Send {
                    n: 1,
                    suppressed: false
                }),
        "once repaired, it goes out"
    );
}

async fn a_claim_marks_the_sends_whose_recipient_is_suppressed(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let suppress =
        |tenant: &str, channel: Channel, recipient: &str, category: Option<&str>| NewSuppression {
            tenant: tenant.to_owned(),
            suppression: Suppression {
                channel,
                recipient: recipient.to_owned(),
                category: category.map(str::to_owned),
                reason: SuppressionReason::Manual,
                source: "test".into(),
                evidence: json!({}),
                note: None,
                created_at: t,
            },
            principal: "test".into(),
        };
    for s in [
        suppress("acme", Channel::Email, "ann@example.com", None),
        suppress("acme", Channel::Sms, "+15550001", Some("news")),
        suppress("other", Channel::Sms, "+15550002", None),
    ] {
        assert!(store.suppress(&s).await.unwrap());
    }
    let email = |to: &str| Notification {
        channel: Channel::Email,
        ..notification("acme", "a", to, "hi", t)
    };
    let sms = |tenant: &str, to: &str, category: Option<&str>| Notification {
        category: category.map(str::to_owned),
        ..notification(tenant, "a", to, "hi", t)
    };
    let cases = [
        (email("Ann@Example.COM"), true, "an address in another case"),
        (email("bob@example.com"), false, "another address"),
        (
            sms("acme", "+15550001", Some("news")),
            true,
            "the category suppressed",
        ),
        (
            sms("acme", "+15550001", Some("alerts")),
            false,
            "another category",
        ),
        (sms("acme", "+15550001", None), false, "no category"),
        (
            sms("acme", "+15550002", None),
            false,
            "another tenant's suppression",
        ),
    ];
    for (n, _, _) in &cases {
        accepted(store, n.clone()).await;
    }
    let claims = claim(store, t, 10, &["a"]).await;
    assert_eq!(claims.len(), cases.len());
    for (n, suppressed, why) in cases {
        let c = claims.iter().find(|c| c.notification.id == n.id).unwrap();
        assert_eq!(c.mode, ClaimMode::Send { n: 1, suppressed }, "{why}");
    }
}

async fn a_claim_fixes_the_provider_request_once(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let n = accepted(store, notification("acme", "a", "+1", "fixed", t)).await;
    let first = store
        .claim(t, LEASE, 10, &routes(&["a"]), &|_| {
            Some(Request::new("first"))
        })
        .await
        .unwrap()
        .remove(0);
    assert_eq!(first.request, Some(Request::new("first")));
    applied(
        store,
        &first,
        &Decision {
            attempt: Some(AttemptOutcome {
                permanent: Some(false),
                ..outcome(1, AttemptResult::Rejected, None)
            }),
            ..decision(Next::Retry { at: t })
        },
        t,
    )
    .await;
    let retry = store
        .claim(t, LEASE, 10, &routes(&["a"]), &|_| {
            panic!("prepared only once")
        })
        .await
        .unwrap()
        .remove(0);
    assert_eq!(retry.notification.id, n.id);
    assert_eq!(
        retry.mode,
        ClaimMode::Send {
            n: 2,
            suppressed: false
        }
    );
    assert_eq!(
        retry.request,
        Some(Request::new("first")),
        "whatever the route says now"
    );

    // A route that cannot prepare a request stores none, and the claim says so.
    accepted(store, notification("acme", "c", "+1", "unpreparable", t)).await;
    let none = store
        .claim(t, LEASE, 10, &routes(&["c"]), &|_| None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(none.request, None);
}

async fn a_lease_that_ends_turns_the_attempt_ambiguous_for_reconciliation(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    accepted(store, notification("acme", "a", "+1", "crash", t)).await;
    let first = claim(store, t, 10, &["a"]).await.remove(0);
    assert!(
        claim(store, t + LEASE - Duration::from_secs(1), 10, &["a"])
            .await
            .is_empty()
    );
    let after = t + LEASE + Duration::from_secs(1);
    let recovered = claim(store, after, 10, &["a"]).await.remove(0);
    assert_eq!(recovered.mode, ClaimMode::Reconcile);
    assert_eq!(recovered.generation, first.generation + 1);
    assert_eq!(recovered.request, first.request);
    let attempt = &recovered.attempts[0];
    assert_eq!(attempt.result, AttemptResult::Ambiguous);
    assert_eq!(attempt.evidence["stage"], "lease_expired");
    assert_eq!(attempt.finished_at, Some(after));
}

async fn a_lost_claim_changes_nothing_but_its_own_attempts_evidence(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let n = accepted(store, notification("acme", "a", "+1", "fenced", t)).await;
    let stale = claim(store, t, 10, &["a"]).await.remove(0);
    let fresh = claim(store, t + LEASE + Duration::from_secs(1), 10, &["a"])
        .await
        .remove(0);

    assert!(
        store
            .start_attempt(&stale, t, LEASE, t + SEND_WINDOW)
            .await
            .unwrap()
            .is_none(),
        "a lost claim starts nothing"
    );
    let late = Decision {
        attempt: Some(outcome(1, AttemptResult::Accepted, Some("late-ref"))),
        ..decision(finish(State::Delivered, Certainty::Known))
    };
    assert!(matches!(
        store.record(&stale, &late, t).await.unwrap(),
        Recorded::Fenced
    ));
    let detail = store.notification("acme", n.id).await.unwrap();
    assert_eq!(detail.notification.state, State::Sending);
    let first = &detail.attempts[0];
    assert_eq!(first.result, AttemptResult::Ambiguous);
    assert_eq!(first.provider_ref, None);
    assert_eq!(first.evidence["late_result"]["provider_ref"], "late-ref");

    // The fresh claim still works: a resend starts attempt 2, with its own send deadline.
    let attempt = store
        .start_attempt(&fresh, t, LEASE, t + SEND_WINDOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(attempt.n, 2);
    assert_eq!(attempt.result, AttemptResult::InFlight);
    assert_eq!(attempt.send_deadline, t + SEND_WINDOW);

    // Its acceptance, recorded after the late one, is held against it: two messages.
    let mut fresh = fresh;
    fresh.attempts.push(attempt);
    let resent = Decision {
        attempt: Some(outcome(2, AttemptResult::Accepted, Some("resent-ref"))),
        ..decision(finish(State::Delivered, Certainty::Known))
    };
    let Recorded::Applied {
        notification: n, ..
    } = store.record(&fresh, &resent, t).await.unwrap()
    else {
        panic!("the fresh claim records");
    };
    assert_eq!(
        (n.state, n.certainty),
        (State::Delivered, Some(Certainty::DuplicatePossible)),
        "the late acceptance and the resend are two messages"
    );
    let why = &n.contradiction.as_ref().expect("reopened").why;
    assert!(
        why.contains("attempt 1 was answered `accepted` (late-ref)"),
        "{why}"
    );
    assert_eq!(
        rig.db
            .scalar("SELECT count(*) FROM outbox WHERE type = 'dev.herald.notification.reopened'")
            .await,
        1
    );

    // It waits for a person as `contradicted`, not as an ordinary duplicate, until acknowledged.
    let listed = |reason: Reason| async move {
        let filter = review_filter(&[reason]);
        let items = store.review("acme", &filter).await.unwrap();
        items
            .into_iter()
            .map(|d| d.notification.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(listed(Reason::Contradicted).await, [n.id]);
    assert!(listed(Reason::DuplicatePossible).await.is_empty());
    assert_eq!(
        count_in(&store.queue_stats(t).await.unwrap())(Reason::Contradicted),
        1
    );
    let read = store.notification("acme", n.id).await.unwrap();
    let acknowledge = resolution(
        Outcome::Acknowledged,
        None,
        Change {
            acknowledged: true,
            ..change(
                State::Delivered,
                Some(Certainty::DuplicatePossible),
                None,
                None,
            )
        },
        &n,
    );
    store
        .resolve("acme", n.id, read.generation, &acknowledge, t)
        .await
        .unwrap();
    assert!(listed(Reason::Contradicted).await.is_empty());
    assert_eq!(
        count_in(&store.queue_stats(t).await.unwrap())(Reason::Contradicted),
        0
    );
}

async fn a_decision_settles_unsettled_attempts_and_attributes_the_message_once(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let after = t + LEASE + Duration::from_secs(1);
    let (one, two) = (
        accepted(store, notification("acme", "a", "+1", "twin", t)).await,
        accepted(store, notification("acme", "a", "+1", "twin", t)).await,
    );
    claim(store, t, 10, &["a"]).await;
    let claims = claim(store, after, 10, &["a"]).await;
    let of = |id| claims.iter().find(|c| c.notification.id == id).unwrap();
    let settle = |reference: &str| Decision {
        settle: Some(Settlement {
            by: SettledBy::OutcomeQuery,
            accepted: true,
            evidence: json!({"found": reference}),
            provider_ref: Some(reference.to_owned()),
        }),
        ..decision(finish(State::Delivered, Certainty::Known))
    };
    let delivered = applied(store, of(one.id), &settle("SM1"), after).await;
    assert_eq!(
        (delivered.state, delivered.certainty),
        (State::Delivered, Some(Certainty::Known))
    );
    let detail = store.notification("acme", one.id).await.unwrap();
    let attempt = &detail.attempts[0];
    assert_eq!(attempt.settled_by, Some(SettledBy::OutcomeQuery));
    assert_eq!(attempt.provider_ref.as_deref(), Some("SM1"));
    assert_eq!(attempt.evidence["settlement"]["outcome"], "accepted");
    assert_eq!(attempt.evidence["settlement"]["evidence"]["found"], "SM1");

    // The sibling cannot take the same message: nothing of its changes.
    assert!(matches!(
        store.record(of(two.id), &settle("SM1"), after).await,
        Err(StoreError::Conflict(_))
    ));
    let detail = store.notification("acme", two.id).await.unwrap();
    assert_eq!(detail.notification.state, State::Sending);
    assert_eq!(detail.attempts[0].settled_by, None);
    applied(store, of(two.id), &settle("SM2"), after).await;
}

async fn records_sharing_a_transaction_are_each_fenced_by_their_own_claim_and_fail_together(
    backend: Backend,
) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let after = t + LEASE + Duration::from_secs(1);
    let store = &*rig.store;
    let (one, three) = (
        accepted(store, notification("acme", "a", "+1", "one", t)).await,
        accepted(store, notification("acme", "a", "+3", "three", t)).await,
    );
    let two = accepted(store, notification("acme", "b", "+2", "two", t)).await;
    let claims = claim(store, t, 10, &["a"]).await;
    let of = |id| {
        claims
            .iter()
            .find(|c: &&Claim| c.notification.id == id)
            .unwrap()
            .clone()
    };
    let stale = claim(store, t, 10, &["b"]).await.remove(0);
    claim(store, after, 10, &["b"]).await;
    let delivered = Decision {
        attempt: Some(outcome(1, AttemptResult::Accepted, None)),
        ..decision(finish(State::Delivered, Certainty::Known))
    };
    let recorded = store
        .record_all(
            &[
                (of(one.id), delivered.clone()),
                (stale, delivered.clone()),
                (of(three.id), delivered.clone()),
            ],
            t,
        )
        .await
        .unwrap();
    assert!(
        matches!(
            recorded.as_slice(),
            [
                Recorded::Applied { .. },
                Recorded::Fenced,
                Recorded::Applied { .. }
            ]
        ),
        "{recorded:?}"
    );
    for (id, state) in [
        (one.id, State::Delivered),
        (two.id, State::Sending),
        (three.id, State::Delivered),
    ] {
        let detail = store.notification("acme", id).await.unwrap();
        assert_eq!(detail.notification.state, state);
    }

    // Two twins settled by the same vendor message: the second's conflict undoes the first.
    let (left, right) = (
        accepted(store, notification("acme", "t", "+1", "twin", t)).await,
        accepted(store, notification("acme", "t", "+1", "twin", t)).await,
    );
    claim(store, t, 10, &["t"]).await;
    let twins = claim(store, after, 10, &["t"]).await;
    let settle = Decision {
        settle: Some(Settlement {
            by: SettledBy::OutcomeQuery,
            accepted: true,
            evidence: json!({"found": "SM7"}),
            provider_ref: Some("SM7".to_owned()),
        }),
        ..decision(finish(State::Delivered, Certainty::Known))
    };
    let both: Vec<(Claim, Decision)> = twins.into_iter().map(|c| (c, settle.clone())).collect();
    assert!(matches!(
        store.record_all(&both, after).await,
        Err(StoreError::Conflict(_))
    ));
    for id in [left.id, right.id] {
        let detail = store.notification("acme", id).await.unwrap();
        assert_eq!(
            detail.notification.state,
            State::Sending,
            "nothing of the group stays"
        );
        assert_eq!(detail.attempts[0].settled_by, None);
    }
}

async fn findings_annotate_without_settling(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let n = accepted(store, notification("acme", "a", "+1", "murky", t)).await;
    claim(store, t, 10, &["a"]).await;
    let c = claim(store, t + LEASE + Duration::from_secs(1), 10, &["a"])
        .await
        .remove(0);
    let d = Decision {
        findings: Some(json!({"look_alikes": ["SM9"]})),
        ..decision(finish(State::Unknown, Certainty::Unknown))
    };
    applied(store, &c, &d, t).await;
    let attempt = &store.notification("acme", n.id).await.unwrap().attempts[0];
    assert_eq!(attempt.settled_by, None);
    assert_eq!(
        attempt.evidence["look_up"]["findings"]["look_alikes"],
        json!(["SM9"])
    );
    assert_eq!(
        attempt.evidence["stage"], "lease_expired",
        "what it saw is kept"
    );
}

async fn a_retry_is_queued_without_an_event_and_a_finish_writes_one(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let n = accepted(store, notification("acme", "a", "+1", "events", t)).await;
    let c = claim(store, t, 10, &["a"]).await.remove(0);
    assert_eq!(
        c.attempts,
        store.notification("acme", n.id).await.unwrap().attempts,
        "a first claim carries the attempt it started, as stored"
    );
    let retry_at = t + Duration::from_secs(5);
    let queued = applied(
        store,
        &c,
        &Decision {
            attempt: Some(AttemptOutcome {
                permanent: Some(false),
                ..outcome(1, AttemptResult::Rejected, None)
            }),
            ..decision(Next::Retry { at: retry_at })
        },
        t,
    )
    .await;
    assert_eq!(queued.state, State::Queued);
    assert_eq!(queued.next_attempt_at, Some(retry_at));
    assert!(
        claim(store, t, 10, &["a"]).await.is_empty(),
        "not before it is due"
    );
    let c = claim(store, retry_at, 10, &["a"]).await.remove(0);
    assert_eq!(
        c.mode,
        ClaimMode::Send {
            n: 2,
            suppressed: false
        }
    );
    assert_eq!(c.attempts.len(), 2, "{:?}", c.attempts);
    assert_eq!(
        c.attempts,
        store.notification("acme", n.id).await.unwrap().attempts,
        "a claim taken again carries its whole history and the attempt it started"
    );
    let done = applied(
        store,
        &c,
        &Decision {
            attempt: Some(outcome(2, AttemptResult::Accepted, Some("P-2"))),
            ..decision(finish(State::Delivered, Certainty::Known))
        },
        retry_at,
    )
    .await;
    assert_eq!(
        (done.state, done.certainty),
        (State::Delivered, Some(Certainty::Known))
    );
    let detail = store.notification("acme", n.id).await.unwrap();
    assert_eq!(detail.attempts.len(), 2);
    assert_eq!(detail.attempts[1].provider_ref.as_deref(), Some("P-2"));
    assert_eq!(
        rig.db.event_types(n.id.as_uuid()).await,
        [
            "dev.herald.notification.accepted",
            "dev.herald.notification.delivered"
        ],
        "one event for the acceptance, one for the end, none for the retry"
    );
}

async fn only_a_queued_notification_can_be_cancelled(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let n = accepted(store, notification("acme", "a", "+1", "cancel me", t)).await;
    let cancelled = store.cancel("acme", n.id, t).await.unwrap();
    assert_eq!(
        (cancelled.state, cancelled.certainty),
        (State::Cancelled, Some(Certainty::Known))
    );
    assert!(matches!(
        store.cancel("acme", n.id, t).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store.cancel("globex", n.id, t).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        rig.db.event_types(n.id.as_uuid()).await,
        [
            "dev.herald.notification.accepted",
            "dev.herald.notification.cancelled"
        ]
    );
    let sending = accepted(store, notification("acme", "a", "+1", "too late", t)).await;
    claim(store, t, 10, &["a"]).await;
    assert!(matches!(
        store.cancel("acme", sending.id, t).await,
        Err(StoreError::Conflict(_))
    ));
}

async fn a_cancellation_key_cancels_what_is_queued_under_it_in_one_step(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let keyed = |tenant: &str, text: &str| Notification {
        cancellation_key: Some("signup/42".into()),
        ..notification(tenant, "a", "+1", text, t)
    };
    // Claimed first: a send under way is `sending`, and no cancellation calls it back.
    let claimed = accepted(store, keyed("acme", "first")).await;
    assert_eq!(claim(store, t, 10, &["a"]).await.len(), 1);
    let second = accepted(store, keyed("acme", "second")).await;
    let third = accepted(store, keyed("acme", "third")).await;
    let unkeyed = accepted(store, notification("acme", "a", "+1", "other", t)).await;
    let elsewhere = accepted(store, keyed("globex", "same key, other tenant")).await;

    let key = CancelKey::Cancellation("signup/42".into());
    let done = store.cancel_by_key("acme", &key, t).await.unwrap();
    assert_eq!(done.cancelled, [second.id, third.id]);
    assert_eq!(done.not_cancelled, [(claimed.id, State::Sending)]);
    for (id, tenant, state) in [
        (second.id, "acme", State::Cancelled),
        (third.id, "acme", State::Cancelled),
        (unkeyed.id, "acme", State::Queued),
        (elsewhere.id, "globex", State::Queued),
    ] {
        let n = store.notification(tenant, id).await.unwrap().notification;
        assert_eq!(n.state, state, "{id}");
    }
    let events = rig.db.event_types(second.id.as_uuid()).await;
    assert_eq!(
        events,
        [
            "dev.herald.notification.accepted",
            "dev.herald.notification.cancelled"
        ]
    );

    // Again: nothing left to cancel, and each says where it stands.
    let again = store.cancel_by_key("acme", &key, t).await.unwrap();
    assert!(again.cancelled.is_empty());
    assert_eq!(
        again.not_cancelled,
        [
            (claimed.id, State::Sending),
            (second.id, State::Cancelled),
            (third.id, State::Cancelled)
        ]
    );
    // By the idempotency key it was enqueued under (`accepted` uses `key-{id}`).
    let by_request = CancelKey::Idempotency(format!("key-{}", unkeyed.id));
    let done = store.cancel_by_key("acme", &by_request, t).await.unwrap();
    assert_eq!(done.cancelled, [unkeyed.id]);
    assert_eq!(
        store.cancel_by_key("globex", &by_request, t).await.unwrap(),
        Cancellation::default()
    );
}

async fn lists_are_newest_first_filtered_and_paged_by_cursor(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            accepted(store, notification("acme", "a", "+1", &format!("n{i}"), t))
                .await
                .id,
        );
    }
    store.cancel("acme", ids[1], t).await.unwrap();
    let page = |before, limit| ListFilter {
        before,
        limit,
        ..ListFilter::default()
    };
    let first = store.list("acme", &page(None, 2)).await.unwrap();
    assert_eq!(ids_of(first), [ids[4], ids[3]]);
    let rest = store.list("acme", &page(Some(ids[3]), 10)).await.unwrap();
    assert_eq!(ids_of(rest), [ids[2], ids[1], ids[0]]);
    let cancelled = store
        .list(
            "acme",
            &ListFilter {
                state: Some(State::Cancelled),
                limit: 10,
                ..ListFilter::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(ids_of(cancelled), [ids[1]]);
    let known = store
        .list(
            "acme",
            &ListFilter {
                certainty: Some(Certainty::Known),
                limit: 10,
                ..ListFilter::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(known.len(), 1);
    assert!(
        store
            .list("globex", &page(None, 10))
            .await
            .unwrap()
            .is_empty()
    );
}

fn ids_of(listed: Vec<herald::store::NotificationDetail>) -> Vec<NotificationId> {
    listed.into_iter().map(|d| d.notification.id).collect()
}

/// The ids `filter` lists for `tenant`, newest first, up to 50.
async fn listed(store: &dyn Store, tenant: &str, filter: ListFilter) -> Vec<NotificationId> {
    let filter = ListFilter {
        limit: 50,
        ..filter
    };
    ids_of(store.list(tenant, &filter).await.unwrap())
}

fn with_metadata(mut n: Notification, pairs: &[(&str, &str)]) -> Notification {
    n.metadata = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    n
}

fn pairs(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

async fn a_list_filters_by_channel(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let store = &*rig.store;
    let t = now();
    let sms = accepted(store, notification("acme", "a", "+1", "sms", t)).await;
    let mut email = notification("acme", "a", "ada@example.com", "email", t);
    email.channel = Channel::Email;
    let email = accepted(store, email).await;
    let by = |channel| ListFilter {
        channel: Some(channel),
        ..ListFilter::default()
    };
    assert_eq!(listed(store, "acme", by(Channel::Sms)).await, [sms.id]);
    assert_eq!(listed(store, "acme", by(Channel::Email)).await, [email.id]);
    assert!(listed(store, "acme", by(Channel::Push)).await.is_empty());
}

async fn a_list_filters_by_route(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let store = &*rig.store;
    let t = now();
    let on_a = accepted(store, notification("acme", "a", "+1", "x", t)).await;
    let on_b = accepted(store, notification("acme", "b", "+1", "x", t)).await;
    let by = |route: &str| ListFilter {
        route: Some(route.to_owned()),
        ..ListFilter::default()
    };
    assert_eq!(listed(store, "acme", by("a")).await, [on_a.id]);
    assert_eq!(listed(store, "acme", by("b")).await, [on_b.id]);
    assert!(
        listed(store, "acme", by("A")).await.is_empty(),
        "exact name"
    );
}

async fn a_list_filters_by_creation_time_from_after_up_to_before(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let store = &*rig.store;
    let t = now();
    let hour = Duration::from_secs(3600);
    let old = accepted(store, notification("acme", "a", "+1", "old", t - 2 * hour)).await;
    let mid = accepted(store, notification("acme", "a", "+1", "mid", t - hour)).await;
    let new = accepted(store, notification("acme", "a", "+1", "new", t)).await;
    let window = |after, before| ListFilter {
        created_after: after,
        created_before: before,
        ..ListFilter::default()
    };
    assert_eq!(
        listed(store, "acme", window(Some(t - hour), None)).await,
        [new.id, mid.id],
        "created_after includes its own instant"
    );
    assert_eq!(
        listed(store, "acme", window(None, Some(t - hour))).await,
        [old.id],
        "created_before excludes its own instant"
    );
    assert_eq!(
        listed(store, "acme", window(Some(t - hour), Some(t))).await,
        [mid.id]
    );
    assert!(
        listed(store, "acme", window(Some(t), Some(t - hour)))
            .await
            .is_empty()
    );
}

async fn a_list_filters_by_every_metadata_pair_as_exact_text(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let store = &*rig.store;
    let t = now();
    let n = |pairs: &[(&str, &str)]| with_metadata(notification("acme", "a", "+1", "x", t), pairs);
    let both = accepted(store, n(&[("export", "e-7"), ("team", "billing")])).await;
    let one = accepted(store, n(&[("export", "e-7")])).await;
    let other = accepted(store, n(&[("export", "e-70")])).await;
    // Keys may hold what a JSON path would read as syntax.
    let odd = accepted(store, n(&[("a.b", "1"), ("say \"hi\"", "$.x")])).await;
    accepted(store, n(&[])).await;
    let by = |wanted: &[(&str, &str)]| ListFilter {
        metadata: pairs(wanted),
        ..ListFilter::default()
    };
    assert_eq!(
        listed(store, "acme", by(&[("export", "e-7")])).await,
        [one.id, both.id]
    );
    assert_eq!(
        listed(store, "acme", by(&[("export", "e-7"), ("team", "billing")])).await,
        [both.id],
        "every pair must match"
    );
    assert_eq!(
        listed(store, "acme", by(&[("export", "e-70")])).await,
        [other.id]
    );
    assert!(
        listed(store, "acme", by(&[("export", "E-7")]))
            .await
            .is_empty()
    );
    assert!(
        listed(store, "acme", by(&[("export", "e")]))
            .await
            .is_empty()
    );
    assert!(listed(store, "acme", by(&[("team", "")])).await.is_empty());
    assert_eq!(
        listed(store, "acme", by(&[("a.b", "1"), ("say \"hi\"", "$.x")])).await,
        [odd.id]
    );
    assert!(
        listed(store, "acme", by(&[("a", "1")])).await.is_empty(),
        "a dot in a key is part of the key, not a path"
    );
    assert!(
        listed(store, "globex", by(&[("export", "e-7")]))
            .await
            .is_empty()
    );
}

async fn list_filters_combine_and_page_by_cursor_within_one_tenant(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let store = &*rig.store;
    let t = now();
    let minute = Duration::from_secs(60);
    let mut wanted = Vec::new();
    for i in 0..5 {
        let at = t - minute * (10 - i);
        let n = |tenant: &str, route: &str, channel, pairs: &[(&str, &str)]| {
            let mut n = with_metadata(notification(tenant, route, "+1", "x", at), pairs);
            n.channel = channel;
            n
        };
        let tag = [("export", "e-7")];
        wanted.push(accepted(store, n("acme", "a", Channel::Sms, &tag)).await.id);
        // Each differs from the wanted ones in one filter only.
        accepted(store, n("acme", "b", Channel::Sms, &tag)).await;
        accepted(store, n("acme", "a", Channel::Email, &tag)).await;
        accepted(store, n("acme", "a", Channel::Sms, &[("export", "e-8")])).await;
        accepted(store, n("globex", "a", Channel::Sms, &tag)).await;
    }
    accepted(
        store,
        with_metadata(
            notification("acme", "a", "+1", "too old", t - minute * 20),
            &[("export", "e-7")],
        ),
    )
    .await;
    let page = |before| ListFilter {
        channel: Some(Channel::Sms),
        route: Some("a".to_owned()),
        created_after: Some(t - minute * 10),
        created_before: Some(t),
        metadata: pairs(&[("export", "e-7")]),
        before,
        limit: 2,
        ..ListFilter::default()
    };
    let mut seen: Vec<NotificationId> = Vec::new();
    let mut before = None;
    loop {
        let ids = ids_of(store.list("acme", &page(before)).await.unwrap());
        seen.extend(&ids);
        match ids.last() {
            Some(last) if ids.len() == 2 => before = Some(*last),
            _ => break,
        }
    }
    wanted.reverse();
    assert_eq!(seen, wanted, "newest first, each once, nothing else");
}

async fn look_alikes_are_the_same_request_on_the_same_route_only(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let me = accepted(store, notification("acme", "a", "+1", "same", t)).await;
    let twin = accepted(store, notification("globex", "a", "+1", "same", t)).await;
    accepted(store, notification("acme", "a", "+1", "other text", t)).await;
    accepted(store, notification("acme", "a", "+2", "same", t)).await;
    accepted(store, notification("acme", "b", "+1", "same", t)).await;
    let old = notification("acme", "a", "+1", "same", t - Duration::from_secs(7200));
    accepted(store, old).await;
    let claims = claim(store, t, 10, &["a", "b"]).await;
    let mine = claims.iter().find(|c| c.notification.id == me.id).unwrap();
    let siblings = store
        .look_alikes(mine, t - Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(
        siblings.iter().map(|s| s.notification).collect::<Vec<_>>(),
        [twin.id],
        "same route and request, not this one, not older than asked (any tenant: one vendor account)"
    );
    assert_eq!(siblings[0].attempt.result, AttemptResult::InFlight);
    assert_eq!(siblings[0].created_at, t);

    // The twin fails over to `b`: its request for `a` is forgotten, but what it may have left
    // on `a`'s vendor is still a look-alike there.
    let twins = claims
        .iter()
        .find(|c| c.notification.id == twin.id)
        .unwrap();
    let failover = Decision {
        attempt: Some(AttemptOutcome {
            n: 1,
            result: AttemptResult::Rejected,
            permanent: Some(false),
            provider_ref: None,
            evidence: json!({"stage": "response", "status": 503}),
        }),
        settle: None,
        findings: None,
        next: Next::Failover {
            route: "b".to_owned(),
            because: "attempt 1 on `a`: vendor_unavailable".to_owned(),
        },
    };
    let moved = applied(store, twins, &failover, t).await;
    assert_eq!((moved.route.as_str(), moved.failovers), ("b", 1));
    assert_eq!(moved.state, State::Queued);
    assert_eq!(moved.provider_key(), format!("{}-f1", twin.id));
    let siblings = store
        .look_alikes(mine, t - Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(
        siblings
            .iter()
            .map(|s| (s.notification, s.attempt.route.as_str()))
            .collect::<Vec<_>>(),
        [(twin.id, "a")],
        "found by its content, with its attempt on `a` only"
    );
    assert_eq!(siblings[0].attempt.evidence["failover"]["to"], "b");
}

async fn a_tenant_never_reads_another_tenants_notification(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let n = accepted(&*rig.store, notification("acme", "a", "+1", "mine", now())).await;
    assert!(rig.store.notification("acme", n.id).await.is_ok());
    assert!(matches!(
        rig.store.notification("globex", n.id).await,
        Err(StoreError::NotFound)
    ));
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

fn review_filter(reasons: &[Reason]) -> ReviewFilter {
    ReviewFilter {
        reasons: reasons.to_vec(),
        limit: 100,
        ..ReviewFilter::default()
    }
}

async fn review_lists_each_reason_oldest_first_and_filters(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let unknown = unknown(store, t).await;
    let dup = ended(
        store,
        notification("acme", "b", "+1", "d", t),
        AttemptResult::Accepted,
        None,
        finish(State::Delivered, Certainty::DuplicatePossible),
    )
    .await;
    // The dead letter ended before the others, and the refusal before it.
    let minute = Duration::from_secs(60);
    let exhausted = ended(
        store,
        notification("acme", "a", "+1", "x", t - minute),
        AttemptResult::Rejected,
        Some(false),
        finish(State::Failed, Certainty::Known),
    )
    .await;
    let refused = ended(
        store,
        notification("acme", "a", "+1", "r", t - 2 * minute),
        AttemptResult::Rejected,
        Some(true),
        finish(State::Failed, Certainty::Known),
    )
    .await;
    ended(
        store,
        notification("acme", "a", "+1", "fine", t),
        AttemptResult::Accepted,
        None,
        finish(State::Delivered, Certainty::Known),
    )
    .await;
    let ids = |items: Vec<herald::store::NotificationDetail>| {
        items
            .into_iter()
            .map(|d| d.notification.id)
            .collect::<Vec<_>>()
    };
    let waiting = review_filter(&Reason::WAITING);
    let open = store.review("acme", &waiting).await.unwrap();
    assert_eq!(
        ids(open),
        [unknown.id, dup.id, exhausted.id],
        "what waits for a person, oldest first"
    );
    for (reason, id) in [
        (Reason::Exhausted, exhausted.id),
        (Reason::Rejected, refused.id),
        (Reason::Unknown, unknown.id),
    ] {
        let listed = store
            .review("acme", &review_filter(&[reason]))
            .await
            .unwrap();
        assert_eq!(ids(listed), [id], "{reason}");
    }
    let on_b = ReviewFilter {
        route: Some("b".into()),
        ..waiting.clone()
    };
    assert_eq!(ids(store.review("acme", &on_b).await.unwrap()), [dup.id]);
    let after = ReviewFilter {
        after: Some(unknown.id),
        ..waiting.clone()
    };
    assert_eq!(
        ids(store.review("acme", &after).await.unwrap()),
        [dup.id, exhausted.id]
    );
    let later = ReviewFilter {
        since: Some(t + Duration::from_secs(1)),
        ..waiting.clone()
    };
    assert!(store.review("acme", &later).await.unwrap().is_empty());
    assert!(store.review("globex", &waiting).await.unwrap().is_empty());
    let listed = store.review("acme", &waiting).await.unwrap();
    assert_eq!(listed[0].attempts.len(), 1, "with attempts");

    let stats = store.queue_stats(t).await.unwrap();
    assert_eq!(
        Reason::ALL.map(count_in(&stats)),
        [1, 1, 1, 1, 0, 0],
        "unknown, duplicate_possible, exhausted, rejected, contradicted, may_have_sent"
    );
    assert_eq!(
        stats.review_oldest,
        Some(t - minute),
        "the oldest that waits: the dead letter, not the refusal (final)"
    );
    assert_eq!(stats.dead_letters.len(), 2);

    // A person closes both dead letters: they leave review, its counts and the dead letters.
    for dead in [&exhausted, &refused] {
        let read = store.notification("acme", dead.id).await.unwrap();
        let close = resolution(
            Outcome::NotDelivered,
            Some(Then::Close),
            Change {
                acknowledged: true,
                ..change(State::Failed, Some(Certainty::Known), None, None)
            },
            dead,
        );
        store
            .resolve("acme", dead.id, read.generation, &close, t)
            .await
            .unwrap();
    }
    let every = review_filter(&Reason::ALL);
    assert_eq!(
        ids(store.review("acme", &every).await.unwrap()),
        [unknown.id, dup.id]
    );
    let stats = store.queue_stats(t).await.unwrap();
    assert_eq!(Reason::ALL.map(count_in(&stats)), [1, 1, 0, 0, 0, 0]);
    assert!(stats.dead_letters.is_empty(), "{:?}", stats.dead_letters);
    assert_eq!(stats.review_oldest, Some(t));
}

/// Work an operator holds on purpose is not late: the gauge a "queue behind" page reads
/// leaves it out, unless the pause sends that work to the fallback, where it is due as ever.
async fn the_queues_oldest_due_leaves_out_a_route_an_operator_paused(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let store = &*rig.store;
    let t = now();
    let minute = Duration::from_secs(60);
    accepted(
        store,
        notification("acme", "held", "+1", "x", t - 10 * minute),
    )
    .await;
    accepted(store, notification("acme", "open", "+1", "x", t - minute)).await;
    let oldest = |stats: herald::store::QueueStats| stats.oldest_due;
    assert_eq!(
        oldest(store.queue_stats(t).await.unwrap()),
        Some(t - 10 * minute)
    );

    let pause = |to_fallback| herald::domain::RoutePause {
        route: "held".into(),
        principal: "acme-oncall".into(),
        note: "the vendor double-sends".into(),
        to_fallback,
        at: t,
    };
    store.pause_route(&pause(false)).await.unwrap();
    let stats = store.queue_stats(t).await.unwrap();
    assert_eq!(stats.queued, 2, "still counted as waiting");
    assert_eq!(oldest(stats), Some(t - minute), "but not as late");

    store.resume_route(&pause(false)).await.unwrap();
    store.pause_route(&pause(true)).await.unwrap();
    assert_eq!(
        oldest(store.queue_stats(t).await.unwrap()),
        Some(t - 10 * minute)
    );
}

fn count_in(stats: &herald::store::QueueStats) -> impl Fn(Reason) -> i64 + '_ {
    |r| stats.review.iter().find(|(x, _)| *x == r).unwrap().1
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

async fn a_resolution_applies_once_with_its_audit_and_event(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let n = unknown(store, t).await;
    let read = store.notification("acme", n.id).await.unwrap();
    let delivered = resolution(
        Outcome::Delivered,
        None,
        change(State::Delivered, Some(Certainty::Known), Some(true), None),
        &n,
    );
    let done = store
        .resolve("acme", n.id, read.generation, &delivered, t)
        .await
        .unwrap();
    assert_eq!(
        (done.state, done.certainty),
        (State::Delivered, Some(Certainty::Known))
    );
    // The same read again: someone else resolved it first.
    assert!(matches!(
        store
            .resolve("acme", n.id, read.generation, &delivered, t)
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store
            .resolve("globex", n.id, read.generation + 1, &delivered, t)
            .await,
        Err(StoreError::Conflict(_))
    ));
    let detail = store.notification("acme", n.id).await.unwrap();
    assert_eq!(detail.resolutions.len(), 1);
    let audit = &detail.resolutions[0];
    assert_eq!(audit.principal, "on-call");
    assert_eq!(audit.outcome, "delivered");
    assert_eq!(audit.state_before, Some(State::Unknown));
    assert_eq!(audit.certainty_after, Some(Certainty::Known));
    assert_eq!(detail.attempts[0].settled_by, Some(SettledBy::Review));
    assert_eq!(
        detail.attempts[0].evidence["settlement"]["evidence"]["note"],
        "checked the vendor's dashboard"
    );
    assert_eq!(
        rig.db.event_types(n.id.as_uuid()).await,
        [
            "dev.herald.notification.accepted",
            "dev.herald.notification.unknown",
            "dev.herald.notification.resolved"
        ]
    );
}

async fn a_resend_renews_the_key_and_the_budget_when_asked(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let n = unknown(store, t).await;
    let read = store.notification("acme", n.id).await.unwrap();
    let resend = resolution(
        Outcome::NotDelivered,
        Some(Then::Resend),
        change(
            State::Queued,
            None,
            Some(false),
            Some(Resend {
                renew_key: true,
                lift_expiry: false,
            }),
        ),
        &n,
    );
    let queued = store
        .resolve("acme", n.id, read.generation, &resend, t)
        .await
        .unwrap();
    assert_eq!(queued.state, State::Queued);
    assert_eq!(queued.provider_key(), format!("{}-1", n.id));
    let c = claim(store, t, 10, &["a"]).await.remove(0);
    assert_eq!(
        c.mode,
        ClaimMode::Send {
            n: 2,
            suppressed: false
        }
    );
    assert_eq!((c.budget_from, c.budget_since), (1, Some(t)));
    assert_eq!(
        c.attempts[1].provider_idempotency_key,
        format!("{}-1", n.id)
    );
    assert_eq!(
        c.request,
        Some(Request::new("to=+1&text=u")),
        "prepared again under the new key"
    );
    let audit = &store.notification("acme", n.id).await.unwrap().resolutions[0];
    assert!(audit.key_renewed);
    assert_eq!(audit.state_after, Some(State::Queued));
}

async fn a_requery_in_review_is_fenced_and_emits_only_on_change(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let n = unknown(store, t).await;
    let read = store.notification("acme", n.id).await.unwrap();
    let as_claim = Claim::in_review(read.clone());
    let nothing = Decision {
        findings: Some(json!({"query": "failed"})),
        ..decision(finish(State::Unknown, Certainty::Unknown))
    };
    assert!(matches!(
        store
            .record_in_review(&as_claim, &nothing, t)
            .await
            .unwrap(),
        Recorded::Applied { .. }
    ));
    assert!(
        matches!(
            store
                .record_in_review(&as_claim, &nothing, t)
                .await
                .unwrap(),
            Recorded::Fenced
        ),
        "the generation moved on"
    );
    assert_eq!(
        rig.db.event_types(n.id.as_uuid()).await,
        [
            "dev.herald.notification.accepted",
            "dev.herald.notification.unknown"
        ],
        "nothing changed, no event"
    );
    let read = store.notification("acme", n.id).await.unwrap();
    let found = Decision {
        settle: Some(Settlement {
            by: SettledBy::OutcomeQuery,
            accepted: true,
            evidence: json!({}),
            provider_ref: Some("SM7".into()),
        }),
        ..decision(finish(State::Delivered, Certainty::Known))
    };
    let as_claim = Claim {
        generation: read.generation,
        attempts: read.attempts,
        ..as_claim
    };
    store.record_in_review(&as_claim, &found, t).await.unwrap();
    let detail = store.notification("acme", n.id).await.unwrap();
    assert_eq!(detail.notification.state, State::Delivered);
    assert_eq!(detail.attempts[0].provider_ref.as_deref(), Some("SM7"));
}

async fn one_tenants_burst_does_not_delay_another_tenants_notification(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    // 10,000 due for acme, all older than globex's one.
    for batch in 0..10 {
        let items: Vec<NewAccept> = (0..1000)
            .map(|i| {
                let at = t - Duration::from_secs(60) + Duration::from_millis(batch * 1000 + i);
                let n = notification("acme", "a", "+1", "burst", at);
                accept_of(&format!("burst-{batch}-{i}"), n, 1)
            })
            .collect();
        store.accept(&items).await.unwrap();
    }
    let single = accepted(store, notification("globex", "a", "+2", "single", t)).await;
    let first = claim(store, t, 64, &["a"]).await;
    assert_eq!(first.len(), 64);
    assert!(
        first.iter().any(|c| c.notification.id == single.id),
        "globex's notification is in the first claim, beside acme's oldest"
    );
    assert_eq!(
        first
            .iter()
            .filter(|c| c.notification.tenant == "acme")
            .count(),
        63
    );
}

const BUS: &str = "bus";
const HOOK: &str = "hook";

fn sinks() -> Vec<String> {
    vec![BUS.to_owned(), HOOK.to_owned()]
}

async fn claim_events(store: &dyn Store, sink: &str, at: OffsetDateTime) -> Vec<ClaimedEvent> {
    store.claim_events(sink, at, LEASE, 100).await.unwrap()
}

/// `(notification, type)` of claimed events, in claim order.
fn kinds(claimed: &[ClaimedEvent]) -> Vec<(NotificationId, EventType)> {
    claimed
        .iter()
        .map(|c| (c.event.notification_id, c.event.event_type))
        .collect()
}

async fn the_trace_a_notification_was_enqueued_in_comes_back_with_its_claim_and_its_events(
    backend: Backend,
) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let enqueued = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    let traced = accepted(
        store,
        Notification {
            trace_parent: enqueued.clone(),
            ..notification("acme", "a", "+1", "traced", t)
        },
    )
    .await;
    let untraced = accepted(store, notification("acme", "a", "+2", "untraced", t)).await;

    let claims = claim(store, t, 10, &["a"]).await;
    let of = |id| {
        &claims
            .iter()
            .find(|c| c.notification.id == id)
            .unwrap()
            .notification
    };
    assert_eq!(of(traced.id).trace_parent, enqueued);
    assert_eq!(of(untraced.id).trace_parent, None);
    let events = claim_events(store, BUS, t).await;
    let event_of = |id| {
        &events
            .iter()
            .find(|c| c.event.notification_id == id)
            .unwrap()
            .event
    };
    assert_eq!(event_of(traced.id).trace_parent, enqueued);
    assert_eq!(event_of(untraced.id).trace_parent, None);
}

async fn the_relay_takes_each_notifications_events_in_order_per_sink(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let first = accepted(store, notification("acme", "a", "+1", "one", t)).await;
    store.cancel("acme", first.id, t).await.unwrap();
    let second = accepted(store, notification("acme", "a", "+1", "two", t)).await;

    let bus = claim_events(store, BUS, t).await;
    assert_eq!(
        kinds(&bus),
        [
            (first.id, EventType::Accepted),
            (second.id, EventType::Accepted)
        ],
        "the cancellation waits until the acceptance is published"
    );
    assert_eq!(bus[0].event.tenant, "acme");
    assert_eq!(bus[0].event.data["state"], "queued");
    assert!(claim_events(store, BUS, t).await.is_empty(), "leased");
    assert_eq!(
        kinds(&claim_events(store, HOOK, t).await),
        kinds(&bus),
        "each sink has its own backlog"
    );
    assert_eq!(store.outbox_backlog(BUS).await.unwrap().events, 3);

    store
        .mark_published(BUS, &[bus[0].event.id], &sinks(), t)
        .await
        .unwrap();
    assert_eq!(
        kinds(&claim_events(store, BUS, t).await),
        [(first.id, EventType::Cancelled)]
    );
    let backlog = store.outbox_backlog(BUS).await.unwrap();
    assert_eq!(
        backlog,
        Backlog {
            events: 2,
            oldest: Some(t)
        }
    );
    assert_eq!(
        store.outbox_backlog(HOOK).await.unwrap().events,
        3,
        "published to the bus only"
    );
}

async fn a_lease_or_a_hold_that_ends_makes_an_event_due_again(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    accepted(store, notification("acme", "a", "+1", "one", t)).await;
    let claimed = claim_events(store, BUS, t).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].failures, 0);
    let id = claimed[0].event.id;

    // The relay that claimed it crashed: after its lease, another takes the same event.
    let again = claim_events(store, BUS, t + LEASE + Duration::from_secs(1)).await;
    assert_eq!(again.iter().map(|c| c.event.id).collect::<Vec<_>>(), [id]);

    let hold = t + LEASE + Duration::from_secs(60);
    store
        .hold_back(BUS, &[id], hold, "nats: timed out")
        .await
        .unwrap();
    assert!(
        claim_events(store, BUS, hold - Duration::from_secs(1))
            .await
            .is_empty()
    );
    let after = claim_events(store, BUS, hold).await;
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].failures, 1);
}

async fn relays_claiming_at_once_never_take_the_same_event(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    for i in 0..40 {
        accepted(
            &*rig.store,
            notification("acme", "a", "+1", &format!("n{i}"), t),
        )
        .await;
    }
    let claims = (0..4).map(|_| {
        let store = rig.store.clone();
        tokio::spawn(async move { store.claim_events(BUS, t, LEASE, 15).await.unwrap() })
    });
    let mut ids: Vec<uuid::Uuid> = Vec::new();
    for claim in claims {
        ids.extend(claim.await.unwrap().iter().map(|c| c.event.id));
    }
    let total = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), total, "an event was claimed twice");
    assert_eq!(total, 40, "four claims of 15 take all 40");
}

async fn events_published_to_every_sink_are_pruned_after_the_retention(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    accepted(store, notification("acme", "a", "+1", "one", t)).await;
    accepted(store, notification("acme", "a", "+1", "two", t)).await;
    let claimed = claim_events(store, BUS, t).await;
    let ids: Vec<uuid::Uuid> = claimed.iter().map(|c| c.event.id).collect();
    store.mark_published(BUS, &ids, &sinks(), t).await.unwrap();
    store
        .mark_published(HOOK, &ids[..1], &sinks(), t)
        .await
        .unwrap();
    assert_eq!(
        store
            .prune_outbox(t - Duration::from_secs(1), 10)
            .await
            .unwrap(),
        0,
        "not yet past the retention"
    );
    let later = t + Duration::from_secs(3600);
    assert_eq!(store.prune_outbox(later, 10).await.unwrap(), 1);
    assert_eq!(
        rig.db.count("outbox").await,
        1,
        "the hook has not published the other"
    );
    assert_eq!(rig.db.count("outbox_published").await, 1);
    assert_eq!(store.outbox_backlog(HOOK).await.unwrap().events, 1);
    assert!(claim_events(store, BUS, t).await.is_empty());
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

async fn an_upstream_event_creates_its_notifications_once(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let made = vec![
        notification("acme", "a", "+1", "export ready", t),
        notification("acme", "a", "+2", "export ready", t),
    ];
    let ids: Vec<NotificationId> = made.iter().map(|n| n.id).collect();
    assert_eq!(
        store
            .receive_event(&inbox_event("academy.exports", "evt-90", made))
            .await
            .unwrap(),
        InboxOutcome::Created
    );
    let again = vec![notification("acme", "a", "+1", "export ready", t)];
    assert_eq!(
        store
            .receive_event(&inbox_event("academy.exports", "evt-90", again))
            .await
            .unwrap(),
        InboxOutcome::Duplicate(ids.clone())
    );
    assert_eq!(rig.db.count("notifications").await, 2);
    for id in &ids {
        assert_eq!(
            rig.db.event_types(id.as_uuid()).await,
            ["dev.herald.notification.accepted"]
        );
        assert_eq!(
            store
                .notification("acme", *id)
                .await
                .unwrap()
                .notification
                .state,
            State::Queued
        );
    }
    // Another source's evt-90 is another event.
    let other = vec![notification("acme", "a", "+1", "other", t)];
    assert_eq!(
        store
            .receive_event(&inbox_event("billing", "evt-90", other))
            .await
            .unwrap(),
        InboxOutcome::Created
    );
}

async fn an_upstream_event_received_at_once_twice_creates_once(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let receives = (0..4).map(|i| {
        let store = rig.store.clone();
        let made = vec![notification("acme", "a", "+1", &format!("copy {i}"), t)];
        tokio::spawn(async move {
            store
                .receive_event(&inbox_event("academy.exports", "evt-91", made))
                .await
                .unwrap()
        })
    });
    let mut outcomes = Vec::new();
    for receive in receives {
        outcomes.push(receive.await.unwrap());
    }
    let created = outcomes
        .iter()
        .filter(|o| **o == InboxOutcome::Created)
        .count();
    assert_eq!(created, 1, "{outcomes:?}");
    assert_eq!(rig.db.count("notifications").await, 1);
}

async fn keys_and_upstream_event_ids_are_forgotten_after_their_window_a_batch_at_a_time(
    backend: Backend,
) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let first = notification("acme", "a", "+1", "one", t);
    store
        .accept(&[accept_of("k-1", first.clone(), 1)])
        .await
        .unwrap();
    for i in 2..=3 {
        let n = notification("acme", "a", "+1", &format!("n{i}"), t);
        store
            .accept(&[accept_of(&format!("k-{i}"), n, 1)])
            .await
            .unwrap();
    }
    let made = vec![notification("acme", "a", "+2", "from an event", t)];
    store
        .receive_event(&inbox_event("academy.exports", "evt-1", made))
        .await
        .unwrap();

    let window_start = t - Duration::from_secs(3600);
    assert_eq!(
        store.forget_keys(window_start, 10).await.unwrap(),
        0,
        "everything is inside its window"
    );
    let later = t + Duration::from_secs(3600);
    assert_eq!(
        store.forget_keys(later, 2).await.unwrap(),
        3,
        "two keys (the batch) and the one event id"
    );
    assert_eq!(store.forget_keys(later, 2).await.unwrap(), 1);
    assert_eq!(store.forget_keys(later, 2).await.unwrap(), 0);
    assert_eq!(rig.db.count("idempotency_keys").await, 0);
    assert_eq!(rig.db.count("inbox").await, 0);

    // The notifications stay; a key or an event id seen again is new.
    assert_eq!(rig.db.count("notifications").await, 4);
    let again = notification("acme", "a", "+1", "one", t);
    assert_eq!(
        store.accept(&[accept_of("k-1", again, 1)]).await.unwrap(),
        [AcceptOutcome::Created]
    );
    let made = vec![notification("acme", "a", "+2", "from an event", t)];
    assert_eq!(
        store
            .receive_event(&inbox_event("academy.exports", "evt-1", made))
            .await
            .unwrap(),
        InboxOutcome::Created
    );
    assert_eq!(
        store
            .notification("acme", first.id)
            .await
            .unwrap()
            .notification
            .state,
        State::Queued
    );
}

/// Publishes every event to every sink, as a relay that has caught up would.
/// Retention's clause for `contradicted`: a notification that later evidence reopened as
/// delivered/known (so no other clause keeps it) stays until a person acknowledges it.
/// Retention's clause for `duplicate_possible`: the recipient may have it twice, and until a
/// person has looked, the evidence stays.
async fn a_possible_duplicate_is_kept_until_a_person_acknowledges_it(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let n = ended(
        store,
        notification("acme", "dp", "+1", "twice?", t),
        AttemptResult::Accepted,
        None,
        finish(State::Delivered, Certainty::DuplicatePossible),
    )
    .await;
    let swept = sweep_a_week_on(store, t).await;
    assert_eq!(
        swept.notifications, 0,
        "in review as duplicate_possible: kept"
    );

    let read = store.notification("acme", n.id).await.unwrap();
    let acknowledge = resolution(
        Outcome::Acknowledged,
        None,
        Change {
            acknowledged: true,
            ..change(
                State::Delivered,
                Some(Certainty::DuplicatePossible),
                None,
                None,
            )
        },
        &read.notification,
    );
    store
        .resolve("acme", n.id, read.generation, &acknowledge, t)
        .await
        .unwrap();
    let swept = sweep_a_week_on(store, t).await;
    assert_eq!(swept.notifications, 1, "acknowledged, it goes when due");
}

/// Retention sweeps while a person resends a closed dead letter and acknowledges a possible
/// duplicate, and a dispatcher claims: whichever commits first wins, and the sweep never deletes
/// what a resend made live again, what nobody acknowledged, or what waits to be sent.
async fn a_sweep_racing_a_resend_an_acknowledgement_and_a_claim_deletes_only_what_was_finished(
    backend: Backend,
) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let retention = herald::retention::Settings {
        idempotency: Duration::from_secs(30 * 86_400),
        finished: Some(Duration::from_secs(7 * 86_400)),
        batch_size: 100,
        refusals: PermanentRefusals::Final,
    };
    let past_it = t + Duration::from_secs(8 * 86_400);
    let awake = tokio_util::sync::CancellationToken::new();
    let (mut resent, mut swept_first) = (0, 0);
    for _ in 0..20 {
        let dead_letter = unknown(store, t).await;
        let read = store.notification("acme", dead_letter.id).await.unwrap();
        let close = resolution(
            Outcome::NotDelivered,
            Some(Then::Close),
            Change {
                acknowledged: true,
                ..change(State::Failed, Some(Certainty::Known), Some(false), None)
            },
            &dead_letter,
        );
        let closed = store
            .resolve("acme", dead_letter.id, read.generation, &close, t)
            .await
            .unwrap();
        let twice = ended(
            store,
            notification("acme", "dp", "+1", "twice?", t),
            AttemptResult::Accepted,
            None,
            finish(State::Delivered, Certainty::DuplicatePossible),
        )
        .await;
        let waiting = accepted(store, notification("acme", "q", "+1", "waiting", t)).await;
        publish_everything(store, t).await;

        let closed_at = store
            .notification("acme", closed.id)
            .await
            .unwrap()
            .generation;
        let twice_at = store
            .notification("acme", twice.id)
            .await
            .unwrap()
            .generation;
        let resend = resolution(
            Outcome::NotDelivered,
            Some(Then::Resend),
            change(
                State::Queued,
                None,
                None,
                Some(Resend {
                    renew_key: false,
                    lift_expiry: false,
                }),
            ),
            &closed,
        );
        let acknowledge = resolution(
            Outcome::Acknowledged,
            None,
            Change {
                acknowledged: true,
                ..change(
                    State::Delivered,
                    Some(Certainty::DuplicatePossible),
                    None,
                    None,
                )
            },
            &twice,
        );
        let slots = routes(&["q"]);
        let (swept, resend, acknowledged, claimed) = tokio::join!(
            herald::retention::sweep(store, &retention, past_it, &awake),
            store.resolve("acme", closed.id, closed_at, &resend, t),
            store.resolve("acme", twice.id, twice_at, &acknowledge, t),
            store.claim(t, LEASE, 10, &slots, &|_| None),
        );
        swept.unwrap();
        claimed.unwrap();
        acknowledged.expect("unacknowledged, it was never the sweep's to take");
        store
            .notification("acme", waiting.id)
            .await
            .expect("what waits to be sent is never swept");
        let now_there = store.notification("acme", closed.id).await;
        match resend {
            Ok(_) => {
                assert_eq!(now_there.unwrap().notification.state, State::Queued);
                resent += 1;
            }
            Err(StoreError::NotFound | StoreError::Conflict(_)) => {
                assert!(matches!(now_there, Err(StoreError::NotFound)));
                swept_first += 1;
            }
            Err(err) => panic!("the resend failed for another cause: {err}"),
        }
    }
    println!("of 20 races, the resend won {resent} and the sweep {swept_first}");
}

async fn a_contradicted_notification_is_kept_until_a_person_acknowledges_it(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    // An unknown send that a person closed as not delivered…
    let n = unknown(store, t).await;
    let read = store.notification("acme", n.id).await.unwrap();
    let key = read.attempts[0].provider_idempotency_key.clone();
    let close = resolution(
        Outcome::NotDelivered,
        Some(Then::Close),
        Change {
            acknowledged: true,
            ..change(State::Failed, Some(Certainty::Known), Some(false), None)
        },
        &n,
    );
    store
        .resolve("acme", n.id, read.generation, &close, t)
        .await
        .unwrap();
    // …and the vendor's report that it delivered it.
    take_reports(
        store,
        "a",
        vec![delivered_report("evt-delivered", &key, None)],
        t,
    )
    .await;
    let reopened = store.notification("acme", n.id).await.unwrap().notification;
    assert_eq!(
        (reopened.state, reopened.certainty, reopened.acknowledged),
        (State::Delivered, Some(Certainty::Known), false)
    );
    assert!(reopened.contradiction.is_some());

    let swept = sweep_a_week_on(store, t).await;
    assert_eq!(swept.notifications, 0, "in review as contradicted: kept");

    let read = store.notification("acme", n.id).await.unwrap();
    let acknowledge = resolution(
        Outcome::Acknowledged,
        None,
        Change {
            acknowledged: true,
            ..change(State::Delivered, Some(Certainty::Known), None, None)
        },
        &reopened,
    );
    store
        .resolve("acme", n.id, read.generation, &acknowledge, t)
        .await
        .unwrap();
    let swept = sweep_a_week_on(store, t).await;
    assert_eq!(swept.notifications, 1, "acknowledged, it goes when due");
}

async fn reports_of_two_messages_while_it_waits_to_be_sent_again_end_it_with_its_final_event(
    backend: Backend,
) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let n = accepted(store, notification("acme", "a", "+1", "twice", t)).await;
    // Two sends under one key whose answers were lost, to a vendor that does not deduplicate.
    for attempt in 1..=2 {
        let c = claim(store, t, 10, &["a"]).await.remove(0);
        assert_eq!(
            c.mode,
            ClaimMode::Send {
                n: attempt,
                suppressed: false
            }
        );
        let queued = applied(
            store,
            &c,
            &Decision {
                attempt: Some(outcome(attempt, AttemptResult::Ambiguous, None)),
                ..decision(Next::Retry { at: t })
            },
            t,
        )
        .await;
        assert_eq!(queued.state, State::Queued);
    }
    let key = store.notification("acme", n.id).await.unwrap().attempts[0]
        .provider_idempotency_key
        .clone();
    // While it waits for a third, the vendor reports a message for each.
    let report = |id: &str| delivered_report(&format!("evt-{id}"), &key, Some(id));
    take_reports(store, "a", vec![report("m-1"), report("m-2")], t).await;
    let ended = store.notification("acme", n.id).await.unwrap().notification;
    assert_eq!(
        (ended.state, ended.certainty),
        (State::Delivered, Some(Certainty::DuplicatePossible)),
        "two messages, never a third send"
    );
    assert!(claim(store, t, 10, &["a"]).await.is_empty());
    // Its first final state has its event, as from any record, and then why it was reopened.
    let states = rig.db.state_event_types(n.id.as_uuid()).await;
    assert_eq!(
        states,
        [
            "dev.herald.notification.accepted",
            "dev.herald.notification.delivered",
            "dev.herald.notification.reopened"
        ]
    );
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

async fn finished_notifications_go_with_their_rows_once_published_and_past_retention(
    backend: Backend,
) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    // Each on its own route, so that each claim takes only its own.
    let delivered = ended(
        store,
        notification("acme", "d", "+1", "delivered", t),
        AttemptResult::Accepted,
        None,
        finish(State::Delivered, Certainty::Known),
    )
    .await;
    let refused = ended(
        store,
        notification("acme", "f", "+1", "refused", t),
        AttemptResult::Rejected,
        Some(true),
        finish(State::Failed, Certainty::Known),
    )
    .await;
    let dead_letter = ended(
        store,
        notification("acme", "x", "+1", "dead letter", t),
        AttemptResult::Rejected,
        Some(false),
        finish(State::Failed, Certainty::Known),
    )
    .await;
    let in_review = unknown(store, t).await;
    // An unknown a person closed as not delivered: failed, and out of review.
    let closed = ended(
        store,
        notification("acme", "uc", "+1", "closed", t),
        AttemptResult::Ambiguous,
        None,
        finish(State::Unknown, Certainty::Unknown),
    )
    .await;
    let read = store.notification("acme", closed.id).await.unwrap();
    let close = resolution(
        Outcome::NotDelivered,
        Some(Then::Close),
        Change {
            acknowledged: true,
            ..change(State::Failed, Some(Certainty::Known), Some(false), None)
        },
        &closed,
    );
    store
        .resolve("acme", closed.id, read.generation, &close, t)
        .await
        .unwrap();
    let queued = accepted(store, notification("acme", "q", "+1", "queued", t)).await;
    let cancelled = accepted(store, notification("acme", "c", "+1", "cancelled", t)).await;
    store.cancel("acme", cancelled.id, t).await.unwrap();
    // Keys outlive the notifications here (a config refuses that), so that each deletion must
    // take its notification's key with it. Permanent refusals wait for a person at first.
    let mut retention = herald::retention::Settings {
        idempotency: Duration::from_secs(30 * 86_400),
        finished: Some(Duration::from_secs(7 * 86_400)),
        batch_size: 1,
        refusals: PermanentRefusals::Review,
    };
    let past_it = t + Duration::from_secs(8 * 86_400);
    let awake = tokio_util::sync::CancellationToken::new();

    let swept = herald::retention::sweep(store, &retention, past_it, &awake)
        .await
        .unwrap();
    assert_eq!(
        swept.notifications, 0,
        "events the sinks have not published keep their notification"
    );

    publish_everything(store, t).await;
    let swept = herald::retention::sweep(store, &retention, t, &awake)
        .await
        .unwrap();
    assert_eq!(
        swept,
        herald::retention::Swept::default(),
        "not yet past it"
    );

    let swept = herald::retention::sweep(store, &retention, past_it, &awake)
        .await
        .unwrap();
    assert_eq!(
        swept.notifications, 3,
        "the delivered, the cancelled and the closed one, a batch of one at a time"
    );
    for gone in [delivered.id, cancelled.id, closed.id] {
        assert!(matches!(
            store.notification("acme", gone).await,
            Err(StoreError::NotFound)
        ));
    }
    store.notification("acme", refused.id).await.unwrap();

    // Where permanent refusals are final, they are finished like any other.
    retention.refusals = PermanentRefusals::Final;
    let swept = herald::retention::sweep(store, &retention, past_it, &awake)
        .await
        .unwrap();
    assert_eq!(swept.notifications, 1, "the permanent refusal");
    // A dead letter nobody closed waits in review for a person, as an unknown one does.
    let kept = [dead_letter.id, in_review.id, queued.id];
    for id in kept {
        store.notification("acme", id).await.unwrap();
    }
    assert_eq!(rig.db.count("notifications").await, 3);
    assert_eq!(
        rig.db.count("attempts").await,
        2,
        "the dead letter's and the unknown one's"
    );
    let mut kept_events = 0;
    for id in kept {
        kept_events += rig.db.event_types(id.as_uuid()).await.len();
    }
    assert_eq!(rig.db.count("outbox").await, kept_events as i64);
    assert_eq!(
        rig.db.count("outbox_published").await,
        2 * kept_events as i64,
        "the deleted events' publication history went with them"
    );
    assert_eq!(
        rig.db.count("idempotency_keys").await,
        3,
        "the kept notifications' keys, inside their window"
    );
}

async fn a_bulk_preview_is_kept_per_tenant_taken_once_and_expired_ones_go(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let t = now();
    let store = &*rig.store;
    let n = unknown(store, t).await;
    let preview = |hash: &[u8], at: OffsetDateTime| ReviewPreview {
        token_hash: hash.to_vec(),
        tenant: "acme".into(),
        principal: "on-call".into(),
        request: json!({"ask": {"outcome": "delivered", "then": null, "force": false}}),
        items: vec![(n.id, 3)],
        created_at: at,
        expires_at: at + Duration::from_secs(900),
    };
    store
        .save_review_preview(&preview(b"first", t))
        .await
        .unwrap();
    let kept = store.review_preview("acme", b"first").await.unwrap();
    assert_eq!(kept.items, [(n.id, 3)]);
    assert_eq!(kept.request["ask"]["outcome"], "delivered");
    assert_eq!(
        (kept.created_at, kept.expires_at),
        (t, t + Duration::from_secs(900))
    );
    assert!(
        matches!(
            store.review_preview("globex", b"first").await,
            Err(StoreError::NotFound)
        ),
        "another tenant's preview is not found"
    );
    assert!(matches!(
        store.use_review_preview("globex", b"first").await,
        Err(StoreError::Conflict(_))
    ));

    store.use_review_preview("acme", b"first").await.unwrap();
    assert!(
        matches!(
            store.use_review_preview("acme", b"first").await,
            Err(StoreError::Conflict(_))
        ),
        "a preview is taken once"
    );
    assert!(matches!(
        store.review_preview("acme", b"first").await,
        Err(StoreError::NotFound)
    ));

    // A preview made after another expired deletes it.
    store
        .save_review_preview(&preview(b"old", t))
        .await
        .unwrap();
    let later = t + Duration::from_secs(901);
    store
        .save_review_preview(&preview(b"new", later))
        .await
        .unwrap();
    assert!(matches!(
        store.review_preview("acme", b"old").await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(rig.db.count("review_previews").await, 1);
}

/// Every way a notification is moved, tried from every state. Each is the store's own guard
/// (and, for a person, the review rule that decides what a resolution may change).
#[derive(Debug, Clone, Copy)]
enum Guard {
    Claim,
    Cancel,
    /// A worker's record of its step, by the first worker's claim.
    Record(Ending),
    /// The first worker's answer, read after another worker claimed it.
    Late(LateAnswer),
    /// A vendor's report of the first attempt's key.
    Report,
    Resolve(Outcome, Option<Then>, bool),
    /// A person's requery: what the look-up proved.
    Requery(Ending),
}

#[derive(Debug, Clone, Copy)]
enum Ending {
    Delivered,
    /// Delivered, but an earlier send may have been taken too.
    Duplicate,
    Failed,
    Unknown,
    Retry,
}

#[derive(Debug, Clone, Copy)]
enum LateAnswer {
    Accepted,
    Unanswered,
    LeftLate,
}

const GUARDS: [Guard; 19] = [
    Guard::Claim,
    Guard::Cancel,
    Guard::Record(Ending::Delivered),
    Guard::Record(Ending::Duplicate),
    Guard::Record(Ending::Failed),
    Guard::Record(Ending::Unknown),
    Guard::Record(Ending::Retry),
    Guard::Late(LateAnswer::Accepted),
    Guard::Late(LateAnswer::Unanswered),
    Guard::Late(LateAnswer::LeftLate),
    Guard::Report,
    Guard::Resolve(Outcome::Delivered, None, false),
    Guard::Resolve(Outcome::NotDelivered, Some(Then::Close), false),
    Guard::Resolve(Outcome::NotDelivered, Some(Then::Resend), false),
    Guard::Resolve(Outcome::NotDelivered, Some(Then::Resend), true),
    Guard::Resolve(Outcome::Acknowledged, None, false),
    Guard::Requery(Ending::Delivered),
    Guard::Requery(Ending::Failed),
    Guard::Requery(Ending::Retry),
];

/// What a placed notification went through before it stood in its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Past {
    /// Its first attempt ambiguous, but where it was delivered or refused for good; a
    /// cancelled one was refused before processing (nothing can have reached the vendor).
    Plain,
    /// With an ambiguous attempt that nothing settled: what no guard may leave `known`.
    Unsettled,
}

/// A notification on its own route brought to `state` by the store's own moves, as `past` says,
/// and its (last) worker's claim: live where it is `sending`, lost or finished otherwise.
/// `None` where no notification can stand so: `failed` beside an unsettled ambiguity.
async fn placed(
    store: &dyn Store,
    state: State,
    past: Past,
    route: &str,
    t: OffsetDateTime,
) -> Option<Claim> {
    if (state, past) == (State::Failed, Past::Unsettled) {
        return None;
    }
    let n = accepted(store, notification("acme", route, "+1", route, t)).await;
    assert_eq!(n.state, State::Queued);
    let mut c = claim(store, t, 10, &[route]).await.remove(0);
    let with = |n, result, permanent, next| Decision {
        attempt: Some(AttemptOutcome {
            permanent,
            ..outcome(
                n,
                result,
                (result == AttemptResult::Accepted).then_some("m-1"),
            )
        }),
        ..decision(next)
    };
    let retry = Next::Retry { at: t };
    let unsettled = past == Past::Unsettled;
    let step = match state {
        State::Sending if unsettled => Some(with(
            1,
            AttemptResult::Ambiguous,
            None,
            Next::Reconcile { at: t },
        )),
        State::Sending => None,
        State::Cancelled if !unsettled => {
            Some(with(1, AttemptResult::Rejected, Some(false), retry))
        }
        State::Queued | State::Cancelled => Some(with(1, AttemptResult::Ambiguous, None, retry)),
        State::Delivered if unsettled => {
            applied(
                store,
                &c,
                &with(1, AttemptResult::Ambiguous, None, retry),
                t,
            )
            .await;
            c = claim(store, t, 10, &[route]).await.remove(0);
            Some(with(
                2,
                AttemptResult::Accepted,
                None,
                finish(State::Delivered, Certainty::DuplicatePossible),
            ))
        }
        State::Delivered => Some(with(
            1,
            AttemptResult::Accepted,
            None,
            finish(State::Delivered, Certainty::Known),
        )),
        State::Failed => Some(with(
            1,
            AttemptResult::Rejected,
            Some(true),
            finish(State::Failed, Certainty::Known),
        )),
        State::Unknown => Some(with(
            1,
            AttemptResult::Ambiguous,
            None,
            finish(State::Unknown, Certainty::Unknown),
        )),
    };
    if let Some(step) = step {
        applied(store, &c, &step, t).await;
    }
    if state == State::Cancelled {
        store.cancel("acme", n.id, t).await.unwrap();
    }
    let now = store.notification("acme", n.id).await.unwrap();
    assert_eq!(now.notification.state, state, "placed on {route}");
    assert!(
        !unsettled || now.attempts.iter().any(certainty::open),
        "placed on {route}: {now:?}"
    );
    Some(c)
}

/// A notification whose first worker lost its lease (its claim is returned, for a late
/// answer): its attempt was recovered and settled "not accepted" by a look-up, and the resend
/// that followed was ambiguous, so it waits to be looked up again with nothing in flight.
async fn waiting_to_look_up_a_resend(store: &dyn Store, route: &str, t: OffsetDateTime) -> Claim {
    let n = accepted(store, notification("acme", route, "+1", route, t)).await;
    let first = claim(store, t, 10, &[route]).await.remove(0);
    let recovered_at = t + LEASE + Duration::from_secs(1);
    let recovery = claim(store, recovered_at, 10, &[route]).await.remove(0);
    let not_found = Decision {
        settle: Some(Settlement {
            by: SettledBy::OutcomeQuery,
            accepted: false,
            evidence: json!({"stage": "query"}),
            provider_ref: None,
        }),
        ..decision(Next::Retry { at: recovered_at })
    };
    applied(store, &recovery, &not_found, recovered_at).await;
    let resend = claim(store, recovered_at, 10, &[route]).await.remove(0);
    let ambiguous = Decision {
        attempt: Some(outcome(2, AttemptResult::Ambiguous, None)),
        ..decision(Next::Reconcile {
            at: recovered_at + Duration::from_secs(3600),
        })
    };
    let waiting = applied(store, &resend, &ambiguous, recovered_at).await;
    assert_eq!(waiting.state, State::Sending, "{n:?}");
    first
}

fn ending(ending: Ending, t: OffsetDateTime) -> (Option<AttemptOutcome>, Next) {
    match ending {
        Ending::Delivered => (
            Some(outcome(1, AttemptResult::Accepted, Some("m-1"))),
            finish(State::Delivered, Certainty::Known),
        ),
        Ending::Duplicate => (
            Some(outcome(1, AttemptResult::Accepted, Some("m-1"))),
            finish(State::Delivered, Certainty::DuplicatePossible),
        ),
        Ending::Failed => (
            Some(AttemptOutcome {
                permanent: Some(true),
                ..outcome(1, AttemptResult::Rejected, None)
            }),
            finish(State::Failed, Certainty::Known),
        ),
        Ending::Unknown => (
            Some(outcome(1, AttemptResult::Ambiguous, None)),
            finish(State::Unknown, Certainty::Unknown),
        ),
        Ending::Retry => (
            Some(outcome(1, AttemptResult::Ambiguous, None)),
            Next::Retry { at: t },
        ),
    }
}

/// Tries `guard` on the notification of `c` (its first worker's claim); the mover it acted
/// as (a reopening is always later evidence's, whichever guard brought it).
/// Tries `guard` on the notification `c` claimed: who moves it, or the store's refusal of a
/// certainty the evidence does not hold (any other error fails the test).
async fn try_guard(
    store: &dyn Store,
    guard: Guard,
    c: &Claim,
    t: OffsetDateTime,
) -> Result<Mover, StoreError> {
    let id = c.notification.id;
    let route = c.notification.route.as_str();
    let later = t + LEASE + Duration::from_secs(1);
    let read = store.notification("acme", id).await.unwrap();
    Ok(match guard {
        Guard::Claim => {
            claim(store, later, 10, &[route]).await;
            Mover::Dispatcher
        }
        Guard::Cancel => {
            match store.cancel("acme", id, t).await {
                Ok(_) | Err(StoreError::Conflict(_)) => {}
                Err(err) => panic!("cancel failed for another cause: {err}"),
            }
            Mover::Upstream
        }
        Guard::Record(e) => {
            let (attempt, next) = ending(e, t);
            let d = Decision {
                attempt,
                ..decision(next)
            };
            store.record(c, &d, t).await?;
            Mover::Dispatcher
        }
        Guard::Late(answer) => {
            if read.notification.state == State::Sending {
                claim(store, later, 10, &[route]).await;
            }
            let mut evidence = json!({"stage": "awaiting_response"});
            if let LateAnswer::LeftLate = answer {
                evidence[herald::domain::evidence::MAY_HAVE_LEFT_LATE] = true.into();
            }
            let attempt = match answer {
                LateAnswer::Accepted => outcome(1, AttemptResult::Accepted, Some("m-late")),
                LateAnswer::Unanswered | LateAnswer::LeftLate => AttemptOutcome {
                    evidence,
                    ..outcome(1, AttemptResult::Ambiguous, None)
                },
            };
            let d = Decision {
                attempt: Some(attempt),
                ..decision(finish(State::Delivered, Certainty::Known))
            };
            let recorded = store.record(c, &d, later).await?;
            assert!(matches!(recorded, Recorded::Fenced), "{guard:?}");
            Mover::Evidence
        }
        Guard::Report => {
            let key = &read.attempts[0].provider_idempotency_key;
            let report = delivered_report(&format!("evt-{id}"), key, None);
            take_reports(store, route, vec![report], t).await;
            Mover::Callback
        }
        Guard::Resolve(outcome, then, force) => {
            let ask = Ask::new(outcome, then, force).unwrap();
            let n = &read.notification;
            if let Ok(change) = herald::review::resolve(n, &read.attempts, &ask, None, t) {
                let resolution = NewResolution {
                    principal: "on-call".into(),
                    outcome,
                    then,
                    note: "checked".into(),
                    change,
                    before: (n.state, n.certainty),
                };
                store
                    .resolve("acme", id, read.generation, &resolution, t)
                    .await?;
            }
            Mover::Person
        }
        Guard::Requery(e) => {
            let (_, next) = ending(e, t);
            let requery = Claim::in_review(read);
            let d = Decision {
                settle: Some(Settlement {
                    by: SettledBy::OutcomeQuery,
                    accepted: matches!(e, Ending::Delivered),
                    evidence: json!({"stage": "query"}),
                    provider_ref: None,
                }),
                ..decision(next)
            };
            let _fenced_unless_unknown = store.record_in_review(&requery, &d, t).await?;
            Mover::Person
        }
    })
}

async fn every_guard_moves_only_as_the_transition_table_allows(backend: Backend) {
    let Some(rig) = rig(backend).await else {
        return;
    };
    let store = &*rig.store;
    let t = now();
    let mut seen: Vec<Transition> = vec![];
    let mut moved = |from: Option<State>, to: Option<State>, by: Mover, what: String| {
        if from != to {
            assert!(
                allowed(from, to, by),
                "{what}: {from:?} -> {to:?} by {by:?}, which the transition table does not have"
            );
            seen.push(Transition {
                from,
                to,
                by,
                why: "",
            });
        }
    };
    moved(None, Some(State::Queued), Mover::Upstream, "accept".into());
    let mut routes = 0;
    let mut refused = vec![];
    for past in [Past::Plain, Past::Unsettled] {
        for from in State::ALL {
            for guard in GUARDS {
                routes += 1;
                let Some(c) = placed(store, *from, past, &format!("r{routes}"), t).await else {
                    continue;
                };
                let what = format!("{guard:?} from {from:?}, {past:?}");
                let by = match try_guard(store, guard, &c, t).await {
                    Ok(by) => by,
                    // The store itself refused the write: a guard asked for more certainty
                    // than the evidence holds (here, a worker's record that ignores its own
                    // unsettled attempt). Nothing moved.
                    Err(StoreError::Unjustified(_)) if past == Past::Unsettled => {
                        refused.push(what);
                        continue;
                    }
                    Err(err) => panic!("{what}: {err}"),
                };
                let after = store.notification("acme", c.notification.id).await.unwrap();
                // herald's one rule of certainty: never `known` beside a send that may have
                // reached a vendor, whoever moved it.
                assert!(
                    after.notification.certainty != Some(Certainty::Known)
                        || !after.attempts.iter().any(certainty::open),
                    "{what}: known beside an open attempt: {after:?}"
                );
                let after = after.notification;
                let by = match (c.notification.contradiction, &after.contradiction) {
                    (None, Some(_)) => Mover::Evidence,
                    _ => by,
                };
                moved(Some(*from), Some(after.state), by, what);
            }
        }
    }
    // A worker's record that says `known` beside its own unsettled attempt is refused by the
    // database, on both: the rule does not depend on every caller remembering it.
    for ending in ["Delivered", "Failed"] {
        assert!(
            refused.contains(&format!("Record({ending}) from Sending, Unsettled")),
            "{refused:?}"
        );
    }

    // A late answer while the notification waits to look up a resend, nothing in flight.
    routes += 1;
    let lost = waiting_to_look_up_a_resend(store, &format!("r{routes}"), t).await;
    let by = try_guard(store, Guard::Late(LateAnswer::Accepted), &lost, t)
        .await
        .unwrap();
    let after = store
        .notification("acme", lost.notification.id)
        .await
        .unwrap()
        .notification;
    assert_eq!(
        (after.state, after.certainty),
        (State::Delivered, Some(Certainty::DuplicatePossible)),
        "the late answer's message, and the resend's that nothing settled"
    );
    assert!(after.contradiction.is_some(), "in review: {after:?}");
    moved(
        Some(State::Sending),
        Some(after.state),
        by,
        "late answer while waiting".into(),
    );

    // The review rule, in Rust and in the SQL of the listing and of the queue's counts, says
    // the same of every notification these moves left.
    the_review_rule_reads_alike_in_rust_and_sql(store, t).await;

    // Retention: one of each state, a week after they ended.
    let mut placed_ids = vec![];
    for from in State::ALL {
        routes += 1;
        let c = placed(store, *from, Past::Plain, &format!("r{routes}"), t)
            .await
            .expect("every state stands with a plain past");
        placed_ids.push((*from, c.notification.id));
    }
    sweep_a_week_on(store, t).await;
    for (from, id) in placed_ids {
        let after = match store.notification("acme", id).await {
            Ok(read) => Some(read.notification.state),
            Err(StoreError::NotFound) => None,
            Err(err) => panic!("{err}"),
        };
        moved(Some(from), after, Mover::Retention, "retention".into());
    }

    for row in TRANSITIONS {
        assert!(
            seen.iter()
                .any(|s| (s.from, s.to, s.by) == (row.from, row.to, row.by)),
            "no guard made {:?} -> {:?} by {:?} ({}): a row of the table nothing does",
            row.from,
            row.to,
            row.by,
            row.why
        );
    }
}

async fn the_review_rule_reads_alike_in_rust_and_sql(store: &dyn Store, t: OffsetDateTime) {
    let every = ListFilter {
        limit: 1000,
        ..ListFilter::default()
    };
    let mut by_rust: Vec<(Reason, NotificationId)> = vec![];
    for read in store.list("acme", &every).await.unwrap() {
        if let Some(reason) = herald::review::reason(&read.notification, &read.attempts) {
            by_rust.push((reason, read.notification.id));
        }
    }
    let stats = store.queue_stats(t).await.unwrap();
    for reason in Reason::ALL {
        let mut rust: Vec<NotificationId> = by_rust
            .iter()
            .filter(|(r, _)| *r == reason)
            .map(|(_, id)| *id)
            .collect();
        let filter = ReviewFilter {
            reasons: vec![reason],
            limit: 1000,
            ..ReviewFilter::default()
        };
        let mut sql: Vec<NotificationId> = store
            .review("acme", &filter)
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.notification.id)
            .collect();
        rust.sort_by_key(|id| id.as_uuid());
        sql.sort_by_key(|id| id.as_uuid());
        assert_eq!(sql, rust, "the review listing for {reason}");
        assert_eq!(
            count_in(&stats)(reason),
            rust.len() as i64,
            "the queue's count for {reason}"
        );
    }
    assert!(
        Reason::ALL
            .iter()
            .all(|r| by_rust.iter().any(|(x, _)| x == r)),
        "every reason is among them: {by_rust:?}"
    );
}
