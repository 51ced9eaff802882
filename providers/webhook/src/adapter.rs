//! Herald's adapter for webhook receivers (`provider = "webhook"`): one signed POST per send.
//!
//! The order of the checks is the order of the exchange, so that each refusal is classified
//! where it happens: the message itself (channel, URL, payload, key), then the destination
//! (the SSRF guard, here for IP literals and in the resolver for names), then the wire.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use herald_provider::http::{
    StatusRules, UrlOwner, classify_failure_status, classify_transport_error, error_chain,
    no_answer_within, record_destination, retry_after,
};
use herald_provider::timeout::{OUT_OF_THE_WAY, within};
use herald_provider::{
    Adapter, Capabilities, Channel, EVIDENCE_EXCERPT_BYTES, Evidence, Message, ProviderKey,
    Request, SendResult, excerpt,
};
use reqwest::header::{CONTENT_TYPE, HeaderValue, LOCATION};
use reqwest::{Method, Response, StatusCode, Url, redirect};
use secrecy::SecretString;

use crate::destination::{GuardedResolver, Refused, check_literal, find_refusal};
use crate::signature::{SecretError, SigningSecret, signature_header};

/// The Standard Webhooks headers (spec, "Webhook headers").
pub const WEBHOOK_ID: &str = "webhook-id";
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";
/// W3C Trace Context's header, sent where the message carries a trace.
pub const TRACEPARENT: &str = "traceparent";

/// The spec recommends a request timeout "somewhere between 15 and 30s".
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);
pub const DEFAULT_USER_AGENT: &str = concat!("herald-webhook/", env!("CARGO_PKG_VERSION"));

/// Receivers document nothing vendor-specific: 503 may come after processing, and 409 is not
/// an idempotency conflict, so both keep the conservative defaults (see the crate docs).
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// A webhook route's settings. There is no base URL: each notification names its receiver in
/// [`Message::to`].
#[derive(Debug, Clone)]
pub struct WebhookRoute {
    /// `whsec_<base64>` signing secrets, each 24–64 bytes decoded. Every request is signed with
    /// all of them, in this order (newest first, by convention), so a receiver can rotate.
    pub secrets: Vec<SecretString>,
    /// The whole exchange, connect to the last byte read; half of it bounds the connect.
    pub timeout: Duration,
    /// Lets webhooks reach loopback, private, link-local and other non-public addresses. Off
    /// in production: a notification's URL is chosen by whoever enqueues it.
    pub allow_private_networks: bool,
    /// Refuse payloads larger than this many bytes of JSON (declared as a capability).
    pub max_payload_bytes: Option<usize>,
    /// `User-Agent`; [`DEFAULT_USER_AGENT`] if `None`.
    pub user_agent: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("a webhook route needs at least one signing secret (whsec_…)")]
    NoSecrets,
    /// `index` counts from 1, as the secrets are listed in the configuration.
    #[error("signing secret #{index} {problem}")]
    Secret { index: usize, problem: SecretError },
    #[error("the user agent is not a valid header value")]
    UserAgent,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

#[derive(Debug, Clone)]
pub struct WebhookAdapter {
    /// How long one call may take: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    secrets: Vec<SigningSecret>,
    /// `application/json` unless [`WebhookAdapter::with_content_type`] says otherwise.
    content_type: HeaderValue,
    allow_private_networks: bool,
    capabilities: Capabilities,
}

