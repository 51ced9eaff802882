//! APNs' `POST /3/device/<device_token>` as the fake speaks it, and everything it remembers:
//! the ledger, what each device shows, the provider tokens seen (and each connection's
//! current one), the pending faults and the last request.
//!
//! All of it sits behind one `Mutex` so that counting a request, checking its token, drawing
//! its fault and delivering it is one atomic step. The lock is never held across an `.await`.
//!
//! The order of checks, as APNs validates a request "using … the provided authentication token"
//! before it uses the device token: the `authorization` header (`403 MissingProviderToken`);
//! the token itself (`403 InvalidProviderToken`, `403 ExpiredProviderToken`); a new token on
//! the connection too soon after the last (`429 TooManyProviderTokenUpdates`); then the faults;
//! then the request's headers and payload (`400 …`, `413 PayloadTooLarge`); then the device
//! (`410 Unregistered`); and only then a delivery.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Version, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::server::ConnectionId;
use super::{Delivery, FakeConfig, Fault, Faults, Ledger};
use crate::token::unix_now;
use crate::wire::{
    self, APNS_COLLAPSE_ID, APNS_EXPIRATION, APNS_ID, APNS_PRIORITY, APNS_PUSH_TYPE, APNS_TOPIC,
    Claims, ErrorBody, MAX_COLLAPSE_ID_BYTES, MAX_PAYLOAD_BYTES,
};
use herald_provider::fake::Kill;

/// A documented error answer from `fixtures/apns/errors/`.
macro_rules! documented {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/apns/errors/", $file))
    };
}

const BAD_DEVICE_TOKEN: &str = documented!("bad-device-token.400.json");
const DEVICE_TOKEN_NOT_FOR_TOPIC: &str = documented!("device-token-not-for-topic.400.json");
const BAD_COLLAPSE_ID: &str = documented!("bad-collapse-id.400.json");
const BAD_EXPIRATION_DATE: &str = documented!("bad-expiration-date.400.json");
const BAD_MESSAGE_ID: &str = documented!("bad-message-id.400.json");
const BAD_PRIORITY: &str = documented!("bad-priority.400.json");
const INVALID_PUSH_TYPE: &str = documented!("invalid-push-type.400.json");
const MISSING_TOPIC: &str = documented!("missing-topic.400.json");
const PAYLOAD_EMPTY: &str = documented!("payload-empty.400.json");
const EXPIRED_PROVIDER_TOKEN: &str = documented!("expired-provider-token.403.json");
const INVALID_PROVIDER_TOKEN: &str = documented!("invalid-provider-token.403.json");
const MISSING_PROVIDER_TOKEN: &str = documented!("missing-provider-token.403.json");
const BAD_PATH: &str = documented!("bad-path.404.json");
const PAYLOAD_TOO_LARGE: &str = documented!("payload-too-large.413.json");
const TOO_MANY_PROVIDER_TOKEN_UPDATES: &str =
    documented!("too-many-provider-token-updates.429.json");
const TOO_MANY_REQUESTS: &str = documented!("too-many-requests.429.json");
const INTERNAL_SERVER_ERROR: &str = documented!("internal-server-error.500.json");
const SERVICE_UNAVAILABLE: &str = documented!("service-unavailable.503.json");

/// Apple's push types (`apns-push-type`).
const PUSH_TYPES: [&str; 11] = [
    "alert",
    "background",
    "complication",
    "controls",
    "fileprovider",
    "liveactivity",
    "location",
    "mdm",
    "pushtotalk",
    "voip",
    "widgets",
];

/// What one push request carried, minus the provider token: tests check its shape here.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// The HTTP version it came in (always HTTP/2: the server takes nothing else).
    pub version: Version,
    pub connection: ConnectionId,
    pub device_token: String,
    /// The request's `apns-id`, `apns-topic`, … as sent; `None` where absent.
    pub apns_id: Option<String>,
    pub topic: Option<String>,
    pub push_type: Option<String>,
    pub priority: Option<String>,
    pub expiration: Option<String>,
    pub collapse_id: Option<String>,
    pub content_type: Option<String>,
    pub user_agent: Option<String>,
    /// The word before the token in `authorization` (APNs expects `bearer`).
    pub auth_scheme: Option<String>,
    /// The token's header `kid` and its claims, where it was a JWT at all.
    pub kid: Option<String>,
    pub claims: Option<Claims>,
    /// The body as JSON, or `Value::Null` if it was not JSON.
    pub body: Value,
}

/// A notification as a device shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub apns_id: String,
    pub collapse_id: Option<String>,
    pub title: Option<String>,
    pub body: Option<String>,
}

/// The fake vendor: fixed settings, and the state behind its lock.
pub struct Vendor {
    config: FakeConfig,
    decoding_key: DecodingKey,
    state: Mutex<VendorState>,
}

