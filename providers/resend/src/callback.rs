//! Resend's webhooks, read: Svix-signed JSON events about the emails a route sent. The crate
//! docs state the mapping and its sources.

use std::collections::BTreeMap;

use herald_provider::callback::{
    CallbackError, CallbackEvent, CallbackRef, CallbackRequest, Callbacks, ReceiptStatus,
    verify_standard_webhook,
};
use herald_provider::signature::SigningSecret;
use serde::Deserialize;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::wire::KEY_TAG;

/// Resend delivers its webhooks through Svix: `svix-id`, `svix-timestamp`, `svix-signature`.
const HEADER_PREFIX: &str = "svix";

/// Reads one route's Resend webhooks, signed with the endpoint's `whsec_` secret.
#[derive(Debug, Clone)]
pub(crate) struct ResendCallbacks {
    secret: SigningSecret,
}

impl ResendCallbacks {
    pub(crate) fn new(secret: SigningSecret) -> Self {
        ResendCallbacks { secret }
    }
}

/// Every webhook: `{"type", "created_at", "data"}`. `data`'s shape depends on the type, so it
/// is read further only for the email events the reader maps.
#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    created_at: Option<String>,
    data: Map<String, Value>,
}

/// What the email events share in `data`, as far as the reader uses it. Everything optional:
/// a missing field leads to another reference or no detail, never to a refused event.
#[derive(Debug, Deserialize)]
struct EmailData {
    #[serde(default)]
    email_id: Option<String>,
    #[serde(default)]
    tags: Option<Tags>,
    #[serde(default)]
    bounce: Option<Bounce>,
}

/// Resend's docs show an email's tags both ways: an array of `{name, value}` (the parameter
/// tables) and an object of name → value (the example payloads).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Tags {
    List(Vec<Tag>),
    Object(BTreeMap<String, Value>),
}

#[derive(Debug, Deserialize)]
struct Tag {
    name: String,
    #[serde(default)]
    value: Value,
}

impl Tags {
    fn get(&self, name: &str) -> Option<&str> {
        match self {
            Tags::List(tags) => tags.iter().find(|tag| tag.name == name)?.value.as_str(),
            Tags::Object(tags) => tags.get(name)?.as_str(),
        }
    }
}

/// `data.bounce` of `email.bounced`: `type` is `Permanent`, `Transient` or `Undetermined`.
#[derive(Debug, Deserialize)]
struct Bounce {
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

impl Bounce {
    /// Whether the bounce proves the address cannot take mail: only a permanent one (or one
    /// that does not say). A soft bounce may be delivered later, and an undetermined one proves
    /// nothing, so neither suppresses a recipient who may well exist.
    fn is_hard(&self) -> bool {
        !self.kind.as_deref().is_some_and(|kind| {
            kind.eq_ignore_ascii_case("transient") || kind.eq_ignore_ascii_case("undetermined")
        })
    }
}

impl Callbacks for ResendCallbacks {
    fn read(&self, request: &CallbackRequest<'_>) -> Result<Vec<CallbackEvent>, CallbackError> {
        // Svix's id is the same on every retry of one event: the event's id.
        let event_id =
            verify_standard_webhook(request, HEADER_PREFIX, std::slice::from_ref(&self.secret))?;
        let malformed = |why: String| CallbackError::Malformed(why);
        let envelope: Envelope = serde_json::from_slice(request.body)
            .map_err(|err| malformed(format!("not a Resend webhook (`type`, `data`): {err}")))?;
        let (status, suppress) = match envelope.kind.as_str() {
            "email.sent" => (ReceiptStatus::Sent, false),
            "email.delivered" => (ReceiptStatus::Delivered, false),
            // An open or a click proves the email arrived, whatever else was missed.
            "email.opened" | "email.clicked" => (ReceiptStatus::Delivered, false),
            "email.bounced" => (ReceiptStatus::Bounced, true),
            // The recipient marked it as spam: mail them no more.
            "email.complained" => (ReceiptStatus::Complained, true),
            // Resend did not send it (invalid recipient, quota, domain): it gave up.
            "email.failed" => (ReceiptStatus::Undeliverable, false),
            // `email.delivery_delayed` (still trying), `email.scheduled`, `email.received`,
            // contact and domain events: nothing a receipt records.
            _ => return Ok(Vec::new()),
        };
        let data: EmailData = serde_json::from_value(Value::Object(envelope.data))
            .map_err(|err| malformed(format!("`{}` with unreadable data: {err}", envelope.kind)))?;
        let key = data.tags.as_ref().and_then(|tags| tags.get(KEY_TAG));
        let message = data.email_id.clone().filter(|id| !id.is_empty());
        let reference = match (key, data.email_id) {
            (Some(key), _) if !key.is_empty() => CallbackRef::Key(key.to_owned()),
            // An email sent before herald stamped its key (or not by herald): Resend's id.
            (_, Some(id)) if !id.is_empty() => CallbackRef::ProviderRef(id),
            _ => {
                return Err(malformed(format!(
                    "`{}` names no email: neither a `{KEY_TAG}` tag nor an `email_id`",
                    envelope.kind
                )));
            }
        };
        let bounce_type = data.bounce.as_ref().and_then(|b| b.kind.as_deref());
        Ok(vec![CallbackEvent {
            event_id,
            reference,
            message,
            status,
            vendor_status: match bounce_type {
                Some(kind) if status == ReceiptStatus::Bounced => {
                    format!("{}/{kind}", envelope.kind)
                }
                _ => envelope.kind.clone(),
            },
            // When Resend created the event; an unreadable time is left out rather than guessed.
            at: envelope
                .created_at
                .as_deref()
                .and_then(|at| OffsetDateTime::parse(at, &Rfc3339).ok()),
            suppress: suppress
                && (status != ReceiptStatus::Bounced
                    || data.bounce.as_ref().is_none_or(Bounce::is_hard)),
        }])
    }
}