impl WebhookAdapter {
    /// Builds the adapter at start-up. Fails on a malformed secret (without quoting it), and if
    /// reqwest cannot build a client, which includes no rustls crypto provider being installed.
    pub fn new(route: WebhookRoute) -> Result<Self, WebhookError> {
        if route.secrets.is_empty() {
            return Err(WebhookError::NoSecrets);
        }
        let secrets = route
            .secrets
            .iter()
            .enumerate()
            .map(|(i, secret)| {
                SigningSecret::parse(secret).map_err(|problem| WebhookError::Secret {
                    index: i + 1,
                    problem,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let user_agent = route.user_agent.as_deref().unwrap_or(DEFAULT_USER_AGENT);
        let user_agent = HeaderValue::from_str(user_agent).map_err(|_| WebhookError::UserAgent)?;

        let mut builder = reqwest::Client::builder()
            .timeout(route.timeout)
            // A connect that fails inside this bound is a rejection (nothing was written); left
            // to the overall timeout it would surface as an ambiguous timeout instead.
            .connect_timeout(route.timeout / 2)
            // The spec counts 3xx as a failure and following one would reach a URL nobody
            // checked; a proxy would move the SSRF check to the proxy's address.
            .redirect(redirect::Policy::none())
            .no_proxy()
            .user_agent(user_agent);
        if !route.allow_private_networks {
            builder = builder.dns_resolver(std::sync::Arc::new(GuardedResolver));
        }
        Ok(WebhookAdapter {
            timeout: route.timeout,
            http: builder.build()?,
            secrets,
            content_type: HeaderValue::from_static("application/json"),
            allow_private_networks: route.allow_private_networks,
            capabilities: Capabilities {
                // Receivers may dedup on webhook-id, but that is each receiver's promise, not
                // one herald can rely on: no window is declared.
                idempotency_window: None,
                query_visibility_lag: None,
                max_payload_bytes: route.max_payload_bytes,
                tags: false,
                attachments: false,
            },
        })
    }

    /// Sends every body with this `Content-Type` instead of `application/json`: herald's event
    /// sink posts CloudEvents in structured mode, `application/cloudevents+json`, which the
    /// signature does not cover and receivers still parse as JSON.
    pub fn with_content_type(mut self, content_type: &'static str) -> Self {
        self.content_type = HeaderValue::from_static(content_type);
        self
    }

    /// Where `message` goes, checked before any connection (a refusal here is permanent: a
    /// resend of the same notification would fail the same way).
    fn destination(&self, message: &Message) -> Result<Url, Evidence> {
        if message.channel != Channel::Webhook {
            return Err(Evidence::new(
                "request",
                format!(
                    "the webhook adapter sends webhooks, not {}",
                    message.channel
                ),
            ));
        }
        let url = Url::parse(&message.to)
            .map_err(|err| Evidence::new("request", format!("`to` is not a URL: {err}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Evidence::new(
                "request",
                format!("`to` must be http or https, not {}", url.scheme()),
            ));
        }
        // Credentials in a URL would travel as Basic auth and show up wherever the URL does.
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Evidence::new("request", "`to` must not carry credentials"));
        }
        let Some(host) = url.host() else {
            return Err(Evidence::new("request", "`to` has no host"));
        };
        if !self.allow_private_networks {
            check_literal(&host).map_err(|refused| refusal_evidence(&refused))?;
        }
        Ok(url)
    }
}

/// The spec: the id must not be user controlled "or at the very least not be allowed to
/// include any `.`", which would make the signed content ambiguous.
fn webhook_id(key: &ProviderKey) -> Result<&str, Evidence> {
    let id = key.as_str();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_graphic() && b != b'.') {
        return Err(Evidence::new(
            "request",
            "the idempotency key is not a valid webhook-id (visible ASCII without `.`)",
        ));
    }
    Ok(id)
}

#[async_trait::async_trait]
impl Adapter for WebhookAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The payload's bytes, checked with everything else that can be decided before a
    /// connection. The signature is not part of it: it covers the attempt's own timestamp.
    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        self.destination(message)?;
        webhook_id(key)?;
        let payload = match &message.payload {
            Some(payload @ serde_json::Value::Object(_)) => payload,
            _ => {
                return Err(Evidence::new(
                    "request",
                    "a webhook's payload must be a JSON object",
                ));
            }
        };
        let body = serde_json::to_string(payload)
            .map_err(|err| Evidence::new("request", format!("cannot encode the payload: {err}")))?;
        if let Some(max) = self.capabilities.max_payload_bytes
            && body.len() > max
        {
            return Err(Evidence::new(
                "request",
                format!(
                    "the payload is {} bytes; this route takes at most {max}",
                    body.len()
                ),
            ));
        }
        Ok(Request::new(body))
    }

    async fn send_prepared(
        &self,
        request: &Request,
        message: &Message,
        key: &ProviderKey,
    ) -> SendResult {
        let (url, id) = match self
            .destination(message)
            .and_then(|url| Ok((url, webhook_id(key)?)))
        {
            Ok(checked) => checked,
            Err(evidence) => return SendResult::permanent(evidence),
        };
        // A clock before 1970 signs 0, which any receiver refuses as stale: still a refusal.
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs() as i64);
        // Signed here, over the stored bytes, so that the signed bytes are the sent bytes.
        let signature = signature_header(&self.secrets, id, timestamp, request.body.as_bytes());
        record_destination(&Method::POST, &url, UrlOwner::Recipient);
        // Cut by `within`, which reads an answer that waits for a process woken from a freeze;
        // reqwest's own timer would fire first and lose it, so it is only a backstop.
        let mut call = self
            .http
            .post(url)
            .header(CONTENT_TYPE, self.content_type.clone())
            .header(WEBHOOK_ID, id)
            .header(WEBHOOK_TIMESTAMP, timestamp)
            .header(WEBHOOK_SIGNATURE, signature);
        // The receiver joins the sender's trace (W3C Trace Context); a value that is no header
        // is not herald's (it sends only ones it parsed), and is left out rather than fail.
        if let Some(trace_parent) = message
            .trace_parent
            .as_deref()
            .and_then(|value| HeaderValue::from_str(value).ok())
        {
            call = call.header(TRACEPARENT, trace_parent);
        }
        let call = call
            .body(request.body.clone())
            .timeout(OUT_OF_THE_WAY)
            .send();
        let started = tokio::time::Instant::now();
        let response = match within(self.timeout, call).await {
            Some(Ok(response)) => response,
            None => return no_answer_within(self.timeout),
            // The attempt already records its URL, which may carry a receiver's token in its
            // path; the error text does not need it.
            Some(Err(err)) => {
                let err = err.without_url();
                return match find_refusal(&err) {
                    Some(refused) => SendResult::permanent(refusal_evidence(refused)),
                    None => classify_transport_error(&err),
                };
            }
        };
        let left = self.timeout.saturating_sub(started.elapsed());
        classify_answer(response, left).await
    }
}

