//! What waits for a person, their resolutions, requeries and bulk previews.

use super::*;

on_both_backends!(
    the_queues_oldest_due_leaves_out_a_route_an_operator_paused,
    review_lists_each_reason_oldest_first_and_filters,
    a_resolution_applies_once_with_its_audit_and_event,
    a_resend_renews_the_key_and_the_budget_when_asked,
    a_requery_in_review_is_fenced_and_emits_only_on_change,
    a_bulk_preview_is_kept_per_tenant_taken_once_and_expired_ones_go,
);

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
