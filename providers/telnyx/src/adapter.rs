//! Herald's adapter for Telnyx Messaging (`provider = "telnyx"`): one `POST /v2/messages` per
//! send, under the notification's `Idempotency-Key`, with herald's key in the message's
//! `webhook_url`; classified as the crate docs say.

use std::fmt;
use std::time::Duration;

use herald_provider::callback::Callbacks;
use herald_provider::http::{
    self, Answer, StatusRules, classify_failure_status, exchange, unreadable_success,
    with_vendor_code,
};
use herald_provider::{
    Adapter, Capabilities, Evidence, Message, ProviderKey, Redactor, Request, SendResult,
};
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use secrecy::{ExposeSecret, SecretString};

use crate::callback::{PublicKeyError, TelnyxCallbacks, WebhookKey, WebhookUrl};
use crate::wire::{self, BLOCKED_BY_STOP, IDEMPOTENCY_KEY, MESSAGES_PATH, SendMessage};

/// Telnyx's API root.
pub const DEFAULT_BASE_URL: &str = "https://api.telnyx.com/v2";

/// Telnyx documents 503 as nothing in particular and 409 not at all for messages: the shared
/// table applies.
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// Where a message comes from: a number (or alphanumeric sender ID), or a messaging profile's
/// number pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sender {
    From(String),
    MessagingProfile(String),
}