/// Classifies a receiver's answer by status (spec, "Delivery success and failure").
/// `left`: how much of the route's timeout the body may still take.
async fn classify_answer(response: Response, left: Duration) -> SendResult {
    let status = response.status();
    let headers = response.headers().clone();
    let body = within(left, read_excerpt(response))
        .await
        .unwrap_or_else(|| Err("the body did not come within the route's timeout".to_owned()));
    if status.is_success() {
        // The status line is the receiver's verdict; its body carries nothing herald needs, so
        // a body that breaks off does not make the acceptance doubtful.
        let detail = match body {
            Ok(body) if body.is_empty() => "(empty body)".to_owned(),
            Ok(body) => body,
            Err(err) => format!("(the body could not be read: {err})"),
        };
        return SendResult::Accepted {
            provider_ref: None,
            evidence: Evidence::new("response", detail).with_status(status.as_u16()),
        };
    }
    let body = body.unwrap_or_else(|err| format!("(the body could not be read: {err})"));
    if status.is_redirection() {
        let location = headers
            .get(LOCATION)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("(no Location)");
        return SendResult::permanent(
            Evidence::new(
                "response",
                format!(
                    "redirect to {location} not followed: Standard Webhooks counts a 3xx as a \
                     failure; point the notification at the final URL"
                ),
            )
            .with_status(status.as_u16()),
        );
    }
    let note = match status {
        StatusCode::GONE => Some(
            "endpoint gone: the receiver asks senders to stop (Standard Webhooks: disable the \
             endpoint)"
                .to_owned(),
        ),
        StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT => Some(format!(
            "the receiver's gateway failed after the request reached it, so the receiver may \
             have processed it; the spec asks senders to throttle{}",
            retry_after_note(&headers)
        )),
        _ if status.is_server_error() => Some(format!(
            "may have been processed{}",
            retry_after_note(&headers)
        )),
        _ => None,
    };
    let result = classify_failure_status(status, &headers, &body, RULES);
    match note {
        Some(note) => with_note(result, &note),
        None => result,
    }
}

/// An ambiguous result has no `retry_after`, so a receiver's hint is kept in the evidence.
fn retry_after_note(headers: &reqwest::header::HeaderMap) -> String {
    retry_after(headers).map_or_else(String::new, |after| {
        format!(" (Retry-After: {} s)", after.as_secs())
    })
}

/// Reads at most one byte more than an evidence excerpt keeps: enough to show the answer and
/// that it went on, without letting a receiver stream an unbounded body into memory.
async fn read_excerpt(mut response: Response) -> Result<String, String> {
    let mut bytes = Vec::new();
    while bytes.len() <= EVIDENCE_EXCERPT_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(err) => return Err(error_chain(&err.without_url())),
        }
    }
    bytes.truncate(EVIDENCE_EXCERPT_BYTES + 1);
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn refusal_evidence(refused: &Refused) -> Evidence {
    Evidence::new(
        "destination",
        format!(
            "refused without connecting: {refused}; this route does not allow private networks"
        ),
    )
}

/// Puts `note` in front of a classified failure's evidence.
fn with_note(mut result: SendResult, note: &str) -> SendResult {
    if let SendResult::Rejected { evidence, .. } | SendResult::Ambiguous { evidence } = &mut result
    {
        evidence.detail = if evidence.detail.is_empty() {
            excerpt(note)
        } else {
            excerpt(&format!("{note}; body: {}", evidence.detail))
        };
    }
    result
}
