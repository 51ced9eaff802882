//! Vendors' reports: receipts and the settlements and endings they prove.

use super::*;

on_both_backends!(
    reports_of_two_messages_while_it_waits_to_be_sent_again_end_it_with_its_final_event,
);

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
