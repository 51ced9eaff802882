//! SES's `SendEmail` as the fake speaks it, and everything the fake remembers: the ledger, the
//! pending faults of sends and of SNS's GETs, the last send received, each delivery's
//! attachments and the subscriptions confirmed.
//!
//! The ledger, the faults and the last send sit behind one `Mutex` so that counting a request,
//! drawing its fault and processing it is one atomic step; the attachments have a lock of their
//! own, taken only inside that step (and by tests reading them). No lock is held across an
//! `.await`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::Value;
use time::PrimitiveDateTime;
use time::macros::format_description;

use herald_provider::Attachment;
use herald_provider::fake::{FaultAnswers, Kill, LookedUp, LookedUpState};

use super::sns::Signer;
use super::{Delivery, FakeConfig, Fault};
use crate::wire::{self, ERROR_TYPE, KEY_TAG, SEND_PATH};

// The error bodies, shared with the tests through `fixtures/ses/`.
const BAD_REQUEST: &str = include_str!("../../../../fixtures/ses/errors/bad_request_400.json");
const MESSAGE_REJECTED: &str =
    include_str!("../../../../fixtures/ses/errors/message_rejected_400.json");
const SIGNATURE_MISMATCH: &str =
    include_str!("../../../../fixtures/ses/errors/signature_does_not_match_403.json");
const FAULT_ANSWERS: FaultAnswers = FaultAnswers {
    rate_limited: include_str!("../../../../fixtures/ses/errors/too_many_requests_429.json"),
    server_error: include_str!("../../../../fixtures/ses/errors/internal_failure_500.json"),
};

/// What one `SendEmail` carried: tests check the request's shape here.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// Whether its Signature Version 4 held.
    pub signed: bool,
    /// The headers it named as signed (`SignedHeaders`), in order.
    pub signed_headers: Vec<String>,
    pub content_type: Option<String>,
    /// The JSON body, or `Value::Null` if it was not JSON.
    pub body: Value,
}

/// The fake vendor: fixed settings, its SNS signer, and the state behind its lock, whose
/// accessors (`ledger`, `set_faults`, `set_lookup_faults` for SNS's GETs, `last_request`) are
/// the vendor's own.
pub struct Vendor {
    pub(super) config: FakeConfig,
    pub(super) signer: Signer,
    /// `http://127.0.0.1:<port>`, known once the server is bound.
    origin: OnceLock<String>,
    pub(super) confirmations: AtomicU64,
    pub(super) state: LookedUpState<ReceivedRequest>,
    /// Per `MessageId`, the attachments of that delivery, decoded. Written under `state`'s lock
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
            signer: Signer::load(),
            origin: OnceLock::new(),
            confirmations: AtomicU64::new(0),
            state: LookedUpState::default(),
            attachments: Mutex::default(),
        }
    }

    /// The attachments of the message SES answered `message_id` for, decoded: their size and
    /// SHA-256 are those of the bytes that arrived. Empty for a message without any.
    pub fn attachments_of(&self, message_id: &str) -> Vec<Attachment> {
        self.attachments
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(message_id)
            .cloned()
            .unwrap_or_default()
    }

    pub(super) fn set_origin(&self, origin: String) {
        let _ = self.origin.set(origin);
    }

    /// Where its SNS side is served: the route's `sns_origin`.
    pub fn origin(&self) -> &str {
        self.origin.get().map_or("", String::as_str)
    }

    /// How many subscriptions were confirmed through its `SubscribeURL`.
    pub fn confirmations(&self) -> u64 {
        self.confirmations.load(Ordering::SeqCst)
    }

    /// The request's SignedHeaders, if its signature is this account's over the request as
    /// it arrived, with the account's session token where it has one.
    fn signature_holds(&self, headers: &HeaderMap, body: &[u8]) -> Option<Vec<String>> {
        let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
        if text("x-amz-security-token") != self.config.session_token.as_deref() {
            return None;
        }
        let authorization = text("authorization")?;
        let signed_headers: Vec<String> = authorization
            .split(", ")
            .find_map(|part| part.strip_prefix("SignedHeaders="))?
            .split(';')
            .map(str::to_owned)
            .collect();
        let stamp = PrimitiveDateTime::parse(
            text("x-amz-date")?,
            format_description!("[year][month][day]T[hour][minute][second]Z"),
        )
        .ok()?
        .assume_utc();
        let credentials = Credentials::new(
            self.config.access_key_id.clone(),
            self.config.secret_access_key.clone(),
            self.config.session_token.clone(),
            None,
            "fake",
        );
        let identity = credentials.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.config.region)
            .name("ses")
            .time(SystemTime::from(stamp))
            .settings(SigningSettings::default())
            .build()
            .ok()?
            .into();
        let named: Vec<(&str, &str)> = signed_headers
            .iter()
            .filter(|name| !matches!(name.as_str(), "x-amz-date" | "x-amz-security-token"))
            .filter_map(|name| Some((name.as_str(), text(name)?)))
            .collect();
        let url = format!("http://{}{SEND_PATH}", text("host")?);
        let request =
            SignableRequest::new("POST", url, named.into_iter(), SignableBody::Bytes(body)).ok()?;
        let (instructions, _) = sign(request, &params).ok()?.into_parts();
        let expected = instructions
            .headers()
            .find(|(name, _)| *name == "authorization")
            .map(|(_, value)| value.to_owned())?;
        (expected == authorization).then_some(signed_headers)
    }

    /// A send proper, under the lock.
    fn send(&self, state: &mut LookedUp<ReceivedRequest>, payload: Option<Value>) -> Response {
        let payload = payload.unwrap_or(Value::Null);
        let text = |pointer: &str| payload.pointer(pointer).and_then(Value::as_str);
        let to = match payload
            .pointer("/Destination/ToAddresses")
            .and_then(Value::as_array)
        {
            Some(to) => to.as_slice(),
            None => &[],
        };
        let (Some(from), [to]) = (text("/FromEmailAddress"), to) else {
            return refusal(StatusCode::BAD_REQUEST, "BadRequestException", BAD_REQUEST);
        };
        let body = [
            "/Content/Simple/Body/Text/Data",
            "/Content/Simple/Body/Html/Data",
        ];
        if from.is_empty() || body.iter().all(|pointer| text(pointer).is_none()) {
            return refusal(StatusCode::BAD_REQUEST, "BadRequestException", BAD_REQUEST);
        }
        let Some(attachments) = decode_attachments(&payload) else {
            return refusal(StatusCode::BAD_REQUEST, "BadRequestException", BAD_REQUEST);
        };
        if self.config.unverified.iter().any(|sender| sender == from) {
            return refusal(StatusCode::BAD_REQUEST, "MessageRejected", MESSAGE_REJECTED);
        }
        let message_id = format!("{}-000000", uuid::Uuid::new_v4().simple());
        let key = payload
            .get("EmailTags")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|tag| tag.get("Name").and_then(Value::as_str) == Some(KEY_TAG))
            .and_then(|tag| tag.get("Value").and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        tracing::debug!(%message_id, %key, "delivered");
        if !attachments.is_empty() {
            self.attachments
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(message_id.clone(), attachments);
        }
        state.ledger.deliveries.push(Delivery::now(
            message_id.clone(),
            key,
            to.as_str().unwrap_or_default().to_owned(),
        ));
        Json(wire::Sent {
            message_id: Some(message_id),
        })
        .into_response()
    }
}

