//! On-call review: why a notification waits for a person, what a person may say about it, and
//! what each resolution changes. Pure rules, no I/O: the API reads the notification, asks
//! [`resolve`], and the store applies the [`Change`] fenced by the generation it read, so two
//! resolutions racing each other (or a late worker) cannot both win.
//!
//! The rules, in prose (the API contract, "Review"):
//! - `unknown` (an ambiguity nothing could settle): `delivered` ends it delivered/known;
//!   `not_delivered` + `close` ends it failed/known and closed; `not_delivered` + `resend`
//!   queues it again. Either way the person's word settles the ambiguous attempts, so a later
//!   acceptance is known.
//! - `duplicate_possible`, not yet acknowledged: `acknowledged` marks it seen.
//! - `cancelled`/`unknown` (cancelled while a send it had already made was unsettled, so the
//!   vendor may hold it): `delivered` says the vendor has it (delivered/known); `not_delivered`
//!   + `close` says it never arrived (cancelled/known, closed). It is never sent again.
//! - a dead letter (`failed`): `not_delivered` + `resend` queues it again; one that failed for a
//!   permanent cause (the vendor refused it for good) also needs `force`. So does any resend past
//!   the notification's expiry, which then holds no more. `not_delivered` +
//!   `close` closes any dead letter where it stands; the resolution is its audit.
//! - A closed item (an acknowledged duplicate, a closed dead letter, marked `acknowledged`) is
//!   out of review for good: it has no [`reason`] any more, and retention may delete it.
//! - A resend reuses the provider key while the vendor's idempotency window still covers the
//!   first attempt under it, so a wrong "not delivered" cannot deliver twice; past the window
//!   the key is renewed, and the resolution records that the person accepted that risk. It
//!   starts a fresh budget of attempts and age.
//!
//! What waits for a person (the default view of the queue) is [`Policy::waiting`]: every reason
//! but a permanent refusal, which is final and known unless `[review] permanent_refusals =
//! "review"` says it waits too.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use utoipa::ToSchema;

use herald_provider::{EXPIRED_STAGE, SUPPRESSED_STAGE};

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
    /// Evidence that came after it was recorded (a late answer, a vendor's report, a request
    /// that may have left late) contradicted the record and reopened it: a person
    /// acknowledges it.
    Contradicted,
    /// Cancelled, or closed, while a send it had made was unsettled: nothing more is sent, but
    /// the vendor may hold the message. A person says whether it arrived.
    MayHaveSent,
}

impl Reason {
    pub const ALL: [Reason; 6] = [
        Reason::Unknown,
        Reason::DuplicatePossible,
        Reason::Exhausted,
        Reason::Rejected,
        Reason::Contradicted,
        Reason::MayHaveSent,
    ];

    /// What always waits for a person: the default view of the queue, whatever the config, and
    /// what `herald_review_oldest_seconds` ages. A new reason that needs a person is one more
    /// line here.
    pub const WAITING: [Reason; 5] = [
        Reason::Unknown,
        Reason::DuplicatePossible,
        Reason::Exhausted,
        Reason::Contradicted,
        Reason::MayHaveSent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Unknown => "unknown",
            Reason::DuplicatePossible => "duplicate_possible",
            Reason::Exhausted => "exhausted",
            Reason::Rejected => "rejected",
            Reason::Contradicted => "contradicted",
            Reason::MayHaveSent => "may_have_sent",
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

/// Whether a permanent refusal (`rejected`: the vendor refused it for good, or the recipient
/// is suppressed) waits for a person: `[review] permanent_refusals`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermanentRefusals {
    /// Final and known: listed with `reason=rejected`, not in the default view, and deleted by
    /// retention when due (`retention.finished_seconds`) like any finished notification.
    #[default]
    Final,
    /// They wait in the default view, as dead letters do, until a person closes or resends
    /// them; retention keeps them until then.
    Review,
}

/// What waits for a person, by configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    pub permanent_refusals: PermanentRefusals,
}

impl Policy {
    /// The reasons of the default view: [`Reason::WAITING`], and `rejected` where refusals
    /// wait too.
    pub fn waiting(self) -> Vec<Reason> {
        let mut reasons = Reason::WAITING.to_vec();
        if self.permanent_refusals == PermanentRefusals::Review {
            reasons.push(Reason::Rejected);
        }
        reasons
    }

    pub fn waits(self, reason: Reason) -> bool {
        self.waiting().contains(&reason)
    }
}

