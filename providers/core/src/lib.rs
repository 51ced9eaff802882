//! The adapter boundary: everything a vendor adapter needs, and nothing of herald's store.
//!
//! An adapter declares its [`Capabilities`] and does three things: [`Adapter::prepare`] the
//! [`Request`] for a [`Message`] (once per notification: herald stores it), send that request
//! under a stable [`ProviderKey`] ([`Adapter::send_prepared`]), and, where the vendor allows it,
//! ask what became of an earlier send ([`Adapter::query_prepared`]). Sends and queries answer
//! with [`Evidence`] that herald stores verbatim on the attempt, so an adapter must never put a
//! secret into it, nor into a request.
//!
//! [`http`] classifies HTTP failures by *when* they happened, so that each vendor adapter states
//! only what its vendor documents differently. The rest of the kit: [`settings`] (a route's
//! table read into a vendor's settings, secrets included), [`callback`] (signed delivery reports
//! read into receipts), [`signature`] (Standard Webhooks signing), [`lookback`] (how far back an
//! outcome look-up can see), [`timeout`] (the deadline a send keeps), [`Attachment`] (an
//! email's files as a vendor takes them), [`Redactor`] (secrets kept out of evidence), and,
//! behind the `fake` feature, [`fake`]'s pieces for a vendor's stand-in in tests.
#![forbid(unsafe_code)]

mod attachment;
pub mod callback;
#[cfg(feature = "fake")]
pub mod fake;
pub mod http;
pub mod lookback;
mod redact;
pub mod settings;
pub mod signature;
pub mod timeout;

pub use attachment::{Attachment, Encoding, PLACEHOLDER_OPEN};
pub use redact::Redactor;

use std::collections::BTreeMap;
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
    /// A message to a team's chat channel (a Slack channel id as the recipient).
    Chat,
}

impl Channel {
    pub const ALL: [Channel; 5] = [
        Channel::Email,
        Channel::Sms,
        Channel::Push,
        Channel::Webhook,
        Channel::Chat,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Email => "email",
            Channel::Sms => "sms",
            Channel::Push => "push",
            Channel::Webhook => "webhook",
            Channel::Chat => "chat",
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
    /// An email address, an E.164 number, a push target, a webhook URL or a chat channel, by
    /// channel.
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
    /// A chat message's layout blocks (a JSON array, Slack's Block Kit), drawn in place of
    /// `text`, which stays the notification's plain form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<serde_json::Value>,
    /// An email's sender, copies, tags and headers beyond the route's own.
    #[serde(default, skip_serializing_if = "EmailOptions::is_empty")]
    pub email: EmailOptions,
    /// herald starts no send after this; a vendor with an expiry of its own may be told the
    /// time left, so that it drops a message it could not hand on in time.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub expires_at: Option<time::OffsetDateTime>,
    /// The W3C `traceparent` of the call this send is part of, where there is one: an adapter
    /// whose vendor reads one passes it on (the webhook adapter as the `traceparent` header).
    /// It changes with every attempt, so it is never part of the stored request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_parent: Option<String>,
}

// The field docs below are also the API document's descriptions (feature `openapi`).
/// The parts of an email besides its recipient and content, as herald's API accepted them:
/// every address checked, the sender one the route allows, tags of letters, digits, `_` and
/// `-`, and headers free of line breaks and of the names an adapter writes itself (sender,
/// recipients, subject, Message-ID, MIME structure). Empty on every other channel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EmailOptions {
    /// Email: the sender, `address` or `Name <address>`, in place of the route's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Email: the reply address, `address` or `Name <address>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// Email: copies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cc: Vec<String>,
    /// Email: blind copies, in the envelope or the vendor's own field, never in a header.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bcc: Vec<String>,
    /// Email: tags, name → value; only vendors that keep tags get any (`Capabilities::tags`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Email: custom headers, name → value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Email: attachments, in the order given; only vendors that take them get any
    /// (`Capabilities::attachments`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

impl EmailOptions {
    pub fn is_empty(&self) -> bool {
        *self == EmailOptions::default()
    }
}

/// Splits a mailbox written `Name <address>` into its display name and address; a bare
/// address has no name. Surrounding quotes of the name are dropped.
pub fn split_mailbox(mailbox: &str) -> (Option<&str>, &str) {
    let mailbox = mailbox.trim();
    match mailbox.strip_suffix('>').and_then(|m| m.rsplit_once('<')) {
        Some((name, address)) => {
            let name = name.trim();
            let name = name
                .strip_prefix('"')
                .and_then(|n| n.strip_suffix('"'))
                .unwrap_or(name)
                .trim();
            ((!name.is_empty()).then_some(name), address.trim())
        }
        None => (None, mailbox),
    }
}

/// What an adapter sends for one notification, fixed when it is first prepared and sent byte
/// for byte on every later attempt. A vendor that deduplicates compares a repeated key with
/// its request, so a replay must repeat the request exactly, whatever herald's configuration or
/// version says by then. Credentials never go in here: an adapter adds them as it sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The body as the vendor receives it.
    pub body: String,
    /// What else the vendor sees as part of the request, besides the body and credentials
    /// (e.g. an SMTP envelope). Most adapters keep nothing here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parts: BTreeMap<String, String>,
}

