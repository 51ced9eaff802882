use super::*;
use crate::domain::evidence::COVERS_LATE;
use crate::domain::{REVIEWED, left_late};
use time::macros::datetime;

const T0: OffsetDateTime = datetime!(2026-11-29 12:00:00 UTC);

#[test]
fn a_settlement_a_sibling_beat_is_dropped_and_the_look_up_asked_again_at_once() {
    let decided = Decision {
        attempt: Some(outcome(2, &accepted())),
        settle: Some(Settlement {
            by: SettledBy::OutcomeQuery,
            accepted: true,
            evidence: serde_json::json!({}),
            provider_ref: Some("SM1".into()),
        }),
        findings: None,
        next: Next::Finish {
            state: State::Delivered,
            certainty: Certainty::Known,
        },
    };
    let again = look_again(decided.clone(), T0);
    assert_eq!(again.attempt, decided.attempt, "what the step saw is kept");
    assert_eq!(again.settle, None);
    assert_eq!(again.next, Next::Reconcile { at: T0 });
}

#[test]
fn a_requery_that_settles_nothing_leaves_it_unknown_with_what_it_found() {
    let findings = serde_json::json!({"look_up": "three look-alikes"});
    let decision = still_unknown(findings.clone());
    assert_eq!(decision.findings, Some(findings));
    assert_eq!((decision.attempt, decision.settle), (None, None));
    assert_eq!(
        decision.next,
        Next::Finish {
            state: State::Unknown,
            certainty: Certainty::Unknown
        }
    );
}

fn limits() -> Limits {
    Limits {
        max_attempts: 4,
        max_age: Duration::from_secs(3600),
        retry_base: Duration::from_secs(1),
        retry_max: Duration::from_secs(60),
        timeout: Duration::from_secs(10),
    }
}

fn attempt(n: i32, result: AttemptResult, settled: bool) -> Attempt {
    Attempt {
        n,
        route: "r".into(),
        provider_idempotency_key: "k".into(),
        started_at: T0,
        send_deadline: T0,
        finished_at: None,
        result,
        permanent: None,
        provider_ref: None,
        settled_by: settled.then_some(SettledBy::OutcomeQuery),
        evidence: json!({}),
    }
}

fn caps(window: bool, query: bool) -> Capabilities {
    Capabilities {
        idempotency_window: window.then_some(Duration::from_secs(86_400)),
        query_visibility_lag: query.then_some(Duration::from_secs(5)),
        max_payload_bytes: None,
        tags: false,
        attachments: false,
    }
}

fn situation<'a>(
    delivery: Delivery,
    caps: &'a Capabilities,
    attempts: &'a [Attempt],
    now: OffsetDateTime,
) -> Situation<'a> {
    Situation {
        id: own_id(),
        route: "r",
        fallback: None,
        delivery,
        capabilities: caps,
        attempts,
        created_at: T0,
        budget_from: 0,
        since: T0,
        expires_at: None,
        now,
        limits: limits(),
        siblings: &[],
    }
}

fn accepted() -> SendResult {
    SendResult::Accepted {
        provider_ref: Some("p-1".into()),
        evidence: Evidence::new("response", "ok").with_status(202),
    }
}

fn rejected(permanent: bool) -> SendResult {
    SendResult::Rejected {
        permanent,
        retry_after: None,
        evidence: Evidence::new("response", "no").with_status(if permanent { 422 } else { 429 }),
    }
}

fn ambiguous() -> SendResult {
    SendResult::Ambiguous {
        evidence: Evidence::new("awaiting_response", "reset"),
    }
}

fn queried(result: QueryResult, asked_at: OffsetDateTime) -> Step {
    Step::Queried { result, asked_at }
}

fn finish(state: State, certainty: Certainty) -> Next {
    Next::Finish { state, certainty }
}

use AttemptResult::{Ambiguous as Amb, InFlight as F};

fn own_id() -> NotificationId {
    NotificationId::from_uuid(uuid::Uuid::from_u128(
        0x0197_0000_0000_7000_8000_0000_0000_0100,
    ))
}

fn key_reused() -> SendResult {
    SendResult::KeyReused {
        evidence: Evidence::new("response", "invalid_idempotent_request").with_status(409),
    }
}

fn sibling(order: u128, result: AttemptResult, provider_ref: Option<&str>) -> Sibling {
    let mut a = attempt(1, result, false);
    a.provider_ref = provider_ref.map(str::to_owned);
    Sibling {
        notification: NotificationId::from_uuid(uuid::Uuid::from_u128(order)),
        created_at: T0,
        attempt: a,
    }
}

fn settled_taken(order: u128) -> Sibling {
    let mut sib = sibling(order, Amb, None);
    sib.attempt.settled_by = Some(SettledBy::OutcomeQuery);
    sib.attempt.evidence = json!({"settlement": {"outcome": "accepted"}});
    sib
}

fn settled_not_taken(order: u128) -> Sibling {
    let mut sib = sibling(order, Amb, None);
    sib.attempt.settled_by = Some(SettledBy::OutcomeQuery);
    sib.attempt.evidence = json!({"settlement": {"outcome": "not_accepted"}});
    sib
}

/// A sibling's send settled "not accepted", whose worker then read the vendor's answer naming
/// `reference` after its lease was lost.
fn taken_late(order: u128, reference: &str) -> Sibling {
    let mut sib = settled_not_taken(order);
    sib.attempt.evidence["late_result"] = json!({"result": "accepted", "provider_ref": reference});
    sib
}

/// `a` settled "not accepted", whose worker then saw its call end unanswered (at T0 + 30 s)
/// after its deadline's promise: it may have left after the look-up that settled it.
fn left_late_after_settling(mut a: Attempt) -> Attempt {
    a.settled_by = Some(SettledBy::OutcomeQuery);
    a.evidence = json!({
        "settlement": {"outcome": "not_accepted"},
        "late_result": {
            "result": "ambiguous",
            "at": "2026-11-29T12:00:30Z",
            "evidence": {MAY_HAVE_LEFT_LATE: true},
        },
    });
    a
}

