//! On-call review: why a notification waits for a person, what a person may say about it, and
//! what each resolution changes. Pure rules, no I/O: the API reads the notification, asks
//! [`resolve`], and the store applies the [`Change`] fenced by the generation it read, so two
//! resolutions racing each other (or a late worker) cannot both win.
//!
//! The rules, in prose (the API contract, "Review"):
//! - `unknown` (an ambiguity nothing could settle): `delivered` ends it delivered/known;
//!   `not_delivered` + `close` ends it failed/known; `not_delivered` + `resend` queues it again.
//!   Either way the person's word settles the ambiguous attempts, so a later acceptance is known.
//! - `duplicate_possible`, not yet acknowledged: `acknowledged` marks it seen.
//! - a dead letter (`failed`): `not_delivered` + `resend` queues it again; one that failed for a
//!   permanent cause (the vendor refused it for good) also needs `force`.
//! - A resend reuses the provider key while the vendor's idempotency window still covers the
//!   first attempt under it, so a wrong "not delivered" cannot deliver twice; past the window
//!   the key is renewed, and the resolution records that the person accepted that risk. It
//!   starts a fresh budget of attempts and age.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use crate::domain::{Attempt, AttemptResult, Certainty, FieldError, Notification, State};

/// The longest note a resolution keeps.
pub const MAX_NOTE_CHARS: usize = 2000;

/// Why a notification is in review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Nothing could settle an ambiguous attempt: a person must say what happened.
    Unknown,
    /// Delivered, perhaps more than once, and not yet acknowledged.
    DuplicatePossible,
    /// A dead letter: failed for a cause that may pass (retries or age spent on transient
    /// refusals, a vendor that was down). Resend when the cause has passed.
    Exhausted,
    /// Failed for a permanent cause (the vendor refused it for good): listed apart, resent
    /// only with `force`.
    Rejected,
}

impl Reason {
    pub const ALL: [Reason; 4] = [
        Reason::Unknown,
        Reason::DuplicatePossible,
        Reason::Exhausted,
        Reason::Rejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Unknown => "unknown",
            Reason::DuplicatePossible => "duplicate_possible",
            Reason::Exhausted => "exhausted",
            Reason::Rejected => "rejected",
        }
    }

    pub fn parse(s: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A person's note for the audit trail: required, trimmed, at most [`MAX_NOTE_CHARS`].
pub fn parse_note(note: &str) -> Result<String, FieldError> {
    let note = note.trim();
    if note.is_empty() {
        return Err(FieldError::new(
            "note",
            "is required: say what you know and why",
        ));
    }
    if note.chars().count() > MAX_NOTE_CHARS {
        return Err(FieldError::new(
            "note",
            format!("must be at most {MAX_NOTE_CHARS} characters"),
        ));
    }
    Ok(note.to_owned())
}

/// Why `n` is in review, if it is.
pub fn reason(n: &Notification, attempts: &[Attempt]) -> Option<Reason> {
    match (n.state, n.certainty) {
        (State::Unknown, _) => Some(Reason::Unknown),
        (State::Delivered, Some(Certainty::DuplicatePossible)) if !n.acknowledged => {
            Some(Reason::DuplicatePossible)
        }
        (State::Failed, _) => Some(if failed_for_good(attempts) {
            Reason::Rejected
        } else {
            Reason::Exhausted
        }),
        _ => None,
    }
}

/// Its last attempt was never made: the recipient is suppressed.
pub fn suppressed(attempts: &[Attempt]) -> bool {
    attempts
        .last()
        .is_some_and(|a| a.evidence["stage"] == herald_provider::SUPPRESSED_STAGE)
}

/// Its last attempt was refused for good.
fn failed_for_good(attempts: &[Attempt]) -> bool {
    attempts
        .last()
        .is_some_and(|a| a.result == AttemptResult::Rejected && a.permanent == Some(true))
}

/// One sentence for a person: why the item is here, with the last attempt's evidence.
pub fn why(reason: Reason, attempts: &[Attempt]) -> String {
    let last = attempts.last().map(|a| {
        let stage = a.evidence["stage"].as_str().unwrap_or("?");
        let detail = a.evidence["detail"].as_str().unwrap_or("");
        match a.evidence["status"].as_u64() {
            Some(status) => format!(
                "attempt {} {} at {stage} ({status}): {detail}",
                a.n, a.result
            ),
            None => format!("attempt {} {} at {stage}: {detail}", a.n, a.result),
        }
    });
    let last = last.unwrap_or_else(|| "no attempt".to_owned());
    let unsettled = attempts
        .iter()
        .filter(|a| a.result == AttemptResult::Ambiguous && a.settled_by.is_none())
        .count();
    match reason {
        Reason::Unknown => format!(
            "{unsettled} ambiguous attempt(s) that no outcome query or replay could settle; \
             the vendor may or may not have it. Last: {last}"
        ),
        Reason::DuplicatePossible => format!(
            "accepted after {unsettled} unsettled ambiguous attempt(s): the recipient may have \
             it more than once. Last: {last}"
        ),
        Reason::Exhausted => format!(
            "failed after {} attempt(s) for a cause that may pass. Last: {last}",
            attempts.len()
        ),
        Reason::Rejected if suppressed(attempts) => format!(
            "not sent: the recipient is on the suppression list; lift the suppression before a \
             forced resend. Last: {last}"
        ),
        Reason::Rejected => format!("refused for good by the vendor. Last: {last}"),
    }
}

/// What a person says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Delivered,
    NotDelivered,
    Acknowledged,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::NotDelivered => "not_delivered",
            Outcome::Acknowledged => "acknowledged",
        }
    }
}

