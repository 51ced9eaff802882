//! SendGrid's Event Webhook, read: batches of events about the messages a route sent, signed
//! with ECDSA (P-256, SHA-256) over the timestamp header and the body. The crate docs state the
//! mapping and its sources.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use herald_provider::callback::{
    CallbackError, CallbackEvent, CallbackRef, CallbackRequest, Callbacks, ReceiptStatus,
    stamped_signature,
};
use ring::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::adapter::message_id;
use crate::wire::KEY_ARG;

/// The signature header: base64 of a DER ECDSA signature.
pub const SIGNATURE: &str = "x-twilio-email-event-webhook-signature";
/// The timestamp header: unix seconds, signed ahead of the body.
pub const TIMESTAMP: &str = "x-twilio-email-event-webhook-timestamp";

/// The DER of a P-256 `SubjectPublicKeyInfo` up to its point: `id-ecPublicKey`, `prime256v1`,
/// and a 66-byte BIT STRING whose first byte is 0 (no unused bits).
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// What is wrong with the form of a configured verification key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublicKeyError {
    #[error("is not base64 (paste the key SendGrid shows, without the PEM lines)")]
    Base64,
    #[error("is not a P-256 public key (SubjectPublicKeyInfo, an uncompressed point)")]
    NotP256,
}

/// The Event Webhook's verification key: the uncompressed P-256 point of the configured SPKI.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookKey(Vec<u8>);

impl fmt::Debug for WebhookKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookKey(P-256)")
    }
}

impl WebhookKey {
    /// Reads the key as SendGrid's settings show it: base64 of a DER `SubjectPublicKeyInfo`,
    /// with or without the PEM lines around it.
    pub fn parse(text: &str) -> Result<WebhookKey, PublicKeyError> {
        let body: String = text
            .lines()
            .filter(|line| !line.starts_with("-----"))
            .flat_map(|line| line.split_whitespace())
            .collect();
        let der = STANDARD
            .decode(body.as_bytes())
            .map_err(|_| PublicKeyError::Base64)?;
        match der.strip_prefix(&P256_SPKI_PREFIX) {
            Some(point) if point.len() == 65 && point[0] == 0x04 => Ok(WebhookKey(point.to_vec())),
            _ => Err(PublicKeyError::NotP256),
        }
    }

    fn verifies(&self, signed: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.0)
            .verify(signed, signature)
            .is_ok()
    }
}

/// Reads one route's SendGrid event batches.
#[derive(Debug, Clone)]
pub(crate) struct SendGridCallbacks {
    key: WebhookKey,
}

impl SendGridCallbacks {
    pub(crate) fn new(key: WebhookKey) -> Self {
        SendGridCallbacks { key }
    }

    fn authenticate(&self, request: &CallbackRequest<'_>) -> Result<(), CallbackError> {
        let (timestamp, signature) = stamped_signature(request, TIMESTAMP, SIGNATURE)?;
        let signed = [timestamp.as_bytes(), request.body].concat();
        if !self.key.verifies(&signed, &signature) {
            return Err(CallbackError::Unauthenticated(format!(
                "`{SIGNATURE}` does not match the configured verification key"
            )));
        }
        Ok(())
    }
}

impl Callbacks for SendGridCallbacks {
    fn read(&self, request: &CallbackRequest<'_>) -> Result<Vec<CallbackEvent>, CallbackError> {
        self.authenticate(request)?;
        let malformed = |why: &str| CallbackError::Malformed(why.to_owned());
        let Ok(Value::Array(events)) = serde_json::from_slice(request.body) else {
            return Err(malformed("not a SendGrid batch: a JSON array of events"));
        };
        let mut read = Vec::new();
        for event in events {
            let Value::Object(event) = event else {
                return Err(malformed("a batch entry that is not an event object"));
            };
            read.extend(read_event(&event).map_err(CallbackError::Malformed)?);
        }
        Ok(read)
    }
}

/// The `reason`s of a `dropped` event that say the address cannot or will not take mail.
const SUPPRESSING_DROPS: [&str; 3] = [
    "Bounced Address",
    "Unsubscribed Address",
    "Spam Reporting Address",
];

/// One event, or `None` for one no receipt records; `Err` says why it is not one.
fn read_event(event: &Map<String, Value>) -> Result<Option<CallbackEvent>, String> {
    let text = |name: &str| event.get(name).and_then(Value::as_str);
    let kind = text("event").ok_or("an event without an `event` type")?;
    let (status, suppress) = match kind {
        // SendGrid took the message and will send it.
        "processed" => (ReceiptStatus::Sent, false),
        "delivered" => (ReceiptStatus::Delivered, false),
        // An open or a click proves the message arrived, whatever else was missed.
        "open" | "click" => (ReceiptStatus::Delivered, false),
        // `type` `bounce`: refused for good; `blocked`: refused for now, which proves nothing
        // about the address.
        "bounce" => (ReceiptStatus::Bounced, text("type") != Some("blocked")),
        "dropped" => (
            ReceiptStatus::Undeliverable,
            text("reason").is_some_and(|reason| SUPPRESSING_DROPS.contains(&reason)),
        ),
        // The recipient marked it as spam: mail them no more.
        "spamreport" => (ReceiptStatus::Complained, true),
        // The recipient unsubscribed: no news of the message, but no more mail to them.
        "unsubscribe" | "group_unsubscribe" => (ReceiptStatus::None, true),
        // `deferred` (still trying), `group_resubscribe` and anything else.
        _ => return Ok(None),
    };
    let time = event
        .get("timestamp")
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("a `{kind}` event without a unix `timestamp`"))?;
    let message = text("sg_message_id")
        .filter(|id| !id.is_empty())
        .map(message_id)
        .ok_or_else(|| format!("a `{kind}` event without an `sg_message_id`"))?;
    let reference = match text(KEY_ARG) {
        Some(key) if !key.is_empty() => CallbackRef::Key(key.to_owned()),
        // Sent without herald's key (or not by herald): SendGrid's id of the message.
        _ => CallbackRef::ProviderRef(message.to_owned()),
    };
    let detail = text("type").filter(|_| kind == "bounce").or(text("reason"));
    Ok(Some(CallbackEvent {
        // `sg_event_id` changes when SendGrid retries a batch (sendgrid/sendgrid-nodejs#1435),
        // so it cannot tell a repeat. To herald, a message's events of one kind in one second
        // are one, and a retry repeats all three parts.
        event_id: format!("{message}:{kind}:{time}"),
        reference,
        message: Some(message.to_owned()),
        status,
        vendor_status: match detail {
            Some(detail) if status != ReceiptStatus::Delivered => format!("{kind}/{detail}"),
            _ => kind.to_owned(),
        },
        at: OffsetDateTime::from_unix_timestamp(time).ok(),
        suppress,
    }))
}
