//! Look-alikes: which of the vendor's messages a content look-up found belong to which
//! notification, settling only what the counts prove.

use herald_provider::Evidence;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::query::{not_found, processed_until, query_settles, settled, visible_by, wait_until};
use super::{Situation, evidence_json, ruled};
use crate::domain::{Attempt, AttemptResult, Certainty, Decision, Sibling, State, left_late};

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

pub(super) fn attribute_unruled(
    s: &Situation<'_>,
    refs: &[String],
    since: OffsetDateTime,
    evidence: &Evidence,
    asked_at: OffsetDateTime,
    jitter: f64,
) -> Attribution {
    let census = Census::of(s, refs, since);
    let Census {
        sought,
        free,
        rivals,
        shown,
        in_flight,
        ..
    } = &census;
    let (own, sends) = (census.own(), census.sends());
    let record = census.record(refs, evidence);
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
    let visible = asked_at >= visible_by(s, shown, asked_at);
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
        return Attribution::Decided(not_found(s, shown, &evidence, asked_at, jitter));
    }
    if rivals.is_empty() {
        return if free.len() > own {
            Attribution::Inconclusive(record)
        } else if free.len() < own && !visible {
            Attribution::Decided(wait_until(visible_by(s, shown, asked_at)))
        } else {
            settle_with(free[0], once_or_more(free.len()))
        };
    }
    // A sibling's send in flight may own any free message, and its answer will say which:
    // wait for it before counting.
    if *in_flight > 0 {
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
        return Attribution::Decided(wait_until(visible_by(s, shown, asked_at)));
    }
    Attribution::Inconclusive(record)
}

/// What a look-up's look-alike messages are weighed against: the sends they may belong to.
struct Census<'a> {
    /// This route's unsettled ambiguous sends, which the look-up is for.
    sought: Vec<&'a Attempt>,
    /// Sends of this notification's that were proven absent, until their own workers said they
    /// may have left after that proof: as much this notification's as the sought ones.
    left_late_since: Vec<&'a Attempt>,
    /// The look-alikes no known send has claimed.
    free: Vec<&'a String>,
    /// Siblings' sends that may have produced one of them.
    rivals: Vec<&'a Sibling>,
    /// Everything but the sought sends that must be visible before absence or a count proves
    /// anything.
    shown: Vec<&'a Attempt>,
    /// Rivals still in flight.
    in_flight: usize,
}

impl<'a> Census<'a> {
    fn of(s: &'a Situation<'_>, refs: &'a [String], since: OffsetDateTime) -> Self {
        let sought = s.unsettled(None);
        // A late answer of a send this look-up is for names what it should find: not
        // attributed.
        let late = s
            .here()
            .filter(|a| !sought.iter().any(|o| o.n == a.n))
            .chain(s.siblings.iter().map(|sib| &sib.attempt))
            .filter_map(Attempt::late_reference);
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
        let shown: Vec<&Attempt> = rivals
            .iter()
            .map(|sib| &sib.attempt)
            .chain(left_late_since.iter().copied())
            .collect();
        let in_flight = rivals
            .iter()
            .filter(|sib| sib.attempt.result == AttemptResult::InFlight)
            .count();
        Census {
            sought,
            left_late_since,
            free,
            rivals,
            shown,
            in_flight,
        }
    }

    /// This notification's sends the look-alikes may be.
    fn own(&self) -> usize {
        self.sought.len() + self.left_late_since.len()
    }

    /// Every send the look-alikes may be.
    fn sends(&self) -> usize {
        self.own() + self.rivals.len()
    }

    /// The count as the look-up's evidence records it.
    fn record(&self, refs: &[String], evidence: &Evidence) -> Value {
        json!({
            "look_alikes": refs,
            "free": self.free,
            "own_sends": self.own(),
            "own_sends_left_late": self.left_late_since.len(),
            "sibling_sends": self.rivals.len(),
            "sibling_sends_in_flight": self.in_flight,
            "query": evidence_json(evidence),
        })
    }
}

/// Whether a sibling's attempt may have produced a look-alike message seen since `since` that
/// no reference attributes yet.
pub(super) fn may_have_sent(s: &Situation<'_>, a: &Attempt, since: OffsetDateTime) -> bool {
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
pub(super) fn settled_not_accepted(a: &Attempt) -> bool {
    a.settled_by.is_some() && a.evidence["settlement"]["outcome"] == "not_accepted"
}
