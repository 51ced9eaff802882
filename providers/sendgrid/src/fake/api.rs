//! SendGrid's `POST /v3/mail/send` and `GET /v3/messages` as the fake speaks them, and
//! everything it remembers: the ledger with each delivery's time, the pending faults of sends
//! and of look-ups, the last send received, and each delivery's attachments.
//!
//! All but the attachments sit behind one `Mutex` so that counting a request, drawing its fault
//! and processing it is one atomic step; the attachments have a lock of their own, taken only
//! inside that step (and by tests reading them). No lock is held across an `.await`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::Value;

use herald_provider::Attachment;
use herald_provider::fake::{FaultAnswers, Kill, LookedUp, LookedUpState};

use super::{Delivery, FakeConfig, Fault};
use crate::wire::{KEY_ARG, Listed, MAIL_SEND_PATH, MESSAGE_ID, MESSAGES_PATH, MessageList};

// The documented error bodies, shared with the tests through `fixtures/sendgrid/`.
const BAD_REQUEST: &str = include_str!("../../../../fixtures/sendgrid/errors/bad_request_400.json");
const UNAUTHORIZED: &str =
    include_str!("../../../../fixtures/sendgrid/errors/unauthorized_401.json");
const FORBIDDEN: &str = include_str!("../../../../fixtures/sendgrid/errors/forbidden_403.json");
const FAULT_ANSWERS: FaultAnswers = FaultAnswers {
    rate_limited: include_str!("../../../../fixtures/sendgrid/errors/too_many_requests_429.json"),
    server_error: include_str!("../../../../fixtures/sendgrid/errors/internal_error_500.json"),
};

/// What one `POST /v3/mail/send` carried, minus the key: tests check the request's shape here.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// The word before the credential in `Authorization` (SendGrid expects `Bearer`); the
    /// credential itself is checked, never kept.
    pub auth_scheme: Option<String>,
    pub content_type: Option<String>,
    /// The JSON body, or `Value::Null` if it was not JSON.
    pub body: Value,
}

/// The fake vendor: fixed settings, and the state behind its lock, whose accessors
/// (`ledger`, `set_faults`, `set_lookup_faults`, `last_request`) are the vendor's own.
pub struct Vendor {
    config: FakeConfig,
    state: LookedUpState<ReceivedRequest>,
    /// Per message id, the attachments of that delivery, decoded. Written under `state`'s lock
    /// as the delivery is recorded.
    attachments: Mutex<BTreeMap<String, Vec<Attachment>>>,
}

impl std::ops::Deref for Vendor {
    type Target = LookedUpState<ReceivedRequest>;

    fn deref(&self) -> &Self::Target {
        &self.state
    }
}

impl Vendor {
    pub(super) fn new(config: FakeConfig) -> Vendor {
        Vendor {
            config,
            state: LookedUpState::default(),
            attachments: Mutex::default(),
        }
    }

    /// The attachments of the message SendGrid answered `message_id` for (`X-Message-Id`),
    /// decoded: their size and SHA-256 are those of the bytes that arrived. Empty for a message
    /// without any.
    pub fn attachments_of(&self, message_id: &str) -> Vec<Attachment> {
        self.attachments
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(message_id)
            .cloned()
            .unwrap_or_default()
    }

    fn authenticated(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .is_some_and(|key| key.trim() == self.config.api_key)
    }

    /// A send proper, under the lock.
    fn send(&self, state: &mut LookedUp<ReceivedRequest>, payload: Option<Value>) -> Response {
        let text = |value: &Value| value.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
        let Some(payload) = payload.filter(Value::is_object) else {
            return fixture(StatusCode::BAD_REQUEST, BAD_REQUEST);
        };
        let personalization = &payload["personalizations"][0];
        let to = text(&personalization["to"][0]["email"]);
        let content_ok = payload["content"].as_array().is_some_and(|parts| {
            !parts.is_empty() && parts.iter().all(|part| text(&part["value"]).is_some())
        });
        let (Some(to), Some(_from), Some(_subject), true) = (
            to,
            text(&payload["from"]["email"]),
            text(&payload["subject"]),
            content_ok,
        ) else {
            return fixture(StatusCode::BAD_REQUEST, BAD_REQUEST);
        };
        let Some(attachments) = decode_attachments(&payload) else {
            return fixture(StatusCode::BAD_REQUEST, BAD_REQUEST);
        };
        let message_id = uuid::Uuid::new_v4().simple().to_string();
        if !attachments.is_empty() {
            self.attachments
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(message_id.clone(), attachments);
        }
        let key = text(&personalization["custom_args"][KEY_ARG]).unwrap_or_default();
        tracing::debug!(%message_id, %key, "delivered");
        state
            .ledger
            .deliveries
            .push(Delivery::now(message_id.clone(), key, to));
        (StatusCode::ACCEPTED, [(MESSAGE_ID, message_id)]).into_response()
    }

