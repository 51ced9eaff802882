//! Retention: what is forgotten when, and what is kept until a person has seen it.

use super::*;

on_both_backends!(
    a_contradicted_notification_is_kept_until_a_person_acknowledges_it,
    a_possible_duplicate_is_kept_until_a_person_acknowledges_it,
    a_sweep_racing_a_resend_an_acknowledgement_and_a_claim_deletes_only_what_was_finished,
    keys_and_upstream_event_ids_are_forgotten_after_their_window_a_batch_at_a_time,
    finished_notifications_go_with_their_rows_once_published_and_past_retention,
);

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
