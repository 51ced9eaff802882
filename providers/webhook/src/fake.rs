//! A local Standard Webhooks receiver for tests (feature `fake`): it verifies what herald sends
//! the way a careful receiver would, can misbehave on demand, and keeps a ledger of what it
//! really processed, which tests take as ground truth.
//!
//! It takes a `POST` on any path of `http://127.0.0.1:<port>`. In order, a request
//! 1. meets the next queued [`Fault`], if any; one that answers before processing ends it here;
//! 2. is checked: `Content-Type: application/json` (else 415); `webhook-id`,
//!    `webhook-timestamp` and `webhook-signature` present and the timestamp an integer (else
//!    400); the timestamp within the tolerance and one `v1,` signature made with one of the
//!    receiver's secrets (else 401); the body a JSON object (else 400);
//! 3. is processed: a delivery is counted for its `webhook-id`, or, with `dedup`, an id
//!    processed before is answered 200 `{"duplicate":true}` without counting it again;
//!    otherwise the answer is 204;
//! 4. meets a fault after processing, if that is what was queued: the delivery stands, only the
//!    answer is lost, late or wrong.
//!
//! The server is herald-provider's fake harness ([`herald_provider::fake::serve`]), which owns
//! each connection so that `accept_then_drop` can close one without writing a byte of the
//! answer, and counts the connections it accepts.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use herald_provider::fake::{self as harness, FakeServer, Kill};
use secrecy::SecretString;

use crate::signature::SigningSecret;
use crate::{WEBHOOK_ID, WEBHOOK_SIGNATURE, WEBHOOK_TIMESTAMP};

/// How the receiver behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeConfig {
    /// The `whsec_…` secrets the receiver knows; a request passes if any one signature in it
    /// was made with any one of them. Empty: signatures are not checked.
    pub secrets: Vec<String>,
    /// Answer a `webhook-id` processed before with 200 instead of processing it again, as the
    /// spec asks receivers to.
    pub dedup: bool,
    /// How far `webhook-timestamp` may lie from the receiver's clock (the spec's libraries use
    /// five minutes).
    pub tolerance: Duration,
    /// Faults for the first requests, one each, in order; see [`FakeHandle::set_faults`].
    pub faults: Vec<Fault>,
    /// How long [`Fault::Delay`] holds its answer; longer than any sane client timeout.
    pub delay: Duration,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            secrets: Vec::new(),
            dedup: false,
            tolerance: Duration::from_secs(5 * 60),
            faults: Vec::new(),
            delay: Duration::from_secs(30),
        }
    }
}

/// One injected misbehaviour, for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Process, then close the connection without a byte of answer.
    AcceptThenDrop,
    /// Process, then hold the answer for [`FakeConfig::delay`].
    Delay,
    /// Process, then answer 500.
    ErrorAfterProcessing,
    /// Answer 503 with `Retry-After: 1` without processing.
    UnavailableBeforeProcessing,
    /// Answer 429 with `Retry-After: 1` without processing.
    RateLimited,
    /// Answer 429 with `Retry-After` of this many seconds, without processing.
    RateLimitedFor(u32),
    /// Answer this status without processing (e.g. 301 with a `Location`, 400, 410).
    StatusBeforeProcessing(u16),
    /// Process, then answer this status (e.g. 502 or 504 from a gateway whose backend did the
    /// work but whose answer was lost).
    StatusAfterProcessing(u16),
}

/// What the receiver saw and did. A snapshot: [`FakeHandle::ledger`] takes a fresh one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ledger {
    /// TCP connections accepted, so a test can prove that a refused send never connected.
    /// The harness counts them; [`FakeHandle::ledger`] copies its count in.
    pub connections: u64,
    /// Every request, oldest first, whatever became of it.
    pub requests: Vec<Received>,
    deliveries: BTreeMap<String, u64>,
}

impl Ledger {
    /// How many times the webhook with this `webhook-id` was really processed.
    pub fn deliveries_of(&self, webhook_id: &str) -> u64 {
        self.deliveries.get(webhook_id).copied().unwrap_or(0)
    }
}

/// One request as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names in lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body exactly as received: the bytes the signature covers.
    pub body: Vec<u8>,
    /// The status the receiver chose, or `None` if it closed the connection instead.
    pub answer: Option<u16>,
}

impl Received {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the handlers share. One lock over the fault queue and the ledger makes taking a fault
/// and counting a delivery one step; it is never held across an `.await`.
struct Shared {
    secrets: Vec<SigningSecret>,
    dedup: bool,
    tolerance: Duration,
    delay: Duration,
    state: Mutex<State>,
}

struct State {
    faults: VecDeque<Fault>,
    ledger: Ledger,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding the lock, so a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A receiver running in a background task on 127.0.0.1. Dropping it shuts the server down and
/// closes its connections, answered or not.
pub struct FakeHandle {
    server: FakeServer,
    shared: Arc<Shared>,
}

/// Binds 127.0.0.1 on a free port and serves `config` there. Fails on a malformed secret.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    let secrets = config
        .secrets
        .iter()
        .map(|s| SigningSecret::parse(&SecretString::from(s.as_str())))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, format!("a secret {err}")))?;
    let shared = Arc::new(Shared {
        secrets,
        dedup: config.dedup,
        tolerance: config.tolerance,
        delay: config.delay,
        state: Mutex::new(State {
            faults: config.faults.into(),
            ledger: Ledger::default(),
        }),
    });
    let router = Router::new()
        .fallback(receive)
        .with_state(Arc::clone(&shared));
    let server = harness::serve(router).await?;
    Ok(FakeHandle { server, shared })
}

