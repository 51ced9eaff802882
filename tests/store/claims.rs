//! Claims: fair choice of due work, leases, send windows, fixed requests and suppressions.

use super::*;

on_both_backends!(
    a_claim_takes_due_work_on_the_given_routes_up_to_its_limit,
    a_claim_fixes_the_provider_request_once,
    a_claim_marks_the_sends_whose_recipient_is_suppressed,
    a_row_a_claim_cannot_read_is_set_aside_and_the_rest_are_claimed,
    a_claim_takes_no_more_of_a_route_than_its_slot_and_fixes_each_send_deadline,
    a_hold_withdraws_its_attempt_spends_no_budget_and_writes_no_event,
    one_tenants_burst_does_not_delay_another_tenants_notification,
);

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
               AND query LIKE 'WITH RECURSIVE tenant_walk%'
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

/// A claim reads the due rows it takes, not the whole backlog: with one tenant's 3,000 due
/// notifications (and statistics that say so, as autovacuum leaves them), claiming ten reads
/// a few dozen index entries of `notifications`. The walk of tenants ends in a NULL row; a
/// search of that tenant's due work once read every due row to find none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_reads_the_rows_it_takes_not_the_backlog() {
    let Some(rig) = rig(Backend::Postgres).await else {
        return;
    };
    let t = now();
    let backlog: Vec<NewAccept> = (0..3_000)
        .map(|i| {
            let n = notification("acme", "a", "+1", &format!("n{i}"), t);
            accept_of(&format!("key-{i}"), n, 1)
        })
        .collect();
    rig.store.accept(&backlog).await.unwrap();
    // Its backends' counters reported (a backend reports when it ends, if not before), then
    // reset: what is counted next is the claim's alone.
    rig.store.close().await;
    let db = sqlx::PgPool::connect(&rig.db.url).await.unwrap();
    sqlx::query("ANALYZE").execute(&db).await.unwrap();
    sqlx::query("SELECT pg_stat_reset()")
        .execute(&db)
        .await
        .unwrap();
    let store = herald::store::connect(&rig.db.url, 8).await.unwrap();
    let index_reads = || async {
        sqlx::query_as::<_, (i64, i64)>(
            "SELECT coalesce(sum(idx_tup_read), 0)::bigint, coalesce(sum(idx_scan), 0)::bigint
             FROM pg_stat_user_indexes WHERE relname = 'notifications'",
        )
        .fetch_one(&db)
        .await
        .unwrap()
    };
    assert_eq!(
        index_reads().await,
        (0, 0),
        "the counters start from nothing"
    );
    assert_eq!(claim(&*store, t, 10, &["a"]).await.len(), 10);
    store.close().await;
    let mut reads = index_reads().await;
    for _ in 0..50 {
        if reads.1 > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        reads = index_reads().await;
    }
    assert!(reads.1 > 0, "the claim's index scans were never reported");
    let by_index: Vec<(String, i64)> = sqlx::query_as(
        "SELECT indexrelname::text, idx_tup_read FROM pg_stat_user_indexes
         WHERE relname = 'notifications' AND idx_tup_read > 0",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    assert!(
        reads.0 < 300,
        "claiming 10 of 3,000 due notifications read {} index entries of notifications: \
         {by_index:?}",
        reads.0
    );
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
