//! Herald's adapter for SparkPost (`provider = "sparkpost"`): one `POST /transmissions` per
//! send, under the notification's stable `Idempotency-Key`, classified where the exchange ended.
//!
//! The crate docs state the classification table and the sources; this module implements it.
//! Four answers differ from `herald_provider::http`'s shared table: a 409 with code 1601 is a
//! transient rejection (the first request with the key is still in progress, this one was not
//! processed), a 409 with code 1600 is [`SendResult::KeyReused`] (an earlier request under the
//! key was processed), a 420 is a transient rejection (a sending limit: "no messages are
//! sent"), and a 200 that accepted no recipient is a permanent rejection.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use herald_provider::callback::{BasicCredentials, Callbacks, CredentialsError};
use herald_provider::http::{
    self, Answer, StatusRules, classify_failure_status, exchange, retry_after, unreadable_success,
    with_vendor_code,
};
use herald_provider::{
    Adapter, Capabilities, Encoding, Evidence, Message, ProviderKey, Redactor, Request, SendResult,
    split_mailbox,
};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};

use crate::callback::SparkPostCallbacks;
use crate::wire::{
    Accepted, Address, Attachment, Content, ErrorBody, IDEMPOTENCY_KEY, KEY_IN_PROGRESS,
    KEY_METADATA, KEY_REUSED, Recipient, Sender, TRANSMISSIONS_PATH, Transmission,
    is_idempotency_key,
};

/// SparkPost's public API root (its EU accounts use `https://api.eu.sparkpost.com/api/v1`).
pub const DEFAULT_BASE_URL: &str = "https://api.sparkpost.com/api/v1";

/// SparkPost keeps an idempotency key for 24 hours (pull request 590 of SparkPost's docs).
pub const IDEMPOTENCY_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

/// "The transmission content (text + html + attachments + inline images) is limited to 20 MBs"
/// (<https://developers.sparkpost.com/api/transmissions/>); decimal megabytes, the smaller
/// reading.
pub const MAX_CONTENT_BYTES: usize = 20_000_000;

/// The metadata entry that carries herald's notification id, so that SparkPost's events and
/// reports can be matched back to a notification.
const NOTIFICATION_METADATA: &str = "herald_notification_id";

/// Every 409 SparkPost answers a transmission is told apart by its code in
/// [`classify_error`], and no 503 is documented as "not processed": the shared table applies
/// to the rest as it is.
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// A route's settings, already resolved by herald.
#[derive(Debug, Clone)]
pub struct SparkPostRoute {
    /// [`DEFAULT_BASE_URL`], the EU one, an Enterprise one, or a stand-in such as the fake's.
    pub base_url: String,
    /// Sent as `Authorization: <key>` and nowhere else.
    pub api_key: SecretString,
    /// The sender, e.g. `Acme <notify@acme.example>`, on a verified sending domain.
    pub from: String,
    /// The whole exchange, connect to last body byte.
    pub timeout: Duration,
    /// The HTTP Basic user name (`auth_type = "basic"`) of the SparkPost webhook that posts to
    /// herald; with `callback_password`, the route reads SparkPost's events
    /// ([`Adapter::callbacks`]).
    pub callback_username: Option<String>,
    /// Its password; set both or neither.
    pub callback_password: Option<SecretString>,
}

