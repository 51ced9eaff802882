//! Herald's adapter for the sandbox vendor (`provider = "sandbox"`).
//!
//! It is written as an adapter for a paid vendor would be: the profile a route names decides
//! which capabilities it declares, and every answer is classified by `herald_provider::http` at
//! the point where the exchange ended. The sandbox documents that 503 means "not processed"
//! and 409 means "the first request with this key is still in progress", so both are transient
//! rejections here rather than ambiguities; 422 `idempotency_key_reused` means an earlier
//! request under the key was processed ([`SendResult::KeyReused`]).
//!
//! The route's profile, window and lag are promises herald's reconciliation relies on, so the
//! adapter holds the sandbox to them: [`Adapter::verify`] compares them with the sandbox's
//! `GET /profile` before the route takes work, and every answer's `sandbox-capabilities` header
//! is checked again (a sandbox restarted with another profile is caught at its next answer). An
//! answer from a sandbox that is not what the route declares proves nothing: a send is then
//! `Ambiguous` and a look-up `Unsupported`.

use std::sync::Arc;
use std::time::Duration;

use herald_provider::http::{
    Answer, StatusRules, classify_failure_status, exchange, look_up, unreadable_success,
    with_vendor_code,
};
use herald_provider::{
    Adapter, Capabilities, Encoding, Evidence, Message, ProviderKey, QueryResult, Request,
    SendResult,
};
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use reqwest::{StatusCode, Url};

use herald_provider::callback::Callbacks;
use herald_provider::signature::SigningSecret;

use crate::callback::SandboxCallbacks;
use crate::server::{Profile, SandboxHandle};
use crate::wire::{
    AcceptedBody, AttachmentOut, CAPABILITIES, DeliveryList, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED,
    KEY_REUSED, MAX_MESSAGE_BYTES, Offer, SendBody,
};

/// What the sandbox documents about its statuses (see the module docs).
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: true,
    conflict_means_in_progress: true,
};