/// What happens after `not_delivered`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Then {
    Resend,
    Close,
}

impl Then {
    pub fn as_str(self) -> &'static str {
        match self {
            Then::Resend => "resend",
            Then::Close => "close",
        }
    }
}

/// A resolution as a person asks for it, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub outcome: Outcome,
    pub then: Option<Then>,
    pub note: String,
    pub force: bool,
}

impl Ask {
    pub fn new(
        outcome: Outcome,
        then: Option<Then>,
        note: &str,
        force: bool,
    ) -> Result<Ask, FieldError> {
        let note = parse_note(note)?;
        match (outcome, then) {
            (Outcome::NotDelivered, None) => {
                return Err(FieldError::new(
                    "then",
                    "is required after not_delivered: resend or close",
                ));
            }
            (Outcome::Delivered | Outcome::Acknowledged, Some(_)) => {
                return Err(FieldError::new("then", "is only for not_delivered"));
            }
            _ => {}
        }
        Ok(Ask {
            outcome,
            then,
            note: note.to_owned(),
            force,
        })
    }
}

/// What a resolution changes on the notification.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub state: State,
    pub certainty: Option<Certainty>,
    pub acknowledged: bool,
    /// Settles every unsettled ambiguous attempt by review, as accepted or not.
    pub settle: Option<bool>,
    /// Queued again: due now, with a fresh budget.
    pub resend: Option<Resend>,
    pub forced: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resend {
    /// The vendor's window for the current key has passed: send under a new one.
    pub renew_key: bool,
}

/// Why a resolution is refused (answered 409).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// What `ask` changes on `n` (with its `attempts`), where the route's vendor keeps keys for
/// `window`; or why it may not.
pub fn resolve(
    n: &Notification,
    attempts: &[Attempt],
    ask: &Ask,
    window: Option<Duration>,
    now: OffsetDateTime,
) -> Result<Change, Refused> {
    let Some(reason) = reason(n, attempts) else {
        return Err(Refused(format!(
            "this notification is {}{} and not in review",
            n.state,
            n.certainty.map(|c| format!("/{c}")).unwrap_or_default()
        )));
    };
    let change = |state, certainty, settle, resend| Change {
        state,
        certainty,
        acknowledged: n.acknowledged,
        settle,
        resend,
        forced: false,
    };
    let resend = || Resend {
        renew_key: !inside_window(n, attempts, window, now),
    };
    match (reason, ask.outcome, ask.then) {
        (Reason::Unknown, Outcome::Delivered, _) => Ok(change(
            State::Delivered,
            Some(Certainty::Known),
            Some(true),
            None,
        )),
        (Reason::Unknown, Outcome::NotDelivered, Some(Then::Close)) => Ok(change(
            State::Failed,
            Some(Certainty::Known),
            Some(false),
            None,
        )),
        (Reason::Unknown, Outcome::NotDelivered, Some(Then::Resend))
        | (Reason::Exhausted, Outcome::NotDelivered, Some(Then::Resend)) => {
            Ok(change(State::Queued, None, Some(false), Some(resend())))
        }
        (Reason::Rejected, Outcome::NotDelivered, Some(Then::Resend)) if ask.force => Ok(Change {
            forced: true,
            ..change(State::Queued, None, None, Some(resend()))
        }),
        (Reason::Rejected, Outcome::NotDelivered, Some(Then::Resend)) => Err(Refused(
            "it failed for a permanent cause (the vendor refused it for good); resend with \
             \"force\": true if the cause is fixed"
                .to_owned(),
        )),
        (Reason::DuplicatePossible, Outcome::Acknowledged, _) => Ok(Change {
            acknowledged: true,
            ..change(n.state, n.certainty, None, None)
        }),
        (reason, outcome, then) => Err(Refused(format!(
            "`{}{}` does not resolve an item in review for `{reason}`: {}",
            outcome.as_str(),
            then.map(|t| format!(" + {}", t.as_str()))
                .unwrap_or_default(),
            match reason {
                Reason::Unknown => "say delivered, or not_delivered with resend or close",
                Reason::DuplicatePossible => "acknowledge it",
                Reason::Exhausted | Reason::Rejected => "resend it with not_delivered + resend",
            }
        ))),
    }
}

