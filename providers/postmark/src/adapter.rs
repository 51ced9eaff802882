//! Herald's adapter for Postmark (`provider = "postmark"`): one `POST /email` per send with
//! herald's key in the message's metadata, and a look-up of the outbound messages by that
//! metadata, classified as the crate docs say.
//!
//! Postmark takes no idempotency key, so a resend is a second email: an ambiguous send is
//! settled by the look-up, which finds the message by `metadata_herald_key` once Postmark has
//! listed it (after the route's visibility lag), or proves it absent after that lag.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use herald_provider::callback::{BasicCredentials, Callbacks, CredentialsError};
use herald_provider::http::{
    self, Answer, StatusRules, classify_failure_status, exchange, look_up, unreadable_success,
    with_vendor_code,
};
use herald_provider::{
    Adapter, Capabilities, Encoding, Evidence, Message, ProviderKey, QueryResult, Redactor,
    Request, SendResult,
};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};

use crate::callback::PostmarkCallbacks;
use crate::wire::{
    self, Attachment, EMAIL_PATH, Header, INACTIVE_RECIPIENT, KEY_FILTER, KEY_METADATA,
    MessageList, OUTBOUND_PATH, SERVER_TOKEN, SendEmail,
};

/// Postmark's API root.
pub const DEFAULT_BASE_URL: &str = "https://api.postmarkapp.com";

/// The message stream of transactional email, Postmark's default.
pub const DEFAULT_MESSAGE_STREAM: &str = "outbound";

/// How long after a send the outbound search can be trusted to list it. Postmark documents no
/// figure, so herald waits as long as it does for Mailjet before it reads absence as "not
/// sent"; a route can set its own (`visibility_lag_ms`).
pub const DEFAULT_VISIBILITY_LAG: Duration = Duration::from_secs(15 * 60);

/// "The maximum message size, including attachments, is 10 MB"
/// (<https://postmarkapp.com/developer/api/email-api>); decimal megabytes, the smaller reading.
pub const MAX_MESSAGE_BYTES: usize = 10_000_000;

/// How many listed messages one look-up asks for: one notification's sends, many times over.
const PAGE: &str = "50";

/// Postmark documents neither 409 nor 503 as "not processed": the shared table applies.
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// A route's settings, already resolved by herald.
#[derive(Debug, Clone)]
pub struct PostmarkRoute {
    /// [`DEFAULT_BASE_URL`], or a stand-in such as the fake's.
    pub base_url: String,
    /// The server token; sent as `X-Postmark-Server-Token` and nowhere else.
    pub server_token: SecretString,
    /// The sender, e.g. `Acme <notify@acme.example>`, a confirmed sender signature or domain.
    pub from: String,
    /// The message stream (default [`DEFAULT_MESSAGE_STREAM`]).
    pub message_stream: String,
    /// How long after a send the look-up is trusted to list it.
    pub visibility_lag: Duration,
    /// The whole exchange, connect to last body byte.
    pub timeout: Duration,
    /// The HTTP Basic user name of the webhook URL configured in Postmark; with
    /// `callback_password`, the route reads Postmark's webhooks ([`Adapter::callbacks`]).
    pub callback_username: Option<String>,
    /// Its password; set both or neither.
    pub callback_password: Option<SecretString>,
}

#[derive(Debug, thiserror::Error)]
pub enum PostmarkError {
    #[error("the Postmark base_url `{url}` is not an http(s) URL: {reason}")]
    BaseUrl { url: String, reason: String },
    /// The token itself is never part of the message.
    #[error("the Postmark server token has characters that an HTTP header cannot carry")]
    ServerToken,
    #[error("a Postmark route needs a visibility_lag above zero")]
    VisibilityLag,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// Says which credential is wrong, never what the password is.
    #[error("a Postmark route that reads webhooks {0}")]
    Callback(#[source] CredentialsError),
}

pub struct PostmarkAdapter {
    /// How long one call may take: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    email_url: Url,
    outbound_url: Url,
    /// The token, marked sensitive so that no header dump shows it.
    token: HeaderValue,
    /// Scrubs the token, in every form, from anything a vendor answer might echo.
    redactor: Redactor,
    from: String,
    message_stream: String,
    capabilities: Capabilities,
    /// Set when the route has webhook credentials.
    callbacks: Option<PostmarkCallbacks>,
}

impl fmt::Debug for PostmarkAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostmarkAdapter")
            .field("email_url", &self.email_url.as_str())
            .field("from", &self.from)
            .field("message_stream", &self.message_stream)
            .field("server_token", &"[REDACTED]")
            .field("capabilities", &self.capabilities)
            .field("callbacks", &self.callbacks.is_some())
            .finish_non_exhaustive()
    }
}

