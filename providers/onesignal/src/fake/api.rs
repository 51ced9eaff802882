//! OneSignal's `POST /notifications` as the fake speaks it, and everything it remembers: the
//! ledger, the results stored per `idempotency_key`, the pending faults and the last request.
//!
//! All of it sits behind one `Mutex` so that counting a request, drawing its fault and
//! processing it is one atomic step: two concurrent requests with the same key can never both
//! deliver. The lock is never held across an `.await`.
//!
//! The order of checks: the `Authorization` header (400 when missing, 403 "Access denied." for
//! another key or scheme, or another app's `app_id`); then the faults that answer before
//! processing (429, 503); then the request itself (400 for a body that is not a JSON object, an
//! `idempotency_key` that is not a UUID, no target, or no English `contents`); then the stored
//! result of the `idempotency_key`, answered again without delivering; and only then a new
//! notification. The ledger counts a delivery the moment it is decided, before any fault
//! decides what goes on the wire.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use serde_json::{Value, json};

use herald_provider::fake::Kill;

use super::{FakeConfig, Fault, Faults, Ledger};
use crate::wire::{IDEMPOTENT_REPLAYED, NOTIFICATIONS_PATH};

// The documented answers, shared with the tests through `fixtures/onesignal/`.
const NO_SUBSCRIBERS: &str =
    include_str!("../../../../fixtures/onesignal/create-message.no-subscribers.json");
const NO_TARGETING: &str =
    include_str!("../../../../fixtures/onesignal/errors/no-targeting.400.json");
const MISSING_AUTHORIZATION: &str =
    include_str!("../../../../fixtures/onesignal/errors/missing-authorization.400.json");
const ACCESS_DENIED: &str =
    include_str!("../../../../fixtures/onesignal/errors/access-denied.403.json");
const RATE_LIMIT: &str = include_str!("../../../../fixtures/onesignal/errors/rate-limit.429.json");
const SERVICE_UNAVAILABLE: &str =
    include_str!("../../../../fixtures/onesignal/errors/service-unavailable.503.json");

// OneSignal documents these statuses but not their text; the wording is the fake's own.
const NOT_AN_OBJECT: &str = r#"{"errors": ["The request body must be a JSON object"]}"#;
const BAD_IDEMPOTENCY_KEY: &str = r#"{"errors": ["idempotency_key must be a UUID"]}"#;
const NO_ENGLISH_CONTENTS: &str =
    r#"{"errors": ["Message Notifications must have English language content"]}"#;
const INTERNAL_ERROR: &str = r#"{"errors": ["Internal Server Error"]}"#;

/// What one `POST /notifications` carried, minus the credential: tests check its shape here.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// The word before the credential in `Authorization` (OneSignal expects `Key`); the
    /// credential itself is checked, never kept.
    pub auth_scheme: Option<String>,
    pub user_agent: Option<String>,
    pub content_type: Option<String>,
    /// The JSON body, or `Value::Null` if it was not JSON.
    pub body: Value,
}

/// The fake vendor: fixed settings, and the state behind its lock.
pub struct Vendor {
    app_id: String,
    api_key: String,
    unsubscribed: Vec<String>,
    idempotency_window: Duration,
    delay: Duration,
    state: Mutex<VendorState>,
}

#[derive(Default)]
struct VendorState {
    ledger: Ledger,
    /// Per `idempotency_key`, the first processed request's result and when it was decided.
    results: HashMap<String, (Value, Instant)>,
    /// The pending faults; each request that gets past authentication draws one.
    faults: Faults,
    last_request: Option<ReceivedRequest>,
}

/// What processing decided, before any fault touches the answer.
enum Outcome {
    /// A new result (created or not), or the stored one of an earlier request with the key.
    Answered {
        result: Value,
        replayed: bool,
    },
    Refused(StatusCode, &'static str),
}

impl Vendor {
    pub(super) fn new(config: FakeConfig) -> Vendor {
        let vendor = Vendor {
            app_id: config.app_id,
            api_key: config.api_key,
            unsubscribed: config.unsubscribed,
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

    /// The last `POST /notifications` received, whatever became of it.
    pub fn last_request(&self) -> Option<ReceivedRequest> {
        self.lock().last_request.clone()
    }

    /// The key and app checks; `Some` is the refusal to send.
    fn refuse_unauthenticated(
        &self,
        headers: &HeaderMap,
        payload: Option<&Value>,
    ) -> Option<Response> {
        let Some(authorization) = headers.get(header::AUTHORIZATION) else {
            return Some(fixture(StatusCode::BAD_REQUEST, MISSING_AUTHORIZATION));
        };
        // The docs write the scheme both `Key` and `key`.
        let token = authorization.to_str().ok().and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("key").then(|| token.trim())
        });
        let app_id = payload.and_then(|body| body.get("app_id")?.as_str());
        // A key for another app is refused like a wrong key: OneSignal answers "Access denied."
        // for "any invalid or mismatched key".
        if token != Some(self.api_key.as_str()) || app_id.is_some_and(|id| id != self.app_id) {
            return Some(fixture(StatusCode::FORBIDDEN, ACCESS_DENIED));
        }
        None
    }

