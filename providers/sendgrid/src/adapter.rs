//! Herald's adapter for SendGrid (`provider = "sendgrid"`): one `POST /v3/mail/send` per send
//! with herald's key as a custom argument, and, where the account has Email Activity, a
//! look-up of the messages carrying that argument; classified as the crate docs say.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use herald_provider::callback::Callbacks;
use herald_provider::http::{
    self, Answer, StatusRules, classify_failure_status, exchange, look_up, retry_after,
    unreadable_success,
};
use herald_provider::{
    Adapter, Capabilities, Encoding, Evidence, Message, ProviderKey, QueryResult, Redactor,
    Request, SendResult, split_mailbox,
};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use time::OffsetDateTime;

use crate::callback::{PublicKeyError, SendGridCallbacks, WebhookKey};
use crate::wire::{
    Address, Attachment, Content, KEY_ARG, MAIL_SEND_PATH, MESSAGE_ID, MESSAGES_PATH, MailSend,
    MessageList, Personalization, RATELIMIT_RESET, key_query,
};

/// SendGrid's API root (an EU subuser uses `https://api.eu.sendgrid.com`).
pub const DEFAULT_BASE_URL: &str = "https://api.sendgrid.com";

/// How long after a send the Email Activity filter can be trusted to list it. SendGrid
/// documents no figure, so herald waits as long as it does for Mailjet and Postmark; a route
/// can set its own (`visibility_lag_ms`).
pub const DEFAULT_VISIBILITY_LAG: Duration = Duration::from_secs(15 * 60);

/// "The total size of your email, including attachments, must be less than 30MB"
/// (<https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send>).
pub const MAX_EMAIL_BYTES: usize = 30_000_000;

/// How many listed messages one look-up asks for: one notification's sends, many times over.
const PAGE: &str = "10";

/// SendGrid documents neither 409 nor 503 as "not processed": the shared table applies.
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// A route's settings, already resolved by herald.
#[derive(Debug, Clone)]
pub struct SendGridRoute {
    /// [`DEFAULT_BASE_URL`], or a stand-in such as the fake's.
    pub base_url: String,
    /// `SG.…`; sent as `Authorization: Bearer <key>` and nowhere else.
    pub api_key: SecretString,
    /// The sender, e.g. `Acme <notify@acme.example>`, a verified sender or domain.
    pub from: String,
    /// Look sends up through Email Activity (a paid add-on): only where the account has it.
    /// Set, this is how long after a send the look-up is trusted to list it.
    pub activity_lookup: Option<Duration>,
    /// The whole exchange, connect to last body byte.
    pub timeout: Duration,
    /// The Event Webhook's verification key (base64 DER, as SendGrid shows it); set, the route
    /// reads SendGrid's signed events ([`Adapter::callbacks`]).
    pub webhook_public_key: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SendGridError {
    #[error("the SendGrid base_url `{url}` is not an http(s) URL: {reason}")]
    BaseUrl { url: String, reason: String },
    /// The key itself is never part of the message.
    #[error("the SendGrid API key has characters that an HTTP header cannot carry")]
    ApiKey,
    #[error("a SendGrid route's visibility_lag must be above zero")]
    VisibilityLag,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("the SendGrid webhook_public_key {0}")]
    WebhookPublicKey(#[source] PublicKeyError),
}

pub struct SendGridAdapter {
    /// How long one call may take: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    send_url: Url,
    messages_url: Url,
    /// `Bearer <key>`, marked sensitive so that no header dump shows it.
    authorization: HeaderValue,
    /// Scrubs the key, in every form, from anything a vendor answer might echo.
    redactor: Redactor,
    from: String,
    capabilities: Capabilities,
    /// Set when the route has the Event Webhook's key.
    callbacks: Option<SendGridCallbacks>,
}

impl fmt::Debug for SendGridAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendGridAdapter")
            .field("send_url", &self.send_url.as_str())
            .field("from", &self.from)
            .field("api_key", &"[REDACTED]")
            .field("capabilities", &self.capabilities)
            .field("callbacks", &self.callbacks.is_some())
            .finish_non_exhaustive()
    }
}