#[derive(Default)]
struct VendorState {
    ledger: Ledger,
    /// Per device token, what it shows, oldest first.
    shown: BTreeMap<String, Vec<Shown>>,
    /// Every distinct provider token presented, valid or not.
    tokens_seen: HashSet<String>,
    /// The last token presented: for a test that checks it with a client of its own.
    last_token: Option<String>,
    /// Tokens a fault declared stale: refused as expired from then on.
    expired: HashSet<String>,
    /// Per connection, the token in use and since when.
    connections: HashMap<ConnectionId, (String, Instant)>,
    faults: Faults,
    last_request: Option<ReceivedRequest>,
}

impl Vendor {
    pub(super) fn new(config: FakeConfig) -> std::io::Result<Vendor> {
        let decoding_key = DecodingKey::from_ec_pem(config.key.public_pem.as_bytes())
            .map_err(std::io::Error::other)?;
        let faults = config.faults.clone();
        let vendor = Vendor {
            config,
            decoding_key,
            state: Mutex::new(VendorState::default()),
        };
        vendor.set_faults(faults);
        Ok(vendor)
    }

    fn lock(&self) -> MutexGuard<'_, VendorState> {
        // No code panics while holding the lock, so a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A snapshot of the ledger: every push request received, and every delivery, keyed by its
    /// `apns-id`.
    pub fn ledger(&self) -> Ledger {
        self.lock().ledger.clone()
    }

    /// Replaces the pending faults.
    pub fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// The last push request received, whatever became of it.
    pub fn last_request(&self) -> Option<ReceivedRequest> {
        self.lock().last_request.clone()
    }

    /// How many distinct provider tokens were presented, valid or not.
    pub fn tokens_seen(&self) -> u64 {
        self.lock().tokens_seen.len() as u64
    }

    /// The last provider token presented, for a test that checks it with a client of its own.
    pub fn last_provider_token(&self) -> Option<String> {
        self.lock().last_token.clone()
    }

    /// What `device_token` shows, oldest first: each delivery, but one whose
    /// `apns-collapse-id` a shown notification has already is shown in that one's place.
    pub fn shown_on(&self, device_token: &str) -> Vec<Shown> {
        self.lock()
            .shown
            .get(device_token)
            .cloned()
            .unwrap_or_default()
    }

