//! Resend's HTTP contract as far as herald uses it: the path, header names and JSON bodies of
//! `POST /emails`, shared by the adapter and the fake so that the two cannot drift apart.
//!
//! Source: <https://resend.com/docs/api-reference/emails/send-email> and
//! <https://resend.com/docs/api-reference/errors>.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The send endpoint, below the base URL.
pub const EMAILS_PATH: &str = "/emails";
/// The request header that carries the idempotency key (1–256 characters, kept 24 hours).
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Seconds until the rate-limit window resets; sent with every answer, including a 429.
pub const RATELIMIT_RESET: &str = "ratelimit-reset";
/// The error `name` of a repeat whose first request with the same key is still in progress.
pub const CONCURRENT_IDEMPOTENT_REQUESTS: &str = "concurrent_idempotent_requests";
/// The error `name` of a repeated key whose first request had another payload.
pub const INVALID_IDEMPOTENT_REQUEST: &str = "invalid_idempotent_request";
/// The longest idempotency key Resend takes.
#[cfg(feature = "fake")]
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 256;

/// The tag that carries herald's provider key: Resend echoes an email's tags in every webhook
/// event about it, so the key names the notification's attempts.
pub const KEY_TAG: &str = "herald_key";

/// `POST /emails` as the adapter writes it, borrowed from herald's message.
#[derive(Debug, Serialize)]
pub struct SendEmail<'a> {
    pub from: &'a str,
    pub to: [&'a str; 1],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub cc: &'a [String],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub bcc: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<&'a str>,
    /// Required by Resend; absent only if herald's message has none, and then Resend refuses
    /// the request (422 `missing_required_field`) rather than the adapter guessing one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub html: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Tag<'a>>,
    /// Custom headers, name → value.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment<'a>>,
}

/// A file attached to the email. Resend also takes a `path` to fetch it from; herald always
/// sends the content.
#[derive(Debug, Serialize)]
pub struct Attachment<'a> {
    pub filename: &'a str,
    /// Base64: herald's placeholder in the stored request, the content once a send expands it.
    pub content: String,
    /// Resend derives one from the filename when it is missing; herald always names it.
    pub content_type: &'a str,
}

/// A Resend email tag: name and value of ASCII letters, digits, `_` and `-`, at most 256 each.
#[derive(Debug, Serialize)]
pub struct Tag<'a> {
    pub name: &'a str,
    pub value: &'a str,
}

/// The answer to an accepted (or replayed) `POST /emails`.
#[derive(Debug, Serialize, Deserialize)]
pub struct SentEmail {
    pub id: String,
}

/// Every error answer: `{"statusCode": 422, "name": "missing_required_field", "message": "…"}`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    #[serde(default)]
    pub status_code: Option<u16>,
    pub name: String,
    #[serde(default)]
    pub message: String,
}

/// Whether `s` may be a tag name or value
/// (<https://resend.com/docs/api-reference/emails/send-email>).
pub fn is_tag_text(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
