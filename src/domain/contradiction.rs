//! Evidence that arrives after a step was recorded — the answer a worker read after its lease
//! was lost, a vendor's report — is held against the record, for herald never records more
//! certainty than it has *now*. Where later evidence shows a message that the record denies (a
//! send settled "not accepted", a notification failed, cancelled, left unknown or waiting to be
//! sent again), or a second message beside a `known` delivery, the notification is reopened:
//! `delivered`, with the certainty the evidence allows, and in review (reason `contradicted`)
//! until a person acknowledges it. Evidence that agrees with the record changes nothing.
//!
//! A worker whose lost call outlived its send deadline's promise shows less: that its request
//! *may* have left after another worker looked for it and found nothing. That takes `known`
//! from a delivery beside it (`duplicate_possible`) or a cancellation (`cancelled`/`unknown`),
//! makes a notification failed or waiting to be sent again `unknown` (under `at_least_once`,
//! one waiting to be sent again is sent: the policy accepts a duplicate over a loss, and its
//! delivery is reopened), and tells a person reviewing an `unknown` one. Once a person has
//! resolved the notification, that possibility was theirs to weigh: it is not held against
//! their word again.
//!
//! Messages are told apart as far as herald can: by the vendor's reference where one is known,
//! else one per attempt; a replay that settled an earlier send under the same key delivered the
//! same message (the vendor deduplicated it). A vendor's report under a provider key counts as
//! one message only where no send under that key is already counted; a report that names the
//! vendor's id of a message that no send under its key holds counts as another one, unless a
//! send under that key whose id herald never learnt may be it. So the count is what the
//! evidence proves at least, never more than was sent.

use std::collections::{BTreeMap, BTreeSet};

use super::certainty;
use super::evidence::left_late;
use super::{
    Attempt, AttemptResult, Certainty, Delivery, Notification, Reported, SettledBy, State,
};

/// What later evidence makes of a notification.
#[derive(Debug, Clone, PartialEq)]
pub struct Reopen {
    /// `delivered` where the evidence shows a message the record denied; where it shows only
    /// that one may have left, `unknown` (a cancellation stays `cancelled`, its certainty
    /// `unknown`: nobody may send it again).
    pub state: State,
    pub certainty: Certainty,
    /// The recipient may have it more than once where the record said once (or never).
    pub duplicate: bool,
    /// What brought the contradiction: `late_result` (an answer read after the lease was lost)
    /// or `callback` (a vendor's report).
    pub cause: &'static str,
    /// One sentence for a person: the evidence, and what the record said.
    pub why: String,
}

/// A message a vendor may hold, as far as herald can tell one from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Message<'a> {
    /// The vendor's reference for it, on a route.
    Ref(&'a str, &'a str),
    /// The message of this attempt, whose reference nothing recorded.
    Attempt(i32),
    /// A message a vendor reported under a (route, provider key) that no counted send accounts
    /// for.
    Reported(&'a str, &'a str),
}

/// The answer a worker read after its lease was lost (kept as `late_result` evidence), if it
/// says the vendor took the message: with the vendor's reference, where it named one.
fn late_acceptance(a: &Attempt) -> Option<Option<&str>> {
    a.taken_late().then(|| a.late_reference())
}

/// How a settlement of `a` came out, if one did.
fn settled(a: &Attempt) -> Option<&str> {
    a.settled_by
        .and(a.evidence["settlement"]["outcome"].as_str())
}

/// The message `a` delivered, if anything shows it took one.
fn message<'a>(a: &'a Attempt, attempts: &'a [Attempt]) -> Option<Message<'a>> {
    let taken = a.result == AttemptResult::Accepted
        || (a.result == AttemptResult::Ambiguous && settled(a) == Some("accepted"))
        || late_acceptance(a).is_some();
    if !taken {
        return None;
    }
    // A replay under the same key settled it: the vendor answered the replay with the message
    // it already had.
    if a.settled_by == Some(SettledBy::IdempotentReplay)
        && let Some(replay) = a.evidence["settlement"]["evidence"]["attempt"].as_i64()
        && let Some(replay) = attempts
            .iter()
            .find(|r| i64::from(r.n) == replay && r.result == AttemptResult::Accepted)
    {
        return message(replay, attempts);
    }
    match a
        .provider_ref
        .as_deref()
        .or_else(|| late_acceptance(a).flatten())
    {
        Some(reference) => Some(Message::Ref(a.route.as_str(), reference)),
        None => Some(Message::Attempt(a.n)),
    }
}

