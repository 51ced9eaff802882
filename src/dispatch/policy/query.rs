//! What a look-up's answer proves: a query that settles an ambiguity, one that finds the
//! message not there once it could last have been processed and become visible, and one that
//! proves nothing yet.

use herald_provider::{Evidence, QueryResult};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{CALL_SLACK, Limits, Situation, evidence_json};
use crate::domain::evidence::{COVERS_LATE, may_have_left_late};
use crate::domain::{Attempt, Certainty, Decision, Next, SettledBy, Settlement, State};

pub(super) fn decide_queried(
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

pub(super) fn query_settles(
    accepted: bool,
    evidence: Value,
    provider_ref: Option<String>,
) -> Settlement {
    Settlement {
        by: SettledBy::OutcomeQuery,
        accepted,
        evidence,
        provider_ref,
    }
}

pub(super) fn settled(settle: Settlement, next: Next) -> Decision {
    Decision {
        attempt: None,
        settle: Some(settle),
        findings: None,
        next,
    }
}

/// A decision that only moves the notification on: no attempt, nothing settled or found.
pub(super) fn only(next: Next) -> Decision {
    Decision {
        attempt: None,
        settle: None,
        findings: None,
        next,
    }
}

pub(super) fn wait_until(at: OffsetDateTime) -> Decision {
    only(Next::Reconcile { at })
}

/// The look-up proves this route's unsettled sends were not taken: on to the fallback, else
/// retry, or end where caps are reached.
pub(super) fn not_accepted(s: &Situation<'_>, evidence: Value, jitter: f64) -> Decision {
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
pub(super) fn processed_until(limits: &Limits, a: &Attempt) -> OffsetDateTime {
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
pub(super) fn visible_by(
    s: &Situation<'_>,
    also: &[&Attempt],
    asked_at: OffsetDateTime,
) -> OffsetDateTime {
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
pub(super) fn not_found(
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
