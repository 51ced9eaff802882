//! The pure heart of dispatch: given what a notification has been through and what the
//! provider just answered, decide what is true now and what happens next. No I/O and no clock:
//! `now` and the jitter are passed in, so every rule has a table-driven test.
//!
//! The rules, in prose (CONTRACT.md, "Delivery policy"; DESIGN.md, "State transitions"):
//! - An acceptance is `known` unless an earlier attempt is an *unsettled* ambiguity, in which
//!   case the recipient may have it twice: `duplicate_possible`.
//! - A rejection ends `failed`/`known` only when nothing ambiguous is unsettled; otherwise the
//!   notification can only end `unknown`.
//! - An ambiguity is settled, in order, by the outcome query, then by a replay under the same
//!   idempotency key inside the vendor's window, and only then by the delivery policy:
//!   `at_most_once` stops (`unknown`), `at_least_once` sends again.
//! - Retries use exponential backoff with full jitter, never sooner than `Retry-After`, and stop
//!   at the route's caps on attempts and on age.

use std::time::Duration;

use herald_provider::{Capabilities, Evidence, QueryResult, SendResult};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::domain::{
    Attempt, AttemptOutcome, AttemptResult, Certainty, Decision, Delivery, Next, SettledBy,
    Settlement, State,
};

/// What the worker knows about one claimed notification.
#[derive(Debug, Clone)]
pub struct Situation<'a> {
    pub delivery: Delivery,
    pub capabilities: &'a Capabilities,
    /// Every attempt so far, oldest first (including one just started).
    pub attempts: &'a [Attempt],
    pub created_at: OffsetDateTime,
    pub now: OffsetDateTime,
    pub limits: Limits,
}

/// A route's caps and retry schedule.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_attempts: u32,
    pub max_age: Duration,
    pub retry_base: Duration,
    pub retry_max: Duration,
    /// How long one call may take: a vendor may process a request until then.
    pub timeout: Duration,
}

/// What to do with a notification whose last attempt is an unsettled ambiguity.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Ask the provider what became of the send.
    Query,
    /// Send again under the same key, inside the vendor's window: an acceptance settles it.
    Replay,
    /// `at_least_once`: send again; an acceptance will be `duplicate_possible`.
    Resend,
    /// No call now: record this (wait and look again, or end where history allows).
    Record(Decision),
}

/// What the worker did in this step.
#[derive(Debug, Clone)]
pub enum Step {
    /// Attempt `n` was sent (as a first send, a retry, a replay or a resend).
    Sent {
        n: i32,
        replay: bool,
        result: SendResult,
    },
    /// The outcome query answered; `asked_at` is when it was sent, because a "not found" proves
    /// only what was visible then, however late the answer arrived.
    Queried {
        result: QueryResult,
        asked_at: OffsetDateTime,
    },
}

impl Situation<'_> {
    fn unsettled(&self, except: Option<i32>) -> Vec<&Attempt> {
        self.attempts
            .iter()
            .filter(|a| {
                a.result == AttemptResult::Ambiguous
                    && a.settled_by.is_none()
                    && Some(a.n) != except
            })
            .collect()
    }

    fn attempts_left(&self) -> bool {
        (self.attempts.len() as u64) < u64::from(self.limits.max_attempts)
            && self.now - self.created_at < self.limits.max_age
    }

    /// Full jitter over an exponentially growing ceiling, never before `retry_after`.
    fn retry_at(&self, jitter: f64, retry_after: Option<Duration>) -> OffsetDateTime {
        self.now
            + retry_delay(
                &self.limits,
                self.attempts.len() as u32,
                jitter,
                retry_after,
            )
    }

    /// The key goes to the vendor unchanged on every attempt, so the window runs from the first.
    fn inside_idempotency_window(&self) -> bool {
        match (self.capabilities.idempotency_window, self.attempts.first()) {
            (Some(window), Some(first)) => self.now < first.started_at + window,
            _ => false,
        }
    }

    fn finish(&self, state: State, certainty: Certainty) -> Next {
        Next::Finish { state, certainty }
    }

    /// Where a retry is not possible: the end that history allows.
    fn exhausted(&self, except: Option<i32>) -> Next {
        if self.unsettled(except).is_empty() {
            self.finish(State::Failed, Certainty::Known)
        } else {
            self.finish(State::Unknown, Certainty::Unknown)
        }
    }
}

/// The delay before retry number `attempts + 1`: uniformly random below
/// `min(retry_max, retry_base · 2^(attempts-1))` ("full jitter"), and never below `retry_after`.
pub fn retry_delay(
    limits: &Limits,
    attempts: u32,
    jitter: f64,
    retry_after: Option<Duration>,
) -> Duration {
    let exponent = attempts.saturating_sub(1).min(30);
    let ceiling = limits
        .retry_base
        .saturating_mul(1u32 << exponent)
        .min(limits.retry_max);
    let jittered = ceiling.mul_f64(jitter.clamp(0.0, 1.0));
    jittered.max(retry_after.unwrap_or_default())
}