/// Whether the vendor still deduplicates the current key: its window runs from the first
/// attempt under that key.
fn inside_window(
    n: &Notification,
    attempts: &[Attempt],
    window: Option<Duration>,
    now: OffsetDateTime,
) -> bool {
    let key = n.provider_key();
    let first = attempts.iter().find(|a| a.provider_idempotency_key == key);
    match (window, first) {
        (Some(window), Some(first)) => now < first.started_at + window,
        // Never sent under this key: nothing to collide with.
        (_, None) => true,
        // The vendor keeps no keys: a new one protects nothing, so keep it.
        (None, Some(_)) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Channel, Content, Delivery, NotificationId, SettledBy};
    use serde_json::{Map, json};
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-11-30 12:00:00 UTC);

    fn notification(state: State, certainty: Option<Certainty>) -> Notification {
        Notification {
            id: NotificationId::new(),
            tenant: "acme".into(),
            channel: Channel::Sms,
            to: "+1".into(),
            route: "r".into(),
            delivery: Delivery::AtMostOnce,
            state,
            certainty,
            acknowledged: false,
            content: Content::default(),
            metadata: Map::new(),
            send_at: None,
            next_attempt_at: None,
            created_at: T0,
            updated_at: T0,
            key_epoch: 0,
            failovers: 0,
            late_evidence: false,
            contradiction: None,
        }
    }

    fn attempt(n: &Notification, result: AttemptResult, permanent: Option<bool>) -> Attempt {
        Attempt {
            n: 1,
            route: "r".into(),
            provider_idempotency_key: n.provider_key(),
            started_at: T0,
            send_deadline: T0,
            finished_at: Some(T0),
            result,
            permanent,
            provider_ref: None,
            settled_by: None::<SettledBy>,
            evidence: json!({"stage": "awaiting_response", "detail": "reset"}),
        }
    }

    fn ask(outcome: Outcome, then: Option<Then>, force: bool) -> Ask {
        Ask::new(outcome, then, "checked with the vendor", force).unwrap()
    }

    #[test]
    fn each_resolution_ends_where_the_contract_says() {
        use Outcome::*;
        let unknown = notification(State::Unknown, Some(Certainty::Unknown));
        let dup = notification(State::Delivered, Some(Certainty::DuplicatePossible));
        let dead = notification(State::Failed, Some(Certainty::Known));
        let ambiguous = [attempt(&unknown, AttemptResult::Ambiguous, None)];
        let transient = [attempt(&dead, AttemptResult::Rejected, Some(false))];
        let refused = [attempt(&dead, AttemptResult::Rejected, Some(true))];
        // (case, notification, its attempts, the ask, Ok((state, settle)) or refused)
        type Case<'a> = (
            &'a str,
            &'a Notification,
            &'a [Attempt],
            Ask,
            Result<(State, Option<bool>), ()>,
        );
        let cases: Vec<Case> = vec![
            (
                "unknown delivered",
                &unknown,
                &ambiguous,
                ask(Delivered, None, false),
                Ok((State::Delivered, Some(true))),
            ),
            (
                "unknown closed",
                &unknown,
                &ambiguous,
                ask(NotDelivered, Some(Then::Close), false),
                Ok((State::Failed, Some(false))),
            ),
            (
                "unknown resent",
                &unknown,
                &ambiguous,
                ask(NotDelivered, Some(Then::Resend), false),
                Ok((State::Queued, Some(false))),
            ),
            (
                "unknown acknowledged",
                &unknown,
                &ambiguous,
                ask(Acknowledged, None, false),
                Err(()),
            ),
            (
                "duplicate acknowledged",
                &dup,
                &ambiguous,
                ask(Acknowledged, None, false),
                Ok((State::Delivered, None)),
            ),
            (
                "duplicate delivered",
                &dup,
                &ambiguous,
                ask(Delivered, None, false),
                Err(()),
            ),
            (
                "dead letter resent",
                &dead,
                &transient,
                ask(NotDelivered, Some(Then::Resend), false),
                Ok((State::Queued, Some(false))),
            ),
            (
                "dead letter closed",
                &dead,
                &transient,
                ask(NotDelivered, Some(Then::Close), false),
                Err(()),
            ),
            (
                "refused for good, resent",
                &dead,
                &refused,
                ask(NotDelivered, Some(Then::Resend), false),
                Err(()),
            ),
            (
                "refused for good, forced",
                &dead,
                &refused,
                ask(NotDelivered, Some(Then::Resend), true),
                Ok((State::Queued, None)),
            ),
        ];
        for (case, n, attempts, ask, expected) in cases {
            let got = resolve(n, attempts, &ask, None, T0)
                .map(|c| (c.state, c.settle))
                .map_err(|_| ());
            assert_eq!(got, expected, "{case}");
        }
        let acked = resolve(&dup, &ambiguous, &ask(Acknowledged, None, false), None, T0).unwrap();
        assert!(acked.acknowledged);
        let delivered = notification(State::Delivered, Some(Certainty::Known));
        assert!(resolve(&delivered, &[], &ask(Delivered, None, false), None, T0).is_err());
    }

    #[test]
    fn a_resend_keeps_the_key_inside_the_vendors_window_and_renews_it_after() {
        let unknown = notification(State::Unknown, Some(Certainty::Unknown));
        let history = [attempt(&unknown, AttemptResult::Ambiguous, None)];
        let resend = ask(Outcome::NotDelivered, Some(Then::Resend), false);
        let day = Duration::from_secs(86_400);
        let renews = |window, now| {
            resolve(&unknown, &history, &resend, window, now)
                .unwrap()
                .resend
                .unwrap()
                .renew_key
        };
        assert!(!renews(Some(day), T0 + Duration::from_secs(3600)));
        assert!(renews(Some(day), T0 + day + Duration::from_secs(1)));
        assert!(
            !renews(None, T0 + day * 30),
            "no window: a new key protects nothing"
        );
    }

    #[test]
    fn a_resolution_needs_a_note_and_the_right_then() {
        assert!(Ask::new(Outcome::Delivered, None, "  ", false).is_err());
        assert!(Ask::new(Outcome::NotDelivered, None, "why", false).is_err());
        assert!(Ask::new(Outcome::Delivered, Some(Then::Close), "why", false).is_err());
        assert!(Ask::new(Outcome::NotDelivered, Some(Then::Close), "why", false).is_ok());
    }

    #[test]
    fn reasons_tell_dead_letters_from_refusals() {
        let dead = notification(State::Failed, Some(Certainty::Known));
        let transient = [attempt(&dead, AttemptResult::Rejected, Some(false))];
        let refused = [attempt(&dead, AttemptResult::Rejected, Some(true))];
        assert_eq!(reason(&dead, &transient), Some(Reason::Exhausted));
        assert_eq!(reason(&dead, &refused), Some(Reason::Rejected));
        let mut acked = notification(State::Delivered, Some(Certainty::DuplicatePossible));
        assert_eq!(reason(&acked, &[]), Some(Reason::DuplicatePossible));
        acked.acknowledged = true;
        assert_eq!(reason(&acked, &[]), None);
        assert!(why(Reason::Exhausted, &transient).contains("may pass"));
    }
}
