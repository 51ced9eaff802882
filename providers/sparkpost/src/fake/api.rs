//! SparkPost's `POST /transmissions` as the fake speaks it, and everything it remembers: the
//! ledger, the idempotency records, the pending faults and the last request received.
//!
//! All of it sits behind one `Mutex` so that counting a request, drawing its fault and
//! processing it is one atomic step: two concurrent requests with the same key can never both
//! deliver. The lock is never held across an `.await`.
//!
//! The order of checks: the API key (401); then the faults that answer before processing (429,
//! 503); then the request itself (400 code 1602 for a malformed key, 422 code 1400 for a missing
//! field, 422 code 1300 for an attachment whose `data` is not base64) and the idempotency record
//! (409 code 1600 for another payload, 409 code 1601 while the first request is still in
//! progress, otherwise the original response again). Only a request that passes all of that
//! creates a transmission, and the ledger counts it at once, before any fault decides what goes
//! on the wire.

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
    Accepted, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, Results, TRANSMISSIONS_PATH, is_idempotency_key,
};

// The documented error bodies, shared with the tests through `fixtures/sparkpost/`.
const UNAUTHORIZED: &str =
    include_str!("../../../../fixtures/sparkpost/errors/unauthorized_401.json");
const INVALID_IDEMPOTENCY_KEY: &str =
    include_str!("../../../../fixtures/sparkpost/errors/invalid_idempotency_key_400.json");
const REQUIRED_FIELD: &str =
    include_str!("../../../../fixtures/sparkpost/errors/required_field_422.json");
const KEY_REUSED: &str =
    include_str!("../../../../fixtures/sparkpost/errors/idempotency_key_reused_409.json");
const KEY_IN_PROGRESS: &str =
    include_str!("../../../../fixtures/sparkpost/errors/idempotent_request_in_progress_409.json");
const RATE_LIMITED: &str =
    include_str!("../../../../fixtures/sparkpost/errors/rate_limited_429.json");
const INTERNAL_ERROR: &str =
    include_str!("../../../../fixtures/sparkpost/errors/internal_error_500.json");
/// SparkPost's "invalid data format/type", status and code as its Recipient Lists API documents
/// them; the description is the fake's own.
const INVALID_DATA: &str = r#"{
  "errors": [
    {
      "message": "invalid data format/type",
      "description": "attachment data must be base64",
      "code": "1300"
    }
  ]
}"#;

/// What one `POST /transmissions` carried, minus the credential: tests check the request's
/// shape here.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// Whether `Authorization` was there; the credential itself is checked, never kept.
    pub authorized: bool,
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
    suppressed: Vec<String>,
    state: Mutex<VendorState>,
}

#[derive(Default)]
struct VendorState {
    ledger: Ledger,
    /// Per idempotency key, what its first processed request was and answered.
    records: IdempotencyRecords<Results>,
    /// The pending faults; each request that gets past authentication draws one.
    faults: Faults,
    last_request: Option<ReceivedRequest>,
    /// Transmissions created so far, for their ids.
    transmissions: u64,
}