/// A route's settings. The profile, window and lag must match the sandbox being called: they
/// are what herald's reconciliation trusts.
#[derive(Debug, Clone)]
pub struct SandboxRoute {
    /// The sandbox's root, e.g. `http://127.0.0.1:4010`.
    pub base_url: String,
    /// The sender named in each message, if any (a real vendor's `from`).
    pub from: Option<String>,
    pub profile: Profile,
    pub idempotency_window: Duration,
    pub visibility_lag: Duration,
    /// The whole exchange, connect to last body byte.
    pub timeout: Duration,
    /// The secret the sandbox signs its delivery reports with; set, the route takes them.
    pub callback_secret: Option<SigningSecret>,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxRouteError {
    #[error("the sandbox base_url `{url}` is not a URL: {reason}")]
    BaseUrl { url: String, reason: String },
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

#[derive(Debug, Clone)]
pub struct SandboxAdapter {
    /// How long one call may take: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    base_url: Url,
    messages_url: Url,
    from: Option<String>,
    /// What the route declares, to hold every answer to.
    offer: Offer,
    capabilities: Capabilities,
    /// The in-process sandbox this adapter speaks to, if it started one: it runs as long as the
    /// adapter lives.
    vendor: Option<Arc<SandboxHandle>>,
    callbacks: Option<SandboxCallbacks>,
}

impl SandboxAdapter {
    /// Builds the adapter at start-up.
    ///
    /// # Panics
    /// If `base_url` is not a URL, or reqwest cannot build a client — which includes no rustls
    /// crypto provider being installed (herald's main installs one before building adapters).
    /// [`SandboxAdapter::try_new`] reports the first two as errors instead.
    pub fn new(route: SandboxRoute) -> Self {
        match SandboxAdapter::try_new(route) {
            Ok(adapter) => adapter,
            Err(err) => panic!("{err}"),
        }
    }

    pub fn try_new(route: SandboxRoute) -> Result<Self, SandboxRouteError> {
        let bad = |reason: String| SandboxRouteError::BaseUrl {
            url: route.base_url.clone(),
            reason,
        };
        let root = format!("{}/", route.base_url.trim_end_matches('/'));
        let base_url = Url::parse(&root).map_err(|err| bad(err.to_string()))?;
        let messages_url = base_url
            .join("messages")
            .map_err(|err| bad(err.to_string()))?;
        let http = reqwest::Client::builder()
            .timeout(route.timeout)
            .no_proxy()
            .build()?;
        let capabilities = Capabilities {
            idempotency_window: (route.profile == Profile::Idempotent)
                .then_some(route.idempotency_window),
            query_visibility_lag: (route.profile == Profile::Queryable)
                .then_some(route.visibility_lag),
            max_payload_bytes: Some(MAX_MESSAGE_BYTES),
            tags: true,
            attachments: true,
        };
        Ok(SandboxAdapter {
            timeout: route.timeout,
            http,
            base_url,
            messages_url,
            from: route.from,
            offer: Offer {
                profile: route.profile,
                idempotency_window: route.idempotency_window,
                visibility_lag: route.visibility_lag,
            },
            capabilities,
            vendor: None,
            callbacks: route
                .callback_secret
                .map(|secret| SandboxCallbacks { secret }),
        })
    }

    /// The same adapter, keeping `vendor` running for as long as it lives.
    pub fn keeping(mut self, vendor: SandboxHandle) -> Self {
        self.vendor = Some(Arc::new(vendor));
        self
    }

    /// Why an answer cannot be trusted: it comes from a sandbox that does not offer what the
    /// route declares. `None` when it does.
    fn mismatch(&self, headers: &HeaderMap) -> Option<String> {
        let said = headers.get(CAPABILITIES).and_then(|v| v.to_str().ok());
        match said.and_then(Offer::parse) {
            Some(offer) if offer == self.offer => None,
            Some(_) => Some(format!(
                "the sandbox offers `{}` but the route declares `{}`; its answers settle nothing",
                said.unwrap_or_default(),
                self.offer.header_value()
            )),
            None => Some(format!(
                "the answer does not say what the sandbox offers (no valid `{CAPABILITIES}` header); \
                 the route declares `{}`",
                self.offer.header_value()
            )),
        }
    }
}

#[async_trait::async_trait]
impl Adapter for SandboxAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn callbacks(&self) -> Option<&dyn Callbacks> {
        self.callbacks.as_ref().map(|c| c as &dyn Callbacks)
    }

    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let email = &message.email;
        let body = SendBody {
            reference: key.as_str(),
            channel: message.channel,
            from: email.from.as_deref().or(self.from.as_deref()),
            to: &message.to,
            subject: message.subject.as_deref(),
            text: message.text.as_deref(),
            html: message.html.as_deref(),
            payload: message.payload.as_ref(),
            reply_to: email.reply_to.as_deref(),
            cc: &email.cc,
            bcc: &email.bcc,
            tags: &email.tags,
            headers: &email.headers,
            attachments: email
                .attachments
                .iter()
                .map(|a| AttachmentOut {
                    filename: &a.filename,
                    content_type: &a.content_type,
                    content: a.placeholder(Encoding::Base64),
                })
                .collect(),
        };
        Request::json(&body)
    }