fn sibling_left_late_after_settling(order: u128) -> Sibling {
    let mut sib = sibling(order, Amb, None);
    sib.attempt = left_late_after_settling(sib.attempt);
    sib
}

/// What attributing `refs` decides for a notification with one unsettled ambiguous attempt
/// (two with `twice`), among `siblings`, asked at `at`: "known M", "duplicate M",
/// "not accepted", "wait", or "inconclusive".
fn attribution(refs: &[&str], siblings: &[Sibling], twice: bool, at: OffsetDateTime) -> String {
    let c = caps(false, true);
    let mut history = vec![attempt(1, Amb, false)];
    if twice {
        history.push(attempt(2, Amb, false));
    }
    let mut s = situation(Delivery::AtMostOnce, &c, &history, at);
    s.siblings = siblings;
    let refs: Vec<String> = refs.iter().map(|r| (*r).to_owned()).collect();
    let evidence = Evidence::new("query", "look-alikes");
    match attribute(&s, &refs, T0 - Duration::from_secs(600), &evidence, at, 0.5) {
        Attribution::Inconclusive(_) => "inconclusive".to_owned(),
        Attribution::Decided(d) => match (d.settle, d.next) {
            (Some(settle), Next::Finish { certainty, .. }) if settle.accepted => {
                let word = if certainty == Certainty::Known {
                    "known"
                } else {
                    "duplicate"
                };
                let named = settle.provider_ref.unwrap_or_else(|| "unnamed".to_owned());
                format!("{word} {named}")
            }
            (Some(settle), _) if !settle.accepted => "not accepted".to_owned(),
            (None, Next::Reconcile { .. }) => "wait".to_owned(),
            other => panic!("unexpected {other:?}"),
        },
    }
}

#[test]
fn look_alikes_settle_only_what_the_counts_prove() {
    let early = T0 + Duration::from_secs(1);
    let late = T0 + Duration::from_secs(60);
    let earlier_sibling = |result, r| sibling(1, result, r);
    let later_sibling = |result, r| sibling(u128::MAX, result, r);
    // (case, look-alikes found, siblings' attempts, two own sends, asked at, decided)
    type Case<'a> = (
        &'a str,
        Vec<&'a str>,
        Vec<Sibling>,
        bool,
        OffsetDateTime,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "alone, one message",
            vec!["M1"],
            vec![],
            false,
            early,
            "known M1",
        ),
        (
            "the sibling's accepted send owns the only message",
            vec!["M1"],
            vec![earlier_sibling(AttemptResult::Accepted, Some("M1"))],
            false,
            late,
            "not accepted",
        ),
        (
            "...and before the lag, absence proves nothing yet",
            vec!["M1"],
            vec![earlier_sibling(AttemptResult::Accepted, Some("M1"))],
            false,
            early,
            "wait",
        ),
        (
            "one free message, the other attributed",
            vec!["M1", "M2"],
            vec![earlier_sibling(AttemptResult::Accepted, Some("M1"))],
            false,
            early,
            "known M2",
        ),
        (
            "two ambiguous siblings, one message: nobody can tell whose",
            vec!["M1"],
            vec![later_sibling(Amb, None)],
            false,
            late,
            "inconclusive",
        ),
        (
            "...which may still change until the lag has passed",
            vec!["M1"],
            vec![later_sibling(Amb, None)],
            false,
            early,
            "wait",
        ),
        (
            "two ambiguous siblings, two messages: both were taken, neither names one",
            vec!["M1", "M2"],
            vec![later_sibling(Amb, None)],
            false,
            early,
            "known unnamed",
        ),
        (
            "...and a sibling settled so counts for one message",
            vec!["M1", "M2"],
            vec![settled_taken(1)],
            false,
            late,
            "known unnamed",
        ),
        (
            "a sibling in flight is waited for even when the counts add up",
            vec!["M1", "M2"],
            vec![later_sibling(F, None)],
            false,
            early,
            "wait",
        ),
        (
            "a sibling in flight may own the message: wait for it",
            vec!["M1"],
            vec![later_sibling(F, None)],
            false,
            late,
            "wait",
        ),
        (
            "a sibling settled as not taken owns nothing",
            vec!["M1"],
            vec![settled_not_taken(1)],
            false,
            early,
            "known M1",
        ),
        (
            "a sibling's late answer owns the message its settlement denied",
            vec!["M1"],
            vec![taken_late(1, "M1")],
            false,
            late,
            "not accepted",
        ),
        (
            "...and leaves the other one free",
            vec!["M1", "M2"],
            vec![taken_late(1, "M1")],
            false,
            early,
            "known M2",
        ),
        (
            "a sibling's send that may have left late may own the message again",
            vec!["M1"],
            vec![sibling_left_late_after_settling(1)],
            false,
            late,
            "inconclusive",
        ),
        (
            "...and two messages are both sends'",
            vec!["M1", "M2"],
            vec![sibling_left_late_after_settling(1)],
            false,
            late,
            "known unnamed",
        ),
        (
            "a sibling accepted without a reference holds one message",
            vec!["M1"],
            vec![earlier_sibling(AttemptResult::Accepted, None)],
            false,
            late,
            "inconclusive",
        ),
        (
            "more messages than sends: someone else sends this text",
            vec!["M1", "M2"],
            vec![],
            false,
            late,
            "inconclusive",
        ),
        (
            "two own sends, two messages: taken twice",
            vec!["M1", "M2"],
            vec![],
            true,
            early,
            "duplicate M1",
        ),
        (
            "two own sends, one message, lag passed: taken once",
            vec!["M1"],
            vec![],
            true,
            late,
            "known M1",
        ),
        (
            "two own sends, one message so far: the second may still show",
            vec!["M1"],
            vec![],
            true,
            early,
            "wait",
        ),
    ];
    for (case, refs, siblings, twice, at, expected) in cases {
        assert_eq!(attribution(&refs, &siblings, twice, at), expected, "{case}");
    }
}

