//! Resend's `POST /emails` as the fake speaks it, and everything it remembers: the ledger, the
//! idempotency records, the pending faults and the last request received.
//!
//! All of it sits behind one `Mutex` so that counting a request, drawing its fault and
//! processing it is one atomic step: two concurrent requests with the same key can never both
//! deliver. The lock is never held across an `.await`.
//!
//! The order of checks follows Resend's documentation: a request without `User-Agent` is refused
//! at the edge (403, "error code: 1010"); then the API key (401 `missing_api_key`, 403
//! `invalid_api_key`); then the faults that answer before processing (429, 503); then the
//! request itself (400 `invalid_idempotency_key`, 422 `missing_required_field`, 400
//! `validation_error`, 422 `invalid_attachment`, 400 `validation_error` for an attachment whose
//! content is not base64) and the idempotency record (409 `invalid_idempotent_request` for
//! another payload, 409 `concurrent_idempotent_requests` while the first request is still in
//! progress, otherwise the first answer again). Only a request that passes all of that is a
//! delivery, and the ledger counts it at once, before any fault decides what goes on the wire.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use serde_json::Value;

use herald_provider::Attachment;
use herald_provider::fake::{IdempotencyRecords, Kill, Seen};

use super::{FakeConfig, Fault, Faults, Ledger};
use crate::wire::{
    EMAILS_PATH, IDEMPOTENCY_KEY, MAX_IDEMPOTENCY_KEY_CHARS, SentEmail, is_tag_text,
};

// The documented error bodies, shared with the tests through `fixtures/resend/`.
const INVALID_IDEMPOTENCY_KEY: &str =
    include_str!("../../../../fixtures/resend/errors/invalid_idempotency_key.json");
const VALIDATION_ERROR: &str =
    include_str!("../../../../fixtures/resend/errors/validation_error.json");
const MISSING_API_KEY: &str =
    include_str!("../../../../fixtures/resend/errors/missing_api_key.json");
const INVALID_API_KEY: &str =
    include_str!("../../../../fixtures/resend/errors/invalid_api_key.json");
const INVALID_IDEMPOTENT_REQUEST: &str =
    include_str!("../../../../fixtures/resend/errors/invalid_idempotent_request.json");
const CONCURRENT_IDEMPOTENT_REQUESTS: &str =
    include_str!("../../../../fixtures/resend/errors/concurrent_idempotent_requests.json");
const MISSING_REQUIRED_FIELD: &str =
    include_str!("../../../../fixtures/resend/errors/missing_required_field.json");
const RATE_LIMIT_EXCEEDED: &str =
    include_str!("../../../../fixtures/resend/errors/rate_limit_exceeded.json");
const APPLICATION_ERROR: &str =
    include_str!("../../../../fixtures/resend/errors/application_error.json");
/// The errors page gives this one's status, name and message but no body; it is put into the
/// shape of the others.
const INVALID_ATTACHMENT: &str = r#"{
  "statusCode": 422,
  "name": "invalid_attachment",
  "message": "Attachment must have either a `content` or `path`."
}"#;

/// What one `POST /emails` carried, minus the credential: tests check the request's shape here.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// The word before the credential in `Authorization` (Resend expects `Bearer`); the
    /// credential itself is checked, never kept.
    pub auth_scheme: Option<String>,
    pub idempotency_key: Option<String>,
    pub user_agent: Option<String>,
    pub content_type: Option<String>,
    /// The JSON body, or `Value::Null` if it was not JSON.
    pub body: Value,
}

/// The fake vendor: fixed settings, and the state behind its lock.
pub struct Vendor {
    api_key: String,
    idempotency_window: Duration,
    delay: Duration,
    state: Mutex<VendorState>,
}

#[derive(Default)]
struct VendorState {
    ledger: Ledger,
    /// Per idempotency key, what its first processed request was and answered.
    records: IdempotencyRecords<String>,
    /// The pending faults; each request that gets past authentication draws one.
    faults: Faults,
    last_request: Option<ReceivedRequest>,
}

/// What processing decided, before any fault touches the answer.
enum Outcome {
    Delivered(String),
    Replayed(String),
    Refused(StatusCode, &'static str),
}

impl Vendor {
    pub(super) fn new(config: FakeConfig) -> Vendor {
        let vendor = Vendor {
            api_key: config.api_key,
            idempotency_window: config.idempotency_window,
            delay: config.delay,
            state: Mutex::new(VendorState::default()),
        };
        vendor.set_faults(config.faults);
        vendor
    }

    fn lock(&self) -> MutexGuard<'_, VendorState> {
        // No code panics while holding the lock, so a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A snapshot of the ledger.
    pub fn ledger(&self) -> Ledger {
        self.lock().ledger.clone()
    }

