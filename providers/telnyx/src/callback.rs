//! Telnyx's message webhooks, read: JSON events signed with Ed25519 over
//! `{telnyx-timestamp}|{body}`, naming herald's key in the message's own `webhook_url`, which
//! herald set at the send. The crate docs state the mapping and its sources.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use herald_provider::ProviderKey;
use herald_provider::callback::{
    CallbackError, CallbackEvent, CallbackRef, CallbackRequest, Callbacks, ReceiptStatus,
    stamped_signature,
};
use ring::signature::{ED25519, UnparsedPublicKey};
use serde::Deserialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use url::Url;

use crate::wire::{BLOCKED_BY_STOP, KEY_PARAM, Message, SIGNATURE, TIMESTAMP};

/// What is wrong with the form of a configured public key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublicKeyError {
    #[error("is not base64 (paste the public key Telnyx shows)")]
    Base64,
    #[error("is not an Ed25519 public key (32 bytes)")]
    NotEd25519,
}

/// The account's webhook public key.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookKey([u8; 32]);

impl fmt::Debug for WebhookKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookKey(Ed25519)")
    }
}

impl WebhookKey {
    pub fn parse(text: &str) -> Result<WebhookKey, PublicKeyError> {
        let bytes = STANDARD
            .decode(text.trim())
            .map_err(|_| PublicKeyError::Base64)?;
        <[u8; 32]>::try_from(bytes.as_slice())
            .map(WebhookKey)
            .map_err(|_| PublicKeyError::NotEd25519)
    }

    fn verifies(&self, signed: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, &self.0)
            .verify(signed, signature)
            .is_ok()
    }
}

/// The route's `webhook_url`: herald's callback URL for it, sent with each message with
/// `herald_key=<key>` added to its query.
#[derive(Debug, Clone)]
pub(crate) struct WebhookUrl(String);

impl WebhookUrl {
    pub(crate) fn parse(configured: &str) -> Result<WebhookUrl, String> {
        let url = Url::parse(configured).map_err(|err| err.to_string())?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
            return Err("is not an absolute http(s) URL".to_owned());
        }
        if url.query_pairs().any(|(name, _)| name == KEY_PARAM) {
            return Err(format!(
                "already has `{KEY_PARAM}` in its query, which herald adds"
            ));
        }
        Ok(WebhookUrl(configured.to_owned()))
    }

    pub(crate) fn for_key(&self, key: &ProviderKey) -> String {
        let mut url = Url::parse(&self.0).expect("checked when the route was built");
        url.query_pairs_mut().append_pair(KEY_PARAM, key.as_str());
        url.into()
    }
}

/// Reads one route's Telnyx message webhooks.
#[derive(Debug, Clone)]
pub(crate) struct TelnyxCallbacks {
    key: WebhookKey,
}

/// A webhook: `{"data": {"event_type", "id", "occurred_at", "payload": {…the message…}}}`.
#[derive(Debug, Deserialize)]
struct Envelope {
    data: Event,
}

#[derive(Debug, Deserialize)]
struct Event {
    event_type: String,
    id: String,
    #[serde(default)]
    occurred_at: Option<String>,
    payload: serde_json::Value,
}

impl TelnyxCallbacks {
    pub(crate) fn new(key: WebhookKey) -> Self {
        TelnyxCallbacks { key }
    }

    fn authenticate(&self, request: &CallbackRequest<'_>) -> Result<(), CallbackError> {
        let (timestamp, signature) = stamped_signature(request, TIMESTAMP, SIGNATURE)?;
        let signed = [timestamp.as_bytes(), b"|", request.body].concat();
        if !self.key.verifies(&signed, &signature) {
            return Err(CallbackError::Unauthenticated(format!(
                "`{SIGNATURE}` does not match the configured public key"
            )));
        }
        Ok(())
    }
}

impl Callbacks for TelnyxCallbacks {
    fn read(&self, request: &CallbackRequest<'_>) -> Result<Vec<CallbackEvent>, CallbackError> {
        self.authenticate(request)?;
        let malformed = |why: String| CallbackError::Malformed(why);
        let Envelope { data: event } = serde_json::from_slice(request.body).map_err(|err| {
            malformed(format!(
                "not a Telnyx webhook (`data` with `event_type`, `id`): {err}"
            ))
        })?;
        let message = || {
            serde_json::from_value::<Message>(event.payload.clone()).map_err(|err| {
                malformed(format!(
                    "`{}` with an unreadable message: {err}",
                    event.event_type
                ))
            })
        };
        let (status, message) = match event.event_type.as_str() {
            "message.sent" => (ReceiptStatus::Sent, message()?),
            "message.finalized" => {
                let message = message()?;
                let status = match message.to.first().and_then(|to| to.status.as_deref()) {
                    Some("delivered") => ReceiptStatus::Delivered,
                    Some("sending_failed" | "delivery_failed") => ReceiptStatus::Undeliverable,
                    // `delivery_unconfirmed`: handed on, with no word from the carrier.
                    Some("delivery_unconfirmed") => ReceiptStatus::Sent,
                    _ => return Ok(Vec::new()),
                };
                (status, message)
            }
            // Inbound messages, `message.received` among them, and anything else.
            _ => return Ok(Vec::new()),
        };
        if message.id.is_empty() {
            return Err(malformed(format!(
                "`{}` names no message",
                event.event_type
            )));
        }
        let key = message
            .webhook_url
            .as_deref()
            .and_then(|url| Url::parse(url).ok())
            .and_then(|url| {
                url.query_pairs()
                    .find(|(name, _)| name == KEY_PARAM)
                    .map(|(_, key)| key.into_owned())
            })
            .filter(|key| !key.is_empty());
        let stopped = message
            .errors
            .iter()
            .any(|error| error.code.as_deref() == Some(BLOCKED_BY_STOP));
        let final_status = message.to.first().and_then(|to| to.status.clone());
        Ok(vec![CallbackEvent {
            event_id: event.id,
            reference: match key {
                Some(key) => CallbackRef::Key(key),
                // Sent without herald's key in its webhook URL: Telnyx's id of the message.
                None => CallbackRef::ProviderRef(message.id.clone()),
            },
            message: Some(message.id),
            status,
            vendor_status: match final_status {
                Some(to) if event.event_type == "message.finalized" => {
                    format!("{}/{to}", event.event_type)
                }
                _ => event.event_type.clone(),
            },
            at: event
                .occurred_at
                .as_deref()
                .and_then(|at| OffsetDateTime::parse(at, &Rfc3339).ok()),
            // The recipient texted STOP: no more messages to them.
            suppress: stopped,
        }])
    }
}