/// How long an item has waited (or has left), as a person says it on the console and in the
/// CLI: whole seconds, minutes, hours or days.
pub fn age_in_words(d: time::Duration) -> String {
    let s = d.whole_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
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

/// Why `n` is in review, if it is: nothing once a person closed it (`acknowledged`).
pub fn reason(n: &Notification, attempts: &[Attempt]) -> Option<Reason> {
    if n.contradiction.is_some() && !n.acknowledged {
        return Some(Reason::Contradicted);
    }
    match (n.state, n.certainty) {
        (State::Unknown, _) => Some(Reason::Unknown),
        (State::Cancelled, Some(Certainty::Unknown)) => Some(Reason::MayHaveSent),
        (State::Delivered, Some(Certainty::DuplicatePossible)) if !n.acknowledged => {
            Some(Reason::DuplicatePossible)
        }
        (State::Failed, _) if !n.acknowledged => Some(dead_letter_cause(attempts)),
        _ => None,
    }
}

/// Why a failed notification failed, closed or not: `rejected` where its last attempt was
/// refused for good (or never made: the recipient is suppressed), else `exhausted`.
pub fn dead_letter_cause(attempts: &[Attempt]) -> Reason {
    if failed_for_good(attempts) {
        Reason::Rejected
    } else {
        Reason::Exhausted
    }
}

/// Why its last attempt was never made, where herald refused it itself: `suppressed` (the
/// recipient is on the suppression list) or `expired`.
pub fn not_made(attempts: &[Attempt]) -> Option<&'static str> {
    let stage = attempts.last()?.evidence["stage"].as_str()?;
    [SUPPRESSED_STAGE, EXPIRED_STAGE]
        .into_iter()
        .find(|refused| *refused == stage)
}

/// Its last attempt was refused for good.
fn failed_for_good(attempts: &[Attempt]) -> bool {
    attempts
        .last()
        .is_some_and(|a| a.result == AttemptResult::Rejected && a.permanent == Some(true))
}

/// Whether `n`'s certainty rests on a person's word rather than on what herald proved: it is
/// `known`, and a person settled one of its ambiguous attempts (they said delivered, or not
/// delivered — to close it or to send it again, when a later acceptance is `known` only because
/// they said the first send never arrived). The API shows it as `settled_by: "person"`, so that
/// a reader can tell "herald proved it" from "a person said so".
pub fn settled_by_person(n: &Notification, attempts: &[Attempt]) -> bool {
    n.certainty == Some(Certainty::Known)
        && attempts
            .iter()
            .any(|a| a.settled_by == Some(crate::domain::SettledBy::Review))
}

/// One sentence for a person: why `n` is here, with the last attempt's evidence (or, where
/// later evidence reopened it, that evidence).
pub fn why(reason: Reason, n: &Notification, attempts: &[Attempt]) -> String {
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
        // Reopened as unknown and acknowledged: what reopened it is still the reason.
        Reason::Unknown if let Some(c) = &n.contradiction => format!(
            "reopened: {}; the vendor may or may not have it. Last: {last}",
            c.why
        ),
        Reason::Unknown => format!(
            "{} that no outcome query or replay could settle; the vendor may or may not have \
             it. Last: {last}",
            counted(unsettled, "ambiguous attempt")
        ),
        Reason::DuplicatePossible => format!(
            "accepted after {}: the recipient may have it more than once. Last: {last}",
            counted(unsettled, "unsettled ambiguous attempt")
        ),
        Reason::Exhausted => format!(
            "failed after {} for a cause that may pass. Last: {last}",
            counted(attempts.len(), "attempt")
        ),
        Reason::Rejected if not_made(attempts) == Some(SUPPRESSED_STAGE) => format!(
            "not sent: the recipient is on the suppression list; lift the suppression before a \
             forced resend, or close it. Last: {last}"
        ),
        Reason::Rejected if not_made(attempts) == Some(EXPIRED_STAGE) => format!(
            "not sent: it expired before an attempt could start; close it, or force a resend. \
             Last: {last}"
        ),
        Reason::Rejected => format!("refused for good by the vendor. Last: {last}"),
        Reason::MayHaveSent => format!(
            "cancelled with {}: nothing more is sent, but the vendor may hold the message; \
             say whether it arrived. Last: {last}",
            counted(unsettled, "unsettled ambiguous attempt")
        ),
        Reason::Contradicted => match &n.contradiction {
            Some(c) => format!(
                "reopened as {}/{}: {}",
                n.state,
                n.certainty.map_or("?", Certainty::as_str),
                c.why
            ),
            None => format!("reopened by later evidence. Last: {last}"),
        },
    }
}

