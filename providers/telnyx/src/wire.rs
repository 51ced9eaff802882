//! Telnyx's HTTP contract as far as herald uses it: the path, headers and JSON bodies of
//! `POST /v2/messages` and of its message webhooks, shared by the adapter and the fake so that
//! the two cannot drift apart.
//!
//! Sources: <https://developers.telnyx.com/api/messaging/send-message> (as the `telnyx` SDK,
//! generated from Telnyx's API description, sends it: `Idempotency-Key` among its headers),
//! <https://developers.telnyx.com/docs/development/api-fundamentals/idempotency>,
//! <https://developers.telnyx.com/docs/messaging/messages/error-codes> and
//! <https://developers.telnyx.com/docs/messaging/messages/advanced-opt-in-out>.

use serde::{Deserialize, Serialize};

/// The send endpoint, below the base URL (which ends in `/v2`).
pub const MESSAGES_PATH: &str = "/messages";
/// The request header that carries the idempotency key (`^[A-Za-z0-9_:-]{1,255}$`).
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The webhook's signature header: base64 of an Ed25519 signature of `{timestamp}|{body}`.
pub const SIGNATURE: &str = "telnyx-signature-ed25519";
/// The webhook's timestamp header: unix seconds.
pub const TIMESTAMP: &str = "telnyx-timestamp";
/// The query parameter herald adds to each message's `webhook_url`: Telnyx echoes the URL in
/// every signed webhook about the message, so the key comes back authenticated.
pub const KEY_PARAM: &str = "herald_key";
/// The error code of a send to a recipient who texted STOP.
pub const BLOCKED_BY_STOP: &str = "40300";

/// Whether `key` matches `^[A-Za-z0-9_:-]{1,255}$`, the form Telnyx takes.
pub fn is_idempotency_key(key: &str) -> bool {
    (1..=255).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b':' | b'-'))
}

/// `POST /v2/messages` as the adapter writes it.
#[derive(Debug, Serialize)]
pub struct SendMessage<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messaging_profile_id: Option<&'a str>,
    pub to: &'a str,
    /// Absent only if herald's message has none, and then Telnyx refuses the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
}

/// Every answer: `{"data": {…}}` on success, `{"errors": [{"code", "title", "detail"}]}` else.
#[derive(Debug, Serialize, Deserialize)]
pub struct Answer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Message>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<Error>,
}

/// A message, as far as herald reads it (in an answer and in a webhook's `payload`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<Recipient>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<Error>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Recipient {
    pub phone_number: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Error {
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Answer {
    /// The first error's code (`"40300"`), where the answer has one.
    pub fn code_of(body: &str) -> Option<String> {
        serde_json::from_str::<Answer>(body)
            .ok()?
            .errors
            .into_iter()
            .find_map(|error| error.code)
    }
}