impl Request {
    pub fn new(body: impl Into<String>) -> Self {
        Request {
            body: body.into(),
            parts: BTreeMap::new(),
        }
    }

    /// A request whose body is `body` as JSON; a failure to encode is a refusal at stage
    /// `request`, before anything was sent.
    pub fn json(body: &impl Serialize) -> Result<Self, Evidence> {
        serde_json::to_string(body)
            .map(Request::new)
            .map_err(|err| Evidence::new("request", format!("cannot encode the message: {err}")))
    }
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
    /// The vendor keeps per-message tags (an email's `tags`); herald refuses them at enqueue
    /// on a route whose vendor would drop them.
    pub tags: bool,
    /// The vendor takes an email's attachments (written with [`Attachment::placeholder`]);
    /// herald refuses them at enqueue on a route whose vendor cannot.
    pub attachments: bool,
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

/// The evidence stage of a send herald did not make because the recipient is suppressed.
pub const SUPPRESSED_STAGE: &str = "suppressed";

/// The evidence stage of a send herald did not make because the notification had expired.
pub const EXPIRED_STAGE: &str = "expired";

/// The evidence stage of a send herald did not make because an operator paused the route and
/// sends its work to the fallback.
pub const ROUTE_PAUSED_STAGE: &str = "route_paused";

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
    /// The vendor refused this request because its key was already used with *another*
    /// request. This request was not processed, but an earlier one under the key was: proof
    /// that an earlier attempt reached the vendor, never a rejection of the notification.
    KeyReused { evidence: Evidence },
}

impl SendResult {
    /// The vendor (or herald, before anything left) refused the message, and a resend cannot
    /// cure it: a bad recipient, a refused credential, a message that does not fit the route.
    pub fn permanent(evidence: Evidence) -> Self {
        SendResult::Rejected {
            permanent: true,
            retry_after: None,
            evidence,
        }
    }

    /// Not taken this time, and worth trying again: after `retry_after` if the vendor said.
    pub fn transient(evidence: Evidence, retry_after: Option<Duration>) -> Self {
        SendResult::Rejected {
            permanent: false,
            retry_after,
            evidence,
        }
    }

    /// Every value [`SendResult::reason`] gives, with the attempt result it goes with: the
    /// series a dashboard can count on finding, at zero before the first attempt.
    pub const REASONS: [(&'static str, &'static str); 13] = [
        ("accepted", "accepted"),
        ("ambiguous", "ambiguous"),
        ("rejected", "key_reused"),
        ("rejected", "circuit_open"),
        ("rejected", "route_paused"),
        ("rejected", "connection_refused"),
        ("rejected", "not_sent_locally"),
        ("rejected", "rate_limited"),
        ("rejected", "vendor_unavailable"),
        ("rejected", "suppressed"),
        ("rejected", "expired"),
        ("rejected", "permanent"),
        ("rejected", "transient"),
    ];

    /// Why the attempt ended so, finer than accepted / rejected / ambiguous: a label an
    /// operator can alert on (a vendor down is not a bad address, a rate limit is not a DNS
    /// failure). Read from where the exchange stopped and what the vendor answered.
    pub fn reason(&self) -> &'static str {
        match self {
            SendResult::Accepted { .. } => "accepted",
            SendResult::Ambiguous { .. } => "ambiguous",
            SendResult::KeyReused { .. } => "key_reused",
            SendResult::Rejected {
                permanent,
                evidence,
                ..
            } => match (evidence.stage.as_str(), evidence.status) {
                // herald did not call it: the recipient is suppressed, the notification expired,
                // or the route's circuit breaker is open or an operator paused it (and the work
                // goes to its fallback).
                (SUPPRESSED_STAGE, _) => "suppressed",
                (EXPIRED_STAGE, _) => "expired",
                ("circuit_open", _) => "circuit_open",
                (ROUTE_PAUSED_STAGE, _) => "route_paused",
                ("connect", _) => "connection_refused",
                // Refused before anything left: the message, its destination, or a name that
                // does not resolve.
                ("request" | "compose" | "destination" | "dns", _) => "not_sent_locally",
                (_, Some(429)) => "rate_limited",
                (_, Some(500..)) => "vendor_unavailable",
                _ if *permanent => "permanent",
                _ => "transient",
            },
        }
    }

    pub fn evidence(&self) -> &Evidence {
        match self {
            SendResult::Accepted { evidence, .. }
            | SendResult::Rejected { evidence, .. }
            | SendResult::Ambiguous { evidence }
            | SendResult::KeyReused { evidence } => evidence,
        }
    }

    /// The same result with its evidence changed by `f`.
    pub fn map_evidence(mut self, f: impl FnOnce(Evidence) -> Evidence) -> Self {
        let slot = match &mut self {
            SendResult::Accepted { evidence, .. }
            | SendResult::Rejected { evidence, .. }
            | SendResult::Ambiguous { evidence }
            | SendResult::KeyReused { evidence } => evidence,
        };
        *slot = f(std::mem::take(slot));
        self
    }
}