impl SendGridAdapter {
    /// Builds the adapter at start-up. reqwest needs a rustls crypto provider to be installed
    /// first (herald's main installs ring); without one, building the client panics inside
    /// reqwest.
    pub fn new(route: SendGridRoute) -> Result<Self, SendGridError> {
        if route.activity_lookup.is_some_and(|lag| lag.is_zero()) {
            return Err(SendGridError::VisibilityLag);
        }
        let send_url = endpoint(&route.base_url, MAIL_SEND_PATH)?;
        let messages_url = endpoint(&route.base_url, MESSAGES_PATH)?;
        let mut authorization =
            HeaderValue::from_str(&format!("Bearer {}", route.api_key.expose_secret()))
                .map_err(|_| SendGridError::ApiKey)?;
        authorization.set_sensitive(true);
        let callbacks = route
            .webhook_public_key
            .as_deref()
            .map(WebhookKey::parse)
            .transpose()
            .map_err(SendGridError::WebhookPublicKey)?
            .map(SendGridCallbacks::new);
        let http = reqwest::Client::builder()
            .timeout(route.timeout)
            .user_agent(concat!("herald-sendgrid/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(SendGridError::Client)?;
        Ok(SendGridAdapter {
            timeout: route.timeout,
            http,
            send_url,
            messages_url,
            authorization,
            redactor: Redactor::secret(route.api_key.expose_secret()),
            from: route.from,
            callbacks,
            capabilities: Capabilities {
                tags: true,
                attachments: true,
                // SendGrid documents no idempotency key: a resend is a second email.
                idempotency_window: None,
                query_visibility_lag: route.activity_lookup,
                max_payload_bytes: Some(MAX_EMAIL_BYTES),
            },
        })
    }

    /// One `POST /v3/mail/send` of a prepared request, classified.
    async fn send_mail(&self, request: &Request) -> SendResult {
        let request = self
            .http
            .post(self.send_url.clone())
            .header(AUTHORIZATION, self.authorization.clone())
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
        let evidence =
            |detail: &str| Evidence::new("response", detail).with_status(status.as_u16());
        match status.as_u16() {
            // "Your message is both valid, and queued to be delivered", its id in a header: a
            // 202 without one is not an answer the adapter can read.
            202 => match headers
                .get(MESSAGE_ID)
                .and_then(|id| id.to_str().ok())
                .filter(|id| !id.is_empty())
            {
                Some(id) => SendResult::Accepted {
                    provider_ref: Some(id.to_owned()),
                    evidence: evidence(&text),
                },
                None => unreadable_success(status, format!("no X-Message-Id: {text}")),
            },
            // "Your message is valid, but it is not queued to be delivered" (sandbox mode):
            // nothing goes out.
            200 => SendResult::permanent(evidence(&format!(
                "valid but not queued (sandbox mode): {text}"
            ))),
            429 => SendResult::transient(evidence(&text), rate_limit_wait(&headers)),
            _ => classify_failure_status(status, &headers, &text, RULES),
        }
    }

    /// `GET /v3/messages?query=unique_args['herald_key']="<key>"`, read.
    async fn look_up(&self, key: &ProviderKey) -> QueryResult {
        let mut url = self.messages_url.clone();
        url.query_pairs_mut()
            .append_pair("query", &key_query(key.as_str()))
            .append_pair("limit", PAGE);
        let unsupported = |evidence| QueryResult::Unsupported { evidence };
        let request = self
            .http
            .get(url)
            .header(AUTHORIZATION, self.authorization.clone());
        let Answer {
            status, body: text, ..
        } = match look_up(request).await {
            Ok(answer) => answer,
            Err(evidence) => return unsupported(evidence),
        };
        if status != StatusCode::OK {
            return unsupported(Evidence::new("query", &text).with_status(status.as_u16()));
        }
        let evidence = |detail: String| Evidence::new("query", detail).with_status(200);
        let list: MessageList = match serde_json::from_str(&text) {
            Ok(list) => list,
            Err(err) => return unsupported(evidence(format!("{err}: {text}"))),
        };
        let ids: Vec<&str> = list
            .messages
            .iter()
            .map(|m| message_id(&m.msg_id))
            .collect();
        let Some(first) = ids.first() else {
            return QueryResult::NotFoundYet {
                evidence: evidence(format!("no message with the custom argument {KEY_ARG}")),
            };
        };
        let detail = match ids.len() {
            1 => format!("found message {first} with this key"),
            n => format!(
                "{n} messages carry this key ({}): more than one send of this notification \
                 reached SendGrid",
                ids.join(", ")
            ),
        };
        QueryResult::Accepted {
            provider_ref: Some((*first).to_owned()),
            evidence: evidence(detail),
        }
    }
}

/// A mailbox written `Name <address>` or bare, as SendGrid's `{email, name}`.
fn address(mailbox: &str) -> Address<'_> {
    let (name, email) = split_mailbox(mailbox);
    Address { email, name }
}

/// The message id an Email Activity `msg_id` or an event's `sg_message_id` names: the part
/// before the first `.`, which is what the send answered as `X-Message-Id`.
pub(crate) fn message_id(id: &str) -> &str {
    id.split_once('.').map_or(id, |(head, _)| head)
}

#[async_trait::async_trait]
impl Adapter for SendGridAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The `POST /v3/mail/send` body, herald's key in its custom arguments.
    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let email = &message.email;
        if email.tags.contains_key(KEY_ARG) {
            // Events and the look-up name the notification by it: a message's own would
            // misname it.
            return Err(Evidence::new(
                "request",
                format!("the tag `{KEY_ARG}` is herald's own on a SendGrid route"),
            ));
        }
        let custom_args: BTreeMap<&str, &str> = email
            .tags
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .chain([(KEY_ARG, key.as_str())])
            .collect();
        let content = [
            ("text/plain", message.text.as_deref()),
            ("text/html", message.html.as_deref()),
        ]
        .into_iter()
        .filter_map(|(kind, value)| value.map(|value| Content { kind, value }))
        .collect();
        let body = MailSend {
            personalizations: [Personalization {
                to: [Address {
                    email: &message.to,
                    name: None,
                }],
                cc: email.cc.iter().map(|mailbox| address(mailbox)).collect(),
                bcc: email.bcc.iter().map(|mailbox| address(mailbox)).collect(),
                custom_args,
            }],
            from: address(email.from.as_deref().unwrap_or(&self.from)),
            reply_to: email.reply_to.as_deref().map(address),
            subject: message.subject.as_deref(),
            content,
            attachments: email
                .attachments
                .iter()
                .map(|a| Attachment {
                    content: a.placeholder(Encoding::Base64),
                    kind: &a.content_type,
                    filename: &a.filename,
                })
                .collect(),
            headers: &email.headers,
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
        _key: &ProviderKey,
    ) -> SendResult {
        // Anything SendGrid echoes is scrubbed of the key before it becomes evidence.
        let result = self.send_mail(request).await;
        self.redactor.send(result)
    }

    async fn query_prepared(
        &self,
        _request: &Request,
        _message: &Message,
        key: &ProviderKey,
    ) -> QueryResult {
        if self.capabilities.query_visibility_lag.is_none() {
            return QueryResult::Unsupported {
                evidence: Evidence::new(
                    "query",
                    "this route has no outcome query: Email Activity is off (activity_lookup)",
                ),
            };
        }
        let result = self.look_up(key).await;
        self.redactor.query(result)
    }
}

fn endpoint(base_url: &str, path: &str) -> Result<Url, SendGridError> {
    http::endpoint(base_url, path).map_err(|reason| SendGridError::BaseUrl {
        url: base_url.to_owned(),
        reason,
    })
}

/// How long a 429 asks us to wait: `retry-after`, else until `x-ratelimit-reset` (a unix time),
/// per the rate-limits page.
fn rate_limit_wait(headers: &HeaderMap) -> Option<Duration> {
    retry_after(headers).or_else(|| {
        let reset: i64 = headers
            .get(RATELIMIT_RESET)?
            .to_str()
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let wait = reset - OffsetDateTime::now_utc().unix_timestamp();
        Some(Duration::from_secs(wait.clamp(0, 60 * 60) as u64))
    })
}