/// Seen in a frozen crash run: attempt 1 was settled "not accepted", its worker then read the
/// vendor's answer naming M1 after its lease was lost, and attempt 2's look-up found M1 and
/// M2. Counting M1 as free made two messages for one send, "inconclusive", and a third send.
#[test]
fn a_late_answer_owns_its_message_in_the_next_look_up() {
    let c = caps(false, true);
    let mut first = attempt(1, Amb, false);
    first.settled_by = Some(SettledBy::OutcomeQuery);
    first.evidence = json!({
        "settlement": {"outcome": "not_accepted"},
        "late_result": {"result": "accepted", "provider_ref": "M1"},
    });
    let history = [first, attempt(2, Amb, false)];
    let at = T0 + Duration::from_secs(1);
    let settled_by_look_up = |history: &[Attempt], refs: &[&str]| {
        let s = situation(Delivery::AtLeastOnce, &c, history, at);
        let refs: Vec<String> = refs.iter().map(|r| (*r).to_owned()).collect();
        let evidence = Evidence::new("query", "look-alikes");
        match attribute(&s, &refs, T0 - Duration::from_secs(600), &evidence, at, 0.5) {
            Attribution::Decided(d) => d.settle.map(|s| (s.accepted, s.provider_ref)),
            Attribution::Inconclusive(_) => None,
        }
    };
    assert_eq!(
        settled_by_look_up(&history, &["M1", "M2"]),
        Some((true, Some("M2".to_owned()))),
        "M1 is attempt 1's: one free message for attempt 2"
    );
    // Still unsettled, the late-answered send is the one looked for: its message counts.
    let mut unsettled = history[0].clone();
    unsettled.settled_by = None;
    unsettled.evidence["settlement"] = Value::Null;
    assert_eq!(
        settled_by_look_up(&[unsettled], &["M1"]),
        Some((true, Some("M1".to_owned())))
    );
}

/// What a late answer showed is never sent beside: not after a look-up that cannot
/// attribute the look-alikes, whether the late-answered send was settled "not accepted"
/// (its message counts, the resend's may be one more) or is the one looked for; nor after
/// a look-up that proves the resend absent.
#[test]
fn a_message_a_late_answer_showed_is_never_sent_beside() {
    let c = caps(false, true);
    let late = |mut a: Attempt| {
        a.evidence["late_result"] = json!({"result": "accepted", "provider_ref": "M1"});
        a
    };
    let denied = late(Attempt {
        evidence: json!({"settlement": {"outcome": "not_accepted"}}),
        ..attempt(1, Amb, true)
    });
    let resend = attempt(2, Amb, false);
    for delivery in [Delivery::AtLeastOnce, Delivery::AtMostOnce] {
        let history = [denied.clone(), resend.clone()];
        let s = situation(delivery, &c, &history, T0);
        assert_eq!(
            plan(&s, Asked::Inconclusive),
            Plan::Record(Box::new(only(finish(
                State::Delivered,
                Certainty::DuplicatePossible
            )))),
            "{delivery:?}"
        );
        let history = [late(attempt(1, Amb, false))];
        let s = situation(delivery, &c, &history, T0);
        assert_eq!(
            plan(&s, Asked::Inconclusive),
            Plan::Record(Box::new(only(finish(State::Delivered, Certainty::Known)))),
            "{delivery:?}"
        );
    }
    let history = [denied, resend];
    let at = T0 + Duration::from_secs(60);
    let s = situation(Delivery::AtLeastOnce, &c, &history, at);
    let evidence = Evidence::new("query", "look-alikes");
    let refs = ["M1".to_owned()];
    let Attribution::Decided(d) =
        attribute(&s, &refs, T0 - Duration::from_secs(600), &evidence, at, 0.5)
    else {
        panic!("M1 is attempt 1's: attempt 2 is not there")
    };
    assert!(!d.settle.expect("attempt 2 settled").accepted);
    assert_eq!(d.next, finish(State::Delivered, Certainty::Known));
}

/// Seen in a frozen crash run: attempt 1 was settled "not accepted"; its worker, frozen
/// across its deadline's promise, then saw its call end unanswered and said it may have left
/// late; attempt 2's look-up found two look-alikes. Counting only attempt 2 made that
/// "inconclusive", and a third send.
#[test]
fn a_send_that_may_have_left_late_is_counted_in_the_next_look_up() {
    let c = caps(false, true);
    let history = [
        left_late_after_settling(attempt(1, Amb, false)),
        attempt(2, Amb, false),
    ];
    let look_up = |history: &[Attempt], refs: &[&str], at: OffsetDateTime| {
        let s = situation(Delivery::AtLeastOnce, &c, history, at);
        let refs: Vec<String> = refs.iter().map(|r| (*r).to_owned()).collect();
        let evidence = Evidence::new("query", "look-alikes");
        attribute(&s, &refs, T0 - Duration::from_secs(600), &evidence, at, 0.5)
    };
    let settled = |a: Attribution| match a {
        Attribution::Decided(d) => d.settle.map(|s| (s.accepted, d.next)),
        Attribution::Inconclusive(_) => None,
    };
    let visible = T0 + Duration::from_secs(60);
    assert_eq!(
        settled(look_up(&history, &["M1", "M2"], visible)),
        Some((true, finish(State::Delivered, Certainty::DuplicatePossible))),
        "two messages, two sends that may have made them"
    );
    // One message for the two: taken once, as far as the look-up shows. But attempt 1's
    // late word stands on its attempt, which no settlement here accounts for, so herald's
    // rule keeps the delivery `duplicate_possible` (as holding the record against that late
    // word did before the rule decided it).
    assert_eq!(
        settled(look_up(&history, &["M1"], visible)),
        Some((true, finish(State::Delivered, Certainty::DuplicatePossible))),
        "one message for the two, beside a late word nothing settled"
    );
    // Attempt 1's message may show up to a lag after its worker said its call ended.
    assert_eq!(
        look_up(&history, &["M1"], T0 + Duration::from_secs(32)),
        Attribution::Decided(wait_until(T0 + Duration::from_secs(35)))
    );
    assert_eq!(
        look_up(&history, &[], T0 + Duration::from_secs(32)),
        Attribution::Decided(wait_until(T0 + Duration::from_secs(35))),
        "no absence is proven before then either"
    );
    // A person resolved it since: the settlement stands again.
    let mut reviewed = history.clone();
    reviewed[0].evidence[REVIEWED] = true.into();
    assert_eq!(
        settled(look_up(&reviewed, &["M1", "M2"], visible)),
        None,
        "two messages for one send: not herald's to attribute"
    );
}

