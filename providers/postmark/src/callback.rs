//! Postmark's webhooks, read: one JSON event per request about a message a route sent, posted
//! to a webhook URL with HTTP Basic credentials in it. The crate docs state the mapping and its
//! sources.

use herald_provider::callback::{
    BasicCredentials, CallbackError, CallbackEvent, CallbackRef, CallbackRequest, Callbacks,
    ReceiptStatus,
};
use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::wire::KEY_METADATA;

/// Reads one route's Postmark webhooks; Postmark signs nothing, so the credentials in the
/// webhook URL are all that tells its requests from anyone's.
#[derive(Debug, Clone)]
pub(crate) struct PostmarkCallbacks {
    credentials: BasicCredentials,
}

impl PostmarkCallbacks {
    pub(crate) fn new(credentials: BasicCredentials) -> Self {
        PostmarkCallbacks { credentials }
    }
}

impl Callbacks for PostmarkCallbacks {
    fn read(&self, request: &CallbackRequest<'_>) -> Result<Vec<CallbackEvent>, CallbackError> {
        self.credentials.authenticate(request)?;
        let Ok(Value::Object(event)) = serde_json::from_slice(request.body) else {
            return Err(CallbackError::Malformed(
                "not a Postmark webhook: a JSON object with a `RecordType`".to_owned(),
            ));
        };
        Ok(read_event(&event)
            .map_err(CallbackError::Malformed)?
            .into_iter()
            .collect())
    }
}

/// Bounce types that say nothing of the message's delivery: an auto-reply, a list
/// (un)subscription request, a changed address, a challenge.
const NOT_BOUNCES: [&str; 6] = [
    "AutoResponder",
    "AddressChange",
    "ChallengeVerification",
    "Subscribe",
    "Unsubscribe",
    "OpenRelayTest",
];

/// The event, or `None` for one no receipt records; `Err` says why it is not one.
fn read_event(event: &Map<String, Value>) -> Result<Option<CallbackEvent>, String> {
    let text = |name: &str| event.get(name).and_then(Value::as_str);
    let flag = |name: &str| event.get(name).and_then(Value::as_bool) == Some(true);
    let kind = text("RecordType").ok_or("an event without a `RecordType`")?;
    let bounce_type = text("Type");
    // `Inactive`: Postmark deactivated the address because of this event (a hard bounce, a
    // spam complaint): it mails it no more, nor does herald.
    let (status, suppress, at) = match kind {
        "Delivery" => (ReceiptStatus::Delivered, false, "DeliveredAt"),
        // An open or a click proves the email arrived, whatever else was missed.
        "Open" | "Click" => (ReceiptStatus::Delivered, false, "ReceivedAt"),
        "Bounce" if bounce_type.is_some_and(|t| NOT_BOUNCES.contains(&t)) => return Ok(None),
        "Bounce" => (ReceiptStatus::Bounced, flag("Inactive"), "BouncedAt"),
        "SpamComplaint" => (ReceiptStatus::Complained, true, "BouncedAt"),
        // The recipient's address was suppressed (an unsubscribe, a manual suppression): no
        // news of the message, but no more mail to them. A reactivation changes nothing here.
        "SubscriptionChange" if flag("SuppressSending") => (ReceiptStatus::None, true, "ChangedAt"),
        _ => return Ok(None),
    };
    let message_id = text("MessageID")
        .filter(|id| !id.is_empty())
        .ok_or_else(|| format!("a `{kind}` event without a `MessageID`"))?;
    let reference = match event
        .get("Metadata")
        .and_then(|meta| meta.get(KEY_METADATA))
        .and_then(Value::as_str)
    {
        Some(key) if !key.is_empty() => CallbackRef::Key(key.to_owned()),
        // Sent without herald's key (or not by herald): Postmark's id of the message.
        _ => CallbackRef::ProviderRef(message_id.to_owned()),
    };
    let time = text(at);
    Ok(Some(CallbackEvent {
        // Postmark gives a bounce an `ID` and nothing else an id. To herald, a message's events
        // of one kind at one instant are one, and a retry of the request repeats all three.
        event_id: match event.get("ID").and_then(Value::as_i64) {
            Some(id) => format!("{kind}:{id}"),
            None => format!("{message_id}:{kind}:{}", time.unwrap_or("")),
        },
        reference,
        message: Some(message_id.to_owned()),
        status,
        vendor_status: match bounce_type {
            Some(kind_of) if status == ReceiptStatus::Bounced => format!("{kind}/{kind_of}"),
            _ => kind.to_owned(),
        },
        at: time.and_then(|at| OffsetDateTime::parse(at, &Rfc3339).ok()),
        suppress,
    }))
}