    async fn send_prepared(
        &self,
        request: &Request,
        _message: &Message,
        key: &ProviderKey,
    ) -> SendResult {
        let request = self
            .http
            .post(self.messages_url.clone())
            .header(IDEMPOTENCY_KEY, key.as_str())
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
        if let Some(mismatch) = self.mismatch(&headers) {
            return SendResult::Ambiguous {
                evidence: Evidence::new("response", format!("{mismatch}: {text}"))
                    .with_status(status.as_u16()),
            };
        }
        if !status.is_success() {
            let code = vendor_code(&text);
            if status == StatusCode::UNPROCESSABLE_ENTITY && code.as_deref() == Some(KEY_REUSED) {
                return SendResult::KeyReused {
                    evidence: Evidence::new("response", &text)
                        .with_status(status.as_u16())
                        .with_vendor_code(KEY_REUSED),
                };
            }
            return with_vendor_code(
                classify_failure_status(status, &headers, &text, RULES),
                code,
            );
        }

        let answer: AcceptedBody = match serde_json::from_str(&text) {
            Ok(answer) => answer,
            Err(err) => return unreadable_success(status, format!("{err}: {text}")),
        };
        if answer.reference != key.as_str() {
            return unreadable_success(
                status,
                format!("the answer is about another reference: {text}"),
            );
        }
        let replayed = headers
            .get(IDEMPOTENT_REPLAYED)
            .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"true"));
        let detail = if replayed {
            format!("idempotent replay of an earlier acceptance: {text}")
        } else {
            text
        };
        SendResult::Accepted {
            provider_ref: Some(answer.id),
            evidence: Evidence::new("response", detail).with_status(status.as_u16()),
        }
    }

    async fn query_prepared(
        &self,
        _request: &Request,
        _message: &Message,
        key: &ProviderKey,
    ) -> QueryResult {
        if self.offer.profile != Profile::Queryable {
            return QueryResult::Unsupported {
                evidence: Evidence::new(
                    "query",
                    format!(
                        "the sandbox profile `{}` has no outcome query",
                        self.offer.profile
                    ),
                ),
            };
        }
        let mut url = self.messages_url.clone();
        url.query_pairs_mut().append_pair("reference", key.as_str());
        let Answer {
            status,
            headers,
            body: text,
        } = match look_up(self.http.get(url)).await {
            Ok(answer) => answer,
            Err(evidence) => return unsupported(evidence),
        };
        if let Some(mismatch) = self.mismatch(&headers) {
            return unsupported(Evidence::new("query", mismatch).with_status(status.as_u16()));
        }
        if status != StatusCode::OK {
            return unsupported(Evidence::new("query", &text).with_status(status.as_u16()));
        }
        let list: DeliveryList = match serde_json::from_str(&text) {
            Ok(list) => list,
            Err(err) => {
                return unsupported(
                    Evidence::new("query", format!("{err}: {text}")).with_status(200),
                );
            }
        };
        // Only entries about this key count. A list that holds none of them but others did not
        // filter by reference as asked: its silence about ours proves nothing.
        let (found, other_references): (Vec<_>, Vec<_>) = list
            .data
            .into_iter()
            .partition(|d| d.reference == key.as_str());
        if found.is_empty() && !other_references.is_empty() {
            return unsupported(
                Evidence::new(
                    "query",
                    format!(
                        "the look-up by reference listed {} deliveries of other references",
                        other_references.len()
                    ),
                )
                .with_status(200),
            );
        }
        let mut found = found.into_iter();
        let Some(first) = found.next() else {
            return QueryResult::NotFoundYet {
                evidence: Evidence::new("query", "no delivery with this reference is visible")
                    .with_status(200),
            };
        };
        let others: Vec<String> = found.map(|d| d.id).collect();
        let detail = if others.is_empty() {
            format!("delivered as {} at {}", first.id, first.accepted_at)
        } else {
            format!(
                "delivered {} times with this reference: first {} at {}, then {}",
                others.len() + 1,
                first.id,
                first.accepted_at,
                others.join(", ")
            )
        };
        QueryResult::Accepted {
            provider_ref: Some(first.id),
            evidence: Evidence::new("query", detail).with_status(200),
        }
    }

    async fn verify(&self) -> Result<(), String> {
        let url = self
            .base_url
            .join("profile")
            .map_err(|err| format!("cannot address the sandbox's profile: {err}"))?;
        let answer = look_up(self.http.get(url)).await.map_err(|evidence| {
            format!("cannot ask the sandbox its profile: {}", evidence.detail)
        })?;
        match self.mismatch(&answer.headers) {
            None => Ok(()),
            Some(mismatch) => Err(mismatch),
        }
    }
}

fn unsupported(evidence: Evidence) -> QueryResult {
    QueryResult::Unsupported { evidence }
}

/// The sandbox's own error `code`, from a problem body.
fn vendor_code(body: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("code")?.as_str().map(str::to_owned))
}