#[derive(Debug, thiserror::Error)]
pub enum SparkPostError {
    #[error("the SparkPost base_url `{url}` is not an http(s) URL: {reason}")]
    BaseUrl { url: String, reason: String },
    /// The key itself is never part of the message.
    #[error("the SparkPost API key has characters that an HTTP header cannot carry")]
    ApiKey,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// Says which credential is wrong, never what the password is.
    #[error("a SparkPost route that reads webhooks {0}")]
    Callback(#[source] CredentialsError),
}

pub struct SparkPostAdapter {
    /// How long one call may take: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    transmissions_url: Url,
    /// The key itself, marked sensitive so that no header dump shows it.
    authorization: HeaderValue,
    /// Scrubs the key, in every form, from anything a vendor answer might echo.
    redactor: Redactor,
    from: String,
    capabilities: Capabilities,
    /// Set when the route has webhook credentials.
    callbacks: Option<SparkPostCallbacks>,
}

impl fmt::Debug for SparkPostAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SparkPostAdapter")
            .field("transmissions_url", &self.transmissions_url.as_str())
            .field("from", &self.from)
            .field("api_key", &"[REDACTED]")
            .field("capabilities", &self.capabilities)
            .field("callbacks", &self.callbacks.is_some())
            .finish_non_exhaustive()
    }
}

impl SparkPostAdapter {
    /// Builds the adapter at start-up. reqwest needs a rustls crypto provider to be installed
    /// first (herald's main installs ring); without one, building the client panics inside
    /// reqwest.
    pub fn new(route: SparkPostRoute) -> Result<Self, SparkPostError> {
        let transmissions_url = endpoint(&route.base_url)?;
        let mut authorization = HeaderValue::from_str(route.api_key.expose_secret())
            .map_err(|_| SparkPostError::ApiKey)?;
        authorization.set_sensitive(true);
        let callbacks = BasicCredentials::configured(
            route.callback_username.as_deref(),
            route.callback_password.as_ref(),
        )
        .map_err(SparkPostError::Callback)?
        .map(SparkPostCallbacks::new);
        let http = reqwest::Client::builder()
            .timeout(route.timeout)
            .user_agent(concat!("herald-sparkpost/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(SparkPostError::Client)?;
        Ok(SparkPostAdapter {
            timeout: route.timeout,
            http,
            transmissions_url,
            authorization,
            redactor: Redactor::secret(route.api_key.expose_secret()),
            from: route.from,
            callbacks,
            capabilities: Capabilities {
                tags: true,
                attachments: true,
                idempotency_window: Some(IDEMPOTENCY_WINDOW),
                // SparkPost's message events can be searched by transmission or recipient, not
                // by our key, and lag behind; a replay inside the window is the
                // reconciliation instead.
                query_visibility_lag: None,
                max_payload_bytes: Some(MAX_CONTENT_BYTES),
            },
        })
    }

    /// One `POST /transmissions` of a prepared request, classified; [`Adapter::send_prepared`]
    /// scrubs the key from the result.
    async fn transmit(&self, request: &Request, key: &ProviderKey) -> SendResult {
        // Checked here, before any I/O: SparkPost would refuse it (400 code 1602) without
        // processing, and the evidence should name the key rather than a vendor error.
        if !is_idempotency_key(key.as_str()) {
            return SendResult::permanent(Evidence::new(
                "request",
                "the idempotency key is not of the form SparkPost takes ([A-Za-z0-9._-]{1,255})",
            ));
        }
        let idempotency_key = HeaderValue::from_str(key.as_str())
            .expect("the key's alphabet is a subset of a header value's");
        let request = self
            .http
            .post(self.transmissions_url.clone())
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
            return classify_error(status, &headers, &text);
        }
        let evidence = || Evidence::new("response", &text).with_status(status.as_u16());
        match serde_json::from_str::<Accepted>(&text) {
            // Created, but every recipient was refused (a suppressed or invalid address):
            // nothing goes out.
            Ok(Accepted { results }) if results.total_accepted_recipients == 0 => {
                SendResult::permanent(evidence())
            }
            Ok(Accepted { results }) if !results.id.is_empty() => SendResult::Accepted {
                provider_ref: Some(results.id),
                evidence: evidence(),
            },
            Ok(_) => unreadable_success(status, format!("the answer has an empty id: {text}")),
            Err(err) => unreadable_success(status, format!("{err}: {text}")),
        }
    }
}

#[async_trait::async_trait]
impl Adapter for SparkPostAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The `POST /transmissions` body. herald stores it at the first attempt and replays it
    /// byte for byte, which is what SparkPost compares a repeated key against: an attachment's
    /// content is a placeholder here, which herald replaces with the same bytes before every
    /// send.
    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let email = &message.email;
        if email.tags.contains_key(KEY_METADATA) || email.tags.contains_key(NOTIFICATION_METADATA) {
            // Events name the notification by this metadata: a message's own would misname it.
            return Err(Evidence::new(
                "request",
                format!(
                    "the tags `{KEY_METADATA}` and `{NOTIFICATION_METADATA}` are herald's own on a SparkPost route"
                ),
            ));
        }
        // CC and BCC recipients see the notification's recipient in `To`.
        let recipients = std::iter::once((&message.to, None))
            .chain(
                email
                    .cc
                    .iter()
                    .chain(&email.bcc)
                    .map(|a| (a, Some(&message.to))),
            )
            .map(|(address, header_to)| Recipient {
                address: Address {
                    email: address,
                    header_to: header_to.map(String::as_str),
                },
            })
            .collect();
        let mut headers: BTreeMap<&str, String> = email
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.clone()))
            .collect();
        if !email.cc.is_empty() {
            headers.insert("CC", email.cc.join(", "));
        }
        let metadata = email
            .tags
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .chain([
                (KEY_METADATA, key.as_str()),
                (NOTIFICATION_METADATA, message.notification_id.as_str()),
            ])
            .collect();
        let (name, address) = split_mailbox(email.from.as_deref().unwrap_or(&self.from));
        let body = Transmission {
            recipients,
            content: Content {
                from: Sender {
                    name,
                    email: address,
                },
                subject: message.subject.as_deref(),
                html: message.html.as_deref(),
                text: message.text.as_deref(),
                reply_to: email.reply_to.as_deref(),
                headers,
                attachments: email
                    .attachments
                    .iter()
                    .map(|a| Attachment {
                        name: &a.filename,
                        kind: &a.content_type,
                        data: a.placeholder(Encoding::Base64),
                    })
                    .collect(),
            },
            metadata,
        };
        Request::json(&body)
    }

    fn callbacks(&self) -> Option<&dyn Callbacks> {
        self.callbacks.as_ref().map(|c| c as &dyn Callbacks)
    }

    async fn send_prepared(
        &self,
        request: &Request,
        _message: &Message,
        key: &ProviderKey,
    ) -> SendResult {
        // Anything SparkPost echoes is scrubbed of the key before it becomes evidence.
        let result = self.transmit(request, key).await;
        self.redactor.send(result)
    }
}

