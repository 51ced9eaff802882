//! Herald's adapter for Resend (`provider = "resend"`): one `POST /emails` per send, under the
//! notification's stable `Idempotency-Key`, classified where the exchange ended.
//!
//! The crate docs state the classification table and the sources; this module implements it.
//! Three answers differ from `herald_provider::http`'s shared table: a 409
//! `concurrent_idempotent_requests` is a transient rejection (the first request with the key is
//! still in progress, this one was not processed), a 409 `invalid_idempotent_request` is
//! [`SendResult::KeyReused`] (an earlier request under the key was processed), and a 429
//! without `Retry-After` takes its wait from `ratelimit-reset`.

use std::fmt;
use std::time::Duration;

use herald_provider::callback::Callbacks;
use herald_provider::http::{
    self, Answer, StatusRules, classify_failure_status, exchange, retry_after, unreadable_success,
    with_vendor_code,
};
use herald_provider::signature::{SecretError, SigningSecret};
use herald_provider::{
    Adapter, Capabilities, Encoding, Evidence, Message, ProviderKey, Redactor, Request, SendResult,
};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};

use crate::callback::ResendCallbacks;
use crate::wire::{
    Attachment, CONCURRENT_IDEMPOTENT_REQUESTS, EMAILS_PATH, ErrorBody, IDEMPOTENCY_KEY,
    INVALID_IDEMPOTENT_REQUEST, KEY_TAG, RATELIMIT_RESET, SendEmail, SentEmail, Tag, is_tag_text,
};

/// Resend's public API root.
pub const DEFAULT_BASE_URL: &str = "https://api.resend.com";

/// Resend keeps an idempotency key for 24 hours
/// (<https://resend.com/docs/dashboard/emails/idempotency-keys>).
pub const IDEMPOTENCY_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

/// "max 40MB per email, after Base64 encoding of the attachments"
/// (<https://resend.com/docs/api-reference/emails/send-email>); decimal megabytes, the smaller
/// reading.
pub const MAX_EMAIL_BYTES: usize = 40_000_000;

/// The tag that carries herald's notification id, so that Resend's dashboard and webhooks can be
/// matched back to a notification.
const NOTIFICATION_TAG: &str = "herald_notification_id";

/// Resend documents nothing special about 409 or 503 beyond what `classify_error` handles by
/// the error's `name`, so the shared table applies as it is.
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// A route's settings, already resolved by herald.
#[derive(Debug, Clone)]
pub struct ResendRoute {
    /// [`DEFAULT_BASE_URL`], or a stand-in such as the fake's.
    pub base_url: String,
    /// `re_…`; sent as `Authorization: Bearer <key>` and nowhere else.
    pub api_key: SecretString,
    /// The sender, e.g. `Acme <notify@acme.example>`, on a domain verified in Resend.
    pub from: String,
    /// The whole exchange, connect to last body byte.
    pub timeout: Duration,
    /// The signing secret (`whsec_…`) of the Resend webhook endpoint that posts to herald; set,
    /// the route reads Resend's webhooks ([`Adapter::callbacks`]).
    pub webhook_secret: Option<SecretString>,
}

#[derive(Debug, thiserror::Error)]
pub enum ResendError {
    #[error("the Resend base_url `{url}` is not an http(s) URL: {reason}")]
    BaseUrl { url: String, reason: String },
    /// The key itself is never part of the message.
    #[error("the Resend API key has characters that an HTTP header cannot carry")]
    ApiKey,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// Says what is wrong with the secret's form, never what it contains.
    #[error("the Resend webhook secret {0}")]
    WebhookSecret(#[source] SecretError),
}

pub struct ResendAdapter {
    /// How long one call may take: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    emails_url: Url,
    /// `Bearer <key>`, marked sensitive so that no header dump shows it.
    authorization: HeaderValue,
    /// Scrubs the key, in every form, from anything a vendor answer might echo.
    redactor: Redactor,
    from: String,
    capabilities: Capabilities,
    /// Set when the route has a webhook secret.
    callbacks: Option<ResendCallbacks>,
}

impl fmt::Debug for ResendAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResendAdapter")
            .field("emails_url", &self.emails_url.as_str())
            .field("from", &self.from)
            .field("api_key", &"[REDACTED]")
            .field("capabilities", &self.capabilities)
            .field(
                "webhook_secret",
                &self.callbacks.as_ref().map(|_| "[REDACTED]"),
            )
            .finish_non_exhaustive()
    }
}