/// What processing decided, before any fault touches the answer.
enum Outcome {
    Created(Results),
    Replayed(Results),
    Refused(StatusCode, &'static str),
}

impl Vendor {
    pub(super) fn new(config: FakeConfig) -> Vendor {
        let vendor = Vendor {
            api_key: config.api_key,
            idempotency_window: config.idempotency_window,
            delay: config.delay,
            suppressed: config.suppressed,
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

    /// The last `POST /transmissions` received, whatever became of it.
    pub fn last_request(&self) -> Option<ReceivedRequest> {
        self.lock().last_request.clone()
    }

    fn authenticated(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.trim() == self.api_key)
    }

    /// The processing step proper, under the lock so that it is atomic per key.
    fn process(
        &self,
        state: &mut VendorState,
        key: Option<&str>,
        payload: Option<Value>,
        fault: Option<Fault>,
    ) -> Outcome {
        if key.is_some_and(|key| !is_idempotency_key(key)) {
            return Outcome::Refused(StatusCode::BAD_REQUEST, INVALID_IDEMPOTENCY_KEY);
        }
        let Some(payload) = payload.filter(is_transmission) else {
            return Outcome::Refused(StatusCode::UNPROCESSABLE_ENTITY, REQUIRED_FIELD);
        };
        let attachments = match decode_attachments(&payload["content"]) {
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
                Seen::Replay(results) => return Outcome::Replayed(results),
                Seen::OtherPayload => return Outcome::Refused(StatusCode::CONFLICT, KEY_REUSED),
                Seen::InProgress => return Outcome::Refused(StatusCode::CONFLICT, KEY_IN_PROGRESS),
            }
        }

        state.transmissions += 1;
        let id = format!("{}", 11_668_787_484_950_000 + state.transmissions);
        let to = payload["recipients"][0]["address"]["email"]
            .as_str()
            .unwrap_or_default();
        let accepted = !self.suppressed.iter().any(|s| s == to);
        let results = Results {
            id: id.clone(),
            total_accepted_recipients: u64::from(accepted),
            total_rejected_recipients: u64::from(!accepted),
        };
        if accepted {
            // A request without a key is counted under its own transmission id: it can never be
            // repeated.
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
        }
        if let Some(key) = key {
            let in_progress_for = match fault {
                Some(Fault::Delay) => self.delay,
                _ => Duration::ZERO,
            };
            state
                .records
                .record(key, payload, results.clone(), now, in_progress_for);
        }
        Outcome::Created(results)
    }
}

/// Inline content with `from`, `subject` and `html` or `text`, and at least one recipient with
/// an address: what the transmission needs, as far as the adapter writes it.
fn is_transmission(payload: &Value) -> bool {
    let is_text = |value: &Value| value.as_str().is_some_and(|s| !s.is_empty());
    let recipients_ok = payload["recipients"].as_array().is_some_and(|list| {
        !list.is_empty()
            && list
                .iter()
                .all(|recipient| is_text(&recipient["address"]["email"]))
    });
    let content = &payload["content"];
    let from_ok = is_text(&content["from"]) || is_text(&content["from"]["email"]);
    let body_ok = [&content["html"], &content["text"]]
        .iter()
        .any(|part| is_text(part));
    let metadata_ok = payload.get("metadata").is_none_or(Value::is_object);
    recipients_ok && from_ok && content["subject"].is_string() && body_ok && metadata_ok
}

/// Each of the content's attachments as the ledger records them: `name` and `type` as sent,
/// `data` decoded from base64. Each of the three is required.
fn decode_attachments(content: &Value) -> Result<Vec<Attachment>, Outcome> {
    let Some(attachments) = content.get("attachments") else {
        return Ok(Vec::new());
    };
    let missing = || Outcome::Refused(StatusCode::UNPROCESSABLE_ENTITY, REQUIRED_FIELD);
    let attachments = attachments.as_array().ok_or_else(missing)?;
    attachments
        .iter()
        .map(|attachment| {
            let text = |field: &str| attachment.get(field).and_then(Value::as_str);
            let (Some(name), Some(kind), Some(data)) = (text("name"), text("type"), text("data"))
            else {
                return Err(missing());
            };
            Attachment::received(name, kind, data).ok_or(Outcome::Refused(
                StatusCode::UNPROCESSABLE_ENTITY,
                INVALID_DATA,
            ))
        })
        .collect()
}

pub(super) fn router(vendor: Arc<Vendor>) -> Router {
    Router::new()
        .route(TRANSMISSIONS_PATH, post(transmit))
        .with_state(vendor)
}

async fn transmit(
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
            authorized: headers.contains_key(header::AUTHORIZATION),
            idempotency_key: key.clone(),
            user_agent: header_text(header::USER_AGENT.as_str()),
            content_type: header_text(header::CONTENT_TYPE.as_str()),
            body: payload.clone().unwrap_or(Value::Null),
        });
        if !vendor.authenticated(&headers) {
            return fixture(StatusCode::UNAUTHORIZED, UNAUTHORIZED);
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
                let mut response = fixture(StatusCode::TOO_MANY_REQUESTS, RATE_LIMITED);
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
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
            fixture(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL_ERROR)
        }
        _ => outcome.into_response(),
    }
}

impl IntoResponse for Outcome {
    fn into_response(self) -> Response {
        match self {
            Outcome::Created(results) => {
                (StatusCode::OK, Json(Accepted { results })).into_response()
            }
            // The original response again, marked as a replay.
            Outcome::Replayed(results) => (
                StatusCode::OK,
                [(IDEMPOTENT_REPLAYED, "true")],
                Json(Accepted { results }),
            )
                .into_response(),
            Outcome::Refused(status, body) => fixture(status, body),
        }
    }
}

fn fixture(status: StatusCode, body: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
