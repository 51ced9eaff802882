//! The pure heart of dispatch: given what a notification has been through and what the
//! provider just answered, decide what is true now and what happens next. No I/O and no clock:
//! `now` and the jitter are passed in, so every rule has a table-driven test.
//!
//! The rules, in prose (the README's "How herald decides" tells users the same):
//! - An acceptance is `known` unless an earlier attempt is an *unsettled* ambiguity, in which
//!   case the recipient may have it twice: `duplicate_possible`.
//! - A rejection ends `failed`/`known` only when nothing ambiguous is unsettled; otherwise the
//!   notification can only end `unknown`.
//! - An ambiguity is settled, in order, by the outcome query, then by a replay under the same
//!   idempotency key inside the vendor's window, and only then by the delivery policy:
//!   `at_most_once` stops (`unknown`), `at_least_once` sends again.
//! - A vendor's "this key was used with another request" proves that an earlier request under
//!   the key was processed: it settles the ambiguity as accepted, and is never a rejection.
//! - A look-up that matches by content finds *look-alikes*: messages that may be this send or a
//!   sibling's (same route, same request). Each vendor message belongs to at most one
//!   notification, and herald settles only what the counts prove ([`attribute`]).
//! - Retries use exponential backoff with full jitter, never sooner than `Retry-After`, and stop
//!   at the route's caps on attempts and on age.
//! - A route with a fallback hands a notification on when the route is known not to have taken
//!   it: a transient rejection, a refusal of the route itself (its credentials or account), or
//!   an ambiguity settled "not accepted". An unsettled ambiguity moves on only under
//!   `at_least_once`. A refusal of the message or its recipient does not.
//! - herald's own hold (its pace, a vendor's pause, an open circuit without a fallback, a send
//!   deadline reached before the request was written) is not an attempt: the attempt started
//!   for it is withdrawn, no budget is spent, nothing fails over, and it waits until the route
//!   can take it.
//! - A send's call starts by its attempt's send deadline or not at all, and is cut at the
//!   route's timeout: what proves it was not taken ("not found once it could last have been
//!   processed and become visible") reads that deadline, never a moment the sender did not
//!   promise to keep.
//! - No attempt (a first send, a retry, a replay or a resend) starts after the notification's
//!   expiry: a retry or a hold waits no later than it, and the claim that comes then records it
//!   expired without a call. It ends `failed`/`known` unless an ambiguity is unsettled, which
//!   only the outcome query or a person can settle now: then `unknown`.
//! - Only a route's own vendor settles its attempts; an ambiguity left unsettled on a route it
//!   failed over from makes any acceptance `duplicate_possible` and any failure `unknown`.

use std::time::Duration;

use herald_provider::{Capabilities, Evidence, QueryResult, SendResult};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::domain::certainty;
use crate::domain::evidence::{CHECKED_AT, COVERS_LATE, MAY_HAVE_LEFT_LATE, may_have_left_late};
use crate::domain::{
    Attempt, AttemptOutcome, AttemptResult, Certainty, Decision, Delivery, HoldReason, Next,
    NotificationId, SettledBy, Settlement, Sibling, State, left_late, messages_proven,
};

/// How much longer than its route's timeout a call may run before herald cuts it (the adapter's
/// own timeout should fire first): a call started by its send deadline has ended by the
/// deadline, the timeout and this.
pub const CALL_SLACK: Duration = Duration::from_secs(1);

/// herald's own hold on a send (see [`HoldReason`]): nothing was sent, and the route may take
/// it again after `wait`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hold {
    pub reason: HoldReason,
    pub wait: Duration,
}

/// What the worker knows about one claimed notification.
#[derive(Debug, Clone)]
pub struct Situation<'a> {
    pub id: NotificationId,
    /// The route it is on, and where that route hands it on.
    pub route: &'a str,
    pub fallback: Option<&'a str>,
    pub delivery: Delivery,
    pub capabilities: &'a Capabilities,
    /// Every attempt so far on every route, oldest first (including one just started).
    pub attempts: &'a [Attempt],
    pub created_at: OffsetDateTime,
    /// The route's caps count attempts after this number, and age since `since`: a person's
    /// resend starts a fresh budget (0 and the creation time until then).
    pub budget_from: i32,
    pub since: OffsetDateTime,
    /// No attempt starts after this time.
    pub expires_at: Option<OffsetDateTime>,
    pub now: OffsetDateTime,
    pub limits: Limits,
    /// The attempts of look-alike notifications, read only to attribute look-alike messages
    /// ([`attribute`]); empty otherwise.
    pub siblings: &'a [Sibling],
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