/// What later evidence makes of notification `n`, given its attempts (with any `late_result`
/// evidence) and the messages vendors reported of it; `None` where the evidence agrees with the
/// record, or while a worker's send is in flight (its record is held against the evidence when
/// it is made).
pub fn reopen(n: &Notification, attempts: &[Attempt], reported: &[Reported]) -> Option<Reopen> {
    let mut messages: BTreeSet<Message> = attempts
        .iter()
        .filter_map(|a| message(a, attempts))
        .collect();
    let reports = count_reports(attempts, reported, &mut messages);
    // Sends that may have left late with a message nothing counts yet.
    let maybe: Vec<&Attempt> = attempts
        .iter()
        .filter(|a| left_late(a) && message(a, attempts).is_none())
        .collect();
    let late: Vec<String> = attempts
        .iter()
        .filter_map(|a| late_sentence(a, maybe.iter().any(|m| m.n == a.n)))
        .collect();
    // A send in flight, an ambiguity that nothing settled, or one that may have left late, may
    // have delivered one more (herald's one rule of certainty, `certainty::open`).
    let open = attempts.iter().any(certainty::open);
    let count = messages.len();
    // What the evidence shows, held to the rule: none shown is no delivery (a cancellation
    // stays cancelled); one shown is a known delivery only where nothing else may have left.
    let (state, certainty) = match count {
        0 if n.state == State::Cancelled => (State::Cancelled, Certainty::Unknown),
        0 => (State::Unknown, Certainty::Unknown),
        1 => certainty::end(State::Delivered, Certainty::Known, attempts),
        _ => (State::Delivered, Certainty::DuplicatePossible),
    };
    if !contradicts(n, attempts, count, open, &maybe) {
        return None;
    }
    let record = match n.certainty {
        Some(c) => format!("{}/{c}", n.state),
        None => n.state.to_string(),
    };
    let cause = if late.is_empty() {
        "callback"
    } else {
        "late_result"
    };
    let evidence: Vec<String> = late.into_iter().chain(reports).collect();
    let evidence = if evidence.is_empty() {
        "later evidence shows a message the record does not account for".to_owned()
    } else {
        evidence.join("; ")
    };
    let conclusion = conclusion(state, certainty, count, !maybe.is_empty());
    Some(Reopen {
        state,
        certainty,
        duplicate: count >= 2,
        cause,
        why: format!("{evidence}, while the record said {record}: {conclusion}"),
    })
}

/// Whether `count` messages shown (and `maybe`, sends that may have left late with one more)
/// contradict what the record says of `n`.
fn contradicts(
    n: &Notification,
    attempts: &[Attempt],
    count: usize,
    open: bool,
    maybe: &[&Attempt],
) -> bool {
    match (n.state, n.certainty) {
        (State::Delivered, Some(Certainty::Known)) => count >= 2 || (count == 1 && open),
        (State::Queued | State::Failed | State::Unknown | State::Cancelled, _) if count >= 1 => {
            true
        }
        // Only a message that may have left: a final record that denies it must not stand,
        // `at_most_once` must not send again beside it, and whoever settles an `unknown` one
        // must hear of it.
        (State::Failed, _) | (State::Cancelled, Some(Certainty::Known)) => !maybe.is_empty(),
        (State::Queued, _) => !maybe.is_empty() && n.delivery == Delivery::AtMostOnce,
        // (An unsettled one is what the review already shows.)
        (State::Unknown, _) => {
            n.contradiction.is_none() && maybe.iter().any(|a| a.settled_by.is_some())
        }
        // Waiting to be looked up again, with no send in flight: a late answer shows a message
        // a settlement denied, and the next step might send again beside it. (A worker amid a
        // send holds it: its record is held against the evidence when it is made.)
        (State::Sending, _) => {
            !attempts.iter().any(|a| a.result == AttemptResult::InFlight)
                && attempts
                    .iter()
                    .any(|a| settled(a) == Some("not_accepted") && late_acceptance(a).is_some())
        }
        (State::Delivered | State::Cancelled, _) => false,
    }
}