/// `1 attempt`, `2 attempts`: a count as a person writes it.
fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
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

/// What a person asks a resolution to do, checked: an outcome, what follows `not_delivered`,
/// and whether a permanent refusal is resent anyway. (Its note is [`parse_note`]'s.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    pub outcome: Outcome,
    pub then: Option<Then>,
    pub force: bool,
}

impl Ask {
    pub fn new(outcome: Outcome, then: Option<Then>, force: bool) -> Result<Ask, FieldError> {
        match (outcome, then) {
            (Outcome::NotDelivered, None) => Err(FieldError::new(
                "then",
                "is required after not_delivered: resend or close",
            )),
            (Outcome::Delivered | Outcome::Acknowledged, Some(_)) => {
                Err(FieldError::new("then", "is only for not_delivered"))
            }
            _ => Ok(Ask {
                outcome,
                then,
                force,
            }),
        }
    }
}

/// What a resolution changes on the notification.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub state: State,
    pub certainty: Option<Certainty>,
    /// A person closed its review: an acknowledged duplicate, or a closed dead letter.
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
    /// It had expired, and a person forced the resend: the expiry holds no more.
    pub lift_expiry: bool,
}

/// Why a resolution is refused (answered 409).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// What `ask` changes on `n` (with its `attempts`), where the route's vendor keeps keys for
/// `window`; or why it may not. Long because it is one table over (reason, outcome, then):
/// every resolution a person may make reads in one place.
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
    // A resend starts over: what a person acknowledged of its past is behind it, and what it
    // comes to may need them again.
    let change = |state, certainty, settle, resend: Option<Resend>| Change {
        state,
        certainty,
        acknowledged: n.acknowledged && resend.is_none(),
        settle,
        resend,
        forced: false,
    };
    // Past its expiry a resend is forced: the upstream said the message is worth nothing now.
    let expired = n.expires_at.filter(|at| *at <= now);
    let resend = || Resend {
        renew_key: !inside_window(n, attempts, window, now),
        lift_expiry: expired.is_some(),
    };
    match (reason, ask.outcome, ask.then) {
        (Reason::Unknown | Reason::MayHaveSent, Outcome::Delivered, _) => Ok(change(
            State::Delivered,
            Some(Certainty::Known),
            Some(true),
            None,
        )),
        // It stays cancelled, now known: the person says nothing reached the recipient.
        (Reason::MayHaveSent, Outcome::NotDelivered, Some(Then::Close)) => Ok(Change {
            acknowledged: true,
            ..change(State::Cancelled, Some(Certainty::Known), Some(false), None)
        }),
        // Closed: failed for good, and out of review (the resolution is its audit).
        (Reason::Unknown, Outcome::NotDelivered, Some(Then::Close)) => Ok(Change {
            acknowledged: true,
            ..change(State::Failed, Some(Certainty::Known), Some(false), None)
        }),
        (Reason::Exhausted | Reason::Rejected, Outcome::NotDelivered, Some(Then::Close)) => {
            Ok(Change {
                acknowledged: true,
                ..change(n.state, n.certainty, None, None)
            })
        }
        (Reason::Unknown | Reason::Exhausted, Outcome::NotDelivered, Some(Then::Resend))
            if expired.is_none() || ask.force =>
        {
            Ok(Change {
                forced: expired.is_some(),
                ..change(State::Queued, None, Some(false), Some(resend()))
            })
        }
        (Reason::Rejected, Outcome::NotDelivered, Some(Then::Resend)) if ask.force => Ok(Change {
            forced: true,
            ..change(State::Queued, None, None, Some(resend()))
        }),
        (
            Reason::Unknown | Reason::Exhausted | Reason::Rejected,
            Outcome::NotDelivered,
            Some(Then::Resend),
        ) if expired.is_some() => Err(Refused(format!(
            "it expired at {}; resend with \"force\": true to send it anyway",
            expired
                .and_then(|at| at.format(&Rfc3339).ok())
                .unwrap_or_default()
        ))),
        (Reason::Rejected, Outcome::NotDelivered, Some(Then::Resend)) => Err(Refused(
            "it failed for a permanent cause (the vendor refused it for good); resend with \
             \"force\": true if the cause is fixed"
                .to_owned(),
        )),
        (Reason::DuplicatePossible | Reason::Contradicted, Outcome::Acknowledged, _) => {
            Ok(Change {
                acknowledged: true,
                ..change(n.state, n.certainty, None, None)
            })
        }
        (reason, outcome, then) => Err(not_an_answer(reason, outcome, then)),
    }
}

