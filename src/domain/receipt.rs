//! What herald hears after a send: delivery receipts from vendor callbacks, and the recipients
//! it must not send to again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::{Attempt, AttemptResult, Channel};
pub use herald_provider::callback::ReceiptStatus;

/// One step of a notification's receipt history. The history only moves forward; its last
/// step is the notification's `receipt`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Receipt {
    pub status: ReceiptStatus,
    /// When the vendor says it happened (when herald heard of it, if the vendor does not say).
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub at: OffsetDateTime,
    /// Who said it: `callback:<route>`.
    pub source: String,
    /// The vendor's own word for it.
    pub vendor_status: String,
}

/// Why a recipient is suppressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SuppressionReason {
    /// A hard bounce: the address does not exist.
    Bounced,
    /// The recipient marked a message as spam.
    Complained,
    /// The recipient asked the vendor to stop (an SMS STOP, an unsubscribe link).
    Unsubscribed,
    /// A person added it through the API.
    Manual,
}

impl SuppressionReason {
    pub const ALL: [SuppressionReason; 4] = [
        SuppressionReason::Bounced,
        SuppressionReason::Complained,
        SuppressionReason::Unsubscribed,
        SuppressionReason::Manual,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SuppressionReason::Bounced => "bounced",
            SuppressionReason::Complained => "complained",
            SuppressionReason::Unsubscribed => "unsubscribed",
            SuppressionReason::Manual => "manual",
        }
    }

    pub fn parse(s: &str) -> Option<SuppressionReason> {
        SuppressionReason::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The reason a callback's suppressing event gives.
    pub fn of_receipt(status: ReceiptStatus) -> SuppressionReason {
        match status {
            ReceiptStatus::Bounced | ReceiptStatus::Undeliverable => SuppressionReason::Bounced,
            ReceiptStatus::Complained => SuppressionReason::Complained,
            ReceiptStatus::None | ReceiptStatus::Sent | ReceiptStatus::Delivered => {
                SuppressionReason::Unsubscribed
            }
        }
    }
}

/// A recipient a tenant's notifications on one channel are not sent to.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Suppression {
    #[schema(schema_with = super::notification::channel_schema)]
    pub channel: Channel,
    pub recipient: String,
    /// Only notifications of this category (a one-click unsubscribe from it); `null`: every
    /// notification to the recipient on the channel.
    pub category: Option<String>,
    pub reason: SuppressionReason,
    /// Who added it: `callback:<route>`, `send:<route>` (the vendor refused the recipient), or
    /// the principal of the token that added it by hand.
    pub source: String,
    /// What showed it: the vendor's event or answer, or nothing for one added by hand.
    #[schema(value_type = Object)]
    pub evidence: Value,
    pub note: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
}

/// The form in which a recipient is suppressed and looked up: email addresses compare without
/// regard to case (every mailbox provider herald reaches treats them so), everything else as
/// written.
pub fn suppression_recipient(channel: Channel, to: &str) -> String {
    match channel {
        Channel::Email => to.trim().to_lowercase(),
        Channel::Sms | Channel::Push | Channel::Webhook | Channel::Chat => to.trim().to_owned(),
    }
}

/// The attempts that a callback naming provider key `key` on `route` settles: its unsettled
/// ambiguous attempts under that key. Where the vendor deduplicates the key and every send under
/// it fell within its `idempotency_window` (so it delivered one message for them all), all of
/// them; otherwise only a lone one that no other
/// unrefused send under the same key stands beside, because two sends under one key may both
/// have delivered and one report cannot say which.
pub fn settled_by_callback(
    attempts: &[Attempt],
    route: &str,
    key: &str,
    idempotency_window: Option<Duration>,
) -> Vec<i32> {
    let same_key = || {
        attempts
            .iter()
            .filter(|a| a.route == route && a.provider_idempotency_key == key)
    };
    let unsettled: Vec<i32> = same_key()
        .filter(|a| a.result == AttemptResult::Ambiguous && a.settled_by.is_none())
        .map(|a| a.n)
        .collect();
    // Refused sends delivered nothing; anything else under the key (accepted, in flight,
    // ambiguous) may have.
    let may_have_delivered = same_key()
        .filter(|a| a.result != AttemptResult::Rejected)
        .count();
    let first = same_key().map(|a| a.started_at).min();
    let last = same_key().map(|a| a.started_at).max();
    let deduplicated = match (idempotency_window, first, last) {
        (Some(window), Some(first), Some(last)) => last - first < window,
        _ => false,
    };
    if deduplicated || (unsettled.len() == 1 && may_have_delivered == 1) {
        unsettled
    } else {
        Vec::new()
    }
}

/// A message a vendor reported: on which route, under which of herald's provider keys, and the
/// vendor's own id of it where the report named one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    pub route: String,
    pub key: String,
    pub message: Option<String>,
}