    /// The Email Activity filter proper, under the lock: the listed deliveries with `key`,
    /// newest first, their ids as Email Activity shows them (the message id and a suffix).
    fn search(&self, state: &LookedUp<ReceivedRequest>, key: Option<&str>) -> Response {
        if !self.config.activity {
            return fixture(StatusCode::FORBIDDEN, FORBIDDEN);
        }
        let listed = state
            .ledger
            .listed(key, self.config.visibility_lag, Instant::now());
        let messages = listed
            .map(|delivery| Listed {
                msg_id: format!(
                    "{}.filterdrecv-5645d9c87f-78xgx-1-5B0BF3A0-2.0",
                    delivery.message_id
                ),
                status: Some("delivered".to_owned()),
            })
            .collect();
        Json(MessageList { messages }).into_response()
    }
}

/// Each attachment as the fake keeps it: `filename` and `type` as sent, `content` decoded from
/// base64; `None` if one has no `filename`, or its `content` is missing or not base64.
fn decode_attachments(payload: &Value) -> Option<Vec<Attachment>> {
    let Some(attachments) = payload.get("attachments") else {
        return Some(Vec::new());
    };
    attachments
        .as_array()?
        .iter()
        .map(|attachment| {
            let text = |field: &str| attachment.get(field).and_then(Value::as_str);
            Attachment::received(
                text("filename")?,
                text("type").unwrap_or_default(),
                text("content")?,
            )
        })
        .collect()
}

/// The key an Email Activity query `unique_args['herald_key']="<key>"` asks for; `None` for
/// any other query, which the fake answers with every listed message.
fn queried_key(query: &str) -> Option<&str> {
    query
        .strip_prefix(&format!("unique_args['{KEY_ARG}']=\""))?
        .strip_suffix('"')
}

pub(super) fn router(vendor: Arc<Vendor>) -> Router {
    Router::new()
        .route(MAIL_SEND_PATH, post(send_mail))
        .route(MESSAGES_PATH, get(search))
        .with_state(vendor)
}

async fn send_mail(
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
    let (fault, processed) = {
        let mut state = vendor.lock();
        state.ledger.requests += 1;
        state.last_request = Some(ReceivedRequest {
            auth_scheme: header_text(header::AUTHORIZATION)
                .and_then(|value| value.split_whitespace().next().map(str::to_owned)),
            content_type: header_text(header::CONTENT_TYPE),
            body: payload.clone().unwrap_or(Value::Null),
        });
        if !vendor.authenticated(&headers) {
            return fixture(StatusCode::UNAUTHORIZED, UNAUTHORIZED);
        }
        let fault = state.faults.draw();
        let processed = (!fault.is_some_and(Fault::is_before_processing))
            .then(|| vendor.send(&mut state, payload));
        (fault, processed)
    };
    FAULT_ANSWERS
        .answer(fault, processed, kill, vendor.config.delay)
        .await
}

async fn search(
    State(vendor): State<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let (fault, processed) = {
        let mut state = vendor.lock();
        if !vendor.authenticated(&headers) {
            return fixture(StatusCode::UNAUTHORIZED, UNAUTHORIZED);
        }
        let fault = state.lookup_faults.draw();
        let key = query.get("query").and_then(|query| queried_key(query));
        let processed =
            (!fault.is_some_and(Fault::is_before_processing)).then(|| vendor.search(&state, key));
        (fault, processed)
    };
    FAULT_ANSWERS
        .answer(fault, processed, kill, vendor.config.delay)
        .await
}

fn fixture(status: StatusCode, body: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