/// What the evidence comes to, in words, for the reopened record.
fn conclusion(state: State, certainty: Certainty, count: usize, may_hold_more: bool) -> String {
    match certainty {
        Certainty::Known => format!("the vendor took {count} message(s)"),
        Certainty::DuplicatePossible => format!(
            "the vendor took {count} message(s){}, so the recipient may have it more than once",
            if may_hold_more {
                " and may hold one more"
            } else {
                ""
            }
        ),
        Certainty::Unknown if state == State::Cancelled => "the vendor may hold the message that \
            was cancelled: it stays cancelled, and is never sent again"
            .to_owned(),
        Certainty::Unknown => "the vendor may hold a message, and only a person can settle \
                               whether it does"
            .to_owned(),
    }
}

/// Adds to `messages` those that vendors reported and no counted send accounts for, and says
/// what each report shows that the record does not.
fn count_reports<'a>(
    attempts: &'a [Attempt],
    reported: &'a [Reported],
    messages: &mut BTreeSet<Message<'a>>,
) -> Vec<String> {
    // The vendor ids reported under each (route, key).
    let mut keys: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for r in reported {
        let ids = keys.entry((&r.route, &r.key)).or_default();
        ids.extend(r.message.as_deref());
    }
    let mut reports = Vec::new();
    for ((route, key), ids) in keys {
        let sent: Vec<Message> = attempts
            .iter()
            .filter(|a| a.route == route && a.provider_idempotency_key == key)
            .filter_map(|a| message(a, attempts))
            .collect();
        let unheld: Vec<&str> = ids
            .into_iter()
            .filter(|id| !sent.contains(&Message::Ref(route, id)))
            .collect();
        // A send whose id herald never learnt may be one of the unheld.
        let nameless: Vec<Message> = sent
            .iter()
            .filter(|m| matches!(m, Message::Attempt(_)))
            .copied()
            .collect();
        for id in &unheld {
            messages.insert(Message::Ref(route, id));
        }
        for m in nameless.iter().take(unheld.len()) {
            messages.remove(m);
        }
        if unheld.len() > nameless.len() {
            reports.push(format!(
                "route `{route}`'s vendor reported {} under key {key}, which the record does \
                 not hold",
                unheld.join(", ")
            ));
        } else if sent.is_empty() {
            messages.insert(Message::Reported(route, key));
            reports.push(format!(
                "route `{route}`'s vendor reported a message sent under key {key}"
            ));
        }
    }
    reports
}

/// What `a`'s late result shows that its record denies, in words: an acceptance, or (where
/// `maybe_left_late`, its message counted nowhere) a request that may have left late.
fn late_sentence(a: &Attempt, maybe_left_late: bool) -> Option<String> {
    if maybe_left_late {
        let denied = match settled(a) {
            Some(_) => " (it had been settled not accepted)",
            None => "",
        };
        return Some(format!(
            "attempt {}'s worker was held up past its send deadline with its request \
             unanswered, which may have reached the vendor late{denied}",
            a.n
        ));
    }
    let reference = late_acceptance(a)?;
    let denied = match (a.result, settled(a)) {
        (AttemptResult::Accepted, _) | (_, Some("accepted")) => return None,
        (_, Some(_)) => " (it had been settled not accepted)",
        _ => "",
    };
    Some(match reference {
        Some(r) => format!(
            "attempt {} was answered `accepted` ({r}) after its worker's lease ended{denied}",
            a.n
        ),
        None => format!(
            "attempt {} was answered `accepted` after its worker's lease ended{denied}",
            a.n
        ),
    })
}

#[cfg(test)]
mod tests {
    use crate::domain::evidence::REVIEWED;
    use serde_json::{Value, json};
    use time::OffsetDateTime;
    use time::macros::datetime;

    use super::*;
    use crate::domain::{Channel, Content, Delivery, NotificationId};

    const T0: OffsetDateTime = datetime!(2026-12-02 12:00 UTC);

    fn notification(state: State, certainty: Option<Certainty>) -> Notification {
        Notification {
            id: NotificationId::new(),
            tenant: "acme".into(),
            channel: Channel::Sms,
            to: "+14155550100".into(),
            route: "fallback".into(),
            delivery: Delivery::AtMostOnce,
            state,
            certainty,
            acknowledged: false,
            content: Content::default(),
            metadata: Default::default(),
            cancellation_key: None,
            category: None,
            send_at: None,
            expires_at: None,
            next_attempt_at: None,
            created_at: T0,
            updated_at: T0,
            key_epoch: 0,
            failovers: 0,
            late_evidence: true,
            contradiction: None,
            trace_parent: None,
        }
    }

