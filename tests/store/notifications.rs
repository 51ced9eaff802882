//! Accepting under an idempotency key, cancelling, listing and reading notifications.

use super::*;

on_both_backends!(
    a_cancellation_key_cancels_what_is_queued_under_it_in_one_step,
    a_new_key_creates_a_replay_answers_again_and_another_body_is_refused,
    concurrent_accepts_of_one_key_create_one_notification,
    a_batch_answers_each_item_in_order_and_commits_together,
    a_key_twice_in_one_batch_is_created_once_and_a_large_batch_whole,
    only_a_queued_notification_can_be_cancelled,
    lists_are_newest_first_filtered_and_paged_by_cursor,
    a_list_filters_by_channel,
    a_list_filters_by_route,
    a_list_filters_by_creation_time_from_after_up_to_before,
    a_list_filters_by_every_metadata_pair_as_exact_text,
    list_filters_combine_and_page_by_cursor_within_one_tenant,
    look_alikes_are_the_same_request_on_the_same_route_only,
    a_tenant_never_reads_another_tenants_notification,
);

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
