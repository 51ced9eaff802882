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
//!
//! This file decides a send; `query` what a look-up proves; `attribution` which look-alike
//! message is whose.

use std::time::Duration;

use herald_provider::{Capabilities, Evidence, QueryResult, SendResult};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::domain::certainty;
use crate::domain::evidence::{CHECKED_AT, MAY_HAVE_LEFT_LATE};
use crate::domain::{
    Attempt, AttemptOutcome, AttemptResult, Certainty, Decision, Delivery, HoldReason, Next,
    NotificationId, SettledBy, Settlement, Sibling, State, messages_proven,
};

mod attribution;
mod query;

pub use attribution::{Attribution, attribute};
use query::{decide_queried, only, wait_until};
pub use query::{look_again, still_unknown};

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

/// What a send's answer decides: its attempt as recorded, what it settles, and what comes next.
fn decide_sent(
    s: &Situation<'_>,
    n: i32,
    replay: bool,
    result: SendResult,
    overran: bool,
    jitter: f64,
) -> Decision {
    let mut attempt = outcome(n, &result);
    // An answer settles itself; without one, whoever looks the send up must know that it may
    // have left after the moment its deadline promised.
    if overran && attempt.result == AttemptResult::Ambiguous {
        attempt.evidence[MAY_HAVE_LEFT_LATE] = true.into();
    }
    let sent = Sent {
        s,
        n,
        replay,
        result: &result,
        unsettled: !s.unsettled(Some(n)).is_empty(),
        elsewhere: s.unsettled_elsewhere(),
        answer: json!({"attempt": n, "answer": attempt.evidence.clone()}),
    };
    let (settle, findings, next) = match &result {
        SendResult::Accepted { .. } => sent.accepted(),
        SendResult::Rejected {
            permanent: true, ..
        } => sent.refused(),
        SendResult::Rejected {
            permanent: false,
            retry_after,
            ..
        } => (None, None, sent.refused_for_now(*retry_after, jitter)),
        SendResult::Ambiguous { .. } => (None, None, Next::Reconcile { at: s.now }),
        SendResult::KeyReused { .. } => sent.key_reused(),
    };
    Decision {
        attempt: Some(attempt),
        settle,
        findings,
        next,
    }
}

/// A send's answer in the light of the attempts before it.
struct Sent<'a> {
    s: &'a Situation<'a>,
    n: i32,
    /// The send replayed an earlier attempt's key to settle it.
    replay: bool,
    result: &'a SendResult,
    /// Whether earlier ambiguous attempts on this route are still unsettled.
    unsettled: bool,
    /// Whether an ambiguity is left unsettled on a route this one failed over from.
    elsewhere: bool,
    answer: Value,
}

/// What a send's answer decides besides its attempt: a settlement of earlier attempts, a
/// contradiction found, and what comes next.
type Answered = (Option<Settlement>, Option<Value>, Next);

impl Sent<'_> {
    fn key_settles(&self, accepted: bool) -> Settlement {
        Settlement {
            by: SettledBy::IdempotentReplay,
            accepted,
            evidence: self.answer.clone(),
            provider_ref: None,
        }
    }

    /// A replay's answer settles the attempts it replayed.
    fn replay_settles(&self, accepted: bool) -> Option<Settlement> {
        (self.replay && self.unsettled).then(|| self.key_settles(accepted))
    }

    fn because(&self) -> String {
        format!(
            "attempt {} on `{}`: {}",
            self.n,
            self.s.route,
            self.result.reason()
        )
    }

    fn accepted(&self) -> Answered {
        let settle = self.replay_settles(true);
        let certainty = if (self.unsettled && settle.is_none()) || self.elsewhere {
            Certainty::DuplicatePossible
        } else {
            Certainty::Known
        };
        (settle, None, self.s.finish(State::Delivered, certainty))
    }

    /// A vendor that keeps idempotent answers would have replayed an acceptance: a rejection
    /// of the replay proves the first send was not taken either. Not a refusal of the route
    /// itself (credentials, account): that vendor never looked at the key.
    fn refused(&self) -> Answered {
        let s = self.s;
        let route_refused = refuses_the_route(self.result);
        let settle = if route_refused {
            None
        } else {
            self.replay_settles(false)
        };
        let open = self.unsettled && settle.is_none();
        let may_leave = !open || s.delivery == Delivery::AtLeastOnce;
        let failover = (may_leave && route_refused)
            .then(|| s.failover(self.because()))
            .flatten();
        let next = match failover {
            Some(next) => next,
            None if open || self.elsewhere => s.finish(State::Unknown, Certainty::Unknown),
            None => s.finish(State::Failed, Certainty::Known),
        };
        (settle, None, next)
    }

    fn refused_for_now(&self, retry_after: Option<Duration>, jitter: f64) -> Next {
        let s = self.s;
        let may_leave = !self.unsettled || s.delivery == Delivery::AtLeastOnce;
        let failover = (!self.replay && may_leave)
            .then(|| s.failover(self.because()))
            .flatten();
        if let Some(next) = failover {
            next
        } else if !s.attempts_left() {
            s.exhausted(Some(self.n))
        } else if self.replay {
            // The ambiguity stands; replay again later, still under the same key.
            Next::Reconcile {
                at: s.retry_at(jitter, retry_after),
            }
        } else {
            Next::Retry {
                at: s.retry_at(jitter, retry_after),
            }
        }
    }

    /// An earlier request under this key was processed. With unsettled ambiguous attempts,
    /// that was one of them: accepted, and (the vendor deduplicating the key) once. With none,
    /// the answer contradicts everything herald recorded: a person must look.
    fn key_reused(&self) -> Answered {
        let s = self.s;
        if !self.unsettled {
            let contradiction = json!({"contradiction": format!(
                "attempt {}: the vendor says this key was used with another request, but no \
                 earlier attempt of this notification is unsettled",
                self.n
            )});
            return (
                None,
                Some(contradiction),
                s.finish(State::Unknown, Certainty::Unknown),
            );
        }
        let deduplicated =
            s.capabilities.idempotency_window.is_some() || s.unsettled(Some(self.n)).len() == 1;
        let certainty = if deduplicated && !self.elsewhere {
            Certainty::Known
        } else {
            Certainty::DuplicatePossible
        };
        (
            Some(self.key_settles(true)),
            None,
            s.finish(State::Delivered, certainty),
        )
    }
}

#[cfg(test)]
mod tests;