impl ResendAdapter {
    /// Builds the adapter at start-up. reqwest needs a rustls crypto provider to be installed
    /// first (herald's main installs ring); without one, building the client panics inside
    /// reqwest.
    pub fn new(route: ResendRoute) -> Result<Self, ResendError> {
        let emails_url = endpoint(&route.base_url)?;
        let mut authorization =
            HeaderValue::from_str(&format!("Bearer {}", route.api_key.expose_secret()))
                .map_err(|_| ResendError::ApiKey)?;
        authorization.set_sensitive(true);
        let callbacks = route
            .webhook_secret
            .as_ref()
            .map(SigningSecret::parse)
            .transpose()
            .map_err(ResendError::WebhookSecret)?
            .map(ResendCallbacks::new);
        let http = reqwest::Client::builder()
            .timeout(route.timeout)
            // Resend refuses requests without a User-Agent (403, error 1010) before they reach
            // the API: https://resend.com/docs/knowledge-base/403-error-1010.
            .user_agent(concat!("herald-resend/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(ResendError::Client)?;
        Ok(ResendAdapter {
            timeout: route.timeout,
            http,
            emails_url,
            authorization,
            redactor: Redactor::secret(route.api_key.expose_secret()),
            from: route.from,
            callbacks,
            capabilities: Capabilities {
                tags: true,
                attachments: true,
                idempotency_window: Some(IDEMPOTENCY_WINDOW),
                // Resend can fetch an email by its own id, but not by our key or reference
                // (its docs name no look-up by key); a replay inside the window is the
                // reconciliation instead.
                query_visibility_lag: None,
                max_payload_bytes: Some(MAX_EMAIL_BYTES),
            },
        })
    }

    /// One `POST /emails` of a prepared request, classified; [`Adapter::send_prepared`] scrubs
    /// the key from the result.
    async fn send_email(&self, request: &Request, key: &ProviderKey) -> SendResult {
        // Checked here, before any I/O, so that the evidence names the key rather than a
        // builder error.
        let Ok(idempotency_key) = HeaderValue::from_str(key.as_str()) else {
            return SendResult::permanent(Evidence::new(
                "request",
                "the idempotency key cannot be sent as a header",
            ));
        };
        let request = self
            .http
            .post(self.emails_url.clone())
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
        match serde_json::from_str::<SentEmail>(&text) {
            Ok(sent) if !sent.id.is_empty() => SendResult::Accepted {
                provider_ref: Some(sent.id),
                evidence: Evidence::new("response", &text).with_status(status.as_u16()),
            },
            Ok(_) => unreadable_success(status, format!("the answer has an empty id: {text}")),
            Err(err) => unreadable_success(status, format!("{err}: {text}")),
        }
    }
}

#[async_trait::async_trait]
impl Adapter for ResendAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The `POST /emails` body. herald stores it at the first attempt and replays it byte for
    /// byte, which is what Resend compares a repeated key against: an attachment's content is a
    /// placeholder here, which herald replaces with the same bytes before every send.
    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let email = &message.email;
        if email.tags.contains_key(KEY_TAG) {
            // Webhooks name the notification by this tag: a message's own would misname it.
            return Err(Evidence::new(
                "request",
                format!("the tag `{KEY_TAG}` is herald's own on a Resend route"),
            ));
        }
        let own = is_tag_text(&message.notification_id).then_some(Tag {
            name: NOTIFICATION_TAG,
            value: &message.notification_id,
        });
        // Resend echoes the tags in every webhook about the email, so the key names the
        // notification's attempts. herald's keys (a UUID, maybe `-f1`) fit the tag alphabet.
        let stamped = is_tag_text(key.as_str()).then_some(Tag {
            name: KEY_TAG,
            value: key.as_str(),
        });
        let tags = own
            .into_iter()
            .chain(stamped)
            .chain(email.tags.iter().map(|(name, value)| Tag { name, value }))
            .collect();
        let body = SendEmail {
            from: email.from.as_deref().unwrap_or(&self.from),
            to: [&message.to],
            cc: &email.cc,
            bcc: &email.bcc,
            reply_to: email.reply_to.as_deref(),
            subject: message.subject.as_deref(),
            html: message.html.as_deref(),
            text: message.text.as_deref(),
            tags,
            headers: &email.headers,
            attachments: email
                .attachments
                .iter()
                .map(|a| Attachment {
                    filename: &a.filename,
                    content: a.placeholder(Encoding::Base64),
                    content_type: &a.content_type,
                })
                .collect(),
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
        // Anything Resend echoes is scrubbed of the key before it becomes evidence.
        let result = self.send_email(request, key).await;
        self.redactor.send(result)
    }
}

fn endpoint(base_url: &str) -> Result<Url, ResendError> {
    http::endpoint(base_url, EMAILS_PATH).map_err(|reason| ResendError::BaseUrl {
        url: base_url.to_owned(),
        reason,
    })
}

/// A non-2xx answer, by status and Resend's error `name` (see the crate docs for the table).
fn classify_error(status: StatusCode, headers: &HeaderMap, body: &str) -> SendResult {
    let name = serde_json::from_str::<ErrorBody>(body)
        .ok()
        .map(|error| error.name);
    let evidence = || Evidence::new("response", body).with_status(status.as_u16());
    let result = match (status.as_u16(), name.as_deref()) {
        // The first request with this key is still being processed and this one was not: the
        // first one's own attempt carries the ambiguity, if any.
        (409, Some(CONCURRENT_IDEMPOTENT_REQUESTS)) => {
            SendResult::transient(evidence(), retry_after(headers))
        }
        // Resend holds another request under this key: it processed an earlier one. herald
        // replays the stored request byte for byte, so this means the first request differed
        // (herald's own older version, or another sender using the key) — proof of processing.
        (409, Some(INVALID_IDEMPOTENT_REQUEST)) => SendResult::KeyReused {
            evidence: evidence(),
        },
        (429, _) => SendResult::transient(evidence(), rate_limit_wait(headers)),
        _ => classify_failure_status(status, headers, body, RULES),
    };
    with_vendor_code(result, name)
}

/// How long a 429 asks us to wait: `retry-after`, else `ratelimit-reset` (seconds until the
/// window resets), per <https://resend.com/docs/api-reference/rate-limit>.
fn rate_limit_wait(headers: &HeaderMap) -> Option<Duration> {
    retry_after(headers).or_else(|| {
        headers
            .get(RATELIMIT_RESET)?
            .to_str()
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()
            .map(Duration::from_secs)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn a_rate_limit_wait_prefers_retry_after_and_falls_back_to_ratelimit_reset() {
        let both = headers(&[("retry-after", "3"), ("ratelimit-reset", "9")]);
        assert_eq!(rate_limit_wait(&both), Some(Duration::from_secs(3)));
        let reset_only = headers(&[("ratelimit-reset", "9")]);
        assert_eq!(rate_limit_wait(&reset_only), Some(Duration::from_secs(9)));
        assert_eq!(rate_limit_wait(&HeaderMap::new()), None);
    }
}