    /// The processing step proper, under the lock so that it is atomic per key.
    fn process(
        &self,
        state: &mut VendorState,
        payload: Option<Value>,
        fault: Option<Fault>,
    ) -> Outcome {
        let Some(payload) = payload.filter(Value::is_object) else {
            return Outcome::Refused(StatusCode::BAD_REQUEST, NOT_AN_OBJECT);
        };
        let key = match payload.get("idempotency_key") {
            None | Some(Value::Null) => None,
            Some(value) => match value.as_str().map(uuid::Uuid::try_parse) {
                Some(Ok(uuid)) => Some(uuid.hyphenated().to_string()),
                _ => return Outcome::Refused(StatusCode::BAD_REQUEST, BAD_IDEMPOTENCY_KEY),
            },
        };
        let targets: Vec<&str> = payload
            .get("include_subscription_ids")
            .and_then(Value::as_array)
            .map(|ids| {
                ids.iter()
                    .filter_map(Value::as_str)
                    .filter(|id| !id.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if targets.is_empty() {
            return Outcome::Refused(StatusCode::BAD_REQUEST, NO_TARGETING);
        }
        if !payload["contents"]["en"].is_string() {
            return Outcome::Refused(StatusCode::BAD_REQUEST, NO_ENGLISH_CONTENTS);
        }

        let now = Instant::now();
        if let Some((result, decided_at)) = key.as_ref().and_then(|key| state.results.get(key))
            && now.duration_since(*decided_at) < self.idempotency_window
        {
            return Outcome::Answered {
                result: result.clone(),
                replayed: true,
            };
        }

        let subscribed = targets
            .iter()
            .any(|id| !self.unsubscribed.iter().any(|gone| gone == id));
        let result = if subscribed {
            let id = uuid::Uuid::new_v4().to_string();
            // A request without a key is counted under its own notification id.
            let counted_as = key.clone().unwrap_or_else(|| id.clone());
            tracing::debug!(%id, key = %counted_as, ?fault, "delivered");
            *state.ledger.deliveries.entry(counted_as).or_default() += 1;
            json!({ "id": id, "external_id": null })
        } else {
            serde_json::from_str(NO_SUBSCRIBERS).unwrap_or_default()
        };
        if let Some(key) = key {
            state.results.insert(key, (result.clone(), now));
        }
        Outcome::Answered {
            result,
            replayed: false,
        }
    }
}

pub(super) fn router(vendor: Arc<Vendor>) -> Router {
    Router::new()
        .route(NOTIFICATIONS_PATH, post(create_message))
        .with_state(vendor)
}

async fn create_message(
    State(vendor): State<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header_text = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let payload = serde_json::from_slice::<Value>(&body).ok();
    let (fault, outcome) = {
        let mut state = vendor.lock();
        state.ledger.requests += 1;
        state.last_request = Some(ReceivedRequest {
            auth_scheme: header_text(header::AUTHORIZATION)
                .and_then(|value| value.split_whitespace().next().map(str::to_owned)),
            user_agent: header_text(header::USER_AGENT),
            content_type: header_text(header::CONTENT_TYPE),
            body: payload.clone().unwrap_or(Value::Null),
        });
        if let Some(refusal) = vendor.refuse_unauthenticated(&headers, payload.as_ref()) {
            return refusal;
        }
        let fault = state.faults.draw();
        match fault {
            Some(Fault::RateLimited | Fault::UnavailableBeforeProcessing) => (fault, None),
            _ => (fault, Some(vendor.process(&mut state, payload, fault))),
        }
    };
    let Some(outcome) = outcome else {
        return match fault {
            Some(Fault::RateLimited) => {
                tracing::info!("refused before processing (rate_limited)");
                let mut response = fixture(StatusCode::TOO_MANY_REQUESTS, RATE_LIMIT);
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
            }
            _ => {
                tracing::info!("refused before processing (unavailable_before_processing)");
                fixture(StatusCode::SERVICE_UNAVAILABLE, SERVICE_UNAVAILABLE)
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
            // Created or not, the answer is 200: a message that reached nobody says so in its
            // body (empty `id`, `errors`).
            Outcome::Answered { result, replayed } => {
                let mut response = (StatusCode::OK, Json(result)).into_response();
                if replayed {
                    response
                        .headers_mut()
                        .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
                }
                response
            }
            Outcome::Refused(status, body) => fixture(status, body),
        }
    }
}

fn fixture(status: StatusCode, body: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Keeps the wire type in use by both sides: the fake's answers must parse as the adapter's.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Created;

    #[test]
    fn the_documented_answers_parse_as_the_adapter_reads_them() {
        let none: Created = serde_json::from_str(NO_SUBSCRIBERS).unwrap();
        assert_eq!(none.id.as_deref(), Some(""));
        assert!(none.errors.is_some());
        let created: Created =
            serde_json::from_value(json!({ "id": "x", "external_id": null })).unwrap();
        assert_eq!(created.id.as_deref(), Some("x"));
    }
}