#[test]
fn a_reused_key_proves_the_earlier_ambiguous_attempt_was_processed() {
    let c = caps(true, false);
    let history = [attempt(1, Amb, false), attempt(2, F, false)];
    let s = situation(Delivery::AtMostOnce, &c, &history, T0);
    let d = decide(
        &s,
        Step::Sent {
            n: 2,
            replay: true,
            result: key_reused(),
            overran: false,
            checked_at: None,
        },
        0.5,
    );
    assert_eq!(d.next, finish(State::Delivered, Certainty::Known));
    let settle = d.settle.unwrap();
    assert_eq!(
        (settle.by, settle.accepted),
        (SettledBy::IdempotentReplay, true)
    );
    let attempt = d.attempt.unwrap();
    assert_eq!(
        (attempt.result, attempt.permanent),
        (AttemptResult::Rejected, Some(true)),
        "this request itself was not processed"
    );
}

#[test]
fn a_reused_key_with_nothing_unsettled_is_a_contradiction_for_a_person() {
    let c = caps(true, false);
    let history = [attempt(1, F, false)];
    let s = situation(Delivery::AtMostOnce, &c, &history, T0);
    let d = decide(
        &s,
        Step::Sent {
            n: 1,
            replay: false,
            result: key_reused(),
            overran: false,
            checked_at: None,
        },
        0.5,
    );
    assert_eq!(d.next, finish(State::Unknown, Certainty::Unknown));
    assert!(d.settle.is_none());
    assert!(d.findings.is_some());
}

#[test]
fn a_first_send_ends_as_its_answer_proves() {
    let c = caps(false, false);
    let history = [attempt(1, F, false)];
    let s = situation(Delivery::AtMostOnce, &c, &history, T0);
    let sent = |result| {
        decide(
            &s,
            Step::Sent {
                n: 1,
                replay: false,
                result,
                overran: false,
                checked_at: None,
            },
            0.5,
        )
    };
    assert_eq!(
        sent(accepted()).next,
        finish(State::Delivered, Certainty::Known)
    );
    assert_eq!(
        sent(rejected(true)).next,
        finish(State::Failed, Certainty::Known)
    );
    assert!(matches!(sent(rejected(false)).next, Next::Retry { .. }));
    assert_eq!(sent(ambiguous()).next, Next::Reconcile { at: T0 });
    assert_eq!(
        sent(accepted()).attempt.unwrap().provider_ref.as_deref(),
        Some("p-1")
    );
}

#[test]
fn after_an_unsettled_ambiguity_nothing_ends_known() {
    let c = caps(false, false);
    let history = [attempt(1, Amb, false), attempt(2, F, false)];
    let s = situation(Delivery::AtLeastOnce, &c, &history, T0);
    let sent = |result| {
        decide(
            &s,
            Step::Sent {
                n: 2,
                replay: false,
                result,
                overran: false,
                checked_at: None,
            },
            0.5,
        )
        .next
    };
    assert_eq!(
        sent(accepted()),
        finish(State::Delivered, Certainty::DuplicatePossible)
    );
    assert_eq!(
        sent(rejected(true)),
        finish(State::Unknown, Certainty::Unknown)
    );
}

#[test]
fn a_settled_ambiguity_no_longer_counts() {
    let c = caps(false, false);
    let history = [attempt(1, Amb, true), attempt(2, F, false)];
    let s = situation(Delivery::AtMostOnce, &c, &history, T0);
    let next = decide(
        &s,
        Step::Sent {
            n: 2,
            replay: false,
            result: accepted(),
            overran: false,
            checked_at: None,
        },
        0.5,
    )
    .next;
    assert_eq!(next, finish(State::Delivered, Certainty::Known));
}

#[test]
fn reconciliation_asks_first_then_replays_then_applies_the_policy() {
    let history = [attempt(1, Amb, false)];
    let cases = [
        (
            caps(true, true),
            Delivery::AtMostOnce,
            Asked::NotYet,
            "query",
        ),
        (
            caps(true, true),
            Delivery::AtMostOnce,
            Asked::Failed,
            "replay",
        ),
        (
            caps(true, false),
            Delivery::AtMostOnce,
            Asked::NotYet,
            "replay",
        ),
        (
            caps(false, false),
            Delivery::AtLeastOnce,
            Asked::NotYet,
            "resend",
        ),
        (
            caps(false, false),
            Delivery::AtMostOnce,
            Asked::NotYet,
            "unknown",
        ),
        (
            caps(false, true),
            Delivery::AtLeastOnce,
            Asked::Inconclusive,
            "resend",
        ),
        (
            caps(false, true),
            Delivery::AtMostOnce,
            Asked::Inconclusive,
            "unknown",
        ),
    ];
    // Past the first resend's backoff (at most `retry_base` after the ambiguity).
    let now = T0 + limits().retry_base;
    for (c, delivery, asked, expected) in cases {
        let s = situation(delivery, &c, &history, now);
        let got = match plan(&s, asked) {
            Plan::Query => "query",
            Plan::Replay => "replay",
            Plan::Resend => "resend",
            Plan::Record(d) if d.next == finish(State::Unknown, Certainty::Unknown) => "unknown",
            Plan::Record(d) => panic!("unexpected {d:?}"),
        };
        assert_eq!(got, expected, "{c:?} {delivery:?} {asked:?}");
    }
}

#[test]
fn no_replay_once_the_window_has_passed() {
    let c = caps(true, false);
    let history = [attempt(1, Amb, false)];
    let s = situation(
        Delivery::AtMostOnce,
        &c,
        &history,
        T0 + Duration::from_secs(86_401),
    );
    assert!(
        matches!(plan(&s, Asked::NotYet), Plan::Record(d) if d.next == finish(State::Unknown, Certainty::Unknown))
    );
}

