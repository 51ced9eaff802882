//! SparkPost's HTTP contract as far as herald uses it: the path, header names, error codes and
//! JSON bodies of `POST /transmissions`, shared by the adapter and the fake so that the two
//! cannot drift apart.
//!
//! Sources: <https://developers.sparkpost.com/api/transmissions/> (the request, its answer, the
//! sending limits), <https://developers.sparkpost.com/api/#header-errors> (the error shape and
//! statuses) and SparkPost's documentation of `Idempotency-Key`
//! (github.com/SparkPost/developers.sparkpost.com, pull request 590, merged 2026-08).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The send endpoint, below the base URL (which ends in `/api/v1`).
pub const TRANSMISSIONS_PATH: &str = "/transmissions";
/// The request header that carries the idempotency key (`^[A-Za-z0-9._-]{1,255}$`, kept 24 h).
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// On an answer replayed for a repeated key and payload: `true`.
#[cfg(feature = "fake")]
pub const IDEMPOTENT_REPLAYED: &str = "x-idempotent-replayed";
/// The error code of a repeated key whose first request had another payload (409).
pub const KEY_REUSED: &str = "1600";
/// The error code of a repeated key whose first request is still in progress (409).
pub const KEY_IN_PROGRESS: &str = "1601";

/// The metadata entry that carries herald's provider key: SparkPost puts a transmission's
/// metadata into every event about its messages (`rcpt_meta`), so the key names the
/// notification's attempts.
pub const KEY_METADATA: &str = "herald_key";

/// Whether `key` matches `^[A-Za-z0-9._-]{1,255}$`, the form SparkPost takes.
pub fn is_idempotency_key(key: &str) -> bool {
    (1..=255).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `POST /transmissions` as the adapter writes it, borrowed from herald's message: one
/// transmission per notification, its recipient first, then each CC and BCC as a recipient of
/// its own whose `header_to` names the first (how SparkPost documents CC and BCC over REST).
#[derive(Debug, Serialize)]
pub struct Transmission<'a> {
    pub recipients: Vec<Recipient<'a>>,
    pub content: Content<'a>,
    /// Herald's key and notification id, and the message's tags: SparkPost echoes them in every
    /// event about the transmission's messages.
    pub metadata: BTreeMap<&'a str, &'a str>,
}

#[derive(Debug, Serialize)]
pub struct Recipient<'a> {
    pub address: Address<'a>,
}

#[derive(Debug, Serialize)]
pub struct Address<'a> {
    pub email: &'a str,
    /// For a CC or BCC recipient: the address the `To` header shows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_to: Option<&'a str>,
}

/// The sender as an object: SparkPost documents a bare address as the string form, so a
/// display name goes in `name`.
#[derive(Debug, Serialize)]
pub struct Sender<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    pub email: &'a str,
}

/// Inline content.
#[derive(Debug, Serialize)]
pub struct Content<'a> {
    pub from: Sender<'a>,
    /// Required by SparkPost; absent only if herald's message has none, and then SparkPost
    /// refuses the request (422) rather than the adapter guessing one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub html: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<&'a str>,
    /// Headers other than `Subject`, `From`, `To` and `Reply-To`, name → value; a CC list is
    /// the `CC` header.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<&'a str, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment<'a>>,
}

/// A file attached to the email.
#[derive(Debug, Serialize)]
pub struct Attachment<'a> {
    /// The filename, at most 255 bytes.
    pub name: &'a str,
    /// The MIME type, used as it is for the part's `Content-Type`.
    #[serde(rename = "type")]
    pub kind: &'a str,
    /// Base64 without line breaks: herald's placeholder in the stored request, the content once
    /// a send expands it.
    pub data: String,
}

/// The answer to an accepted (or replayed) transmission.
#[derive(Debug, Serialize, Deserialize)]
pub struct Accepted {
    pub results: Results,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub id: String,
    pub total_accepted_recipients: u64,
    pub total_rejected_recipients: u64,
}

/// Every error answer: `{"errors": [{"message", "description", "code"}]}`.
#[derive(Debug, Deserialize)]
pub struct ErrorBody {
    pub errors: Vec<Error>,
}

#[derive(Debug, Deserialize)]
pub struct Error {
    #[serde(default)]
    pub code: Option<String>,
}

impl ErrorBody {
    /// The first error's code (`"1600"`), where the answer has one.
    pub fn code_of(body: &str) -> Option<String> {
        serde_json::from_str::<ErrorBody>(body)
            .ok()?
            .errors
            .into_iter()
            .find_map(|error| error.code)
    }
}