/// What the outcome query has shown in this round of reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// Not asked yet (or the route has no query).
    NotYet,
    /// The look-up itself failed: it proved nothing, and may be asked again later.
    Failed,
    /// The look-up answered, but its look-alikes cannot be attributed: asking again will not
    /// tell more, so the delivery policy decides now.
    Inconclusive,
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
    /// No call now: record this (wait and look again, move on, or end where history allows).
    Record(Box<Decision>),
}

/// What the worker did in this step.
#[derive(Debug, Clone)]
pub enum Step {
    /// Attempt `n` was sent (as a first send, a retry, a replay or a resend); `overran` where
    /// its call ended after its send deadline's promise, `checked_at` when its worker last read
    /// the clock before writing (see [`super::routes::Sent`]).
    Sent {
        n: i32,
        replay: bool,
        result: SendResult,
        overran: bool,
        checked_at: Option<OffsetDateTime>,
    },
    /// The outcome query answered; `asked_at` is when it was sent, because a "not found" proves
    /// only what was visible then, however late the answer arrived.
    Queried {
        result: QueryResult,
        asked_at: OffsetDateTime,
    },
    /// herald held attempt `n` back before writing anything; `reconciling` where it was a
    /// replay or a resend of a notification being reconciled.
    Held {
        n: i32,
        hold: Hold,
        reconciling: bool,
    },
}