/// Why `outcome` (+ `then`) does not resolve an item waiting for `reason`, and what would.
fn not_an_answer(reason: Reason, outcome: Outcome, then: Option<Then>) -> Refused {
    let would = match reason {
        Reason::Unknown => "say delivered, or not_delivered with resend or close",
        Reason::MayHaveSent => {
            "it was cancelled and is never sent again: say delivered, or not_delivered with close"
        }
        Reason::DuplicatePossible | Reason::Contradicted => "acknowledge it",
        Reason::Exhausted | Reason::Rejected => {
            "resend it with not_delivered + resend, or close it with not_delivered + close"
        }
    };
    Refused(format!(
        "`{}{}` does not resolve an item in review for `{reason}`: {would}",
        outcome.as_str(),
        then.map(|t| format!(" + {}", t.as_str()))
            .unwrap_or_default(),
    ))
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
    #[test]
    fn ages_read_as_a_person_would_say_them() {
        assert_eq!(super::age_in_words(time::Duration::seconds(42)), "42s");
        assert_eq!(super::age_in_words(time::Duration::minutes(90)), "1h");
        assert_eq!(super::age_in_words(time::Duration::days(3)), "3d");
    }

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
            cancellation_key: None,
            category: None,
            send_at: None,
            expires_at: None,
            next_attempt_at: None,
            created_at: T0,
            updated_at: T0,
            key_epoch: 0,
            failovers: 0,
            late_evidence: false,
            contradiction: None,
            trace_parent: None,
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
        Ask::new(outcome, then, force).unwrap()
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
                Ok((State::Failed, None)),
            ),
            (
                "refused for good, closed",
                &dead,
                &refused,
                ask(NotDelivered, Some(Then::Close), false),
                Ok((State::Failed, None)),
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
    fn a_closed_item_leaves_review_and_cannot_be_resolved_again() {
        let close = ask(Outcome::NotDelivered, Some(Then::Close), false);
        let unknown = notification(State::Unknown, Some(Certainty::Unknown));
        let dead = notification(State::Failed, Some(Certainty::Known));
        let cases = [
            (&unknown, attempt(&unknown, AttemptResult::Ambiguous, None)),
            (&dead, attempt(&dead, AttemptResult::Rejected, Some(false))),
            (&dead, attempt(&dead, AttemptResult::Rejected, Some(true))),
        ];
        for (n, last) in cases {
            let history = [last];
            let change = resolve(n, &history, &close, None, T0).unwrap();
            assert!(change.acknowledged, "closed: {:?}", reason(n, &history));
            let closed = Notification {
                state: change.state,
                certainty: change.certainty,
                acknowledged: change.acknowledged,
                ..n.clone()
            };
            assert_eq!(reason(&closed, &history), None);
            assert_eq!(
                dead_letter_cause(&history),
                reason(&dead, &history).unwrap(),
                "the cause outlives the review"
            );
            assert!(resolve(&closed, &history, &close, None, T0).is_err());
        }
    }

    #[test]
    fn a_resend_past_the_expiry_is_forced_and_lifts_it() {
        let resend = |force| ask(Outcome::NotDelivered, Some(Then::Resend), force);
        let expiring = |state, certainty| Notification {
            expires_at: Some(T0),
            ..notification(state, Some(certainty))
        };
        let unknown = expiring(State::Unknown, Certainty::Unknown);
        let dead = expiring(State::Failed, Certainty::Known);
        let ambiguous = [attempt(&unknown, AttemptResult::Ambiguous, None)];
        let mut expired = attempt(&dead, AttemptResult::Rejected, Some(true));
        expired.evidence = json!({"stage": herald_provider::EXPIRED_STAGE, "detail": "expired"});
        let expired = [expired];
        assert_eq!(reason(&dead, &expired), Some(Reason::Rejected));
        assert_eq!(not_made(&expired), Some("expired"));
        for (n, history) in [(&unknown, &ambiguous[..]), (&dead, &expired[..])] {
            let refused = resolve(n, history, &resend(false), None, T0).unwrap_err();
            assert!(
                refused.0.contains("expired at 2026-11-30T12:00:00Z"),
                "{refused:?}"
            );
            let change = resolve(n, history, &resend(true), None, T0).unwrap();
            assert!(change.forced);
            assert!(change.resend.is_some_and(|r| r.lift_expiry));
            // Before the expiry, nothing needs forcing and nothing is lifted.
            let earlier = T0 - time::Duration::seconds(1);
            if n.state == State::Unknown {
                let change = resolve(n, history, &resend(false), None, earlier).unwrap();
                assert!(!change.forced);
                assert!(change.resend.is_some_and(|r| !r.lift_expiry));
            }
        }
    }

    #[test]
    fn permanent_refusals_wait_for_a_person_only_where_configured() {
        let default = Policy::default();
        assert_eq!(default.waiting(), Reason::WAITING);
        assert!(!default.waits(Reason::Rejected));
        assert!(default.waits(Reason::Exhausted));
        let review = Policy {
            permanent_refusals: PermanentRefusals::Review,
        };
        assert!(review.waits(Reason::Rejected));
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
        assert!(parse_note("  ").is_err());
        assert_eq!(parse_note(" seen it ").unwrap(), "seen it");
        assert!(Ask::new(Outcome::NotDelivered, None, false).is_err());
        assert!(Ask::new(Outcome::Delivered, Some(Then::Close), false).is_err());
        assert!(Ask::new(Outcome::NotDelivered, Some(Then::Close), false).is_ok());
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
        assert!(why(Reason::Exhausted, &dead, &transient).contains("may pass"));
        assert!(
            why(Reason::Exhausted, &dead, &transient).contains("after 1 attempt for"),
            "one attempt, not attempt(s)"
        );
        let unknown = notification(State::Unknown, Some(Certainty::Unknown));
        let ambiguous = [attempt(&unknown, AttemptResult::Ambiguous, None)];
        assert!(why(Reason::Unknown, &unknown, &ambiguous).starts_with("1 ambiguous attempt that"));
    }

    #[test]
    fn a_reopened_notification_waits_as_contradicted_until_acknowledged() {
        let reopened = Notification {
            contradiction: Some(crate::domain::Contradiction {
                why: "route `r`'s vendor reported a message sent under key k".into(),
                at: T0,
            }),
            ..notification(State::Delivered, Some(Certainty::Known))
        };
        let history = [attempt(&reopened, AttemptResult::Ambiguous, None)];
        assert_eq!(reason(&reopened, &history), Some(Reason::Contradicted));
        assert!(Policy::default().waits(Reason::Contradicted));
        assert!(
            why(Reason::Contradicted, &reopened, &history)
                .starts_with("reopened as delivered/known: route `r`'s vendor reported")
        );
        for refused in [
            ask(Outcome::Delivered, None, false),
            ask(Outcome::NotDelivered, Some(Then::Resend), true),
            ask(Outcome::NotDelivered, Some(Then::Close), false),
        ] {
            assert!(
                resolve(&reopened, &history, &refused, None, T0).is_err(),
                "{refused:?}: a delivery report is never resent, nor denied"
            );
        }
        let change = resolve(
            &reopened,
            &history,
            &ask(Outcome::Acknowledged, None, false),
            None,
            T0,
        )
        .unwrap();
        assert_eq!(
            (
                change.state,
                change.certainty,
                change.acknowledged,
                change.resend
            ),
            (State::Delivered, Some(Certainty::Known), true, None)
        );
        let acknowledged = Notification {
            acknowledged: true,
            ..reopened
        };
        assert_eq!(reason(&acknowledged, &history), None);
    }

    #[test]
    fn one_reopened_as_unknown_waits_as_unknown_once_acknowledged_and_says_why() {
        let maybe = "attempt 1's worker was held up past its send deadline";
        let reopened = Notification {
            acknowledged: true,
            contradiction: Some(crate::domain::Contradiction {
                why: maybe.into(),
                at: T0,
            }),
            ..notification(State::Unknown, Some(Certainty::Unknown))
        };
        let settled = [Attempt {
            settled_by: Some(SettledBy::OutcomeQuery),
            ..attempt(&reopened, AttemptResult::Ambiguous, None)
        }];
        assert_eq!(reason(&reopened, &settled), Some(Reason::Unknown));
        let why = why(Reason::Unknown, &reopened, &settled);
        assert!(why.starts_with(&format!("reopened: {maybe}")), "{why}");
    }
}