    /// Replaces the pending faults.
    pub fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// The last `POST /emails` received, whatever became of it.
    pub fn last_request(&self) -> Option<ReceivedRequest> {
        self.lock().last_request.clone()
    }

    /// The edge and authentication checks; `Some` is the refusal to send.
    fn refuse_unauthenticated(&self, headers: &HeaderMap) -> Option<Response> {
        if !headers.contains_key(header::USER_AGENT) {
            // https://resend.com/docs/knowledge-base/403-error-1010: blocked before the API.
            return Some((StatusCode::FORBIDDEN, "error code: 1010").into_response());
        }
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .unwrap_or("");
        if token.is_empty() {
            Some(fixture(StatusCode::UNAUTHORIZED, MISSING_API_KEY))
        } else if token != self.api_key {
            Some(fixture(StatusCode::FORBIDDEN, INVALID_API_KEY))
        } else {
            None
        }
    }

    /// The processing step proper, under the lock so that it is atomic per key.
    fn process(
        &self,
        state: &mut VendorState,
        key: Option<&str>,
        payload: Option<Value>,
        fault: Option<Fault>,
    ) -> Outcome {
        if let Some(key) = key
            && (key.is_empty() || key.chars().count() > MAX_IDEMPOTENCY_KEY_CHARS)
        {
            return Outcome::Refused(StatusCode::BAD_REQUEST, INVALID_IDEMPOTENCY_KEY);
        }
        let Some(payload) = payload.filter(Value::is_object) else {
            return Outcome::Refused(StatusCode::BAD_REQUEST, VALIDATION_ERROR);
        };
        if let Some(refusal) = check_fields(&payload) {
            return refusal;
        }
        let attachments = match decode_attachments(&payload) {
            Ok(attachments) => attachments,
            Err(refusal) => return refusal,
        };

        let now = Instant::now();
        if let Some(key) = key {
            match state
                .records
                .seen(key, &payload, now, self.idempotency_window)
            {
                Seen::New => {}
                Seen::Replay(id) => return Outcome::Replayed(id),
                Seen::OtherPayload => {
                    return Outcome::Refused(StatusCode::CONFLICT, INVALID_IDEMPOTENT_REQUEST);
                }
                Seen::InProgress => {
                    return Outcome::Refused(StatusCode::CONFLICT, CONCURRENT_IDEMPOTENT_REQUESTS);
                }
            }
        }

        let id = uuid::Uuid::new_v4().to_string();
        // A request without a key is counted under its own email id: it can never be repeated.
        let counted_as = key.map_or_else(|| id.clone(), str::to_owned);
        tracing::debug!(%id, key = %counted_as, "delivered");
        if !attachments.is_empty() {
            state
                .ledger
                .attachments
                .insert(counted_as.clone(), attachments);
        }
        state
            .ledger
            .arrivals
            .entry(counted_as.clone())
            .or_default()
            .push(time::OffsetDateTime::now_utc());
        *state.ledger.deliveries.entry(counted_as).or_default() += 1;
        if let Some(key) = key {
            let in_progress_for = match fault {
                Some(Fault::Delay) => self.delay,
                _ => Duration::ZERO,
            };
            state
                .records
                .record(key, payload, id.clone(), now, in_progress_for);
        }
        Outcome::Delivered(id)
    }
}

/// `from`, `to` and `subject` are required; `to` is one address or 1–50 of them.
fn check_fields(payload: &Value) -> Option<Outcome> {
    let missing = ["from", "to", "subject"]
        .iter()
        .any(|field| payload.get(field).is_none_or(Value::is_null));
    if missing {
        return Some(Outcome::Refused(
            StatusCode::UNPROCESSABLE_ENTITY,
            MISSING_REQUIRED_FIELD,
        ));
    }
    let is_text = |value: &Value| value.as_str().is_some_and(|s| !s.is_empty());
    let to_ok = match &payload["to"] {
        Value::Array(list) => (1..=50).contains(&list.len()) && list.iter().all(is_text),
        other => is_text(other),
    };
    let optional_text_ok = ["html", "text"]
        .iter()
        .all(|field| payload.get(field).is_none_or(Value::is_string));
    // Each may be one address or a list of them.
    let addresses_ok = ["cc", "bcc", "reply_to"]
        .iter()
        .all(|field| match payload.get(*field) {
            None => true,
            Some(Value::Array(list)) => list.iter().all(is_text),
            Some(other) => is_text(other),
        });
    let headers_ok = payload.get("headers").is_none_or(|h| {
        h.as_object()
            .is_some_and(|h| h.values().all(Value::is_string))
    });
    let tags_ok = payload.get("tags").is_none_or(|tags| {
        tags.as_array().is_some_and(|tags| {
            tags.iter().all(|tag| {
                ["name", "value"]
                    .iter()
                    .all(|part| tag[*part].as_str().is_some_and(is_tag_text))
            })
        })
    });
    let valid = is_text(&payload["from"])
        && payload["subject"].is_string()
        && to_ok
        && optional_text_ok
        && addresses_ok
        && headers_ok
        && tags_ok;
    (!valid).then_some(Outcome::Refused(StatusCode::BAD_REQUEST, VALIDATION_ERROR))
}

/// Each attachment as the ledger records it: `filename` and `content_type` as sent, the content
/// decoded from base64. One without `content` (herald never sends a `path`) is refused as Resend
/// documents; content that is not base64 is a field error.
fn decode_attachments(payload: &Value) -> Result<Vec<Attachment>, Outcome> {
    let Some(attachments) = payload.get("attachments") else {
        return Ok(Vec::new());
    };
    let invalid = || Outcome::Refused(StatusCode::BAD_REQUEST, VALIDATION_ERROR);
    let attachments = attachments.as_array().ok_or_else(invalid)?;
    attachments
        .iter()
        .map(|attachment| {
            let text = |field: &str| attachment.get(field).and_then(Value::as_str);
            let content = match attachment.get("content") {
                None | Some(Value::Null) => {
                    return Err(Outcome::Refused(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        INVALID_ATTACHMENT,
                    ));
                }
                Some(content) => content.as_str().ok_or_else(invalid)?,
            };
            Attachment::received(
                text("filename").ok_or_else(invalid)?,
                text("content_type").unwrap_or_default(),
                content,
            )
            .ok_or_else(invalid)
        })
        .collect()
}

pub(super) fn router(vendor: Arc<Vendor>) -> Router {
    Router::new()
        .route(EMAILS_PATH, post(send_email))
        .with_state(vendor)
}

async fn send_email(
    State(vendor): State<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header_text = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let key = header_text(IDEMPOTENCY_KEY);
    let payload = serde_json::from_slice::<Value>(&body).ok();
    let (fault, outcome) = {
        let mut state = vendor.lock();
        state.ledger.requests += 1;
        state.last_request = Some(ReceivedRequest {
            auth_scheme: header_text(header::AUTHORIZATION.as_str())
                .and_then(|value| value.split_whitespace().next().map(str::to_owned)),
            idempotency_key: key.clone(),
            user_agent: header_text(header::USER_AGENT.as_str()),
            content_type: header_text(header::CONTENT_TYPE.as_str()),
            body: payload.clone().unwrap_or(Value::Null),
        });
        if let Some(refusal) = vendor.refuse_unauthenticated(&headers) {
            return refusal;
        }
        let fault = state.faults.draw();
        match fault {
            Some(Fault::RateLimited | Fault::UnavailableBeforeProcessing) => (fault, None),
            _ => (
                fault,
                Some(vendor.process(&mut state, key.as_deref(), payload, fault)),
            ),
        }
    };
    let Some(outcome) = outcome else {
        return match fault {
            Some(Fault::RateLimited) => {
                tracing::info!("refused before processing (rate_limited)");
                rate_limited()
            }
            _ => {
                tracing::info!("refused before processing (unavailable_before_processing)");
                (StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable").into_response()
            }
        };
    };
    match fault {
        Some(Fault::AcceptThenDrop) => {
            tracing::info!("closing the connection after processing (accept_then_drop)");
            kill.kill().await
        }
        Some(Fault::Delay) => {
            tracing::info!(delay = ?vendor.delay, "holding the answer (delay)");
            tokio::time::sleep(vendor.delay).await;
            outcome.into_response()
        }
        Some(Fault::ErrorAfterProcessing) => {
            tracing::info!("answering 500 after processing (error_after_processing)");
            fixture(StatusCode::INTERNAL_SERVER_ERROR, APPLICATION_ERROR)
        }
        _ => outcome.into_response(),
    }
}

impl IntoResponse for Outcome {
    fn into_response(self) -> Response {
        match self {
            // Resend answers a replay exactly like the first request: same status, same id.
            Outcome::Delivered(id) | Outcome::Replayed(id) => {
                (StatusCode::OK, Json(SentEmail { id })).into_response()
            }
            Outcome::Refused(status, body) => fixture(status, body),
        }
    }
}

/// 429 with the headers of <https://resend.com/docs/api-reference/rate-limit>.
fn rate_limited() -> Response {
    let mut response = fixture(StatusCode::TOO_MANY_REQUESTS, RATE_LIMIT_EXCEEDED);
    let headers = response.headers_mut();
    for (name, value) in [
        ("ratelimit-limit", "2"),
        ("ratelimit-remaining", "0"),
        ("ratelimit-reset", "1"),
        ("retry-after", "1"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn fixture(status: StatusCode, body: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