/// Each attachment of the simple message as the fake keeps it: `FileName` and `ContentType` as
/// sent, `RawContent` decoded from base64; `None` if one has no `FileName`, or its `RawContent`
/// is missing or not base64.
fn decode_attachments(payload: &Value) -> Option<Vec<Attachment>> {
    let Some(attachments) = payload.pointer("/Content/Simple/Attachments") else {
        return Some(Vec::new());
    };
    attachments
        .as_array()?
        .iter()
        .map(|attachment| {
            let text = |field: &str| attachment.get(field).and_then(Value::as_str);
            Attachment::received(
                text("FileName")?,
                text("ContentType").unwrap_or_default(),
                text("RawContent")?,
            )
        })
        .collect()
}

pub(super) fn router(vendor: Arc<Vendor>) -> Router {
    Router::new()
        .route(SEND_PATH, post(send_email))
        .route("/", get(super::sns::confirm))
        .route(super::sns::CERTIFICATE_PATH, get(super::sns::certificate))
        .with_state(vendor)
}

async fn send_email(
    State(vendor): State<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let payload = serde_json::from_slice::<Value>(&body).ok();
    let signed = vendor.signature_holds(&headers, &body);
    let (fault, processed) = {
        let mut state = vendor.lock();
        state.ledger.requests += 1;
        state.last_request = Some(ReceivedRequest {
            signed: signed.is_some(),
            signed_headers: signed.clone().unwrap_or_default(),
            content_type: headers
                .get(header::CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned),
            body: payload.clone().unwrap_or(Value::Null),
        });
        if signed.is_none() {
            return refusal(
                StatusCode::FORBIDDEN,
                "SignatureDoesNotMatch",
                SIGNATURE_MISMATCH,
            );
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

/// An error as a REST-JSON AWS service answers it: the type in `x-amzn-ErrorType`.
fn refusal(status: StatusCode, kind: &'static str, body: &'static str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::HeaderName::from_static(ERROR_TYPE), kind),
        ],
        body,
    )
        .into_response()
}
