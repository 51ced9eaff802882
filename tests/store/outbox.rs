//! The outbox: events claimed per sink, in order, leased, and pruned once published.

use super::*;

on_both_backends!(
    the_relay_takes_each_notifications_events_in_order_per_sink,
    the_trace_a_notification_was_enqueued_in_comes_back_with_its_claim_and_its_events,
    a_lease_or_a_hold_that_ends_makes_an_event_due_again,
    relays_claiming_at_once_never_take_the_same_event,
    events_published_to_every_sink_are_pruned_after_the_retention,
);

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