/// What to do about an unsettled ambiguity. `query_failed`: the outcome query was tried in this
/// round and proved nothing (the vendor's look-up failed), so it is asked again later unless a
/// replay or the policy can act now.
pub fn plan(s: &Situation<'_>, query_failed: bool) -> Plan {
    if s.capabilities.query_visibility_lag.is_some() && !query_failed {
        return Plan::Query;
    }
    if s.attempts_left() {
        if s.inside_idempotency_window() {
            return Plan::Replay;
        }
        if s.delivery == Delivery::AtLeastOnce {
            return Plan::Resend;
        }
    }
    let young = s.now - s.created_at < s.limits.max_age;
    let next = if query_failed && young {
        let since = s.unsettled(None).iter().map(|a| s.now - a.started_at).max();
        let wait = since
            .and_then(|d| Duration::try_from(d).ok())
            .unwrap_or_default()
            .clamp(s.limits.retry_base, s.limits.retry_max);
        Next::Reconcile { at: s.now + wait }
    } else if s.delivery == Delivery::AtMostOnce {
        s.finish(State::Unknown, Certainty::Unknown)
    } else {
        s.exhausted(None)
    };
    Plan::Record(Decision {
        attempt: None,
        settle: None,
        next,
    })
}

fn evidence_json(evidence: &Evidence) -> Value {
    serde_json::to_value(evidence).unwrap_or_else(|_| json!({}))
}

fn outcome(n: i32, result: &SendResult) -> AttemptOutcome {
    match result {
        SendResult::Accepted {
            provider_ref,
            evidence,
        } => AttemptOutcome {
            n,
            result: AttemptResult::Accepted,
            permanent: None,
            provider_ref: provider_ref.clone(),
            evidence: evidence_json(evidence),
        },
        SendResult::Rejected {
            permanent,
            evidence,
            ..
        } => AttemptOutcome {
            n,
            result: AttemptResult::Rejected,
            permanent: Some(*permanent),
            provider_ref: None,
            evidence: evidence_json(evidence),
        },
        SendResult::Ambiguous { evidence } => AttemptOutcome {
            n,
            result: AttemptResult::Ambiguous,
            permanent: None,
            provider_ref: None,
            evidence: evidence_json(evidence),
        },
    }
}

/// Decides what a step proved and what happens next. `jitter` is uniform in [0, 1).
pub fn decide(s: &Situation<'_>, step: Step, jitter: f64) -> Decision {
    match step {
        Step::Sent { n, replay, result } => decide_sent(s, n, replay, result, jitter),
        Step::Queried { result, asked_at } => decide_queried(s, result, asked_at, jitter),
    }
}

fn decide_sent(
    s: &Situation<'_>,
    n: i32,
    replay: bool,
    result: SendResult,
    jitter: f64,
) -> Decision {
    let unsettled = !s.unsettled(Some(n)).is_empty();
    let attempt = Some(outcome(n, &result));
    let replay_settles = |accepted: bool| {
        (replay && unsettled).then(|| Settlement {
            by: SettledBy::IdempotentReplay,
            accepted,
            evidence: json!({"attempt": n, "answer": attempt.as_ref().map(|a| a.evidence.clone())}),
        })
    };
    match &result {
        SendResult::Accepted { .. } => {
            let settle = replay_settles(true);
            let certainty = if unsettled && settle.is_none() {
                Certainty::DuplicatePossible
            } else {
                Certainty::Known
            };
            Decision {
                attempt,
                settle,
                next: s.finish(State::Delivered, certainty),
            }
        }
        SendResult::Rejected {
            permanent: true, ..
        } => {
            // A vendor that keeps idempotent answers would have replayed an acceptance: a
            // rejection of the replay proves the first send was not taken either.
            let settle = replay_settles(false);
            let next = if unsettled && settle.is_none() {
                s.finish(State::Unknown, Certainty::Unknown)
            } else {
                s.finish(State::Failed, Certainty::Known)
            };
            Decision {
                attempt,
                settle,
                next,
            }
        }
        SendResult::Rejected {
            permanent: false,
            retry_after,
            ..
        } => {
            let next = if !s.attempts_left() {
                s.exhausted(Some(n))
            } else if replay {
                // The ambiguity stands; replay again later, still under the same key.
                Next::Reconcile {
                    at: s.retry_at(jitter, *retry_after),
                }
            } else {
                Next::Retry {
                    at: s.retry_at(jitter, *retry_after),
                }
            };
            Decision {
                attempt,
                settle: None,
                next,
            }
        }
        SendResult::Ambiguous { .. } => Decision {
            attempt,
            settle: None,
            next: Next::Reconcile { at: s.now },
        },
    }
}

