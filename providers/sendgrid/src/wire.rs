//! SendGrid's HTTP contract as far as herald uses it: the paths, headers and JSON bodies of
//! `POST /v3/mail/send` and `GET /v3/messages` (Email Activity), shared by the adapter and the
//! fake so that the two cannot drift apart.
//!
//! Sources: <https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send>,
//! <https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/errors>,
//! <https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/rate-limits>
//! and <https://www.twilio.com/docs/sendgrid/api-reference/email-activity/filter-all-messages>.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The send endpoint, below the base URL.
pub const MAIL_SEND_PATH: &str = "/v3/mail/send";
/// The Email Activity message filter, below the base URL.
pub const MESSAGES_PATH: &str = "/v3/messages";
/// The answer header with the id of the accepted message.
pub const MESSAGE_ID: &str = "x-message-id";
/// The unix time at which the rate-limit window resets.
pub const RATELIMIT_RESET: &str = "x-ratelimit-reset";

/// The custom argument that carries herald's provider key: the Email Activity query finds the
/// message by it, and every event about the message carries it.
pub const KEY_ARG: &str = "herald_key";

/// `POST /v3/mail/send` as the adapter writes it: one personalization, herald's recipient.
#[derive(Debug, Serialize)]
pub struct MailSend<'a> {
    pub personalizations: [Personalization<'a>; 1],
    pub from: Address<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<Address<'a>>,
    /// Required by SendGrid unless a template gives one; absent only if herald's message has
    /// none, and then SendGrid refuses the request (400) rather than the adapter guessing one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<&'a str>,
    pub content: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment<'a>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: &'a BTreeMap<String, String>,
}

#[derive(Debug, Serialize)]
pub struct Personalization<'a> {
    pub to: [Address<'a>; 1],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cc: Vec<Address<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bcc: Vec<Address<'a>>,
    /// Herald's key and the message's tags: SendGrid carries them with the email and its
    /// events.
    pub custom_args: BTreeMap<&'a str, &'a str>,
}

#[derive(Debug, Serialize)]
pub struct Address<'a> {
    pub email: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct Content<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub value: &'a str,
}

/// A file attached to the email; its `disposition` is SendGrid's default, `attachment`.
#[derive(Debug, Serialize)]
pub struct Attachment<'a> {
    /// Base64: herald's placeholder in the stored request, the content once a send expands it.
    pub content: String,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub filename: &'a str,
}

/// A page of the Email Activity filter.
#[derive(Debug, Serialize, Deserialize)]
pub struct MessageList {
    pub messages: Vec<Listed>,
}

/// A listed message, as far as the look-up reads it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Listed {
    pub msg_id: String,
    #[serde(default)]
    pub status: Option<String>,
}

/// The Email Activity query that finds the messages carrying `key` as herald's custom argument.
pub fn key_query(key: &str) -> String {
    format!("unique_args['{KEY_ARG}']=\"{key}\"")
}