/// A route's settings, already resolved by herald.
#[derive(Debug, Clone)]
pub struct TelnyxRoute {
    /// [`DEFAULT_BASE_URL`], or a stand-in such as the fake's.
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>` and nowhere else.
    pub api_key: SecretString,
    pub sender: Sender,
    /// The whole exchange, connect to last body byte.
    pub timeout: Duration,
    /// herald's callback URL for the route, as Telnyx will call it: each message's
    /// `webhook_url`, with herald's key in its query.
    pub webhook_url: Option<String>,
    /// The account's webhook public key (base64 Ed25519); with `webhook_url`, the route reads
    /// Telnyx's signed message webhooks ([`Adapter::callbacks`]).
    pub webhook_public_key: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum TelnyxError {
    #[error("the Telnyx base_url `{url}` is not an http(s) URL: {reason}")]
    BaseUrl { url: String, reason: String },
    /// The key itself is never part of the message.
    #[error("the Telnyx API key has characters that an HTTP header cannot carry")]
    ApiKey,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("the Telnyx webhook_url {0}")]
    WebhookUrl(String),
    #[error("the Telnyx webhook_public_key {0}")]
    WebhookPublicKey(#[source] PublicKeyError),
    #[error("a Telnyx route that reads webhooks needs both webhook_url and webhook_public_key")]
    WebhookHalf,
}

pub struct TelnyxAdapter {
    /// How long one call may take: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    messages_url: Url,
    /// `Bearer <key>`, marked sensitive so that no header dump shows it.
    authorization: HeaderValue,
    /// Scrubs the key, in every form, from anything a vendor answer might echo.
    redactor: Redactor,
    sender: Sender,
    webhook_url: Option<WebhookUrl>,
    capabilities: Capabilities,
    callbacks: Option<TelnyxCallbacks>,
}

impl fmt::Debug for TelnyxAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelnyxAdapter")
            .field("messages_url", &self.messages_url.as_str())
            .field("sender", &self.sender)
            .field("api_key", &"[REDACTED]")
            .field("capabilities", &self.capabilities)
            .field("callbacks", &self.callbacks.is_some())
            .finish_non_exhaustive()
    }
}

impl TelnyxAdapter {
    /// Builds the adapter at start-up. reqwest needs a rustls crypto provider to be installed
    /// first (herald's main installs ring); without one, building the client panics inside
    /// reqwest.
    pub fn new(route: TelnyxRoute) -> Result<Self, TelnyxError> {
        let messages_url = endpoint(&route.base_url)?;
        let mut authorization =
            HeaderValue::from_str(&format!("Bearer {}", route.api_key.expose_secret()))
                .map_err(|_| TelnyxError::ApiKey)?;
        authorization.set_sensitive(true);
        let webhook_url = route
            .webhook_url
            .as_deref()
            .map(WebhookUrl::parse)
            .transpose()
            .map_err(TelnyxError::WebhookUrl)?;
        let key = route
            .webhook_public_key
            .as_deref()
            .map(WebhookKey::parse)
            .transpose()
            .map_err(TelnyxError::WebhookPublicKey)?;
        let callbacks = match (&webhook_url, key) {
            (Some(_), Some(key)) => Some(TelnyxCallbacks::new(key)),
            (None, None) => None,
            // Reading webhooks without stamping the key would leave every lost answer's
            // reports unattributed; stamping it without reading them would leave them unread.
            (Some(_), None) | (None, Some(_)) => return Err(TelnyxError::WebhookHalf),
        };
        let http = reqwest::Client::builder()
            .timeout(route.timeout)
            .user_agent(concat!("herald-telnyx/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(TelnyxError::Client)?;
        Ok(TelnyxAdapter {
            timeout: route.timeout,
            http,
            messages_url,
            authorization,
            redactor: Redactor::secret(route.api_key.expose_secret()),
            sender: route.sender,
            webhook_url,
            callbacks,
            capabilities: Capabilities {
                tags: false,
                attachments: false,
                // The key goes with every send, but Telnyx replays only successful answers: after
                // an error answer (a 500 when the message may already be out) a resend under the
                // key may send again, so herald claims nothing of a replay.
                idempotency_window: None,
                // Telnyx looks a message up by its own id only (and for 10 days): nothing finds
                // a send whose answer was lost.
                query_visibility_lag: None,
                max_payload_bytes: None,
            },
        })
    }

    /// One `POST /v2/messages` of a prepared request, classified.
    async fn send_message(&self, request: &Request, key: &ProviderKey) -> SendResult {
        if !wire::is_idempotency_key(key.as_str()) {
            return SendResult::permanent(Evidence::new(
                "request",
                "the idempotency key is not of the form Telnyx takes ([A-Za-z0-9_:-]{1,255})",
            ));
        }
        let idempotency_key = HeaderValue::from_str(key.as_str())
            .expect("the key's alphabet is a subset of a header value's");
        let request = self
            .http
            .post(self.messages_url.clone())
            .header(AUTHORIZATION, self.authorization.clone())
            .header(IDEMPOTENCY_KEY, idempotency_key)
            .header(CONTENT_TYPE, "application/json")
            .body(request.body.clone());
        let Answer {
            status,
            headers,
            body: text,
        } = match exchange(request, self.timeout).await {
            Ok(answer) => answer,
            Err(result) => return result,
        };
        if !status.is_success() {
            let result = classify_failure_status(status, &headers, &text, RULES);
            return with_vendor_code(result, wire::Answer::code_of(&text));
        }
        match serde_json::from_str::<wire::Answer>(&text) {
            Ok(wire::Answer {
                data: Some(message),
                ..
            }) if !message.id.is_empty() => SendResult::Accepted {
                provider_ref: Some(message.id),
                evidence: Evidence::new("response", &text).with_status(status.as_u16()),
            },
            _ => unreadable_success(status, format!("the answer has no message id: {text}")),
        }
    }
}

#[async_trait::async_trait]
impl Adapter for TelnyxAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let (from, messaging_profile_id) = match &self.sender {
            Sender::From(from) => (Some(from.as_str()), None),
            Sender::MessagingProfile(id) => (None, Some(id.as_str())),
        };
        let body = SendMessage {
            from,
            messaging_profile_id,
            to: &message.to,
            text: message.text.as_deref(),
            webhook_url: self.webhook_url.as_ref().map(|url| url.for_key(key)),
        };
        Request::json(&body)
    }

    fn callbacks(&self) -> Option<&dyn Callbacks> {
        self.callbacks.as_ref().map(|c| c as &dyn Callbacks)
    }

    /// Blocked by the recipient's STOP (40300): herald suppresses the number too.
    fn unsubscribed(&self, evidence: &Evidence) -> bool {
        evidence.vendor_code.as_deref() == Some(BLOCKED_BY_STOP)
    }

    async fn send_prepared(
        &self,
        request: &Request,
        _message: &Message,
        key: &ProviderKey,
    ) -> SendResult {
        // Anything Telnyx echoes is scrubbed of the key before it becomes evidence.
        let result = self.send_message(request, key).await;
        self.redactor.send(result)
    }
}

fn endpoint(base_url: &str) -> Result<Url, TelnyxError> {
    http::endpoint(base_url, MESSAGES_PATH).map_err(|reason| TelnyxError::BaseUrl {
        url: base_url.to_owned(),
        reason,
    })
}