    fn attempt(n: i32, route: &str, result: AttemptResult, provider_ref: Option<&str>) -> Attempt {
        Attempt {
            n,
            route: route.into(),
            provider_idempotency_key: format!("k-{route}"),
            started_at: T0,
            send_deadline: T0,
            finished_at: Some(T0),
            result,
            permanent: (result == AttemptResult::Rejected).then_some(true),
            provider_ref: provider_ref.map(str::to_owned),
            settled_by: None,
            evidence: json!({}),
        }
    }

    fn settled(mut a: Attempt, by: SettledBy, outcome: &str, extra: Value) -> Attempt {
        a.settled_by = Some(by);
        a.evidence["settlement"] = json!({"outcome": outcome, "evidence": extra});
        a
    }

    fn late(mut a: Attempt, result: &str, provider_ref: Option<&str>) -> Attempt {
        a.evidence["late_result"] = json!({"result": result, "provider_ref": provider_ref});
        a
    }

    /// A lost call's answer that never came, from a worker held up past its send deadline's
    /// promise.
    fn held_up(mut a: Attempt) -> Attempt {
        a.evidence["late_result"] = json!({
            "result": "ambiguous",
            "evidence": {"stage": "awaiting_response", "may_have_left_late": true},
        });
        a
    }

    fn reviewed(mut a: Attempt) -> Attempt {
        a.evidence[REVIEWED] = true.into();
        a
    }

    use AttemptResult::{Accepted, Ambiguous, Rejected};

    /// The stale worker's attempt 1, reclaimed as ambiguous and settled "not accepted" by a
    /// look-up, then answered late.
    fn stale(answer: &str, provider_ref: Option<&str>) -> Attempt {
        late(
            settled(
                attempt(1, "primary", Ambiguous, None),
                SettledBy::OutcomeQuery,
                "not_accepted",
                json!({}),
            ),
            answer,
            provider_ref,
        )
    }

    /// (what reopen makes of it) as "state/certainty duplicate cause", or "unchanged".
    fn verdict(n: &Notification, attempts: &[Attempt], reported: &[(&str, &str)]) -> String {
        // A key written `key/id` is reported with the vendor's id of the message.
        let reported: Vec<Reported> = reported
            .iter()
            .map(|(r, k)| {
                let (key, message) = match k.split_once('/') {
                    Some((key, id)) => (key, Some(id.to_owned())),
                    None => (*k, None),
                };
                Reported {
                    route: (*r).to_owned(),
                    key: key.to_owned(),
                    message,
                }
            })
            .collect();
        match reopen(n, attempts, &reported) {
            None => "unchanged".to_owned(),
            Some(r) => format!(
                "{}/{}{} {}",
                r.state,
                r.certainty,
                if r.duplicate { " duplicate" } else { "" },
                r.cause
            ),
        }
    }