#[test]
fn a_failed_query_is_asked_again_before_an_at_least_once_resend() {
    let c = caps(false, true);
    let history = [attempt(1, Amb, false)];
    let s = situation(Delivery::AtLeastOnce, &c, &history, T0);
    assert!(
        matches!(plan(&s, Asked::Failed), Plan::Record(d) if matches!(d.next, Next::Reconcile { .. })),
        "a failed look-up proves nothing: resending now could deliver twice"
    );
    let past_backoff = situation(
        Delivery::AtLeastOnce,
        &c,
        &history,
        T0 + limits().retry_base,
    );
    assert_eq!(plan(&past_backoff, Asked::Inconclusive), Plan::Resend);
    let c = caps(true, true);
    let s = situation(Delivery::AtLeastOnce, &c, &history, T0);
    assert_eq!(
        plan(&s, Asked::Failed),
        Plan::Replay,
        "a replay is always safe"
    );
}

#[test]
fn an_at_least_once_resend_waits_a_backoff_that_grows_and_agrees_with_itself() {
    let c = caps(false, false);
    let mut history = vec![attempt(1, Amb, false)];
    let mut waits = Vec::new();
    for n in 1..=3 {
        let ended = history.last().unwrap().started_at;
        let s = situation(Delivery::AtLeastOnce, &c, &history, ended);
        let Plan::Record(wait) = plan(&s, Asked::NotYet) else {
            panic!("attempt {n}: a resend at once, with no backoff")
        };
        let Next::Reconcile { at } = wait.next else {
            panic!("attempt {n}: {wait:?}")
        };
        assert_eq!(wait.settle, None, "the ambiguity stays unsettled meanwhile");
        // Every look agrees on when: the jitter is drawn once per attempt.
        assert_eq!(plan(&s, Asked::NotYet), Plan::Record(wait.clone()));
        let ceiling = limits().retry_base * (1 << (n - 1));
        assert!(
            at > ended && at <= ended + ceiling,
            "attempt {n}: {at} after {ended}"
        );
        let then = situation(Delivery::AtLeastOnce, &c, &history, at);
        assert_eq!(plan(&then, Asked::NotYet), Plan::Resend, "attempt {n}");
        waits.push(at - ended);
        let mut next = attempt(n + 1, Amb, false);
        next.started_at = at + Duration::from_millis(10);
        history.push(next);
    }
    assert!(waits.iter().all(|w| *w > time::Duration::ZERO), "{waits:?}");
}

#[test]
fn a_failed_query_without_other_means_waits_and_asks_again() {
    let c = caps(false, true);
    let history = [attempt(1, Amb, false)];
    let s = situation(
        Delivery::AtMostOnce,
        &c,
        &history,
        T0 + Duration::from_secs(30),
    );
    match plan(&s, Asked::Failed) {
        Plan::Record(d) => assert_eq!(
            d.next,
            Next::Reconcile {
                at: T0 + Duration::from_secs(60)
            }
        ),
        other => panic!("expected to wait, got {other:?}"),
    }
}

#[test]
fn a_replay_settles_the_ambiguity_either_way() {
    let c = caps(true, false);
    let history = [attempt(1, Amb, false), attempt(2, F, false)];
    let s = situation(Delivery::AtMostOnce, &c, &history, T0);
    let replayed = |result| {
        decide(
            &s,
            Step::Sent {
                n: 2,
                replay: true,
                result,
                overran: false,
                checked_at: None,
            },
            0.5,
        )
    };
    let accepted = replayed(accepted());
    assert_eq!(accepted.next, finish(State::Delivered, Certainty::Known));
    let settle = accepted.settle.unwrap();
    assert_eq!(
        (settle.by, settle.accepted),
        (SettledBy::IdempotentReplay, true)
    );
    let refused = replayed(rejected(true));
    assert_eq!(refused.next, finish(State::Failed, Certainty::Known));
    assert!(!refused.settle.unwrap().accepted);
    let busy = replayed(rejected(false));
    assert!(busy.settle.is_none());
    assert!(matches!(busy.next, Next::Reconcile { .. }));
}

#[test]
fn the_outcome_query_settles_or_waits_out_the_visibility_lag() {
    let c = caps(false, true);
    let history = [attempt(1, Amb, false)];
    let found = QueryResult::Accepted {
        provider_ref: None,
        evidence: Evidence::new("query", "found"),
    };
    let s = situation(
        Delivery::AtMostOnce,
        &c,
        &history,
        T0 + Duration::from_secs(1),
    );
    let d = decide(&s, queried(found, s.now), 0.5);
    assert_eq!(d.next, finish(State::Delivered, Certainty::Known));
    assert_eq!(d.settle.unwrap().by, SettledBy::OutcomeQuery);

    let missing = || QueryResult::NotFoundYet {
        evidence: Evidence::new("query", "none"),
    };
    let visible_by = T0 + Duration::from_secs(10 + 5) + CALL_SLACK;
    let early = decide(&s, queried(missing(), s.now), 0.5);
    assert_eq!(
        (early.next, early.settle),
        (Next::Reconcile { at: visible_by }, None)
    );

    let s = situation(Delivery::AtMostOnce, &c, &history, visible_by);
    let late = decide(&s, queried(missing(), visible_by), 0.5);
    assert!(matches!(late.next, Next::Retry { .. }));
    assert!(!late.settle.unwrap().accepted);

    // Only when the question was asked counts, not when the answer arrived.
    let s = situation(
        Delivery::AtMostOnce,
        &c,
        &history,
        visible_by + Duration::from_secs(5),
    );
    let slow_answer = decide(
        &s,
        queried(missing(), visible_by - Duration::from_millis(1)),
        0.5,
    );
    assert_eq!(slow_answer.next, Next::Reconcile { at: visible_by });

    // When herald learnt of the attempt's fate proves nothing: its send deadline does.
    let mut late_news = history.clone();
    late_news[0].finished_at = Some(T0 + Duration::from_secs(30));
    let s = situation(Delivery::AtMostOnce, &c, &late_news, visible_by);
    let d = decide(&s, queried(missing(), visible_by), 0.5);
    assert!(!d.settle.unwrap().accepted);
}