    /// The provider token's verdict: `Err` with APNs' status and documented body where it is
    /// refused.
    fn check_token(
        &self,
        state: &mut VendorState,
        connection: ConnectionId,
        headers: &HeaderMap,
    ) -> Result<(), (StatusCode, &'static str)> {
        let refused = |status: StatusCode, body: &'static str| Err((status, body));
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return refused(StatusCode::FORBIDDEN, MISSING_PROVIDER_TOKEN);
        };
        let Some(token) = value
            .to_str()
            .ok()
            .and_then(|value| value.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|token| !token.is_empty())
        else {
            return refused(StatusCode::FORBIDDEN, MISSING_PROVIDER_TOKEN);
        };
        state.tokens_seen.insert(token.to_owned());
        state.last_token = Some(token.to_owned());
        let Some(claims) = self.verify(token) else {
            return refused(StatusCode::FORBIDDEN, INVALID_PROVIDER_TOKEN);
        };
        let now = unix_now();
        if claims.iat > now + self.config.token_lifetime.as_secs() {
            return refused(StatusCode::FORBIDDEN, INVALID_PROVIDER_TOKEN);
        }
        let stale = now.saturating_sub(claims.iat) > self.config.token_lifetime.as_secs();
        if stale || state.expired.contains(token) {
            return refused(StatusCode::FORBIDDEN, EXPIRED_PROVIDER_TOKEN);
        }
        // A new token on this connection: only once per interval, unless the one before it is
        // stale (APNs refused it as expired, so the provider had to make a new one).
        match state.connections.get(&connection) {
            Some((current, _)) if current == token => {}
            Some((current, since))
                if !state.expired.contains(current)
                    && since.elapsed() < self.config.min_token_update_interval =>
            {
                return refused(
                    StatusCode::TOO_MANY_REQUESTS,
                    TOO_MANY_PROVIDER_TOKEN_UPDATES,
                );
            }
            _ => {
                state
                    .connections
                    .insert(connection, (token.to_owned(), Instant::now()));
            }
        }
        Ok(())
    }

    /// The claims of `token` if it is an ES256 JWT with the configured `kid`, signed by the
    /// configured key, issued by the configured team.
    fn verify(&self, token: &str) -> Option<Claims> {
        let header = jsonwebtoken::decode_header(token).ok()?;
        if header.alg != Algorithm::ES256 || header.kid.as_deref() != Some(&self.config.key_id) {
            return None;
        }
        let mut validation = Validation::new(Algorithm::ES256);
        validation.required_spec_claims = HashSet::from(["iss".to_owned()]);
        validation.validate_exp = false;
        validation.validate_aud = false;
        validation.set_issuer(&[&self.config.team_id]);
        jsonwebtoken::decode::<Claims>(token, &self.decoding_key, &validation)
            .ok()
            .map(|data| data.claims)
    }

    /// The request's own checks and the delivery, under the lock: the answer processing gives.
    fn push(
        &self,
        state: &mut VendorState,
        device_token: &str,
        headers: &HeaderMap,
        body: &Bytes,
        apns_id: &str,
    ) -> Response {
        let refused = |status: StatusCode, body: &'static str| answer(status, body, Some(apns_id));
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        match text(APNS_TOPIC) {
            None => return refused(StatusCode::BAD_REQUEST, MISSING_TOPIC),
            Some(topic) if topic != self.config.topic => {
                return refused(StatusCode::BAD_REQUEST, DEVICE_TOKEN_NOT_FOR_TOPIC);
            }
            Some(_) => {}
        }
        if text(APNS_PUSH_TYPE).is_some_and(|kind| !PUSH_TYPES.contains(&kind)) {
            return refused(StatusCode::BAD_REQUEST, INVALID_PUSH_TYPE);
        }
        if text(APNS_PRIORITY).is_some_and(|p| !["10", "5", "1"].contains(&p)) {
            return refused(StatusCode::BAD_REQUEST, BAD_PRIORITY);
        }
        if text(APNS_EXPIRATION).is_some_and(|e| e.parse::<u64>().is_err()) {
            return refused(StatusCode::BAD_REQUEST, BAD_EXPIRATION_DATE);
        }
        let collapse_id = text(APNS_COLLAPSE_ID).map(str::to_owned);
        if collapse_id
            .as_ref()
            .is_some_and(|id| id.len() > MAX_COLLAPSE_ID_BYTES)
        {
            return refused(StatusCode::BAD_REQUEST, BAD_COLLAPSE_ID);
        }
        if device_token.is_empty() || !device_token.bytes().all(|b| b.is_ascii_hexdigit()) {
            return refused(StatusCode::BAD_REQUEST, BAD_DEVICE_TOKEN);
        }
        if body.is_empty() {
            return refused(StatusCode::BAD_REQUEST, PAYLOAD_EMPTY);
        }
        if body.len() > MAX_PAYLOAD_BYTES {
            return refused(StatusCode::PAYLOAD_TOO_LARGE, PAYLOAD_TOO_LARGE);
        }
        if self.config.unregistered.iter().any(|d| d == device_token) {
            return unregistered(apns_id);
        }
        let payload: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let alert = &payload["aps"]["alert"];
        let shown = Shown {
            apns_id: apns_id.to_owned(),
            collapse_id: collapse_id.clone(),
            title: alert["title"].as_str().map(str::to_owned),
            body: alert["body"]
                .as_str()
                .or_else(|| alert.as_str())
                .map(str::to_owned),
        };
        tracing::debug!(%apns_id, device_token, "delivered");
        state.ledger.deliveries.push(Delivery::now(
            apns_id.to_owned(),
            apns_id.to_owned(),
            device_token.to_owned(),
        ));
        let screen = state.shown.entry(device_token.to_owned()).or_default();
        match screen
            .iter_mut()
            .find(|earlier| collapse_id.is_some() && earlier.collapse_id == collapse_id)
        {
            Some(earlier) => *earlier = shown,
            None => screen.push(shown),
        }
        let mut response = StatusCode::OK.into_response();
        set_apns_id(&mut response, Some(apns_id));
        response
    }
}

pub(super) fn router(vendor: Arc<Vendor>) -> Router {
    Router::new()
        .route("/3/device/{device_token}", post(push))
        .fallback(|| async { answer(StatusCode::NOT_FOUND, BAD_PATH, None) })
        .with_state(vendor)
}

