//! The state machine's names, exactly as the API spells them. Stored as text with CHECK
//! constraints, so `as_str` and `parse` are the only translation.

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $variant,)+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text,)+ }
            }

            pub fn parse(s: &str) -> Option<$name> {
                match s { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

text_enum! {
    /// Where a notification stands. Which moves between states there are, and who makes
    /// each, is herald's transition table (docs/api.md, "Words").
    State {
        /// Waiting to be sent (now or when due).
        Queued = "queued",
        /// Claimed by a dispatcher, with an `in_flight` attempt committed before any call; also
        /// while an ambiguous attempt is reconciled.
        Sending = "sending",
        /// Final. The provider accepted it; certainty `known` or `duplicate_possible`.
        Delivered = "delivered",
        /// Final. The provider did not accept it, and nothing ambiguous is in the history
        /// (a person may still send a dead letter again).
        Failed = "failed",
        /// Final: nothing herald can ask tells whether the provider took it. A vendor's report,
        /// later evidence or a person settles it.
        Unknown = "unknown",
        /// Final. Cancelled while `queued`; `unknown` certainty where an earlier attempt may
        /// have reached the vendor, until a report or a person settles it.
        Cancelled = "cancelled",
    }
}

impl State {
    /// States a dispatcher never claims again: only a person, a vendor's report, later
    /// evidence or retention moves them (herald's transition table says which and how).
    pub fn is_final(self) -> bool {
        !matches!(self, State::Queued | State::Sending)
    }
}

text_enum! {
    /// How sure herald is about what the provider did.
    Certainty {
        /// The provider's answer proves the outcome.
        Known = "known",
        /// Accepted, but the recipient may have got it more than once.
        DuplicatePossible = "duplicate_possible",
        /// Herald cannot tell whether the provider accepted it.
        Unknown = "unknown",
    }
}

text_enum! {
    /// What herald does after an ambiguous attempt that nothing could settle.
    Delivery {
        /// Never send again; go to `unknown` for review.
        AtMostOnce = "at_most_once",
        /// Send again; an acceptance then ends `delivered`/`duplicate_possible`.
        AtLeastOnce = "at_least_once",
    }
}

impl Delivery {
    /// The default of defaults, for a route that names none.
    pub const DEFAULT: Delivery = Delivery::AtMostOnce;
}

text_enum! {
    /// The result of one attempt. `in_flight` is written before the call; the others after.
    AttemptResult {
        InFlight = "in_flight",
        Accepted = "accepted",
        Rejected = "rejected",
        Ambiguous = "ambiguous",
    }
}

text_enum! {
    /// What later settled an ambiguous attempt.
    SettledBy {
        OutcomeQuery = "outcome_query",
        IdempotentReplay = "idempotent_replay",
        Review = "review",
        /// A vendor's delivery callback named the attempt's provider key.
        Callback = "callback",
    }
}

text_enum! {
    /// Why herald held a send back on its own account. A hold is not an attempt: it leaves no
    /// attempt row, spends no budget and fails nothing over; the notification waits until the
    /// route can take it (`herald_holds_total{route,reason}` counts them).
    HoldReason {
        /// The route's own rate limit had no token left before the send deadline.
        Paced = "paced",
        /// The route is paused: its vendor asked for a pause (`Retry-After`).
        Paused = "paused",
        /// The route's circuit is open and it has no fallback to hand the work to.
        CircuitOpen = "circuit_open",
        /// The send deadline passed before the request could be written: nothing was sent.
        Deadline = "deadline",
        /// The process's budget for attachment bytes in memory stayed spent until the send
        /// deadline: other sends and enqueues with attachments held it.
        Memory = "memory",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for s in State::ALL {
            assert_eq!(State::parse(s.as_str()), Some(*s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for c in Certainty::ALL {
            assert_eq!(Certainty::parse(c.as_str()), Some(*c));
        }
        assert_eq!(
            Delivery::parse("at_least_once"),
            Some(Delivery::AtLeastOnce)
        );
        assert_eq!(State::parse("QUEUED"), None);
    }
}
