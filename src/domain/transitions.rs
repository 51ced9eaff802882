//! Which states a notification moves between, and who moves it, written once as data. Every
//! guard that moves one — a worker's record, a requery, a person's resolution, a cancellation,
//! a vendor's report, a reopening, retention — is held against this table on both databases
//! (`every_guard_moves_only_as_the_transition_table_allows` in `tests/store/transitions.rs`), and the review
//! rule's two forms (Rust and SQL) against each other.
//! A move a guard makes that the table lacks, or a row no guard makes, fails that test.

use super::State;

/// Who moves a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mover {
    /// The API or an upstream event: a new notification; a cancellation.
    Upstream,
    /// A dispatcher: its claim, and the record of what its step decided (a retry, a hold and a
    /// failover included).
    Dispatcher,
    /// A vendor's report that proves an ambiguous send.
    Callback,
    /// Later evidence that contradicts the record: it is reopened.
    Evidence,
    /// A person in review: a resolution, or a requery they asked for.
    Person,
    /// Retention, which deletes what finished long enough ago.
    Retention,
}

/// One move: `from` `None` is a notification that did not exist yet, `to` `None` one deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub from: Option<State>,
    pub to: Option<State>,
    pub by: Mover,
    pub why: &'static str,
}

const fn t(from: Option<State>, to: Option<State>, by: Mover, why: &'static str) -> Transition {
    Transition { from, to, by, why }
}

use Mover::{Callback, Dispatcher, Evidence, Person, Retention, Upstream};
use State::{Cancelled, Delivered, Failed, Queued, Sending, Unknown};

/// Every move between two different states (a record that leaves the state as it was — a
/// reconciliation that waits, an acknowledgement — is no move).
#[rustfmt::skip]
pub const TRANSITIONS: &[Transition] = &[
    t(None, Some(Queued), Upstream, "accepted by the API or from an upstream event"),
    t(Some(Queued), Some(Cancelled), Upstream, "cancelled before it was claimed"),
    t(Some(Queued), Some(Sending), Dispatcher, "claimed, with an in_flight attempt committed first"),
    t(Some(Sending), Some(Queued), Dispatcher, "a retry, a hold, or a failover to the fallback"),
    t(Some(Sending), Some(Delivered), Dispatcher, "the vendor accepted it, or a report proved it"),
    t(Some(Sending), Some(Failed), Dispatcher, "refused, or retries spent, with nothing ambiguous"),
    t(Some(Sending), Some(Unknown), Dispatcher, "an ambiguity nothing settled that the policy may not resend"),
    t(Some(Queued), Some(Delivered), Callback, "a report proved a send while it waited to be sent again"),
    t(Some(Unknown), Some(Delivered), Callback, "a report proved the send left in review"),
    t(Some(Queued), Some(Delivered), Evidence, "a late answer or a report shows a message"),
    t(Some(Sending), Some(Delivered), Evidence, "a late answer shows a message a settlement denied, while it waited to be looked up again"),
    t(Some(Failed), Some(Delivered), Evidence, "a late answer or a report shows a message"),
    t(Some(Unknown), Some(Delivered), Evidence, "a late answer or a report shows a message"),
    t(Some(Cancelled), Some(Delivered), Evidence, "a late answer or a report shows a message"),
    t(Some(Queued), Some(Unknown), Evidence, "a request that may have left late, under at_most_once"),
    t(Some(Failed), Some(Unknown), Evidence, "a request that may have left late"),
    t(Some(Unknown), Some(Delivered), Person, "resolved delivered, or a requery found it"),
    t(Some(Unknown), Some(Failed), Person, "resolved not delivered and closed, or a requery proved it absent with retries spent"),
    t(Some(Unknown), Some(Queued), Person, "resolved not delivered, to send again (or a requery proved it absent)"),
    t(Some(Failed), Some(Queued), Person, "a dead letter sent again"),
    t(Some(Cancelled), Some(Delivered), Person, "resolved delivered: the vendor had the message that was cancelled"),
    t(Some(Delivered), None, Retention, "finished and out of review, its events published"),
    t(Some(Failed), None, Retention, "closed by a person (or refused for good), its events published"),
    t(Some(Cancelled), None, Retention, "finished, its events published"),
];

/// Whether `by` may move a notification from `from` to `to`: a row of the table, or no move.
pub fn allowed(from: Option<State>, to: Option<State>, by: Mover) -> bool {
    from == to
        || TRANSITIONS
            .iter()
            .any(|t| t.from == from && t.to == to && t.by == by)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_final_state_is_left_only_by_a_person_a_report_later_evidence_or_retention() {
        for t in TRANSITIONS {
            if t.from.is_some_and(State::is_final) {
                assert!(
                    matches!(t.by, Person | Evidence | Retention | Callback),
                    "{t:?}"
                );
            }
        }
        // Nothing is ever deleted before it finished, and nothing comes back from `delivered`
        // but by deletion.
        for t in TRANSITIONS {
            assert!(
                t.to.is_some() || t.from.is_some_and(State::is_final),
                "{t:?}"
            );
            assert!(t.from != Some(Delivered) || t.to.is_none(), "{t:?}");
        }
    }
}
