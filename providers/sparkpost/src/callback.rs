//! SparkPost's webhooks, read: batches of events about the messages a route sent, posted with
//! the HTTP Basic credentials configured on the webhook (`auth_type = "basic"`). The crate docs
//! state the mapping and its sources.

use herald_provider::callback::{
    BasicCredentials, CallbackError, CallbackEvent, CallbackRef, CallbackRequest, Callbacks,
    ReceiptStatus,
};
use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::wire::KEY_METADATA;

/// Reads one route's SparkPost webhook batches; SparkPost signs nothing, so the webhook's Basic
/// credentials are all that tells its requests from anyone's.
#[derive(Debug, Clone)]
pub(crate) struct SparkPostCallbacks {
    credentials: BasicCredentials,
}

impl SparkPostCallbacks {
    pub(crate) fn new(credentials: BasicCredentials) -> Self {
        SparkPostCallbacks { credentials }
    }
}

impl Callbacks for SparkPostCallbacks {
    fn read(&self, request: &CallbackRequest<'_>) -> Result<Vec<CallbackEvent>, CallbackError> {
        self.credentials.authenticate(request)?;
        let malformed = |why: &str| CallbackError::Malformed(why.to_owned());
        // A batch: `[{"msys": {"message_event": {…}}}, …]`; the webhook's test batch is
        // `[{"msys": {}}]`.
        let batch: Vec<Value> = serde_json::from_slice(request.body)
            .map_err(|_| malformed("not a SparkPost batch: a JSON array of `msys` objects"))?;
        let mut events = Vec::new();
        for entry in batch {
            let Some(msys) = entry.get("msys").and_then(Value::as_object) else {
                return Err(malformed("a batch entry without an `msys` object"));
            };
            for event in msys.values() {
                let Some(event) = event.as_object() else {
                    return Err(malformed("an `msys` entry that is not an event object"));
                };
                events.extend(read_event(event).map_err(CallbackError::Malformed)?);
            }
        }
        Ok(events)
    }
}

/// The bounce classes SparkPost counts as hard: 10 (invalid recipient), 30 (generic bounce, no
/// RCPT) and 90 (unsubscribe). Every other class is soft, a block or undetermined: it proves
/// nothing about the address, so it suppresses no one.
const HARD_BOUNCE_CLASSES: [&str; 3] = ["10", "30", "90"];

/// One event object, or `None` for an event no receipt records; `Err` says why it is not one.
fn read_event(event: &Map<String, Value>) -> Result<Option<CallbackEvent>, String> {
    let text = |name: &str| event.get(name).and_then(Value::as_str);
    let kind = text("type").ok_or("an event without a `type`")?;
    let bounce_class = text("bounce_class");
    let hard = bounce_class.is_some_and(|class| HARD_BOUNCE_CLASSES.contains(&class));
    let (status, suppress) = match kind {
        // SparkPost took the transmission's message for delivery.
        "injection" => (ReceiptStatus::Sent, false),
        "delivery" => (ReceiptStatus::Delivered, false),
        // An open or a click proves the message arrived, whatever else was missed.
        "open" | "initial_open" | "amp_open" | "click" | "amp_click" => {
            (ReceiptStatus::Delivered, false)
        }
        // In band (the receiving server refused it) or out of band (it bounced later).
        "bounce" | "out_of_band" => (ReceiptStatus::Bounced, hard),
        // The recipient reported it as spam: mail them no more.
        "spam_complaint" => (ReceiptStatus::Complained, true),
        // SparkPost did not send it (its policy, or the message could not be generated).
        "policy_rejection" | "generation_failure" | "generation_rejection" => {
            (ReceiptStatus::Undeliverable, false)
        }
        // The recipient unsubscribed: no news of the message, but no more mail to them.
        "list_unsubscribe" | "link_unsubscribe" => (ReceiptStatus::None, true),
        // `delay` (still trying), relay, A/B test and ingest events: nothing a receipt records.
        _ => return Ok(None),
    };
    // A CC or BCC copy's fate is not the notification's: its recipient is someone else.
    if matches!(text("rcpt_type"), Some("cc" | "bcc")) {
        return Ok(None);
    }
    let event_id = text("event_id")
        .filter(|id| !id.is_empty())
        .ok_or_else(|| format!("a `{kind}` event without an `event_id`"))?;
    let transmission = text("transmission_id").filter(|id| !id.is_empty());
    let key = event
        .get("rcpt_meta")
        .and_then(|meta| meta.get(KEY_METADATA))
        .and_then(Value::as_str)
        .filter(|key| !key.is_empty());
    let reference = match (key, transmission) {
        (Some(key), _) => CallbackRef::Key(key.to_owned()),
        // Sent before herald stamped its key (or not by herald): SparkPost's transmission id,
        // which herald records as the provider reference.
        (None, Some(id)) => CallbackRef::ProviderRef(id.to_owned()),
        (None, None) => {
            return Err(format!(
                "a `{kind}` event names no message: neither `rcpt_meta.{KEY_METADATA}` nor a `transmission_id`"
            ));
        }
    };
    Ok(Some(CallbackEvent {
        event_id: event_id.to_owned(),
        reference,
        message: transmission.map(str::to_owned),
        status,
        vendor_status: match bounce_class {
            Some(class) if status == ReceiptStatus::Bounced => format!("{kind}/{class}"),
            _ => kind.to_owned(),
        },
        at: event.get("timestamp").and_then(timestamp),
        suppress,
    }))
}

/// Webhook events carry unix seconds as a string (`"1460989507"`); the events API shows
/// RFC 3339. An unreadable time is left out rather than guessed.
fn timestamp(value: &Value) -> Option<OffsetDateTime> {
    let seconds = match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => match s.parse::<i64>() {
            Ok(seconds) => Some(seconds),
            Err(_) => return OffsetDateTime::parse(s, &Rfc3339).ok(),
        },
        _ => None,
    }?;
    OffsetDateTime::from_unix_timestamp(seconds).ok()
}
