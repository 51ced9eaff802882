//! Telnyx's `POST /v2/messages` as the fake speaks it, and everything it remembers: the ledger,
//! the idempotency records of successful answers, the pending faults and the last request.
//!
//! All of it sits behind one `Mutex` so that counting a request, drawing its fault and
//! processing it is one atomic step. The lock is never held across an `.await`.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use serde_json::{Value, json};

use herald_provider::fake::{FaultAnswers, IdempotencyRecords, Kill, Seen};

use super::{Delivery, FakeConfig, Fault, Faults, Ledger};
use crate::wire::{IDEMPOTENCY_KEY, MESSAGES_PATH};

// The documented error bodies, shared with the tests through `fixtures/telnyx/`.
const UNAUTHENTICATED: &str =
    include_str!("../../../../fixtures/telnyx/errors/authentication_401.json");
const INVALID_REQUEST: &str =
    include_str!("../../../../fixtures/telnyx/errors/invalid_request_422.json");
const KEY_REUSED: &str =
    include_str!("../../../../fixtures/telnyx/errors/idempotency_key_reused_422.json");
const BLOCKED_BY_STOP: &str =
    include_str!("../../../../fixtures/telnyx/errors/blocked_by_stop_40300.json");
const FAULT_ANSWERS: FaultAnswers = FaultAnswers {
    rate_limited: include_str!("../../../../fixtures/telnyx/errors/rate_limited_429.json"),
    server_error: include_str!("../../../../fixtures/telnyx/errors/unexpected_500.json"),
};

/// What one `POST /v2/messages` carried, minus the key: tests check the request's shape here.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    pub idempotency_key: Option<String>,
    pub content_type: Option<String>,
    /// The JSON body, or `Value::Null` if it was not JSON.
    pub body: Value,
}

/// The fake vendor: fixed settings, and the state behind its lock.
pub struct Vendor {
    config: FakeConfig,
    state: Mutex<VendorState>,
}

#[derive(Default)]
struct VendorState {
    ledger: Ledger,
    /// Per key, the first successful answer: a failed request keeps none.
    records: IdempotencyRecords<String>,
    faults: Faults,
    last_request: Option<ReceivedRequest>,
}

impl Vendor {
    pub(super) fn new(config: FakeConfig) -> Vendor {
        Vendor {
            config,
            state: Mutex::new(VendorState::default()),
        }
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

    /// The last `POST /v2/messages` received, whatever became of it.
    pub fn last_request(&self) -> Option<ReceivedRequest> {
        self.lock().last_request.clone()
    }

    fn authenticated(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .is_some_and(|key| key.trim() == self.config.api_key)
    }

    /// A send proper, under the lock. `succeeds`: whether its answer will be a success, and so
    /// kept for the key.
    fn send(
        &self,
        state: &mut VendorState,
        key: Option<&str>,
        payload: Option<Value>,
        succeeds: bool,
    ) -> Response {
        let text = |value: &Value| value.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
        let Some(payload) = payload.filter(Value::is_object) else {
            return fixture(StatusCode::UNPROCESSABLE_ENTITY, INVALID_REQUEST);
        };
        let sender = text(&payload["from"]).or(text(&payload["messaging_profile_id"]));
        let (Some(to), Some(body), Some(_)) =
            (text(&payload["to"]), text(&payload["text"]), sender)
        else {
            return fixture(StatusCode::UNPROCESSABLE_ENTITY, INVALID_REQUEST);
        };
        let now = Instant::now();
        if let Some(key) = key {
            match state
                .records
                .seen(key, &payload, now, self.config.idempotency_window)
            {
                // A success is kept with no time in progress, so a kept key is never in
                // progress.
                Seen::New | Seen::InProgress => {}
                Seen::Replay(answer) => return created(answer),
                Seen::OtherPayload => {
                    return fixture(StatusCode::UNPROCESSABLE_ENTITY, KEY_REUSED);
                }
            }
        }
        if self.config.stopped.contains(&to) {
            return fixture(StatusCode::BAD_REQUEST, BLOCKED_BY_STOP);
        }
        let id = uuid::Uuid::new_v4().to_string();
        tracing::debug!(%id, ?key, "delivered");
        state.ledger.deliveries.push(Delivery::now(
            id.clone(),
            key.map_or_else(|| id.clone(), str::to_owned),
            to.clone(),
        ));
        let answer = json!({"data": {
            "record_type": "message", "direction": "outbound", "id": id, "type": "SMS",
            "to": [{"phone_number": to, "status": "queued"}], "text": body,
            "webhook_url": payload.get("webhook_url"), "errors": [],
        }})
        .to_string();
        if let (Some(key), true) = (key, succeeds) {
            state
                .records
                .record(key, payload, answer.clone(), now, Duration::ZERO);
        }
        created(answer)
    }
}

pub(super) fn router(vendor: Arc<Vendor>) -> Router {
    Router::new()
        .route(MESSAGES_PATH, post(send_message))
        .with_state(vendor)
}

async fn send_message(
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
    let (fault, processed) = {
        let mut state = vendor.lock();
        state.ledger.requests += 1;
        state.last_request = Some(ReceivedRequest {
            idempotency_key: key.clone(),
            content_type: header_text(header::CONTENT_TYPE.as_str()),
            body: payload.clone().unwrap_or(Value::Null),
        });
        if !vendor.authenticated(&headers) {
            return fixture(StatusCode::UNAUTHORIZED, UNAUTHENTICATED);
        }
        let fault = state.faults.draw();
        // "Only successful responses are replayed": a 500 after processing keeps no record.
        let succeeds = fault != Some(Fault::ErrorAfterProcessing);
        let processed = (!fault.is_some_and(Fault::is_before_processing))
            .then(|| vendor.send(&mut state, key.as_deref(), payload, succeeds));
        (fault, processed)
    };
    FAULT_ANSWERS
        .answer(fault, processed, kill, vendor.config.delay)
        .await
}

fn created(answer: String) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        answer,
    )
        .into_response()
}

fn fixture(status: StatusCode, body: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