async fn push(
    State(vendor): State<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
    Extension(connection): Extension<ConnectionId>,
    Path(device_token): Path<String>,
    version: Version,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    // "If you omit this header, APNs creates a UUID for you and returns it in its response."
    let apns_id = match text(APNS_ID) {
        None => uuid::Uuid::new_v4().to_string(),
        Some(id) if is_canonical_uuid(&id) => id,
        Some(_) => return answer(StatusCode::BAD_REQUEST, BAD_MESSAGE_ID, None),
    };
    let (fault, processed) = {
        let mut state = vendor.lock();
        state.ledger.requests += 1;
        state.last_request = Some(received(
            &headers,
            version,
            connection,
            &device_token,
            &body,
            &vendor,
        ));
        if let Err((status, body)) = vendor.check_token(&mut state, connection, &headers) {
            return answer(status, body, Some(&apns_id));
        }
        let fault = state.faults.draw();
        let before = match fault {
            Some(Fault::RateLimited) => Some(answer(
                StatusCode::TOO_MANY_REQUESTS,
                TOO_MANY_REQUESTS,
                Some(&apns_id),
            )),
            Some(Fault::UnavailableBeforeProcessing) => Some(answer(
                StatusCode::SERVICE_UNAVAILABLE,
                SERVICE_UNAVAILABLE,
                Some(&apns_id),
            )),
            Some(Fault::Unregistered) => Some(unregistered(&apns_id)),
            Some(Fault::BadDeviceToken) => Some(answer(
                StatusCode::BAD_REQUEST,
                BAD_DEVICE_TOKEN,
                Some(&apns_id),
            )),
            Some(Fault::ExpiredProviderToken) => {
                if let Some(token) = state.last_token.clone() {
                    state.expired.insert(token);
                }
                Some(answer(
                    StatusCode::FORBIDDEN,
                    EXPIRED_PROVIDER_TOKEN,
                    Some(&apns_id),
                ))
            }
            Some(Fault::TooManyProviderTokenUpdates) => Some(answer(
                StatusCode::TOO_MANY_REQUESTS,
                TOO_MANY_PROVIDER_TOKEN_UPDATES,
                Some(&apns_id),
            )),
            _ => None,
        };
        if let Some(refusal) = before {
            tracing::info!(?fault, "refused before processing");
            return refusal;
        }
        let processed = vendor.push(&mut state, &device_token, &headers, &body, &apns_id);
        (fault, processed)
    };
    match fault {
        Some(Fault::AcceptThenDrop) => {
            tracing::info!("closing the connection after processing (accept_then_drop)");
            kill.kill().await
        }
        Some(Fault::Delay) => {
            tracing::info!(delay = ?vendor.config.delay, "holding the answer (delay)");
            tokio::time::sleep(vendor.config.delay).await;
            processed
        }
        Some(Fault::ErrorAfterProcessing) => {
            tracing::info!("answering 500 after processing (error_after_processing)");
            answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                INTERNAL_SERVER_ERROR,
                Some(&apns_id),
            )
        }
        _ => processed,
    }
}

/// What the fake keeps of a request: everything but the token itself.
fn received(
    headers: &HeaderMap,
    version: Version,
    connection: ConnectionId,
    device_token: &str,
    body: &Bytes,
    vendor: &Vendor,
) -> ReceivedRequest {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let authorization = text(header::AUTHORIZATION.as_str());
    let token = authorization
        .as_deref()
        .and_then(|value| value.split_once(' '))
        .map(|(_, token)| token.trim());
    ReceivedRequest {
        version,
        connection,
        device_token: device_token.to_owned(),
        apns_id: text(APNS_ID),
        topic: text(APNS_TOPIC),
        push_type: text(APNS_PUSH_TYPE),
        priority: text(APNS_PRIORITY),
        expiration: text(APNS_EXPIRATION),
        collapse_id: text(APNS_COLLAPSE_ID),
        content_type: text(header::CONTENT_TYPE.as_str()),
        user_agent: text(header::USER_AGENT.as_str()),
        auth_scheme: authorization
            .as_deref()
            .and_then(|value| value.split_whitespace().next())
            .map(str::to_owned),
        kid: token
            .and_then(|token| jsonwebtoken::decode_header(token).ok())
            .and_then(|header| header.kid),
        claims: token.and_then(|token| vendor.verify(token)),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
    }
}

/// "Canonical UUIDs are 32 lowercase hexadecimal digits, displayed in five groups separated by
/// hyphens in the form 8-4-4-4-12."
fn is_canonical_uuid(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| {
            g.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// `410 Unregistered`, with the time APNs confirmed the token inactive, in milliseconds.
fn unregistered(apns_id: &str) -> Response {
    let millis = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis(),
    )
    .unwrap_or(u64::MAX);
    let body = ErrorBody {
        reason: wire::UNREGISTERED.to_owned(),
        timestamp: Some(millis),
    };
    let json = serde_json::to_string(&body).unwrap_or_default();
    let mut response = (
        StatusCode::GONE,
        [(header::CONTENT_TYPE, "application/json")],
        json,
    )
        .into_response();
    set_apns_id(&mut response, Some(apns_id));
    response
}

/// A documented error body with its status, carrying `apns_id` where the request had one.
fn answer(status: StatusCode, body: &'static str, apns_id: Option<&str>) -> Response {
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    set_apns_id(&mut response, apns_id);
    response
}

fn set_apns_id(response: &mut Response, apns_id: Option<&str>) {
    if let Some(value) = apns_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        response.headers_mut().insert(APNS_ID, value);
    }
}