impl FakeHandle {
    /// `http://127.0.0.1:<port>`, without a trailing slash; any path below it is a receiver.
    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// A snapshot of what the receiver has seen so far.
    pub fn ledger(&self) -> Ledger {
        let mut ledger = self.shared.lock().ledger.clone();
        ledger.connections = self.server.connections();
        ledger
    }

    /// Replaces the fault queue: the next requests meet these faults, one each, in order; then
    /// the receiver behaves again.
    pub fn set_faults(&self, faults: Vec<Fault>) {
        self.shared.lock().faults = faults.into();
    }

    /// Stops the server, closes its connections and waits until it has.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}

async fn receive(
    AxumState(shared): AxumState<Arc<Shared>>,
    Extension(kill): Extension<Kill>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let fault;
    let answer;
    {
        let mut state = shared.lock();
        fault = state.faults.pop_front();
        answer = match fault.and_then(before_processing) {
            Some(answer) => answer,
            None => process(&shared, &mut state.ledger, &method, &headers, &body),
        };
        let status = match fault {
            Some(Fault::AcceptThenDrop) => None,
            Some(Fault::ErrorAfterProcessing) => Some(500),
            Some(Fault::StatusAfterProcessing(status)) => Some(status),
            _ => Some(answer.status().as_u16()),
        };
        state.ledger.requests.push(Received {
            method: method.to_string(),
            path: uri.path().to_owned(),
            headers: headers
                .iter()
                .map(|(n, v)| {
                    let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
                    (n.as_str().to_owned(), value)
                })
                .collect(),
            body: body.to_vec(),
            answer: status,
        });
    }
    match fault {
        Some(Fault::AcceptThenDrop) => kill.kill().await,
        Some(Fault::Delay) => {
            tokio::time::sleep(shared.delay).await;
            answer
        }
        Some(Fault::ErrorAfterProcessing) => text(StatusCode::INTERNAL_SERVER_ERROR, "boom"),
        Some(Fault::StatusAfterProcessing(status)) => status_answer(status),
        _ => answer,
    }
}

/// The answer of a fault that answers instead of processing; `None` for the others.
fn before_processing(fault: Fault) -> Option<Response> {
    let retry_after = |status, message, seconds: u32| {
        let mut response = text(status, message);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        response
    };
    Some(match fault {
        Fault::RateLimited => retry_after(StatusCode::TOO_MANY_REQUESTS, "slow down", 1),
        Fault::RateLimitedFor(seconds) => {
            retry_after(StatusCode::TOO_MANY_REQUESTS, "slow down", seconds)
        }
        Fault::UnavailableBeforeProcessing => retry_after(
            StatusCode::SERVICE_UNAVAILABLE,
            "not processed; try again",
            1,
        ),
        Fault::StatusBeforeProcessing(status) => status_answer(status),
        _ => return None,
    })
}

/// Checks and processes one request under the lock (see the module docs for the order).
fn process(
    shared: &Shared,
    ledger: &mut Ledger,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    if method != Method::POST {
        return text(StatusCode::METHOD_NOT_ALLOWED, "webhooks are POSTed");
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if !header(header::CONTENT_TYPE.as_str()).is_some_and(|ct| ct.starts_with("application/json")) {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "expected application/json",
        );
    }
    let (Some(id), Some(timestamp), Some(signature)) = (
        header(WEBHOOK_ID),
        header(WEBHOOK_TIMESTAMP),
        header(WEBHOOK_SIGNATURE),
    ) else {
        return text(StatusCode::BAD_REQUEST, "missing webhook-* headers");
    };
    let Ok(timestamp) = timestamp.parse::<i64>() else {
        return text(
            StatusCode::BAD_REQUEST,
            "webhook-timestamp is not an integer",
        );
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    if now.abs_diff(timestamp) > shared.tolerance.as_secs() {
        return text(
            StatusCode::UNAUTHORIZED,
            "webhook-timestamp outside tolerance",
        );
    }
    if !shared.secrets.is_empty()
        && !shared
            .secrets
            .iter()
            .any(|secret| secret.verifies(signature, id, timestamp, body))
    {
        return text(StatusCode::UNAUTHORIZED, "no valid signature");
    }
    if !matches!(
        serde_json::from_slice::<serde_json::Value>(body),
        Ok(serde_json::Value::Object(_))
    ) {
        return text(StatusCode::BAD_REQUEST, "the body is not a JSON object");
    }
    let count = ledger.deliveries.entry(id.to_owned()).or_default();
    if shared.dedup && *count > 0 {
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            r#"{"duplicate":true}"#,
        )
            .into_response();
    }
    *count += 1;
    StatusCode::NO_CONTENT.into_response()
}

/// An answer with `status`; a redirect carries a `Location`, as a real one would.
fn status_answer(status: u16) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = text(status, status.canonical_reason().unwrap_or("fault"));
    if status.is_redirection() {
        response
            .headers_mut()
            .insert(header::LOCATION, HeaderValue::from_static("/moved"));
    }
    response
}

fn text(status: StatusCode, message: &'static str) -> Response {
    (status, message).into_response()
}
