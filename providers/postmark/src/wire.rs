//! Postmark's HTTP contract as far as herald uses it: the paths, header and JSON bodies of
//! `POST /email` and `GET /messages/outbound`, shared by the adapter and the fake so that the
//! two cannot drift apart.
//!
//! Sources: <https://postmarkapp.com/developer/api/email-api>,
//! <https://postmarkapp.com/developer/api/messages-api>,
//! <https://postmarkapp.com/developer/api/overview> (statuses and error codes) and the custom
//! metadata FAQ <https://postmarkapp.com/support/article/1125-custom-metadata-faq> (search by
//! `metadata_<key>`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The send endpoint, below the base URL.
pub const EMAIL_PATH: &str = "/email";
/// The outbound message search, below the base URL.
pub const OUTBOUND_PATH: &str = "/messages/outbound";
/// The header that carries the server token.
pub const SERVER_TOKEN: &str = "x-postmark-server-token";
/// The metadata entry that carries herald's provider key: the search finds a message by it, and
/// every webhook about the message echoes it.
pub const KEY_METADATA: &str = "herald_key";
/// The search parameter that filters by [`KEY_METADATA`].
pub const KEY_FILTER: &str = "metadata_herald_key";

/// `ErrorCode` 0: the message was accepted.
pub const OK: i64 = 0;
/// `ErrorCode` 406: the recipient is inactive (it bounced hard, complained or unsubscribed).
pub const INACTIVE_RECIPIENT: i64 = 406;

/// `POST /email` as the adapter writes it, borrowed from herald's message.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct SendEmail<'a> {
    pub from: &'a str,
    pub to: &'a str,
    /// Comma-separated, as Postmark takes them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cc: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bcc: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub html_body: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text_body: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<Header<'a>>,
    pub metadata: BTreeMap<&'a str, &'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment<'a>>,
    pub message_stream: &'a str,
}

/// A file attached to the email.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Attachment<'a> {
    pub name: &'a str,
    /// Base64: herald's placeholder in the stored request, the content once a send expands it.
    pub content: String,
    pub content_type: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Header<'a> {
    pub name: &'a str,
    pub value: &'a str,
}

/// Every answer to `POST /email`, and every error answer:
/// `{"ErrorCode", "Message", "MessageID", "SubmittedAt", "To"}`, the last three on success.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Answer {
    pub error_code: i64,
    #[serde(default)]
    pub message: String,
    #[serde(rename = "MessageID", default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// A page of the outbound message search.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct MessageList {
    pub total_count: u64,
    pub messages: Vec<Listed>,
}

/// A listed message, as far as the look-up reads it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Listed {
    #[serde(rename = "MessageID")]
    pub message_id: String,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}
