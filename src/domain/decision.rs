//! What one dispatch step decided, as data: the attempt's result, any settlement of earlier
//! ambiguous attempts, and where the notification goes next. `dispatch::policy` produces it;
//! the store commits it in one transaction, fenced by the claim's generation.

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{Attempt, AttemptResult, Certainty, HoldReason, SettledBy, State};

/// The outcome of a step, for the store to commit in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The result of the attempt made in this step, if one was made.
    pub attempt: Option<AttemptOutcome>,
    /// Settles every unsettled ambiguous attempt (other than this step's own).
    pub settle: Option<Settlement>,
    /// What a look-up found that settles nothing (look-alike messages that the counts cannot
    /// attribute), added to the evidence of every unsettled ambiguous attempt.
    pub findings: Option<Value>,
    pub next: Next,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AttemptOutcome {
    pub n: i32,
    pub result: AttemptResult,
    pub permanent: Option<bool>,
    pub provider_ref: Option<String>,
    pub evidence: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    pub by: SettledBy,
    pub accepted: bool,
    pub evidence: Value,
    /// The vendor's reference for the message that settled it, attributed from now on to the
    /// earliest unsettled attempt: no other notification can claim that message again.
    pub provider_ref: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Finish {
        state: State,
        certainty: Certainty,
    },
    /// Back to `queued`, due at this time.
    Retry {
        at: OffsetDateTime,
    },
    /// Stay `sending` and reconcile again at this time.
    Reconcile {
        at: OffsetDateTime,
    },
    /// Back to `queued`, due now, on the route's fallback `route` with a fresh budget: the
    /// current route is known not to have taken it (or, under `at_least_once`, may have).
    Failover {
        route: String,
        because: String,
    },
    /// herald held the send back itself before writing anything: attempt `attempt`, started
    /// for it, is withdrawn (no row, no budget spent), and the notification waits until `at` —
    /// `queued` again, or still `sending` where it was being reconciled (`reconciling`), so that
    /// the next claim reconciles rather than sends afresh.
    Hold {
        attempt: i32,
        reason: HoldReason,
        at: OffsetDateTime,
        reconciling: bool,
    },
}

impl Decision {
    /// `attempts` as they stand once this decision is recorded for a notification on `route`:
    /// its attempt's result in place of the one in flight, and its settlement on every other
    /// unsettled ambiguous attempt on that route (as the store writes them).
    pub fn applied_to(
        &self,
        attempts: &[Attempt],
        route: &str,
        now: OffsetDateTime,
    ) -> Vec<Attempt> {
        let own = self.attempt.as_ref().map(|a| a.n);
        attempts
            .iter()
            .map(|a| {
                let mut a = a.clone();
                if let Some(outcome) = self.attempt.as_ref().filter(|o| o.n == a.n) {
                    a.result = outcome.result;
                    a.permanent = outcome.permanent;
                    a.provider_ref.clone_from(&outcome.provider_ref);
                    a.evidence = outcome.evidence.clone();
                } else if let Some(settle) = &self.settle
                    && a.result == AttemptResult::Ambiguous
                    && a.settled_by.is_none()
                    && Some(a.n) != own
                    && a.route == route
                {
                    a.settled_by = Some(settle.by);
                    if let (Some(evidence), Some(record)) =
                        (a.evidence.as_object_mut(), settle.record(now).as_object())
                    {
                        evidence.extend(record.clone());
                    }
                }
                a
            })
            .collect()
    }

    /// What its settlement adds to each attempt it settles.
    pub fn settlement_evidence(&self, now: OffsetDateTime) -> Option<Value> {
        self.settle.as_ref().map(|s| s.record(now))
    }

    /// What its findings add to each unsettled ambiguous attempt.
    pub fn findings_evidence(&self, now: OffsetDateTime) -> Option<Value> {
        self.findings.as_ref().map(|f| {
            json!({"look_up": {
                "findings": f,
                "at": now.format(&Rfc3339).ok(),
            }})
        })
    }

    /// What a failover adds to the attempt that caused it, for the timeline: from where to
    /// where, and why.
    pub fn failover_evidence(&self, from: &str, now: OffsetDateTime) -> Option<Value> {
        match &self.next {
            Next::Failover { route, because } => Some(json!({"failover": {
                "from": from,
                "to": route,
                "because": because,
                "at": now.format(&Rfc3339).ok(),
            }})),
            _ => None,
        }
    }

    /// Its attempt's result, for when the claim was lost before it could be recorded: kept as
    /// evidence on that attempt, never as the result, with when it came.
    pub fn late_evidence(&self, now: OffsetDateTime) -> Option<(i32, Value)> {
        self.attempt.as_ref().map(|a| {
            (
                a.n,
                json!({"late_result": {
                    "result": a.result,
                    "provider_ref": a.provider_ref,
                    "evidence": a.evidence,
                    "at": now.format(&Rfc3339).ok(),
                }}),
            )
        })
    }
}

impl Settlement {
    /// What it adds to each attempt it settles.
    pub fn record(&self, now: OffsetDateTime) -> Value {
        json!({"settlement": {
            "by": self.by,
            "outcome": if self.accepted { "accepted" } else { "not_accepted" },
            "evidence": self.evidence,
            "at": now.format(&Rfc3339).ok(),
        }})
    }
}