    #[test]
    fn late_evidence_reopens_only_what_it_contradicts() {
        let known = notification(State::Delivered, Some(Certainty::Known));
        let duplicate = notification(State::Delivered, Some(Certainty::DuplicatePossible));
        let failed = notification(State::Failed, Some(Certainty::Known));
        let unknown = notification(State::Unknown, Some(Certainty::Unknown));
        let queued = notification(State::Queued, None);
        let cancelled = notification(State::Cancelled, Some(Certainty::Known));
        let queued_at_least_once = Notification {
            delivery: Delivery::AtLeastOnce,
            ..queued.clone()
        };
        let sending = notification(State::Sending, None);
        let resent = attempt(2, "primary", Accepted, Some("SM2"));
        let failed_over = attempt(2, "fallback", Accepted, Some("SM9"));
        let refused = attempt(2, "primary", Rejected, None);
        let by_person = |a: Attempt| settled(a, SettledBy::Review, "not_accepted", json!({}));
        // (case, the record, its attempts, reported (route, key) pairs, what reopen makes of it)
        type Case<'a> = (
            &'a str,
            &'a Notification,
            Vec<Attempt>,
            Vec<(&'a str, &'a str)>,
            &'a str,
        );
        let cases: Vec<Case> = vec![
            (
                "late accepted after a look-up said not found and a resend was accepted",
                &known,
                vec![stale("accepted", Some("SM1")), resent.clone()],
                vec![],
                "delivered/duplicate_possible duplicate late_result",
            ),
            (
                "...the same, after a failover",
                &known,
                vec![stale("accepted", Some("SM1")), failed_over.clone()],
                vec![],
                "delivered/duplicate_possible duplicate late_result",
            ),
            (
                "late accepted after the notification failed",
                &failed,
                vec![stale("accepted", Some("SM1")), refused.clone()],
                vec![],
                "delivered/known late_result",
            ),
            (
                "late accepted while it waits to be sent again",
                &queued,
                vec![stale("accepted", None)],
                vec![],
                "delivered/known late_result",
            ),
            (
                "late accepted on the very ambiguity left unknown",
                &unknown,
                vec![late(
                    attempt(1, "primary", Ambiguous, None),
                    "accepted",
                    Some("SM1"),
                )],
                vec![],
                "delivered/known late_result",
            ),
            (
                "late rejected agrees with any record",
                &known,
                vec![stale("rejected", None), resent.clone()],
                vec![],
                "unchanged",
            ),
            (
                "late ambiguous proves nothing",
                &failed,
                vec![stale("ambiguous", None), refused.clone()],
                vec![],
                "unchanged",
            ),
            (
                "held up past its deadline after a look-up said not found and a resend was \
                 accepted",
                &known,
                vec![held_up(stale("ambiguous", None)), resent.clone()],
                vec![],
                "delivered/duplicate_possible late_result",
            ),
            (
                "...the same, after a failover",
                &known,
                vec![held_up(stale("ambiguous", None)), failed_over.clone()],
                vec![],
                "delivered/duplicate_possible late_result",
            ),
            (
                "held up past its deadline after the notification failed",
                &failed,
                vec![held_up(stale("ambiguous", None)), refused.clone()],
                vec![],
                "unknown/unknown late_result",
            ),
            (
                "held up while it waits to be sent again, at most once",
                &queued,
                vec![held_up(stale("ambiguous", None))],
                vec![],
                "unknown/unknown late_result",
            ),
            (
                "...at least once, it is sent again",
                &queued_at_least_once,
                vec![held_up(stale("ambiguous", None))],
                vec![],
                "unchanged",
            ),
            (
                "held up on the very ambiguity left unknown: the review shows it already",
                &unknown,
                vec![held_up(attempt(1, "primary", Ambiguous, None))],
                vec![],
                "unchanged",
            ),
            (
                "held up on a send settled not accepted, beside the ambiguity left unknown",
                &unknown,
                vec![
                    held_up(stale("ambiguous", None)),
                    attempt(2, "primary", Ambiguous, None),
                ],
                vec![],
                "unknown/unknown late_result",
            ),
            (
                "held up after it was cancelled: it stays cancelled",
                &cancelled,
                vec![held_up(stale("ambiguous", None))],
                vec![],
                "cancelled/unknown late_result",
            ),
            (
                "held up, then a person resolved it: theirs to weigh",
                &failed,
                vec![reviewed(held_up(stale("ambiguous", None))), refused.clone()],
                vec![],
                "unchanged",
            ),
            (
                "held up on a send a look-up found: its message is counted",
                &known,
                vec![held_up(settled(
                    attempt(1, "primary", Ambiguous, Some("SM1")),
                    SettledBy::OutcomeQuery,
                    "accepted",
                    json!({}),
                ))],
                vec![],
                "unchanged",
            ),
            (
                "held up beside a duplicate already recorded",
                &duplicate,
                vec![held_up(stale("ambiguous", None)), resent.clone()],
                vec![],
                "unchanged",
            ),
            (
                "late accepted on a send a look-up found agrees",
                &known,
                vec![late(
                    settled(
                        attempt(1, "primary", Ambiguous, Some("SM1")),
                        SettledBy::OutcomeQuery,
                        "accepted",
                        json!({}),
                    ),
                    "accepted",
                    Some("SM1"),
                )],
                vec![],
                "unchanged",
            ),
            (
                "late accepted on a send a replay settled is the replay's message",
                &known,
                vec![
                    late(
                        settled(
                            attempt(1, "primary", Ambiguous, None),
                            SettledBy::IdempotentReplay,
                            "accepted",
                            json!({"attempt": 2}),
                        ),
                        "accepted",
                        Some("SM2"),
                    ),
                    resent.clone(),
                ],
                vec![],
                "unchanged",
            ),
            (
                "a duplicate already recorded stays as it is",
                &duplicate,
                vec![stale("accepted", Some("SM1")), resent.clone()],
                vec![],
                "unchanged",
            ),
            (
                "a worker holds it: its record is held against the evidence",
                &sending,
                vec![
                    stale("accepted", Some("SM1")),
                    attempt(2, "primary", AttemptResult::InFlight, None),
                ],
                vec![],
                "unchanged",
            ),
            (
                "waiting to look up a resend, nothing in flight: not sent again beside it",
                &sending,
                vec![
                    stale("accepted", Some("SM1")),
                    attempt(2, "primary", Ambiguous, None),
                ],
                vec![],
                "delivered/duplicate_possible late_result",
            ),
            (
                "waiting to look up the very send a late answer took: the look-up finds it",
                &sending,
                vec![late(
                    attempt(1, "primary", Ambiguous, None),
                    "accepted",
                    Some("SM1"),
                )],
                vec![],
                "unchanged",
            ),
            (
                "a report after a person closed it not delivered",
                &failed,
                vec![by_person(attempt(1, "primary", Ambiguous, None))],
                vec![("primary", "k-primary")],
                "delivered/known callback",
            ),
            (
                "a report after a person asked for a resend, before it went",
                &queued,
                vec![by_person(attempt(1, "primary", Ambiguous, None))],
                vec![("primary", "k-primary")],
                "delivered/known callback",
            ),
            (
                "a report of the primary's message beside the fallback's delivery",
                &known,
                vec![
                    settled(
                        attempt(1, "primary", Ambiguous, None),
                        SettledBy::OutcomeQuery,
                        "not_accepted",
                        json!({}),
                    ),
                    failed_over.clone(),
                ],
                vec![("primary", "k-primary")],
                "delivered/duplicate_possible duplicate callback",
            ),
            (
                "a report of the message the record has agrees",
                &known,
                vec![attempt(1, "primary", Accepted, Some("SM1"))],
                vec![("primary", "k-primary")],
                "unchanged",
            ),
            (
                "...and so does one that names it",
                &known,
                vec![attempt(1, "primary", Accepted, Some("SM1"))],
                vec![("primary", "k-primary/SM1")],
                "unchanged",
            ),
            (
                "a report of a second message under the key (a stale worker's send)",
                &known,
                vec![attempt(1, "primary", Accepted, Some("SM1"))],
                vec![("primary", "k-primary/SM1"), ("primary", "k-primary/SM2")],
                "delivered/duplicate_possible duplicate callback",
            ),
            (
                "...named alone, beside the message the record has",
                &known,
                vec![attempt(1, "primary", Accepted, Some("SM1"))],
                vec![("primary", "k-primary/SM2")],
                "delivered/duplicate_possible duplicate callback",
            ),
            (
                "a report's id may be that of a send whose id herald never learnt",
                &known,
                vec![settled(
                    attempt(1, "primary", Ambiguous, None),
                    SettledBy::OutcomeQuery,
                    "accepted",
                    json!({}),
                )],
                vec![("primary", "k-primary/SM2")],
                "unchanged",
            ),
            (
                "...but not two ids for one such send",
                &known,
                vec![settled(
                    attempt(1, "primary", Ambiguous, None),
                    SettledBy::OutcomeQuery,
                    "accepted",
                    json!({}),
                )],
                vec![("primary", "k-primary/SM2"), ("primary", "k-primary/SM3")],
                "delivered/duplicate_possible duplicate callback",
            ),
        ];
        for (case, n, attempts, reported, expected) in cases {
            assert_eq!(verdict(n, &attempts, &reported), expected, "{case}");
        }
    }

    #[test]
    fn the_reason_names_the_evidence_and_the_record() {
        let n = notification(State::Delivered, Some(Certainty::Known));
        let attempts = [
            stale("accepted", Some("SM1")),
            attempt(2, "primary", Accepted, Some("SM2")),
        ];
        let why = reopen(&n, &attempts, &[]).unwrap().why;
        assert_eq!(
            why,
            "attempt 1 was answered `accepted` (SM1) after its worker's lease ended (it had been \
             settled not accepted), while the record said delivered/known: the vendor took 2 \
             message(s), so the recipient may have it more than once"
        );
        let attempts = [
            held_up(stale("ambiguous", None)),
            attempt(2, "primary", Accepted, Some("SM2")),
        ];
        let why = reopen(&n, &attempts, &[]).unwrap().why;
        assert_eq!(
            why,
            "attempt 1's worker was held up past its send deadline with its request unanswered, \
             which may have reached the vendor late (it had been settled not accepted), while \
             the record said delivered/known: the vendor took 1 message(s) and may hold one \
             more, so the recipient may have it more than once"
        );
    }
}
