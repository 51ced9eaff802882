//! Upstream events create their notifications once.

use super::*;

on_both_backends!(
    an_upstream_event_creates_its_notifications_once,
    an_upstream_event_received_at_once_twice_creates_once,
);

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