#[test]
fn one_query_cannot_prove_a_single_delivery_of_several_sends() {
    let c = caps(false, true);
    let history = [attempt(1, Amb, false), attempt(2, Amb, false)];
    let s = situation(Delivery::AtLeastOnce, &c, &history, T0);
    let found = QueryResult::Accepted {
        provider_ref: None,
        evidence: Evidence::new("query", "found"),
    };
    assert_eq!(
        decide(&s, queried(found, T0), 0.5).next,
        finish(State::Delivered, Certainty::DuplicatePossible)
    );
}

#[test]
fn caps_end_a_notification_where_its_history_allows() {
    let c = caps(false, false);
    let clean: Vec<Attempt> = (1..=4)
        .map(|n| attempt(n, if n == 4 { F } else { AttemptResult::Rejected }, false))
        .collect();
    let s = situation(Delivery::AtLeastOnce, &c, &clean, T0);
    let d = decide(
        &s,
        Step::Sent {
            n: 4,
            replay: false,
            result: rejected(false),
            overran: false,
            checked_at: None,
        },
        0.5,
    );
    assert_eq!(d.next, finish(State::Failed, Certainty::Known));

    let mut murky = clean.clone();
    murky[0].result = Amb;
    let s = situation(Delivery::AtLeastOnce, &c, &murky, T0);
    let d = decide(
        &s,
        Step::Sent {
            n: 4,
            replay: false,
            result: rejected(false),
            overran: false,
            checked_at: None,
        },
        0.5,
    );
    assert_eq!(d.next, finish(State::Unknown, Certainty::Unknown));

    let old = [attempt(1, F, false)];
    let s = situation(
        Delivery::AtLeastOnce,
        &c,
        &old,
        T0 + Duration::from_secs(3601),
    );
    let d = decide(
        &s,
        Step::Sent {
            n: 1,
            replay: false,
            result: rejected(false),
            overran: false,
            checked_at: None,
        },
        0.5,
    );
    assert_eq!(d.next, finish(State::Failed, Certainty::Known));
}

#[test]
fn backoff_grows_is_jittered_capped_and_honours_retry_after() {
    let l = limits();
    let full: Vec<Duration> = (1..=8).map(|n| retry_delay(&l, n, 1.0, None)).collect();
    assert_eq!(full[..4], [1, 2, 4, 8].map(Duration::from_secs));
    assert_eq!(full[7], Duration::from_secs(60), "capped at retry_max");
    assert_eq!(
        retry_delay(&l, 3, 0.5, None),
        Duration::from_secs(2),
        "full jitter scales the ceiling"
    );
    assert_eq!(retry_delay(&l, 3, 0.0, None), Duration::ZERO);
    assert_eq!(
        retry_delay(&l, 1, 0.1, Some(Duration::from_secs(30))),
        Duration::from_secs(30)
    );
    assert_eq!(
        retry_delay(&l, 40, 1.0, None),
        Duration::from_secs(60),
        "no overflow"
    );
}

/// Where a step leaves a notification on route `r` whose fallback is `b`: "failover",
/// "retry", "reconcile", or the final state and certainty.
fn with_fallback(delivery: Delivery, history: &[Attempt], step: Step) -> String {
    let c = caps(false, false);
    let mut s = situation(delivery, &c, history, T0 + Duration::from_secs(1));
    s.fallback = Some("b");
    summary(decide(&s, step, 0.5).next)
}

fn summary(next: Next) -> String {
    match next {
        Next::Failover { route, .. } => format!("failover to {route}"),
        Next::Retry { .. } => "retry".to_owned(),
        Next::Reconcile { .. } => "reconcile".to_owned(),
        Next::Finish { state, certainty } => format!("{state}/{certainty}"),
        Next::Hold { reason, .. } => format!("hold ({reason})"),
    }
}

#[test]
fn a_hold_of_herald_s_own_spends_nothing_and_waits_for_the_route() {
    let c = caps(false, false);
    // The budget is spent and a fallback waits: neither matters to a hold.
    let history: Vec<Attempt> = (1..=4)
        .map(|n| attempt(n, AttemptResult::Rejected, false))
        .collect();
    let now = T0 + Duration::from_secs(1);
    let mut s = situation(Delivery::AtMostOnce, &c, &history, now);
    s.fallback = Some("b");
    for reason in HoldReason::ALL {
        for reconciling in [false, true] {
            let wait = Duration::from_secs(7);
            let step = Step::Held {
                n: 4,
                hold: Hold {
                    reason: *reason,
                    wait,
                },
                reconciling,
            };
            assert_eq!(
                decide(&s, step, 0.5),
                only(Next::Hold {
                    attempt: 4,
                    reason: *reason,
                    at: now + wait,
                    reconciling,
                }),
                "{reason}, reconciling: {reconciling}"
            );
        }
    }
}

#[test]
fn past_its_expiry_nothing_starts_and_only_an_unsettled_ambiguity_ends_unknown() {
    let expiry = T0 + Duration::from_secs(10);
    let c = caps(true, false);
    // A retry and a hold wait no later than the expiry, whatever the vendor asked for.
    let refused = [attempt(1, AttemptResult::Rejected, false)];
    let mut s = situation(
        Delivery::AtMostOnce,
        &c,
        &refused,
        T0 + Duration::from_secs(1),
    );
    s.expires_at = Some(expiry);
    let slow_down = SendResult::transient(
        Evidence::new("response", "slow down").with_status(429),
        Some(Duration::from_secs(60)),
    );
    assert_eq!(
        decide(&s, sent(slow_down), 1.0).next,
        Next::Retry { at: expiry }
    );
    let paced = Step::Held {
        n: 2,
        hold: Hold {
            reason: HoldReason::Paced,
            wait: Duration::from_secs(60),
        },
        reconciling: false,
    };
    assert_eq!(
        decide(&s, paced, 0.5).next,
        Next::Hold {
            attempt: 2,
            reason: HoldReason::Paced,
            at: expiry,
            reconciling: false,
        }
    );

    // The claim that comes then is refused by herald itself: failed, and known.
    s.now = expiry;
    let expired = SendResult::permanent(Evidence::new(
        herald_provider::EXPIRED_STAGE,
        "expired; not sent",
    ));
    assert_eq!(
        decide(&s, sent(expired), 0.5).next,
        finish(State::Failed, Certainty::Known)
    );

    // An unsettled ambiguity is neither replayed nor resent past the expiry, and stays
    // unknown for the query or a person; a moment before, it would have been.
    let ambiguous = [attempt(1, Amb, false)];
    for (c, delivery, before) in [
        (caps(true, false), Delivery::AtMostOnce, "replay"),
        (caps(false, false), Delivery::AtLeastOnce, "resend"),
    ] {
        let mut s = situation(delivery, &c, &ambiguous, expiry - Duration::from_secs(1));
        s.expires_at = Some(expiry);
        let planned = match plan(&s, Asked::NotYet) {
            Plan::Replay => "replay",
            Plan::Resend => "resend",
            other => panic!("{other:?}"),
        };
        assert_eq!(planned, before);
        s.now = expiry;
        assert!(
            matches!(plan(&s, Asked::NotYet), Plan::Record(d) if d.next == finish(State::Unknown, Certainty::Unknown)),
            "{delivery:?}"
        );
    }
}

