//! Certainty has one author. Whatever ends a notification — a worker's record, a cancellation,
//! an expiry, a suppression, a failover's end, a person's resolution, a vendor's report, later
//! evidence — asks [`end`] what it may say, over the attempts as they stand once that step's own
//! settlements are applied. The rule, in prose:
//!
//! - An attempt is **open** while it may have left a message with a vendor that nothing has
//!   accounted for: an ambiguous call that no look-up, replay, report or person settled (and no
//!   late answer showed), or a call whose worker was held up past its send deadline's promise
//!   with its request unanswered, whose message nothing counts, that no look-up has waited out
//!   and no person has weighed.
//! - An attempt **took** a message where the vendor accepted it, a settlement said it was
//!   accepted, or an answer read after its lease ended said so.
//! - `delivered` is `known` only where the step proved one message and nothing is open; else
//!   `duplicate_possible`.
//! - `failed` and `cancelled` say nothing reached a vendor, so they are `known` only where no
//!   attempt is open and none took a message. Otherwise a failure is `unknown`/`unknown` (the
//!   contract's rule: never `failed` beside an unsettled ambiguity) and a cancellation stays
//!   `cancelled` — nothing more is sent — with certainty `unknown`, for a person to settle.
//!
//! The store holds every write to this rule: a notification written `known` beside an open
//! attempt is refused by the database itself (the trigger of migration 0022, the same test in
//! SQL), so that no path — a new one included — can record more certainty than it has.

use super::evidence::left_late;
use super::{Attempt, AttemptResult, Certainty, State};

/// Whether `a` may have left a message with a vendor that nothing accounts for (see the module
/// doc). A send in flight is open too: its worker has not said what became of it.
pub fn open(a: &Attempt) -> bool {
    match a.result {
        AttemptResult::InFlight => true,
        AttemptResult::Ambiguous if a.settled_by.is_none() && !a.taken_late() => true,
        _ => left_late(a) && !took(a),
    }
}

/// Whether `a` took a message: accepted, settled accepted, or accepted by a late answer.
pub fn took(a: &Attempt) -> bool {
    a.result == AttemptResult::Accepted
        || (a.settled_by.is_some() && a.evidence["settlement"]["outcome"] == "accepted")
        || a.taken_late()
}

/// Whether any of `attempts` may have reached a vendor: one is open, or took a message.
pub fn may_have_sent(attempts: &[Attempt]) -> bool {
    attempts.iter().any(|a| open(a) || took(a))
}

/// The state and certainty a step that ends a notification as `state` may record, where what
/// it proved is `proven` (`known` where the step itself shows the outcome), given `attempts`
/// as they stand once the step's settlements are applied. Never more certain than `proven`.
pub fn end(state: State, proven: Certainty, attempts: &[Attempt]) -> (State, Certainty) {
    let open = attempts.iter().any(open);
    match state {
        State::Delivered if proven == Certainty::Known && !open => {
            (State::Delivered, Certainty::Known)
        }
        State::Delivered => (State::Delivered, Certainty::DuplicatePossible),
        State::Failed | State::Cancelled
            if proven == Certainty::Known && !may_have_sent(attempts) =>
        {
            (state, Certainty::Known)
        }
        State::Cancelled => (State::Cancelled, Certainty::Unknown),
        State::Failed | State::Unknown | State::Queued | State::Sending => {
            (State::Unknown, Certainty::Unknown)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use time::macros::datetime;

    use super::*;
    use crate::domain::SettledBy;

    fn attempt(
        n: i32,
        result: AttemptResult,
        settled_by: Option<SettledBy>,
        evidence: Value,
    ) -> Attempt {
        let at = datetime!(2026-12-01 12:00 UTC);
        Attempt {
            n,
            route: "primary".into(),
            provider_idempotency_key: "k".into(),
            started_at: at,
            send_deadline: at,
            finished_at: Some(at),
            result,
            permanent: None,
            provider_ref: None,
            settled_by,
            evidence,
        }
    }

    fn settled(outcome: &str) -> Value {
        json!({"settlement": {"outcome": outcome}})
    }

    fn left_late() -> Value {
        json!({"settlement": {"outcome": "not_accepted"},
               "late_result": {"result": "ambiguous", "evidence": {"may_have_left_late": true}}})
    }

    #[test]
    fn only_what_nothing_can_have_reached_a_vendor_ends_known() {
        use AttemptResult::{Accepted, Ambiguous, Rejected};
        let query = Some(SettledBy::OutcomeQuery);
        let refused = attempt(1, Rejected, None, json!({}));
        let unsettled = attempt(1, Ambiguous, None, json!({}));
        let settled_absent = attempt(1, Ambiguous, query, settled("not_accepted"));
        let settled_taken = attempt(1, Ambiguous, query, settled("accepted"));
        let late_taken = attempt(
            1,
            Ambiguous,
            None,
            json!({"late_result": {"result": "accepted"}}),
        );
        let maybe_late = attempt(1, Ambiguous, query, left_late());
        let mut weighed = maybe_late.clone();
        weighed.evidence["late_result_reviewed"] = true.into();
        let accepted = attempt(2, Accepted, None, json!({}));

        // (history, may a failure or cancellation be known, may a delivery be known)
        let cases: [(&[Attempt], bool, bool); 8] = [
            (&[], true, true),
            (std::slice::from_ref(&refused), true, true),
            (std::slice::from_ref(&settled_absent), true, true),
            (std::slice::from_ref(&weighed), true, true),
            (std::slice::from_ref(&unsettled), false, false),
            (std::slice::from_ref(&maybe_late), false, false),
            (std::slice::from_ref(&settled_taken), false, true),
            (&[late_taken.clone(), accepted.clone()], false, true),
        ];
        for (history, undelivered_known, delivered_known) in cases {
            for state in [State::Failed, State::Cancelled] {
                let expected = match (undelivered_known, state) {
                    (true, _) => (state, Certainty::Known),
                    (false, State::Cancelled) => (State::Cancelled, Certainty::Unknown),
                    (false, _) => (State::Unknown, Certainty::Unknown),
                };
                assert_eq!(
                    end(state, Certainty::Known, history),
                    expected,
                    "{history:?}"
                );
            }
            let delivered = if delivered_known {
                Certainty::Known
            } else {
                Certainty::DuplicatePossible
            };
            assert_eq!(
                end(State::Delivered, Certainty::Known, history),
                (State::Delivered, delivered),
                "{history:?}"
            );
        }
    }

    #[test]
    fn the_rule_never_adds_certainty_a_step_did_not_prove() {
        assert_eq!(
            end(State::Delivered, Certainty::DuplicatePossible, &[]),
            (State::Delivered, Certainty::DuplicatePossible)
        );
        assert_eq!(
            end(State::Unknown, Certainty::Unknown, &[]),
            (State::Unknown, Certainty::Unknown)
        );
        let in_flight = attempt(1, AttemptResult::InFlight, None, json!({}));
        assert!(open(&in_flight));
    }
}
