//! Every guard in the store moves a notification only as the transition table allows.

use super::*;

on_both_backends!(every_guard_moves_only_as_the_transition_table_allows,);

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
