//! The adapter boundary: everything a vendor adapter needs, and nothing of herald's store.
//!
//! An adapter declares its [`Capabilities`] and does two things: [`Adapter::send`] a
//! [`Message`] under a stable [`ProviderKey`], and, where the vendor allows it,
//! [`Adapter::query`] what became of an earlier send. Both answer with [`Evidence`] that herald
//! stores verbatim on the attempt, so an adapter must never put a secret into it.
//!
//! [`http`] classifies HTTP failures by *when* they happened, so that each vendor adapter states
//! only what its vendor documents differently.
#![forbid(unsafe_code)]

#[cfg(feature = "fake")]
pub mod fake;
pub mod http;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The channel a message travels on. Herald's API uses these names verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Email,
    Sms,
    Push,
    Webhook,
}

impl Channel {
    pub const ALL: [Channel; 4] = [
        Channel::Email,
        Channel::Sms,
        Channel::Push,
        Channel::Webhook,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Email => "email",
            Channel::Sms => "sms",
            Channel::Push => "push",
            Channel::Webhook => "webhook",
        }
    }

    pub fn parse(s: &str) -> Option<Channel> {
        Channel::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The idempotency key herald gives the provider. It is stable per notification, not per
/// attempt, so every resend of one notification carries the same key and a vendor that
/// deduplicates can recognise it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProviderKey(String);

impl ProviderKey {
    pub fn new(key: impl Into<String>) -> Self {
        ProviderKey(key.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProviderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What is handed to a vendor: already validated and rendered by herald.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Herald's notification id, for vendors that take a client reference.
    pub notification_id: String,
    pub channel: Channel,
    /// An email address, an E.164 number, a push target or a webhook URL, by channel.
    pub to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
    /// The JSON body of a webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
}

/// What a vendor really offers; herald's reconciliation relies on it, so it must be truthful.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capabilities {
    /// The vendor deduplicates sends that carry the same key, for this long.
    pub idempotency_window: Option<Duration>,
    /// The vendor can be asked what became of a send; a send may take this long to show up.
    pub query_visibility_lag: Option<Duration>,
    /// The largest message the vendor takes, in bytes.
    pub max_payload_bytes: Option<usize>,
}

/// Facts from the vendor's answer (or its absence) that justify a result. Stored on the
/// attempt and shown to people who review it; never holds a credential.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Where the exchange stood when it ended, e.g. `connect`, `response`, `after_data`.
    pub stage: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The vendor's own error code, where it sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_code: Option<String>,
    /// A bounded excerpt of the answer or the error.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Evidence excerpts are cut to this many bytes: enough to diagnose, small enough to store.
pub const EVIDENCE_EXCERPT_BYTES: usize = 512;

impl Evidence {
    pub fn new(stage: impl Into<String>, detail: impl AsRef<str>) -> Self {
        Evidence {
            stage: stage.into(),
            detail: excerpt(detail.as_ref()),
            ..Evidence::default()
        }
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    pub fn with_vendor_code(mut self, code: impl Into<String>) -> Self {
        self.vendor_code = Some(code.into());
        self
    }
}

/// Cuts `s` to at most [`EVIDENCE_EXCERPT_BYTES`] on a character boundary.
pub fn excerpt(s: &str) -> String {
    if s.len() <= EVIDENCE_EXCERPT_BYTES {
        return s.to_owned();
    }
    let mut end = EVIDENCE_EXCERPT_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The outcome of one send, classified at the exact point where the exchange ended.
#[derive(Debug, Clone, PartialEq)]
pub enum SendResult {
    /// The vendor proved it took the message.
    Accepted {
        provider_ref: Option<String>,
        evidence: Evidence,
    },
    /// The vendor proved it did not take the message. `permanent` rejections are not retried.
    Rejected {
        permanent: bool,
        retry_after: Option<Duration>,
        evidence: Evidence,
    },
    /// Nothing proves either way: the request may have been processed.
    Ambiguous { evidence: Evidence },
}

/// What a look-up of an earlier send found.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryResult {
    Accepted {
        provider_ref: Option<String>,
        evidence: Evidence,
    },
    /// The vendor's records prove the send was not taken.
    NotAccepted { evidence: Evidence },
    /// Not visible (yet): proves nothing inside the visibility lag, absence after it.
    NotFoundYet { evidence: Evidence },
    /// The look-up itself failed or the vendor has none; proves nothing.
    Unsupported { evidence: Evidence },
}

/// One configured vendor instance. Implementations live in their own crates under `providers/`
/// and reach nothing of herald but this crate.
#[async_trait::async_trait]
pub trait Adapter: Send + Sync {
    fn capabilities(&self) -> &Capabilities;

    /// Hands `message` to the vendor under `key`. Must return within the adapter's own timeout.
    async fn send(&self, message: &Message, key: &ProviderKey) -> SendResult;

    /// Asks the vendor what became of the send(s) under `key`. Adapters whose capabilities
    /// declare no query keep this default.
    async fn query(&self, _message: &Message, _key: &ProviderKey) -> QueryResult {
        QueryResult::Unsupported {
            evidence: Evidence::new("query", "this provider has no outcome query"),
        }
    }
}