fn decide_queried(
    s: &Situation<'_>,
    result: QueryResult,
    asked_at: OffsetDateTime,
    jitter: f64,
) -> Decision {
    let unsettled = s.unsettled(None);
    let query_settles = |accepted: bool, evidence: &Evidence| Settlement {
        by: SettledBy::OutcomeQuery,
        accepted,
        evidence: evidence_json(evidence),
    };
    let not_accepted = |evidence: &Evidence| Decision {
        attempt: None,
        settle: Some(query_settles(false, evidence)),
        next: if s.attempts_left() {
            Next::Retry {
                at: s.retry_at(jitter, None),
            }
        } else {
            s.finish(State::Failed, Certainty::Known)
        },
    };
    match &result {
        QueryResult::Accepted { evidence, .. } => {
            // One look-up proves at least one acceptance; with several unsettled sends and no
            // deduplication, it cannot prove there was only one.
            let certainty = if unsettled.len() > 1 && s.capabilities.idempotency_window.is_none() {
                Certainty::DuplicatePossible
            } else {
                Certainty::Known
            };
            Decision {
                attempt: None,
                settle: Some(query_settles(true, evidence)),
                next: s.finish(State::Delivered, certainty),
            }
        }
        QueryResult::NotAccepted { evidence } => not_accepted(evidence),
        QueryResult::NotFoundYet { evidence } => {
            // A send may be processed until herald gave up on it: its timeout after it started,
            // or later still if herald only learnt its fate later (a lease that expired, a
            // worker held back). It is visible to the look-up one lag after that.
            let lag = s.capabilities.query_visibility_lag.unwrap_or_default();
            let latest = unsettled
                .iter()
                .map(|a| {
                    (a.started_at + s.limits.timeout).max(a.finished_at.unwrap_or(a.started_at))
                })
                .max()
                .unwrap_or(asked_at);
            let visible_by = latest + lag;
            if asked_at < visible_by {
                Decision {
                    attempt: None,
                    settle: None,
                    next: Next::Reconcile { at: visible_by },
                }
            } else {
                let mut evidence = evidence.clone();
                evidence.detail = format!(
                    "not found {} ms after the send could last have been processed and become visible: {}",
                    (asked_at - latest).whole_milliseconds(),
                    evidence.detail
                );
                not_accepted(&evidence)
            }
        }
        // The worker re-plans with `plan(s, true)` instead of deciding on a failed look-up;
        // should one arrive here, it proves nothing, so look again later.
        QueryResult::Unsupported { .. } => Decision {
            attempt: None,
            settle: None,
            next: Next::Reconcile {
                at: s.now + s.limits.retry_base,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-11-29 12:00:00 UTC);

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
        }
    }

    fn situation<'a>(
        delivery: Delivery,
        caps: &'a Capabilities,
        attempts: &'a [Attempt],
        now: OffsetDateTime,
    ) -> Situation<'a> {
        Situation {
            delivery,
            capabilities: caps,
            attempts,
            created_at: T0,
            now,
            limits: limits(),
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
            evidence: Evidence::new("response", "no").with_status(if permanent {
                422
            } else {
                429
            }),
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
            (caps(true, true), Delivery::AtMostOnce, false, "query"),
            (caps(true, true), Delivery::AtMostOnce, true, "replay"),
            (caps(true, false), Delivery::AtMostOnce, false, "replay"),
            (caps(false, false), Delivery::AtLeastOnce, false, "resend"),
            (caps(false, false), Delivery::AtMostOnce, false, "unknown"),
        ];
        for (c, delivery, query_failed, expected) in cases {
            let s = situation(delivery, &c, &history, T0);
            let got = match plan(&s, query_failed) {
                Plan::Query => "query",
                Plan::Replay => "replay",
                Plan::Resend => "resend",
                Plan::Record(d) if d.next == finish(State::Unknown, Certainty::Unknown) => {
                    "unknown"
                }
                Plan::Record(d) => panic!("unexpected {d:?}"),
            };
            assert_eq!(
                got, expected,
                "{c:?} {delivery:?} query_failed={query_failed}"
            );
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
            matches!(plan(&s, false), Plan::Record(d) if d.next == finish(State::Unknown, Certainty::Unknown))
        );
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
        match plan(&s, true) {
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
        let visible_by = T0 + Duration::from_secs(10 + 5);
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

        // An attempt whose fate herald learnt late could have been processed until then.
        let mut late_news = history.clone();
        late_news[0].finished_at = Some(T0 + Duration::from_secs(30));
        let s = situation(Delivery::AtMostOnce, &c, &late_news, visible_by);
        let d = decide(&s, queried(missing(), visible_by), 0.5);
        assert_eq!(
            d.next,
            Next::Reconcile {
                at: T0 + Duration::from_secs(35)
            }
        );
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
}
