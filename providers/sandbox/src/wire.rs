//! The sandbox's HTTP contract: header names and JSON bodies, shared by the server and the adapter.
//!
//! One definition serves both sides so that a change to the vendor's API cannot leave the
//! adapter speaking an older dialect; the integration tests still go over real HTTP.

use std::collections::BTreeMap;
use std::time::Duration;

use herald_provider::Channel;
use serde::{Deserialize, Serialize};

use std::fmt;
use std::str::FromStr;

/// Which capability the sandbox offers, so that each of herald's reconciliation paths can be
/// exercised against a vendor that has exactly that one and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
// One parser, `FromStr`, for the CLI, the config and the wire: each says the same when it fails.
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum Profile {
    /// `Idempotency-Key` deduplicates within the window; no outcome query.
    Idempotent,
    /// `GET /messages?reference=…` lists deliveries after the visibility lag; no deduplication.
    Queryable,
    /// Neither: every request that is processed is a new delivery, and nothing can be asked.
    Plain,
}

impl Profile {
    pub const ALL: [Profile; 3] = [Profile::Idempotent, Profile::Queryable, Profile::Plain];

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Idempotent => "idempotent",
            Profile::Queryable => "queryable",
            Profile::Plain => "plain",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Profile {
    type Err = UnknownProfile;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Profile::ALL
            .into_iter()
            .find(|profile| profile.as_str() == s)
            .ok_or_else(|| UnknownProfile(s.to_owned()))
    }
}

impl TryFrom<String> for Profile {
    type Error = UnknownProfile;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown sandbox profile `{0}`: expected idempotent, queryable or plain")]
pub struct UnknownProfile(pub String);

/// The request header that carries the caller's idempotency key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Set to `true` on an answer that repeats a stored one instead of delivering again.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// On every answer: what this sandbox offers (see [`Offer`]), so that a client can check each
/// answer against what it was told to expect.
pub const CAPABILITIES: &str = "sandbox-capabilities";
/// The error `code` of a `POST /messages` refused because its idempotency key was used before
/// with another body (422): the earlier request was processed, this one was not.
pub const KEY_REUSED: &str = "idempotency_key_reused";

/// The largest `POST /messages` body the sandbox reads; larger ones get 413, unprocessed. Room
/// for herald's largest attachments (10 MiB by default, a third more in base64).
pub const MAX_MESSAGE_BYTES: usize = 20 << 20;

/// `POST /messages` as the adapter writes it: borrowed from herald's message, never copied.
#[derive(Debug, Serialize)]
pub struct SendBody<'a> {
    pub reference: &'a str,
    pub channel: Channel,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<&'a str>,
    pub to: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub html: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub cc: &'a [String],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub bcc: &'a [String],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<AttachmentOut<'a>>,
}

/// An email attachment in `POST /messages`, as JSON vendors take one: its content in base64
/// (herald's placeholder until the send expands it).
#[derive(Debug, Serialize)]
pub struct AttachmentOut<'a> {
    pub filename: &'a str,
    pub content_type: &'a str,
    pub content: String,
}

/// `POST /messages` as the server reads it. Only what the server checks is kept: the rest of
/// the message is "delivered" by being counted, so its content does not matter here.
#[derive(Debug, Deserialize)]
pub struct MessageIn {
    pub reference: String,
    /// Parsed so that an unknown channel is refused, as a vendor would refuse it.
    pub channel: Channel,
    pub to: String,
    /// Decoded so that content that is not base64 is refused, and recorded in the ledger.
    #[serde(default)]
    pub attachments: Vec<AttachmentIn>,
}

#[derive(Debug, Deserialize)]
pub struct AttachmentIn {
    pub filename: String,
    pub content_type: String,
    /// Base64.
    pub content: String,
}

/// The answer to an accepted (or replayed) `POST /messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcceptedBody {
    pub id: String,
    pub reference: String,
    pub status: String,
}

/// The answer to `GET /messages?reference=…`.
#[derive(Debug, Serialize, Deserialize)]
pub struct DeliveryList {
    pub data: Vec<DeliveryItem>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DeliveryItem {
    pub id: String,
    pub reference: String,
    /// RFC 3339.
    pub accepted_at: String,
}

/// A delivery report the sandbox posts to its callback URL, one event per request, signed as
/// Standard Webhooks (`webhook-id` is the event's id, the same on every repeat of it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallbackBody {
    /// The `reference` of the message (herald's provider key).
    pub reference: String,
    /// The sandbox's id of the message.
    pub message_id: String,
    pub to: String,
    /// `sent`, `delivered`, `bounced` (a hard bounce) or `complained`.
    pub status: String,
    /// RFC 3339: when it happened.
    pub at: String,
}

/// What the sandbox reports about a delivery, in the order it happens: addresses containing
/// `bounce` bounce, those containing `complain` complain after delivery, the rest are sent and
/// delivered. (Test addresses choose their fate, as Postmark's and Resend's test inboxes do.)
pub fn reports_for(to: &str) -> &'static [&'static str] {
    if to.contains("bounce") {
        &["sent", "bounced"]
    } else if to.contains("complain") {
        &["sent", "delivered", "complained"]
    } else {
        &["sent", "delivered"]
    }
}

/// What a sandbox offers, as its [`CAPABILITIES`] header says it:
/// `profile=idempotent; window_ms=86400000; lag_ms=0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    pub profile: Profile,
    pub idempotency_window: Duration,
    pub visibility_lag: Duration,
}

impl Offer {
    pub fn header_value(&self) -> String {
        format!(
            "profile={}; window_ms={}; lag_ms={}",
            self.profile,
            self.idempotency_window.as_millis(),
            self.visibility_lag.as_millis()
        )
    }

    /// Reads a [`CAPABILITIES`] header; `None` if it is not one.
    pub fn parse(header: &str) -> Option<Offer> {
        let (mut profile, mut window, mut lag) = (None, None, None);
        for pair in header.split(';') {
            let (name, value) = pair.trim().split_once('=')?;
            match name {
                "profile" => profile = value.parse().ok(),
                "window_ms" => window = value.parse().ok().map(Duration::from_millis),
                "lag_ms" => lag = value.parse().ok().map(Duration::from_millis),
                _ => {}
            }
        }
        Some(Offer {
            profile: profile?,
            idempotency_window: window?,
            visibility_lag: lag?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offer_reads_back_what_it_writes() {
        let offer = Offer {
            profile: Profile::Queryable,
            idempotency_window: Duration::from_secs(60),
            visibility_lag: Duration::from_millis(250),
        };
        assert_eq!(
            offer.header_value(),
            "profile=queryable; window_ms=60000; lag_ms=250"
        );
        assert_eq!(Offer::parse(&offer.header_value()), Some(offer));
        assert_eq!(Offer::parse("profile=plain"), None);
        assert_eq!(Offer::parse("nonsense"), None);
    }
}