#[test]
fn a_send_is_proven_absent_only_after_its_deadline_and_timeout_and_the_lag() {
    // Claimed at T0, its call could start until T0 + 20 s: a worker that waited for the
    // route that long may have written it then.
    let c = caps(false, true);
    let mut stalled = attempt(1, Amb, false);
    stalled.send_deadline = T0 + Duration::from_secs(20);
    let history = [stalled];
    let processed = T0 + Duration::from_secs(20) + limits().timeout + CALL_SLACK;
    let visible = processed + Duration::from_secs(5);
    let not_found = || QueryResult::NotFoundYet {
        evidence: Evidence::new("query", "no message"),
    };
    let early = visible - Duration::from_millis(1);
    let s = situation(Delivery::AtMostOnce, &c, &history, early);
    assert_eq!(
        decide(&s, queried(not_found(), early), 0.5).next,
        Next::Reconcile { at: visible },
        "absence before then proves nothing"
    );
    let s = situation(Delivery::AtMostOnce, &c, &history, visible);
    let decision = decide(&s, queried(not_found(), visible), 0.5);
    assert!(
        matches!(
            decision.settle,
            Some(Settlement {
                accepted: false,
                ..
            })
        ),
        "{decision:?}"
    );
}

#[test]
fn a_call_that_outlived_its_deadline_is_looked_up_only_after_it_was_recorded() {
    let c = caps(false, true);
    let history = [attempt(1, F, false)];
    let s = situation(Delivery::AtMostOnce, &c, &history, T0);
    let overran = |result| Step::Sent {
        n: 1,
        replay: false,
        result,
        overran: true,
        checked_at: None,
    };
    let marked = |d: Decision| d.attempt.unwrap().evidence[MAY_HAVE_LEFT_LATE].clone();
    assert_eq!(marked(decide(&s, overran(ambiguous()), 0.5)), true);
    assert_eq!(
        marked(decide(&s, overran(accepted()), 0.5)),
        Value::Null,
        "an answer settles itself"
    );
    assert_eq!(marked(decide(&s, sent(ambiguous()), 0.5)), Value::Null);

    // Its worker woke 60 s after the deadline and recorded the call it had made: the
    // request may have reached the vendor until then.
    let mut late = attempt(1, Amb, false);
    let recorded = T0 + Duration::from_secs(60);
    late.finished_at = Some(recorded);
    late.evidence = json!({"stage": "awaiting_response", MAY_HAVE_LEFT_LATE: true});
    let history = [late];
    let visible = recorded + Duration::from_secs(5);
    let promised = T0 + limits().timeout + CALL_SLACK + Duration::from_secs(5);
    let not_found = QueryResult::NotFoundYet {
        evidence: Evidence::new("query", "no message"),
    };
    let s = situation(Delivery::AtMostOnce, &c, &history, promised);
    assert_eq!(
        decide(&s, queried(not_found, promised), 0.5).next,
        Next::Reconcile { at: visible },
        "the deadline's promise does not hold for it"
    );
}

#[test]
fn a_look_up_that_waited_out_a_late_word_says_so_and_the_word_no_longer_holds_it_open() {
    // Attempt 1's lease ended unanswered; then its worker woke and said its request may
    // have left until 60 s after the deadline. The look-up waits for that, and lists it.
    let c = caps(false, true);
    let worker_said = T0 + Duration::from_secs(60);
    let mut lost = attempt(1, Amb, false);
    lost.evidence = json!({"late_result": {
        "result": "ambiguous",
        "at": "2026-11-29T12:01:00Z",
        "evidence": {MAY_HAVE_LEFT_LATE: true},
    }});
    assert!(left_late(&lost));
    let history = [lost];
    let visible = worker_said + Duration::from_secs(5);
    let not_found = || QueryResult::NotFoundYet {
        evidence: Evidence::new("query", "no message"),
    };
    let s = situation(
        Delivery::AtMostOnce,
        &c,
        &history,
        visible - Duration::from_secs(1),
    );
    assert_eq!(
        decide(&s, queried(not_found(), s.now), 0.5).next,
        Next::Reconcile { at: visible },
        "not before the late request is visible"
    );
    let s = situation(Delivery::AtMostOnce, &c, &history, visible);
    let decision = decide(&s, queried(not_found(), visible), 0.5);
    let settle = decision.settle.clone().expect("settled");
    assert!(!settle.accepted);
    assert_eq!(settle.evidence[COVERS_LATE], json!([1]), "{settle:?}");
    let settled = decision.applied_to(&history, "r", visible);
    assert!(!left_late(&settled[0]), "{:#}", settled[0].evidence);
    assert!(!crate::domain::certainty::open(&settled[0]));

    // A look-up that settled it before the worker's word lists nothing: the word, when it
    // comes, holds the notification open.
    let before = [attempt(1, Amb, false)];
    let s = situation(Delivery::AtMostOnce, &c, &before, visible);
    let decision = decide(&s, queried(not_found(), visible), 0.5);
    assert_eq!(
        decision.settlement_evidence(visible).unwrap()["settlement"]["evidence"][COVERS_LATE],
        Value::Null
    );
    let mut settled = decision.applied_to(&before, "r", visible).remove(0);
    settled.evidence["late_result"] = history[0].evidence["late_result"].clone();
    assert!(left_late(&settled), "{:#}", settled.evidence);
}

