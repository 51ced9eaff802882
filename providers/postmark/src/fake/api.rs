//! Postmark's `POST /email` and `GET /messages/outbound` as the fake speaks them, and everything
//! it remembers: the ledger with each delivery's time, the pending faults of sends and of
//! look-ups, the last send received, and each delivery's attachments.
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
use crate::wire::{
    self, EMAIL_PATH, KEY_FILTER, KEY_METADATA, Listed, MessageList, OUTBOUND_PATH, SERVER_TOKEN,
};

// The documented error bodies, shared with the tests through `fixtures/postmark/`.
const BAD_TOKEN: &str = include_str!("../../../../fixtures/postmark/errors/bad_token_401.json");
const INVALID_REQUEST: &str =
    include_str!("../../../../fixtures/postmark/errors/invalid_request_422.json");
const INACTIVE_RECIPIENT: &str =
    include_str!("../../../../fixtures/postmark/errors/inactive_recipient_422.json");
const FAULT_ANSWERS: FaultAnswers = FaultAnswers {
    rate_limited: include_str!("../../../../fixtures/postmark/errors/rate_limit_429.json"),
    server_error: include_str!("../../../../fixtures/postmark/errors/internal_error_500.json"),
};

/// What one `POST /email` carried, minus the token: tests check the request's shape here.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// Whether `X-Postmark-Server-Token` was there; the token itself is checked, never kept.
    pub token_sent: bool,
    pub content_type: Option<String>,
    pub accept: Option<String>,
    /// The JSON body, or `Value::Null` if it was not JSON.
    pub body: Value,
}

/// The fake vendor: fixed settings, and the state behind its lock, whose accessors
/// (`ledger`, `set_faults`, `set_lookup_faults`, `last_request`) are the vendor's own.
pub struct Vendor {
    config: FakeConfig,
    state: LookedUpState<ReceivedRequest>,
    /// Per `MessageID`, the attachments of that delivery, decoded. Written under `state`'s lock
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

    /// The attachments of the message Postmark answered `message_id` for, decoded: their size
    /// and SHA-256 are those of the bytes that arrived. Empty for a message without any.
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
            .get(SERVER_TOKEN)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|token| token == self.config.server_token)
    }

    /// A send proper, under the lock.
    fn send(&self, state: &mut LookedUp<ReceivedRequest>, payload: Option<Value>) -> Response {
        let text = |value: &Value, name: &str| {
            value
                .get(name)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let Some(payload) = payload.filter(Value::is_object) else {
            return fixture(StatusCode::UNPROCESSABLE_ENTITY, INVALID_REQUEST);
        };
        let (Some(_from), Some(to)) = (text(&payload, "From"), text(&payload, "To")) else {
            return fixture(StatusCode::UNPROCESSABLE_ENTITY, INVALID_REQUEST);
        };
        if text(&payload, "HtmlBody").is_none() && text(&payload, "TextBody").is_none() {
            return fixture(StatusCode::UNPROCESSABLE_ENTITY, INVALID_REQUEST);
        }
        let Some(attachments) = decode_attachments(&payload) else {
            return fixture(StatusCode::UNPROCESSABLE_ENTITY, INVALID_REQUEST);
        };
        if self.config.inactive.contains(&to) {
            return fixture(StatusCode::UNPROCESSABLE_ENTITY, INACTIVE_RECIPIENT);
        }
        let message_id = uuid::Uuid::new_v4().to_string();
        if !attachments.is_empty() {
            self.attachments
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(message_id.clone(), attachments);
        }
        let key = payload
            .get("Metadata")
            .and_then(|meta| text(meta, KEY_METADATA))
            .unwrap_or_default();
        tracing::debug!(%message_id, %key, "delivered");
        state
            .ledger
            .deliveries
            .push(Delivery::now(message_id.clone(), key, to.clone()));
        Json(wire::Answer {
            error_code: wire::OK,
            message: "OK".to_owned(),
            message_id: Some(message_id),
            submitted_at: Some("2014-02-17T07:25:01.4178645-05:00".to_owned()),
            to: Some(to),
        })
        .into_response()
    }

    /// The outbound search proper, under the lock: the listed deliveries with `key`, newest
    /// first.
    fn search(&self, state: &LookedUp<ReceivedRequest>, key: Option<&str>) -> Response {
        let listed = state
            .ledger
            .listed(key, self.config.visibility_lag, Instant::now());
        let messages: Vec<Listed> = listed
            .map(|delivery| Listed {
                message_id: delivery.message_id.clone(),
                status: Some("Sent".to_owned()),
                metadata: BTreeMap::from([(KEY_METADATA.to_owned(), delivery.key.clone())]),
            })
            .collect();
        Json(MessageList {
            total_count: messages.len() as u64,
            messages,
        })
        .into_response()
    }
}

/// Each attachment as the fake keeps it: `Name` and `ContentType` as sent, `Content` decoded
/// from base64; `None` if one has no `Name`, or its `Content` is missing or not base64.
fn decode_attachments(payload: &Value) -> Option<Vec<Attachment>> {
    let Some(attachments) = payload.get("Attachments") else {
        return Some(Vec::new());
    };
    attachments
        .as_array()?
        .iter()
        .map(|attachment| {
            let text = |field: &str| attachment.get(field).and_then(Value::as_str);
            Attachment::received(
                text("Name")?,
                text("ContentType").unwrap_or_default(),
                text("Content")?,
            )
        })
        .collect()
}

pub(super) fn router(vendor: Arc<Vendor>) -> Router {
    Router::new()
        .route(EMAIL_PATH, post(send_email))
        .route(OUTBOUND_PATH, get(search))
        .with_state(vendor)
}

async fn send_email(
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
            token_sent: headers.contains_key(SERVER_TOKEN),
            content_type: header_text(header::CONTENT_TYPE),
            accept: header_text(header::ACCEPT),
            body: payload.clone().unwrap_or(Value::Null),
        });
        if !vendor.authenticated(&headers) {
            return fixture(StatusCode::UNAUTHORIZED, BAD_TOKEN);
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
            return fixture(StatusCode::UNAUTHORIZED, BAD_TOKEN);
        }
        let fault = state.lookup_faults.draw();
        let key = query.get(KEY_FILTER).map(String::as_str);
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