fn endpoint(base_url: &str) -> Result<Url, SparkPostError> {
    http::endpoint(base_url, TRANSMISSIONS_PATH).map_err(|reason| SparkPostError::BaseUrl {
        url: base_url.to_owned(),
        reason,
    })
}

/// A non-2xx answer, by status and SparkPost's error `code` (see the crate docs for the table).
fn classify_error(status: StatusCode, headers: &HeaderMap, body: &str) -> SendResult {
    let code = ErrorBody::code_of(body);
    let evidence = || Evidence::new("response", body).with_status(status.as_u16());
    let result = match (status.as_u16(), code.as_deref()) {
        // The first request with this key is still being processed and this one was not: the
        // first one's own attempt carries the ambiguity, if any.
        (409, Some(KEY_IN_PROGRESS)) => SendResult::transient(evidence(), retry_after(headers)),
        // SparkPost holds another payload under this key: it processed an earlier request.
        // herald replays the stored request byte for byte, so this means the first request
        // differed (herald's own older version, or another sender using the key) — proof of
        // processing, never of refusal.
        (409, Some(KEY_REUSED)) => SendResult::KeyReused {
            evidence: evidence(),
        },
        // A daily, monthly or sandbox sending limit: "no messages are sent".
        (420, _) => SendResult::transient(evidence(), retry_after(headers)),
        _ => classify_failure_status(status, headers, body, RULES),
    };
    with_vendor_code(result, code)
}