impl Situation<'_> {
    /// The attempts on the route it is on: the only ones its vendor's answers speak about.
    fn here(&self) -> impl DoubleEndedIterator<Item = &Attempt> {
        self.attempts.iter().filter(|a| a.route == self.route)
    }

    /// This route's unsettled ambiguous attempts.
    fn unsettled(&self, except: Option<i32>) -> Vec<&Attempt> {
        self.here()
            .filter(|a| {
                a.result == AttemptResult::Ambiguous
                    && a.settled_by.is_none()
                    && Some(a.n) != except
            })
            .collect()
    }

    /// An ambiguity left unsettled on a route it failed over from: nothing this route's vendor
    /// says can settle it.
    fn unsettled_elsewhere(&self) -> bool {
        self.attempts.iter().any(|a| {
            a.route != self.route && a.result == AttemptResult::Ambiguous && a.settled_by.is_none()
        })
    }

    /// Attempts spent from the current budget.
    fn spent(&self) -> usize {
        self.attempts
            .iter()
            .filter(|a| a.n > self.budget_from)
            .count()
    }

    fn young(&self) -> bool {
        self.now - self.since < self.limits.max_age
    }

    fn attempts_left(&self) -> bool {
        (self.spent() as u64) < u64::from(self.limits.max_attempts) && self.young()
    }

    /// Full jitter over an exponentially growing ceiling, never before `retry_after`; and no
    /// later than its expiry, when the claim that comes then ends it.
    fn retry_at(&self, jitter: f64, retry_after: Option<Duration>) -> OffsetDateTime {
        self.by_expiry(
            self.now + retry_delay(&self.limits, self.spent() as u32, jitter, retry_after),
        )
    }

    /// When an `at_least_once` resend after the last attempt's ambiguity may go: a retry's
    /// backoff from when that attempt ended, its jitter drawn once per attempt (from the
    /// notification and the attempt's number), so that every look at it agrees.
    fn resend_at(&self) -> OffsetDateTime {
        let Some(last) = self.attempts.last() else {
            return self.now;
        };
        let jitter = resend_jitter(self.id, last.n);
        let delay = retry_delay(&self.limits, self.spent() as u32, jitter, None);
        self.by_expiry(last.finished_at.unwrap_or(last.started_at) + delay)
    }

    /// Whether an attempt may still start.
    fn unexpired(&self) -> bool {
        self.expires_at.is_none_or(|at| self.now < at)
    }

    /// `at`, or the expiry if that comes first: a send waiting past it would only wait to end.
    fn by_expiry(&self, at: OffsetDateTime) -> OffsetDateTime {
        self.expires_at.map_or(at, |expiry| at.min(expiry))
    }

    /// The key goes to the vendor unchanged on every attempt, so the window runs from the first
    /// attempt under the current key (the last attempt's: only a person's resend renews it).
    fn inside_idempotency_window(&self) -> bool {
        let key = self.here().last().map(|a| &a.provider_idempotency_key);
        let first = self
            .here()
            .find(|a| Some(&a.provider_idempotency_key) == key);
        match (self.capabilities.idempotency_window, first) {
            (Some(window), Some(first)) => self.now < first.started_at + window,
            _ => false,
        }
    }

    fn finish(&self, state: State, certainty: Certainty) -> Next {
        Next::Finish { state, certainty }
    }

    /// A late answer (read after a lease was lost) showed a message: the vendor has the
    /// notification, and another send could only add one.
    fn taken_late(&self) -> bool {
        self.attempts.iter().any(Attempt::taken_late)
    }

    /// Delivered, as its attempts and late answers show: `known` where exactly one attempt took
    /// a message and no other may have (`settling_here`: this route's unsettled attempts are
    /// being settled "not accepted" now), else `duplicate_possible`.
    fn delivered_late(&self, settling_here: bool) -> Next {
        let took = |a: &&Attempt| {
            a.result == AttemptResult::Accepted
                || a.taken_late()
                || (a.settled_by.is_some() && a.evidence["settlement"]["outcome"] == "accepted")
        };
        let open = |a: &&Attempt| {
            a.result == AttemptResult::Ambiguous
                && a.settled_by.is_none()
                && !a.taken_late()
                && !(settling_here && a.route == self.route)
        };
        let once = self.attempts.iter().filter(took).count() == 1
            && !self.attempts.iter().any(|a| open(&a));
        let certainty = if once {
            Certainty::Known
        } else {
            Certainty::DuplicatePossible
        };
        self.finish(State::Delivered, certainty)
    }

    /// On to the fallback, if the route has one.
    fn failover(&self, because: String) -> Option<Next> {
        self.fallback.map(|route| Next::Failover {
            route: route.to_owned(),
            because,
        })
    }

    /// Where a retry is not possible: the end that history allows.
    fn exhausted(&self, except: Option<i32>) -> Next {
        if self.unsettled(except).is_empty() && !self.unsettled_elsewhere() {
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

/// A number in [0, 1) drawn from notification `id` and attempt `n` alone: the jitter of the
/// `at_least_once` resend after attempt `n`, which every process computes alike, however often
/// it looks.
pub fn resend_jitter(id: NotificationId, n: i32) -> f64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(id.as_uuid().as_bytes())
        .chain_update(n.to_be_bytes())
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    // 53 bits, as an f64 holds them exactly.
    (u64::from_be_bytes(first) >> 11) as f64 / (1u64 << 53) as f64
}

/// What to do about an unsettled ambiguity, given what the outcome query has shown in this
/// round: a failed look-up is asked again later unless a replay or the policy can act now; an
/// inconclusive one leaves the decision to the replay or the policy at once.
pub fn plan(s: &Situation<'_>, asked: Asked) -> Plan {
    match unruled_plan(s, asked) {
        Plan::Record(decision) => Plan::Record(Box::new(ruled(s, *decision))),
        plan => plan,
    }
}

fn unruled_plan(s: &Situation<'_>, asked: Asked) -> Plan {
    // A vendor's callback settled the ambiguity while the notification waited to be reconciled:
    // the vendor has the message, and no other send may have delivered another.
    if s.here().any(|a| a.settled_by == Some(SettledBy::Callback))
        && messages_proven(s.attempts, &[], &[]) == Some(1)
    {
        return Plan::Record(Box::new(only(s.finish(State::Delivered, Certainty::Known))));
    }
    if s.capabilities.query_visibility_lag.is_some() && asked == Asked::NotYet {
        return Plan::Query;
    }
    // Past its expiry nothing starts: not even a replay, which delivers what the first
    // request did not.
    if s.attempts_left() && s.unexpired() && s.inside_idempotency_window() {
        return Plan::Replay;
    }
    // Nothing is sent beside a message a late answer showed (a replay above adds none).
    if s.taken_late() {
        return Plan::Record(Box::new(only(s.delivered_late(false))));
    }
    // A look-up that failed proved nothing, and the send may yet be found: ask again later
    // rather than resend now, which would deliver twice what a working look-up would show once.
    let ask_again = asked == Asked::Failed && s.young();
    if s.delivery == Delivery::AtLeastOnce && !ask_again && s.unexpired() {
        let because = format!(
            "an ambiguous attempt on `{}` is unsettled, and at_least_once sends again",
            s.route
        );
        if let Some(next) = s.failover(because) {
            return Plan::Record(Box::new(only(next)));
        }
        if s.attempts_left() {
            // A vendor that drops answers is often overloaded: the resend waits as a retry
            // would, and the ambiguity stays unsettled meanwhile, for a report or a look-up to
            // settle it (and so stop the resend).
            let at = s.resend_at();
            return match s.now < at {
                true => Plan::Record(Box::new(wait_until(at))),
                false => Plan::Resend,
            };
        }
    }
    let next = if ask_again {
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
    Plan::Record(Box::new(only(next)))
}

/// A permanent refusal of the route itself (its credentials, its account, its payment), not of
/// the message or its recipient: another route may well take the message.
pub fn refuses_the_route(result: &SendResult) -> bool {
    matches!(
        result,
        SendResult::Rejected { permanent: true, evidence, .. }
            if matches!(evidence.status, Some(401..=403))
    )
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
        // This request was refused unprocessed; what it proves is about an earlier one.
        SendResult::KeyReused { evidence } => AttemptOutcome {
            n,
            result: AttemptResult::Rejected,
            permanent: Some(true),
            provider_ref: None,
            evidence: evidence_json(evidence),
        },
    }
}

/// Decides what a step proved and what happens next. `jitter` is uniform in [0, 1).
pub fn decide(s: &Situation<'_>, step: Step, jitter: f64) -> Decision {
    let decision = match step {
        Step::Sent {
            n,
            replay,
            result,
            overran,
            checked_at,
        } => {
            let mut decision = decide_sent(s, n, replay, result, overran, jitter);
            if let (Some(attempt), Some(at)) = (decision.attempt.as_mut(), checked_at) {
                attempt.evidence[CHECKED_AT] = at.format(&Rfc3339).ok().into();
            }
            decision
        }
        Step::Queried { result, asked_at } => decide_queried(s, result, asked_at, jitter),
        // Nothing left herald: the attempt is withdrawn, and the route takes it again once it
        // can (a reconciliation goes on where it stood).
        Step::Held {
            n,
            hold,
            reconciling,
        } => only(Next::Hold {
            attempt: n,
            reason: hold.reason,
            at: s.by_expiry(s.now + hold.wait),
            reconciling,
        }),
    };
    ruled(s, decision)
}

/// `decision`, its end held to herald's one rule of certainty ([`certainty::end`]) over the
/// attempts as the decision leaves them: every end the policy decides passes here.
fn ruled(s: &Situation<'_>, mut decision: Decision) -> Decision {
    if let Next::Finish { state, certainty } = decision.next {
        let after = decision.applied_to(s.attempts, s.route, s.now);
        let (state, certainty) = certainty::end(state, certainty, &after);
        decision.next = Next::Finish { state, certainty };
    }
    decision
}

fn decide_sent(
    s: &Situation<'_>,
    n: i32,
    replay: bool,
    result: SendResult,
    overran: bool,
    jitter: f64,
) -> Decision {
    let unsettled = !s.unsettled(Some(n)).is_empty();
    let elsewhere = s.unsettled_elsewhere();
    let mut attempt = outcome(n, &result);
    // An answer settles itself; without one, whoever looks the send up must know that it may
    // have left after the moment its deadline promised.
    if overran && attempt.result == AttemptResult::Ambiguous {
        attempt.evidence[MAY_HAVE_LEFT_LATE] = true.into();
    }
    let attempt = Some(attempt);
    let because = || format!("attempt {n} on `{}`: {}", s.route, result.reason());
    let answer = json!({"attempt": n, "answer": attempt.as_ref().map(|a| a.evidence.clone())});
    let key_settles = |accepted: bool| Settlement {
        by: SettledBy::IdempotentReplay,
        accepted,
        evidence: answer.clone(),
        provider_ref: None,
    };
    let replay_settles = |accepted: bool| (replay && unsettled).then(|| key_settles(accepted));
    match &result {
        SendResult::Accepted { .. } => {
            let settle = replay_settles(true);
            let certainty = if (unsettled && settle.is_none()) || elsewhere {
                Certainty::DuplicatePossible
            } else {
                Certainty::Known
            };
            Decision {
                attempt,
                settle,
                findings: None,
                next: s.finish(State::Delivered, certainty),
            }
        }
        SendResult::Rejected {
            permanent: true, ..
        } => {
            // A vendor that keeps idempotent answers would have replayed an acceptance: a
            // rejection of the replay proves the first send was not taken either. Not a refusal
            // of the route itself (credentials, account): that vendor never looked at the key.
            let route_refused = refuses_the_route(&result);
            let settle = if route_refused {
                None
            } else {
                replay_settles(false)
            };
            let open = unsettled && settle.is_none();
            let may_leave = !open || s.delivery == Delivery::AtLeastOnce;
            let failover = (may_leave && route_refused)
                .then(|| s.failover(because()))
                .flatten();
            let next = match failover {
                Some(next) => next,
                None if open || elsewhere => s.finish(State::Unknown, Certainty::Unknown),
                None => s.finish(State::Failed, Certainty::Known),
            };
            Decision {
                attempt,
                settle,
                findings: None,
                next,
            }
        }
        SendResult::Rejected {
            permanent: false,
            retry_after,
            ..
        } => {
            let may_leave = !unsettled || s.delivery == Delivery::AtLeastOnce;
            let failover = (!replay && may_leave)
                .then(|| s.failover(because()))
                .flatten();
            let next = if let Some(next) = failover {
                next
            } else if !s.attempts_left() {
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
                findings: None,
                next,
            }
        }
        SendResult::Ambiguous { .. } => Decision {
            attempt,
            settle: None,
            findings: None,
            next: Next::Reconcile { at: s.now },
        },
        // An earlier request under this key was processed. With unsettled ambiguous attempts,
        // that was one of them: accepted, and (the vendor deduplicating the key) once. With
        // none, the answer contradicts everything herald recorded: a person must look.
        SendResult::KeyReused { .. } if unsettled => {
            let deduplicated =
                s.capabilities.idempotency_window.is_some() || s.unsettled(Some(n)).len() == 1;
            let certainty = if deduplicated && !elsewhere {
                Certainty::Known
            } else {
                Certainty::DuplicatePossible
            };
            Decision {
                attempt,
                settle: Some(key_settles(true)),
                findings: None,
                next: s.finish(State::Delivered, certainty),
            }
        }
        SendResult::KeyReused { .. } => Decision {
            attempt,
            settle: None,
            findings: Some(json!({"contradiction": format!(
                "attempt {n}: the vendor says this key was used with another request, but no \
                 earlier attempt of this notification is unsettled"
            )})),
            next: s.finish(State::Unknown, Certainty::Unknown),
        },
    }
}

fn decide_queried(
    s: &Situation<'_>,
    result: QueryResult,
    asked_at: OffsetDateTime,
    jitter: f64,
) -> Decision {
    match &result {
        QueryResult::Accepted {
            evidence,
            provider_ref,
        } => {
            // One look-up proves at least one acceptance; with several unsettled sends and no
            // deduplication, it cannot prove there was only one.
            let unsettled = s.unsettled(None).len();
            let certainty = if (unsettled > 1 && s.capabilities.idempotency_window.is_none())
                || s.unsettled_elsewhere()
            {
                Certainty::DuplicatePossible
            } else {
                Certainty::Known
            };
            let settle = query_settles(true, evidence_json(evidence), provider_ref.clone());
            settled(settle, s.finish(State::Delivered, certainty))
        }
        QueryResult::NotAccepted { evidence } => not_accepted(s, evidence_json(evidence), jitter),
        QueryResult::NotFoundYet { evidence } => not_found(s, &[], evidence, asked_at, jitter),
        // The worker attributes look-alikes with [`attribute`], and re-plans after a failed
        // look-up instead of deciding; should either arrive here, it proves nothing, so look
        // again later.
        QueryResult::LookAlikes { .. } | QueryResult::Unsupported { .. } => Decision {
            attempt: None,
            settle: None,
            findings: None,
            next: Next::Reconcile {
                at: s.now + s.limits.retry_base,
            },
        },
    }
}

fn query_settles(accepted: bool, evidence: Value, provider_ref: Option<String>) -> Settlement {
    Settlement {
        by: SettledBy::OutcomeQuery,
        accepted,
        evidence,
        provider_ref,
    }
}

fn settled(settle: Settlement, next: Next) -> Decision {
    Decision {
        attempt: None,
        settle: Some(settle),
        findings: None,
        next,
    }
}

/// A decision that only moves the notification on: no attempt, nothing settled or found.
fn only(next: Next) -> Decision {
    Decision {
        attempt: None,
        settle: None,
        findings: None,
        next,
    }
}

fn wait_until(at: OffsetDateTime) -> Decision {
    only(Next::Reconcile { at })
}

/// The look-up proves this route's unsettled sends were not taken: on to the fallback, else
/// retry, or end where caps are reached.
fn not_accepted(s: &Situation<'_>, evidence: Value, jitter: f64) -> Decision {
    let because = format!("the outcome query on `{}` proved it not accepted", s.route);
    let next = if s.taken_late() {
        s.delivered_late(true)
    } else if let Some(next) = s.failover(because) {
        next
    } else if s.attempts_left() {
        Next::Retry {
            at: s.retry_at(jitter, None),
        }
    } else if s.unsettled_elsewhere() {
        s.finish(State::Unknown, Certainty::Unknown)
    } else {
        s.finish(State::Failed, Certainty::Known)
    };
    settled(query_settles(false, evidence, None), next)
}

/// When a send may last have been processed: its call started by its send deadline or never,
/// and was cut at the route's timeout (and [`CALL_SLACK`]). Whether its worker crashed, froze
/// or waited, nothing of it reaches the vendor later — unless its worker saw its call outlive
/// that moment, and said so: then until that worker recorded it, after its call had ended.
fn processed_until(limits: &Limits, a: &Attempt) -> OffsetDateTime {
    let promised = a.send_deadline + limits.timeout + CALL_SLACK;
    let late = &a.evidence["late_result"];
    let recorded = if may_have_left_late(&a.evidence) {
        a.finished_at
    } else if may_have_left_late(&late["evidence"]) {
        late["at"]
            .as_str()
            .and_then(|at| OffsetDateTime::parse(at, &Rfc3339).ok())
    } else {
        None
    };
    recorded.map_or(promised, |at| promised.max(at))
}

/// When every send in `also` and this notification's unsettled ones is visible to the look-up:
/// one lag after it may last have been processed.
fn visible_by(s: &Situation<'_>, also: &[&Attempt], asked_at: OffsetDateTime) -> OffsetDateTime {
    let lag = s.capabilities.query_visibility_lag.unwrap_or_default();
    s.unsettled(None)
        .into_iter()
        .chain(also.iter().copied())
        .map(|a| processed_until(&s.limits, a))
        .max()
        .unwrap_or(asked_at)
        + lag
}

/// Nothing of this notification's is visible: absence proves "not accepted" only once every
/// send that could show is visible (`also`, besides the unsettled ones: look-alike sends that
/// could hide it among theirs, and its own that may have left late).
fn not_found(
    s: &Situation<'_>,
    also: &[&Attempt],
    evidence: &Evidence,
    asked_at: OffsetDateTime,
    jitter: f64,
) -> Decision {
    let visible_by = visible_by(s, also, asked_at);
    if asked_at < visible_by {
        return wait_until(visible_by);
    }
    let lag = s.capabilities.query_visibility_lag.unwrap_or_default();
    let mut evidence = evidence.clone();
    evidence.detail = format!(
        "not found {} ms after the send could last have been processed and become visible: {}",
        (asked_at - (visible_by - lag)).whole_milliseconds(),
        evidence.detail
    );
    let mut evidence = evidence_json(&evidence);
    // The sends it settles whose workers had said they may have left late were waited out
    // (`processed_until`): this absence covers them, and says so.
    let covered: Vec<i32> = s
        .unsettled(None)
        .into_iter()
        .filter(|a| may_have_left_late(&a.evidence["late_result"]["evidence"]))
        .map(|a| a.n)
        .collect();
    if !covered.is_empty() {
        evidence[COVERS_LATE] = json!(covered);
    }
    not_accepted(s, evidence, jitter)
}

/// A settlement the store refused because a look-alike sibling attributed that vendor message
/// first: keep what the step saw, settle nothing, and look again at once with the sibling's
/// settlement in view.
pub fn look_again(decision: Decision, now: OffsetDateTime) -> Decision {
    Decision {
        settle: None,
        next: Next::Reconcile { at: now },
        ..decision
    }
}

/// A person's requery that settled nothing: the notification stays `unknown` in review, with
/// what the look-up found kept as evidence on its unsettled attempts.
pub fn still_unknown(findings: Value) -> Decision {
    Decision {
        attempt: None,
        settle: None,
        findings: Some(findings),
        next: Next::Finish {
            state: State::Unknown,
            certainty: Certainty::Unknown,
        },
    }
}

/// What look-alike messages prove about this notification.
#[derive(Debug, Clone, PartialEq)]
pub enum Attribution {
    /// Settled, proven not accepted, or wait and look again: record this.
    Decided(Decision),
    /// The counts cannot say whose the messages are: asking again will not tell, so the
    /// replay or the delivery policy decides, with this evidence (the candidates) recorded.
    Inconclusive(Value),
}

/// Attributes the look-alike messages `refs` (oldest first, seen since `since`) of a content
/// look-up. The rule, in prose:
/// - a message already attributed (the reference of an accepted send, of a settlement, or of
///   an answer read after its worker's lease was lost; of this notification or a sibling's) is
///   nobody else's: only the *free* ones count;
/// - the sends that may have produced a free message are this notification's unsettled
///   ambiguous attempts, its attempts settled "not accepted" whose call then said it may have
///   left late (the settlement no longer proves anything), and the siblings' attempts that are
///   in flight, ambiguous and not settled "not accepted" (or settled so but left late), or
///   accepted without a reference — each produced at most one;
/// - no free message: this send is not there, once everything that could show is visible;
/// - only this notification could own them: as many free messages as it has sends settles it
///   (one message: `known`; more: `duplicate_possible`), fewer waits out the lag, more (a
///   sender outside herald) proves nothing;
/// - siblings could own them too: wait while a sibling's send is in flight (its answer will
///   name its message); then as many free messages as sends in the group proves every send was
///   taken, so this one is settled as accepted without naming a message (which one is whose,
///   nothing says); fewer waits out the lag, and then nothing can be attributed.
pub fn attribute(
    s: &Situation<'_>,
    refs: &[String],
    since: OffsetDateTime,
    evidence: &Evidence,
    asked_at: OffsetDateTime,
    jitter: f64,
) -> Attribution {
    match attribute_unruled(s, refs, since, evidence, asked_at, jitter) {
        Attribution::Decided(decision) => Attribution::Decided(ruled(s, decision)),
        inconclusive => inconclusive,
    }
}

fn attribute_unruled(
    s: &Situation<'_>,
    refs: &[String],
    since: OffsetDateTime,
    evidence: &Evidence,
    asked_at: OffsetDateTime,
    jitter: f64,
) -> Attribution {
    let sought = s.unsettled(None);
    // A late answer of a send this look-up is for names what it should find: not attributed.
    let late = s
        .here()
        .filter(|a| !sought.iter().any(|o| o.n == a.n))
        .chain(s.siblings.iter().map(|sib| &sib.attempt))
        .filter_map(Attempt::late_reference);
    // Sends of this notification's that were proven absent, until their own workers said they
    // may have left after that proof: as much this notification's as the sought ones.
    let left_late_since: Vec<&Attempt> = s
        .here()
        .filter(|a| settled_not_accepted(a) && left_late(a) && a.late_reference().is_none())
        .collect();
    let attributed: std::collections::HashSet<&str> = s
        .here()
        .chain(s.siblings.iter().map(|sib| &sib.attempt))
        .filter_map(|a| a.provider_ref.as_deref())
        .chain(late)
        .collect();
    let free: Vec<&String> = refs
        .iter()
        .filter(|r| !attributed.contains(r.as_str()))
        .collect();
    let rivals: Vec<&Sibling> = s
        .siblings
        .iter()
        .filter(|sib| may_have_sent(s, &sib.attempt, since))
        .collect();
    let rival_attempts: Vec<&Attempt> = rivals.iter().map(|sib| &sib.attempt).collect();
    // Everything but the sought sends that must be visible before absence or a count proves
    // anything.
    let shown: Vec<&Attempt> = rival_attempts
        .iter()
        .chain(&left_late_since)
        .copied()
        .collect();
    let in_flight = rivals
        .iter()
        .filter(|sib| sib.attempt.result == AttemptResult::InFlight)
        .count();
    let own = sought.len() + left_late_since.len();
    let sends = own + rivals.len();
    let record = json!({
        "look_alikes": refs,
        "free": free,
        "own_sends": own,
        "own_sends_left_late": left_late_since.len(),
        "sibling_sends": rivals.len(),
        "sibling_sends_in_flight": in_flight,
        "query": evidence_json(evidence),
    });
    let settle_with = |reference: &String, certainty: Certainty| {
        Attribution::Decided(settled(
            query_settles(true, record.clone(), Some(reference.clone())),
            s.finish(State::Delivered, certainty),
        ))
    };
    // An ambiguity left on a route it failed over from may be a delivery too.
    let once_or_more = |n: usize| {
        if n == 1 && !s.unsettled_elsewhere() {
            Certainty::Known
        } else {
            Certainty::DuplicatePossible
        }
    };
    let visible = asked_at >= visible_by(s, &shown, asked_at);
    if sought.is_empty() {
        return Attribution::Inconclusive(record);
    }
    if free.is_empty() {
        let mut evidence = evidence.clone();
        evidence.detail = format!(
            "{} look-alike(s), all attributed to sends already known: {}",
            refs.len(),
            evidence.detail
        );
        return Attribution::Decided(not_found(s, &shown, &evidence, asked_at, jitter));
    }
    if rivals.is_empty() {
        return if free.len() > own {
            Attribution::Inconclusive(record)
        } else if free.len() < own && !visible {
            Attribution::Decided(wait_until(visible_by(s, &shown, asked_at)))
        } else {
            settle_with(free[0], once_or_more(free.len()))
        };
    }
    // A sibling's send in flight may own any free message, and its answer will say which:
    // wait for it before counting.
    if in_flight > 0 {
        return Attribution::Decided(wait_until(s.now + s.limits.retry_base));
    }
    if free.len() == sends {
        // Every send of the group was taken, but nothing says which message is whose: settled
        // as accepted without naming one (such a settlement holds one message for the others'
        // counts), so that no guess can hand the same message to two notifications.
        return Attribution::Decided(settled(
            query_settles(true, record.clone(), None),
            s.finish(State::Delivered, once_or_more(own)),
        ));
    }
    if free.len() < sends && !visible {
        return Attribution::Decided(wait_until(visible_by(s, &shown, asked_at)));
    }
    Attribution::Inconclusive(record)
}

/// Whether a sibling's attempt may have produced a look-alike message seen since `since` that
/// no reference attributes yet.
fn may_have_sent(s: &Situation<'_>, a: &Attempt, since: OffsetDateTime) -> bool {
    let produced = match a.result {
        AttemptResult::InFlight => return a.provider_ref.is_none(),
        AttemptResult::Accepted => true,
        AttemptResult::Ambiguous => !settled_not_accepted(a) || left_late(a),
        AttemptResult::Rejected => false,
    };
    produced
        && a.provider_ref.is_none()
        && a.late_reference().is_none()
        && processed_until(&s.limits, a) >= since
}

/// An ambiguous attempt that a settlement proved was not taken.
fn settled_not_accepted(a: &Attempt) -> bool {
    a.settled_by.is_some() && a.evidence["settlement"]["outcome"] == "not_accepted"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::REVIEWED;
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
        sib.attempt.evidence["late_result"] =
            json!({"result": "accepted", "provider_ref": reference});
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
                Plan::Record(d) if d.next == finish(State::Unknown, Certainty::Unknown) => {
                    "unknown"
                }
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
}
