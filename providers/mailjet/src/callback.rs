//! Mailjet's Event API, read: JSON events about the messages a route sent, posted with the
//! HTTP Basic credentials written into the callback URL configured in Mailjet. The crate docs
//! state the mapping and its sources.

use herald_provider::callback::{
    BasicCredentials, CallbackError, CallbackEvent, CallbackRef, CallbackRequest, Callbacks,
    ReceiptStatus,
};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::wire::id_text;

/// Reads one route's Mailjet events; Mailjet signs nothing, so the credentials in the URL are
/// all that tells its requests from anyone's.
#[derive(Debug, Clone)]
pub(crate) struct MailjetCallbacks {
    credentials: BasicCredentials,
}

impl MailjetCallbacks {
    pub(crate) fn new(credentials: BasicCredentials) -> Self {
        MailjetCallbacks { credentials }
    }
}

impl Callbacks for MailjetCallbacks {
    fn read(&self, request: &CallbackRequest<'_>) -> Result<Vec<CallbackEvent>, CallbackError> {
        self.credentials.authenticate(request)?;
        let body: Value = serde_json::from_slice(request.body)
            .map_err(|err| CallbackError::Malformed(format!("not JSON: {err}")))?;
        // One event per request, or (Event API version 2, "grouping") an array of them.
        let objects = match body {
            Value::Array(items) => items,
            object @ Value::Object(_) => vec![object],
            _ => {
                return Err(CallbackError::Malformed(
                    "neither an event object nor an array of them".to_owned(),
                ));
            }
        };
        let mut events = Vec::new();
        for object in objects {
            let Value::Object(object) = object else {
                return Err(CallbackError::Malformed(
                    "an array entry that is not an event object".to_owned(),
                ));
            };
            events.extend(read_event(&object).map_err(CallbackError::Malformed)?);
        }
        Ok(events)
    }
}

/// One event object, or `None` for an event no receipt records; `Err` says why it is not one.
fn read_event(event: &Map<String, Value>) -> Result<Option<CallbackEvent>, String> {
    let kind = event
        .get("event")
        .and_then(Value::as_str)
        .ok_or("an event without an `event` type")?;
    let flag = |name: &str| event.get(name).and_then(Value::as_bool) == Some(true);
    let (status, suppress) = match kind {
        // Mailjet's `sent` is "the destination SMTP server has accepted the message": what other
        // vendors call delivered, not a hand-over inside Mailjet.
        "sent" => (ReceiptStatus::Delivered, false),
        // An open or a click proves the message arrived, whatever else was missed.
        "open" | "click" => (ReceiptStatus::Delivered, false),
        // `hard_bounce`: "true if error was permanent".
        "bounce" => (ReceiptStatus::Bounced, flag("hard_bounce")),
        // The recipient reported it as spam (a feedback loop): mail them no more.
        "spam" => (ReceiptStatus::Complained, true),
        // Mailjet refused to send it (a blocked recipient, spam content, …).
        "blocked" => (ReceiptStatus::Undeliverable, false),
        // The recipient unsubscribed: no news of the message, but no more mail to them.
        "unsub" => (ReceiptStatus::None, true),
        _ => return Ok(None),
    };
    let time = event
        .get("time")
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("a `{kind}` event without a unix `time`"))?;
    // `MessageID` is a number (up to 17 digits, kept exactly); grouped events in Mailjet's docs
    // show only the older `mj_message_id`, a string.
    let message_id = event
        .get("MessageID")
        .and_then(id_text)
        .or_else(|| event.get("mj_message_id").and_then(id_text))
        .ok_or_else(|| format!("a `{kind}` event without a `MessageID`"))?;
    let reference = match event.get("CustomID").and_then(Value::as_str) {
        Some(key) if !key.is_empty() => CallbackRef::Key(key.to_owned()),
        // Sent without herald's key as `CustomID`: Mailjet's id of the message.
        _ => CallbackRef::ProviderRef(message_id.clone()),
    };
    let error = event
        .get("error")
        .and_then(Value::as_str)
        .filter(|e| !e.is_empty());
    Ok(Some(CallbackEvent {
        // Mailjet gives its events no id. To herald, a message's events of one kind in one
        // second are one (two opens in a second move no receipt further), and a retry of the
        // request repeats all three parts.
        event_id: format!("{message_id}:{kind}:{time}"),
        reference,
        message: Some(message_id),
        status,
        vendor_status: match error {
            Some(error) => format!("{kind}/{error}"),
            None => kind.to_owned(),
        },
        at: OffsetDateTime::from_unix_timestamp(time).ok(),
        suppress,
    }))
}