fn sent(result: SendResult) -> Step {
    Step::Sent {
        n: 1,
        replay: false,
        result,
        overran: false,
        checked_at: None,
    }
}

#[test]
fn a_route_known_not_to_have_taken_it_hands_it_to_its_fallback() {
    let in_flight = [attempt(1, F, false)];
    let refused_credentials = SendResult::Rejected {
        permanent: true,
        retry_after: None,
        evidence: Evidence::new("response", "invalid API key").with_status(401),
    };
    let circuit_open = SendResult::Rejected {
        permanent: false,
        retry_after: Some(Duration::from_secs(30)),
        evidence: Evidence::new("circuit_open", "not sent"),
    };
    let cases = [
        ("a transient rejection", rejected(false), "failover to b"),
        (
            "the route's credentials refused",
            refused_credentials,
            "failover to b",
        ),
        ("an open circuit", circuit_open, "failover to b"),
        ("the recipient refused", rejected(true), "failed/known"),
        ("an ambiguity", ambiguous(), "reconcile"),
    ];
    for (case, result, expected) in cases {
        for delivery in [Delivery::AtMostOnce, Delivery::AtLeastOnce] {
            assert_eq!(
                with_fallback(delivery, &in_flight, sent(result.clone())),
                expected,
                "{case}, {delivery:?}"
            );
        }
    }
}

#[test]
fn an_unsettled_ambiguity_fails_over_only_under_at_least_once() {
    let history = [attempt(1, Amb, false)];
    for (delivery, window, expected) in [
        (Delivery::AtMostOnce, false, "unknown/unknown"),
        (Delivery::AtLeastOnce, false, "failover to b"),
        // Inside an idempotent route's window a replay settles it first.
        (Delivery::AtLeastOnce, true, "replay"),
        (Delivery::AtMostOnce, true, "replay"),
    ] {
        let c = caps(window, false);
        let mut s = situation(delivery, &c, &history, T0 + Duration::from_secs(1));
        s.fallback = Some("b");
        let planned = match plan(&s, Asked::NotYet) {
            Plan::Record(decision) => summary(decision.next),
            Plan::Replay => "replay".to_owned(),
            other => format!("{other:?}"),
        };
        assert_eq!(planned, expected, "{delivery:?}, window {window}");
    }
    // A replay refused for the route's credentials: that vendor never looked at the key,
    // so the first send's fate is as open as before.
    let replayed = [attempt(1, Amb, false), attempt(2, F, false)];
    let refused = SendResult::Rejected {
        permanent: true,
        retry_after: None,
        evidence: Evidence::new("response", "invalid API key").with_status(401),
    };
    for (delivery, expected) in [
        (Delivery::AtMostOnce, "unknown/unknown"),
        (Delivery::AtLeastOnce, "failover to b"),
    ] {
        let c = caps(true, false);
        let mut s = situation(delivery, &c, &replayed, T0 + Duration::from_secs(1));
        s.fallback = Some("b");
        let step = Step::Sent {
            n: 2,
            replay: true,
            result: refused.clone(),
            overran: false,
            checked_at: None,
        };
        let d = decide(&s, step, 0.5);
        assert!(
            d.settle.is_none(),
            "{delivery:?}: settled by a refused replay"
        );
        assert_eq!(summary(d.next), expected, "{delivery:?}");
    }
    let c = caps(false, true);
    let mut s = situation(
        Delivery::AtMostOnce,
        &c,
        &history,
        T0 + Duration::from_secs(60),
    );
    s.fallback = Some("b");
    let evidence = Evidence::new("query", "nothing found");
    let proven = decide(
        &s,
        queried(QueryResult::NotAccepted { evidence }, s.now),
        0.5,
    );
    assert!(proven.settle.is_some_and(|settle| !settle.accepted));
    assert_eq!(
        summary(proven.next),
        "failover to b",
        "settled not accepted by the look-up"
    );
}

#[test]
fn an_ambiguity_left_on_the_primary_is_settled_by_nothing_the_fallback_says() {
    let mut on_fallback = attempt(2, F, false);
    on_fallback.route = "b".into();
    let history = [attempt(1, Amb, false), on_fallback];
    let c = caps(true, true);
    let mut s = situation(
        Delivery::AtLeastOnce,
        &c,
        &history,
        T0 + Duration::from_secs(1),
    );
    s.route = "b";
    let on_b = |result| Step::Sent {
        n: 2,
        replay: false,
        result,
        overran: false,
        checked_at: None,
    };
    let ends = |step| summary(decide(&s, step, 0.5).next);
    assert_eq!(ends(on_b(accepted())), "delivered/duplicate_possible");
    assert_eq!(ends(on_b(rejected(true))), "unknown/unknown");
    let replayed = decide(
        &s,
        Step::Sent {
            n: 2,
            replay: true,
            result: accepted(),
            overran: false,
            checked_at: None,
        },
        0.5,
    );
    assert!(
        replayed.settle.is_none(),
        "b's replay settles none of r's attempts"
    );
    let found = QueryResult::Accepted {
        provider_ref: Some("p-2".into()),
        evidence: Evidence::new("query", "found"),
    };
    assert_eq!(
        summary(decide(&s, queried(found, s.now), 0.5).next),
        "delivered/duplicate_possible"
    );
    // b's look-up finds one message that only b's send can own: r's may be another.
    let mut on_fallback = attempt(2, Amb, false);
    on_fallback.route = "b".into();
    let history = [attempt(1, Amb, false), on_fallback];
    let c = caps(false, true);
    let mut s = situation(
        Delivery::AtLeastOnce,
        &c,
        &history,
        T0 + Duration::from_secs(60),
    );
    s.route = "b";
    let evidence = Evidence::new("query", "look-alikes");
    let refs = ["M1".to_owned()];
    match attribute(&s, &refs, T0, &evidence, s.now, 0.5) {
        Attribution::Decided(d) => {
            assert_eq!(summary(d.next), "delivered/duplicate_possible");
        }
        other => panic!("unexpected {other:?}"),
    }
}