impl PostmarkAdapter {
    /// Builds the adapter at start-up. reqwest needs a rustls crypto provider to be installed
    /// first (herald's main installs ring); without one, building the client panics inside
    /// reqwest.
    pub fn new(route: PostmarkRoute) -> Result<Self, PostmarkError> {
        if route.visibility_lag.is_zero() {
            return Err(PostmarkError::VisibilityLag);
        }
        let email_url = endpoint(&route.base_url, EMAIL_PATH)?;
        let outbound_url = endpoint(&route.base_url, OUTBOUND_PATH)?;
        let mut token = HeaderValue::from_str(route.server_token.expose_secret())
            .map_err(|_| PostmarkError::ServerToken)?;
        token.set_sensitive(true);
        let callbacks = BasicCredentials::configured(
            route.callback_username.as_deref(),
            route.callback_password.as_ref(),
        )
        .map_err(PostmarkError::Callback)?
        .map(PostmarkCallbacks::new);
        let http = reqwest::Client::builder()
            .timeout(route.timeout)
            .user_agent(concat!("herald-postmark/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(PostmarkError::Client)?;
        Ok(PostmarkAdapter {
            timeout: route.timeout,
            http,
            email_url,
            outbound_url,
            token,
            redactor: Redactor::secret(route.server_token.expose_secret()),
            from: route.from,
            message_stream: route.message_stream,
            callbacks,
            capabilities: Capabilities {
                tags: true,
                attachments: true,
                // Postmark deduplicates nothing: a resend is a second email.
                idempotency_window: None,
                query_visibility_lag: Some(route.visibility_lag),
                max_payload_bytes: Some(MAX_MESSAGE_BYTES),
            },
        })
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request
            .header(SERVER_TOKEN, self.token.clone())
            .header(ACCEPT, "application/json")
    }

    /// One `POST /email` of a prepared request, classified; [`Adapter::send_prepared`] scrubs
    /// the token from the result.
    async fn send_email(&self, request: &Request) -> SendResult {
        let request = self
            .authorized(self.http.post(self.email_url.clone()))
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
        let answer = serde_json::from_str::<wire::Answer>(&text).ok();
        let code = answer.as_ref().map(|answer| answer.error_code);
        if !status.is_success() {
            let result = classify_failure_status(status, &headers, &text, RULES);
            return with_vendor_code(result, code.map(|code| code.to_string()));
        }
        match answer {
            Some(wire::Answer {
                error_code: wire::OK,
                message_id: Some(id),
                ..
            }) if !id.is_empty() => SendResult::Accepted {
                provider_ref: Some(id),
                evidence: Evidence::new("response", &text).with_status(status.as_u16()),
            },
            _ => unreadable_success(
                status,
                format!("the answer has no MessageID with ErrorCode 0: {text}"),
            ),
        }
    }

    /// `GET /messages/outbound?metadata_herald_key=<key>`, read.
    async fn look_up(&self, key: &ProviderKey) -> QueryResult {
        let mut url = self.outbound_url.clone();
        url.query_pairs_mut()
            .append_pair("count", PAGE)
            .append_pair("offset", "0")
            .append_pair(KEY_FILTER, key.as_str());
        let unsupported = |evidence| QueryResult::Unsupported { evidence };
        let Answer {
            status, body: text, ..
        } = match look_up(self.authorized(self.http.get(url))).await {
            Ok(answer) => answer,
            Err(evidence) => return unsupported(evidence),
        };
        if status != StatusCode::OK {
            let evidence = Evidence::new("query", &text).with_status(status.as_u16());
            let code = serde_json::from_str::<wire::Answer>(&text)
                .ok()
                .map(|answer| answer.error_code.to_string());
            return unsupported(match code {
                Some(code) => evidence.with_vendor_code(code),
                None => evidence,
            });
        }
        let list: MessageList = match serde_json::from_str(&text) {
            Ok(list) => list,
            Err(err) => {
                return unsupported(
                    Evidence::new("query", format!("{err}: {text}")).with_status(200),
                );
            }
        };
        let evidence = |detail: String| Evidence::new("query", detail).with_status(200);
        // A listed message without our key means the filter did not hold: the page proves
        // nothing about this notification.
        if let Some(other) = list
            .messages
            .iter()
            .find(|m| m.metadata.get(KEY_METADATA).map(String::as_str) != Some(key.as_str()))
        {
            return unsupported(evidence(format!(
                "the answer lists message {} without this key in its metadata",
                other.message_id
            )));
        }
        let Some(first) = list.messages.first() else {
            if list.total_count > 0 {
                return unsupported(evidence(format!(
                    "TotalCount {} but no message listed",
                    list.total_count
                )));
            }
            return QueryResult::NotFoundYet {
                evidence: evidence("no message with this key in its metadata is listed".into()),
            };
        };
        let status = first.status.as_deref().unwrap_or("(none)");
        let detail = match list.messages.len() {
            1 => format!(
                "found message {} (status {status}) with this key",
                first.message_id
            ),
            n => format!(
                "{n} messages carry this key ({}): more than one send of this notification \
                 reached Postmark",
                list.messages
                    .iter()
                    .map(|m| m.message_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        QueryResult::Accepted {
            provider_ref: Some(first.message_id.clone()),
            evidence: evidence(detail),
        }
    }
}

#[async_trait::async_trait]
impl Adapter for PostmarkAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The `POST /email` body, herald's key in its metadata.
    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let email = &message.email;
        // Postmark refuses metadata keys that differ only in case.
        if email
            .tags
            .keys()
            .any(|name| name.eq_ignore_ascii_case(KEY_METADATA))
        {
            return Err(Evidence::new(
                "request",
                format!("the tag `{KEY_METADATA}` is herald's own on a Postmark route"),
            ));
        }
        let join = |list: &[String]| (!list.is_empty()).then(|| list.join(", "));
        let metadata: BTreeMap<&str, &str> = email
            .tags
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .chain([(KEY_METADATA, key.as_str())])
            .collect();
        let body = SendEmail {
            from: email.from.as_deref().unwrap_or(&self.from),
            to: &message.to,
            cc: join(&email.cc),
            bcc: join(&email.bcc),
            subject: message.subject.as_deref(),
            html_body: message.html.as_deref(),
            text_body: message.text.as_deref(),
            reply_to: email.reply_to.as_deref(),
            headers: email
                .headers
                .iter()
                .map(|(name, value)| Header { name, value })
                .collect(),
            metadata,
            attachments: email
                .attachments
                .iter()
                .map(|a| Attachment {
                    name: &a.filename,
                    content: a.placeholder(Encoding::Base64),
                    content_type: &a.content_type,
                })
                .collect(),
            message_stream: &self.message_stream,
        };
        Request::json(&body)
    }

    fn callbacks(&self) -> Option<&dyn Callbacks> {
        self.callbacks.as_ref().map(|c| c as &dyn Callbacks)
    }

    /// An inactive recipient (406): Postmark stopped mailing the address after a hard bounce,
    /// a spam complaint or an unsubscribe, so herald suppresses it too.
    fn unsubscribed(&self, evidence: &Evidence) -> bool {
        evidence
            .vendor_code
            .as_deref()
            .and_then(|code| code.parse::<i64>().ok())
            == Some(INACTIVE_RECIPIENT)
    }

    async fn send_prepared(
        &self,
        request: &Request,
        _message: &Message,
        _key: &ProviderKey,
    ) -> SendResult {
        // Anything Postmark echoes is scrubbed of the token before it becomes evidence.
        let result = self.send_email(request).await;
        self.redactor.send(result)
    }

    async fn query_prepared(
        &self,
        _request: &Request,
        _message: &Message,
        key: &ProviderKey,
    ) -> QueryResult {
        let result = self.look_up(key).await;
        self.redactor.query(result)
    }
}

fn endpoint(base_url: &str, path: &str) -> Result<Url, PostmarkError> {
    http::endpoint(base_url, path).map_err(|reason| PostmarkError::BaseUrl {
        url: base_url.to_owned(),
        reason,
    })
}
