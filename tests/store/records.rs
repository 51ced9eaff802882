//! Recording a send's result: fenced by its claim, settling ambiguity, writing events.

use super::*;

on_both_backends!(
    a_lease_that_ends_turns_the_attempt_ambiguous_for_reconciliation,
    a_lost_claim_changes_nothing_but_its_own_attempts_evidence,
    a_decision_settles_unsettled_attempts_and_attributes_the_message_once,
    records_sharing_a_transaction_are_each_fenced_by_their_own_claim_and_fail_together,
    findings_annotate_without_settling,
    a_retry_is_queued_without_an_event_and_a_finish_writes_one,
);

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