/// What a look-up of an earlier send found.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryResult {
    Accepted {
        provider_ref: Option<String>,
        evidence: Evidence,
    },
    /// Messages that match this one by what they say (recipient, sender, content) rather than
    /// by a reference of herald's, oldest first: any of them may be this send, or a look-alike
    /// sibling's. herald attributes them (each vendor message to at most one notification) and
    /// settles only what the counts prove. `since`: the look-up saw messages from then on.
    LookAlikes {
        refs: Vec<String>,
        since: time::OffsetDateTime,
        evidence: Evidence,
    },
    /// The vendor's records prove the send was not taken.
    NotAccepted { evidence: Evidence },
    /// Not visible (yet): proves nothing inside the visibility lag, absence after it.
    NotFoundYet { evidence: Evidence },
    /// The look-up itself failed or the vendor has none; proves nothing.
    Unsupported { evidence: Evidence },
}

impl QueryResult {
    /// The same result with its evidence changed by `f`.
    pub fn map_evidence(mut self, f: impl FnOnce(Evidence) -> Evidence) -> Self {
        let slot = match &mut self {
            QueryResult::Accepted { evidence, .. }
            | QueryResult::LookAlikes { evidence, .. }
            | QueryResult::NotAccepted { evidence }
            | QueryResult::NotFoundYet { evidence }
            | QueryResult::Unsupported { evidence } => evidence,
        };
        *slot = f(std::mem::take(slot));
        self
    }

    pub fn evidence(&self) -> &Evidence {
        match self {
            QueryResult::Accepted { evidence, .. }
            | QueryResult::LookAlikes { evidence, .. }
            | QueryResult::NotAccepted { evidence }
            | QueryResult::NotFoundYet { evidence }
            | QueryResult::Unsupported { evidence } => evidence,
        }
    }
}

/// One configured vendor instance. Implementations live in their own crates under `providers/`
/// and reach nothing of herald but this crate.
#[async_trait::async_trait]
pub trait Adapter: Send + Sync {
    fn capabilities(&self) -> &Capabilities;

    /// Builds the request for `message` under `key`, without I/O. herald stores it with the
    /// notification at its first attempt and hands the stored request to every later send and
    /// query. `Err`: this route cannot send the message (a permanent refusal).
    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence>;

    /// Hands a prepared request to the vendor under `key`. Must return within the adapter's
    /// own timeout. `message` is the notification the request was prepared from.
    async fn send_prepared(
        &self,
        request: &Request,
        message: &Message,
        key: &ProviderKey,
    ) -> SendResult;

    /// Asks the vendor what became of the send(s) of `request` under `key`. Adapters whose
    /// capabilities declare no query keep this default.
    async fn query_prepared(
        &self,
        _request: &Request,
        _message: &Message,
        _key: &ProviderKey,
    ) -> QueryResult {
        QueryResult::Unsupported {
            evidence: Evidence::new("query", "this provider has no outcome query"),
        }
    }

    /// The adapter's reader of vendor delivery callbacks, if the vendor has them and the route
    /// configured their secret.
    fn callbacks(&self) -> Option<&dyn callback::Callbacks> {
        None
    }

    /// Whether a permanent rejection says the recipient asked the vendor to stop (Twilio 21610
    /// after a STOP): herald then suppresses the recipient as a hard bounce would.
    fn unsubscribed(&self, _evidence: &Evidence) -> bool {
        false
    }

    /// Checks, before a route takes work, that the vendor offers what [`Self::capabilities`]
    /// declares, where the vendor can say. Reconciliation trusts those capabilities, so a
    /// route whose declaration is wrong must not start. `Err` says what disagrees.
    async fn verify(&self) -> Result<(), String> {
        Ok(())
    }

    /// Prepares and sends in one step: a first send.
    async fn send(&self, message: &Message, key: &ProviderKey) -> SendResult {
        match self.prepare(message, key) {
            Ok(request) => self.send_prepared(&request, message, key).await,
            Err(evidence) => SendResult::permanent(evidence),
        }
    }

    /// Prepares and asks in one step.
    async fn query(&self, message: &Message, key: &ProviderKey) -> QueryResult {
        match self.prepare(message, key) {
            Ok(request) => self.query_prepared(&request, message, key).await,
            Err(evidence) => QueryResult::Unsupported { evidence },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_mailbox;

    #[test]
    fn a_mailbox_splits_into_name_and_address() {
        assert_eq!(split_mailbox("ada@example.com"), (None, "ada@example.com"));
        assert_eq!(
            split_mailbox("Ada Lovelace <ada@example.com>"),
            (Some("Ada Lovelace"), "ada@example.com")
        );
        assert_eq!(
            split_mailbox(r#""Acme Inc." <news@acme.example>"#),
            (Some("Acme Inc."), "news@acme.example")
        );
        assert_eq!(
            split_mailbox("<ada@example.com>"),
            (None, "ada@example.com")
        );
    }
}