/// How many messages the vendors may hold for a notification once `settled` are settled as
/// accepted, given the messages that vendors' reports named: each (route, provider key) pair
/// that a report names or whose send may have been taken counts once, and once more for each
/// further vendor id seen under it (a vendor that does not deduplicate by key made two
/// messages). `None` while an ambiguous attempt is still unsettled, for then nothing is
/// proven. One means the reports prove exactly one delivery; more, that the recipient may
/// have several.
pub fn messages_proven(
    attempts: &[Attempt],
    settled: &[i32],
    reported: &[Reported],
) -> Option<usize> {
    let mut messages: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut ids: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for r in reported {
        let pair = (r.route.as_str(), r.key.as_str());
        messages.insert(pair);
        if let Some(id) = &r.message {
            ids.entry(pair).or_default().insert(id);
        }
    }
    for a in attempts {
        let taken = match a.result {
            AttemptResult::Accepted => true,
            AttemptResult::Ambiguous if settled.contains(&a.n) => true,
            // A send still in flight, or an ambiguity unsettled, may add a message.
            AttemptResult::InFlight => return None,
            AttemptResult::Ambiguous if a.settled_by.is_none() => return None,
            AttemptResult::Ambiguous => a.evidence["settlement"]["outcome"] != "not_accepted",
            AttemptResult::Rejected => false,
        };
        if taken {
            let pair = (a.route.as_str(), a.provider_idempotency_key.as_str());
            messages.insert(pair);
            if let Some(id) = &a.provider_ref {
                ids.entry(pair).or_default().insert(id);
            }
        }
    }
    let further: usize = ids.values().map(|ids| ids.len().saturating_sub(1)).sum();
    Some(messages.len() + further)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use time::macros::datetime;

    use super::*;
    use crate::domain::SettledBy;

    fn attempt(n: i32, route: &str, key: &str, result: AttemptResult) -> Attempt {
        Attempt {
            n,
            route: route.into(),
            provider_idempotency_key: key.into(),
            started_at: datetime!(2026-12-01 10:00 UTC) + time::Duration::seconds(i64::from(n)),
            send_deadline: datetime!(2026-12-01 10:00 UTC) + time::Duration::seconds(i64::from(n)),
            finished_at: None,
            result,
            permanent: None,
            provider_ref: None,
            settled_by: None,
            evidence: json!({}),
        }
    }

    fn reported(pairs: &[(&str, &str)]) -> Vec<Reported> {
        pairs
            .iter()
            .map(|(r, k)| Reported {
                route: (*r).into(),
                key: (*k).into(),
                message: None,
            })
            .collect()
    }

    #[test]
    fn a_report_settles_a_lone_send_or_every_send_a_vendor_deduplicated() {
        use AttemptResult::*;
        let lone = [
            attempt(1, "a", "k", Rejected),
            attempt(2, "a", "k", Ambiguous),
        ];
        assert_eq!(settled_by_callback(&lone, "a", "k", None), [2]);
        assert!(
            settled_by_callback(&lone, "b", "k", None).is_empty(),
            "another route's"
        );
        assert!(
            settled_by_callback(&lone, "a", "k2", None).is_empty(),
            "another key's"
        );
        // Two sends under one key to a vendor that keeps no keys: both may have delivered.
        let twice = [
            attempt(1, "a", "k", Ambiguous),
            attempt(2, "a", "k", Ambiguous),
        ];
        assert!(settled_by_callback(&twice, "a", "k", None).is_empty());
        assert_eq!(
            settled_by_callback(&twice, "a", "k", Some(Duration::from_secs(60))),
            [1, 2]
        );
        assert!(
            settled_by_callback(&twice, "a", "k", Some(Duration::from_millis(500))).is_empty(),
            "the second send came after the window"
        );
        let beside_an_acceptance = [
            attempt(1, "a", "k", Ambiguous),
            attempt(2, "a", "k", Accepted),
        ];
        assert!(settled_by_callback(&beside_an_acceptance, "a", "k", None).is_empty());
    }

    #[test]
    fn reports_prove_one_message_only_where_nothing_else_may_have_delivered() {
        use AttemptResult::*;
        let failover = [
            attempt(1, "a", "k", Ambiguous),
            attempt(2, "b", "k-f1", Ambiguous),
        ];
        assert_eq!(
            messages_proven(&failover, &[1], &reported(&[("a", "k")])),
            None,
            "b unsettled"
        );
        assert_eq!(
            messages_proven(&failover, &[1, 2], &reported(&[("a", "k"), ("b", "k-f1")])),
            Some(2),
            "each vendor delivered one"
        );
        // A person said "not delivered"; the vendor's report says otherwise, and counts.
        let mut overruled = attempt(1, "a", "k", Ambiguous);
        overruled.settled_by = Some(SettledBy::Review);
        overruled.evidence = json!({"settlement": {"outcome": "not_accepted"}});
        let resent = [overruled, attempt(2, "a", "k-1", Ambiguous)];
        assert_eq!(
            messages_proven(&resent, &[2], &reported(&[("a", "k"), ("a", "k-1")])),
            Some(2)
        );
        assert_eq!(
            messages_proven(&resent, &[2], &reported(&[("a", "k-1")])),
            Some(1)
        );
        // Two vendor ids under one key: a vendor that does not deduplicate made two.
        let mut ids = reported(&[("a", "k"), ("a", "k")]);
        ids[0].message = Some("SM1".into());
        ids[1].message = Some("SM2".into());
        assert_eq!(
            messages_proven(&[attempt(1, "a", "k", Ambiguous)], &[1], &ids),
            Some(2)
        );
        let mut accepted = attempt(1, "a", "k", Accepted);
        accepted.provider_ref = Some("SM1".into());
        assert_eq!(
            messages_proven(&[accepted], &[], &ids[..1]),
            Some(1),
            "the report names the message the send's answer named"
        );
        let in_flight = [
            attempt(1, "a", "k", Ambiguous),
            attempt(2, "a", "k", InFlight),
        ];
        assert_eq!(
            messages_proven(&in_flight, &[1], &reported(&[("a", "k")])),
            None
        );
    }
}
