//! The vendor's routes and everything they remember: the ledger, the idempotency records, the
//! delivery log behind the outcome query, and the current fault rules.
//!
//! All of it sits in one `Mutex`-guarded [`State`] so that counting a request, drawing its fault
//! and processing it is one atomic step: two concurrent requests with the same key can never
//! both deliver. The lock is never held across an `.await`.
//!
//! What "processing" means here, and what the ledger counts: a `POST /messages` with a valid
//! body that is not answered from a stored answer (and not refused as a concurrent repeat) is a
//! delivery, recorded at once. A fault after processing changes only what goes on the wire:
//! the vendor's own record keeps the acceptance, so a later replay of that key answers 202 with
//! the stored id, even if the first answer was a 500, a timeout or a dropped connection — the
//! message *was* delivered, and an honest vendor says so. Such a fault applies to whatever
//! processing answered — a new delivery, a replay, a 409 or a 422 — so it can hide an answer
//! but never invent a delivery. Faults before processing (503, 429) answer before the
//! idempotency records are even consulted, as an overloaded vendor's front door would.
//!
//! Under profile `idempotent`, a key is bound to the exact body of its first processed request:
//! the same body again is a replay (the stored answer), another body is refused with 422
//! `idempotency_key_reused`, as Resend, Novu and the IETF draft do.
//!
//! Every answer carries a `sandbox-capabilities` header stating the profile, window and lag, so
//! that a client can tell, answer by answer, whether this is the vendor it was configured for.
//!
//! History is bounded ([`SandboxConfig::history`]): the most recent deliveries and keys are
//! kept, older ones forgotten and counted in the ledger (`forgotten_deliveries`,
//! `forgotten_keys`), and a key is forgotten once its window has passed, so that a sandbox
//! left running (the quick start's, a staging one) keeps its memory flat. A test reads far
//! fewer deliveries than that, and the counts say if it ever did not.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State as AxumState};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::callbacks::{self, CallbackTarget};
use super::faults::{self, Fault, FaultRule};
use super::{Arrival, ConnectionKill, Ledger, Profile, SandboxConfig};
use crate::wire::{
    AcceptedBody, AttachmentIn, CAPABILITIES, DeliveryItem, DeliveryList, IDEMPOTENCY_KEY,
    IDEMPOTENT_REPLAYED, KEY_REUSED, MAX_MESSAGE_BYTES, MessageIn, Offer,
};
use herald_provider::Attachment;
use herald_provider::signature::SigningSecret;

/// What the routes share: the fixed settings, and the state behind its lock.
struct Sandbox {
    profile: Profile,
    idempotency_window: Duration,
    visibility_lag: Duration,
    delay: Duration,
    retry_after: Duration,
    /// The secret that signs delivery reports, and the client that posts them.
    reporter: Option<(SigningSecret, reqwest::Client)>,
    history: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// `POST /messages` requests seen since start or the last reset; numbers `nth` triggers.
    requests: u64,
    /// Look-ups (`GET /messages`) seen, numbering `nth` triggers of look-up faults.
    lookups: u64,
    /// Per reference, how many of the deliveries in `log` it has.
    deliveries: BTreeMap<String, u64>,
    /// The most recent deliveries, oldest first, for the outcome query.
    log: VecDeque<Delivery>,
    /// Deliveries dropped from `log` to keep to the history.
    forgotten_deliveries: u64,
    /// Per idempotency key, the answer to replay (profile `idempotent` only).
    replays: HashMap<String, StoredAnswer>,
    /// Keys in the order they were processed, to forget them with their window or the history.
    replay_order: VecDeque<(String, Instant)>,
    /// Keys forgotten before their window ended.
    forgotten_keys: u64,
    faults: Vec<FaultRule>,
    /// Where new deliveries are reported.
    callbacks: Option<CallbackTarget>,
    /// The most recent requests as they arrived, oldest first, up to the history.
    arrivals: VecDeque<Arrival>,
}

struct Delivery {
    id: String,
    reference: String,
    accepted_at: OffsetDateTime,
    /// Monotonic twin of `accepted_at`, for the visibility lag.
    at: Instant,
    attachments: Vec<Attachment>,
}

/// The answer processing gave to the first request with a key.
struct StoredAnswer {
    body: AcceptedBody,
    /// A digest of the request body the key was first processed with: a replay must repeat it
    /// exactly. (A digest, not the body: the sandbox keeps many keys.)
    request: u64,
    processed_at: Instant,
    /// How long after processing the first request still counts as in progress: the `delay`
    /// fault's hold, otherwise zero. Kept as a time span rather than flipped by the handler
    /// when it answers, because a handler whose client hung up may be dropped before then.
    in_progress_for: Duration,
}

impl Sandbox {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding the lock, so a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(super) fn router(config: SandboxConfig) -> Result<Router, reqwest::Error> {
    let reporter = match config.callback_secret {
        Some(secret) => {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .no_proxy()
                .build()?;
            Some((secret, http))
        }
        None => None,
    };
    let sandbox = Arc::new(Sandbox {
        profile: config.profile,
        idempotency_window: config.idempotency_window,
        visibility_lag: config.visibility_lag,
        delay: config.delay,
        retry_after: config.retry_after,
        reporter,
        history: config.history.max(1),
        state: Mutex::new(State {
            faults: config.faults,
            callbacks: config.callbacks,
            ..State::default()
        }),
    });
    let offer = Offer {
        profile: config.profile,
        idempotency_window: config.idempotency_window,
        visibility_lag: config.visibility_lag,
    };
    let offer = HeaderValue::from_str(&offer.header_value()).expect("an offer is header text");
    Ok(Router::new()
        .route("/messages", get(list_messages).post(post_message))
        .route("/ledger", get(read_ledger).delete(clear_ledger))
        .route("/profile", get(read_profile))
        .route("/faults", axum::routing::put(replace_faults))
        .route("/callbacks", axum::routing::put(replace_callbacks))
        .layer(DefaultBodyLimit::max(MAX_MESSAGE_BYTES))
        .layer(axum::middleware::map_response(
            move |mut response: Response| {
                response.headers_mut().insert(CAPABILITIES, offer.clone());
                async move { response }
            },
        ))
        .with_state(sandbox))
}

/// The one field of a message body an arrival records.
#[derive(Deserialize)]
struct Referenced {
    reference: String,
}

/// What processing a `POST /messages` decided, before any fault touches the answer.
enum Outcome {
    Delivered(AcceptedBody),
    Replayed(AcceptedBody),
    /// A repeat of a key whose first request is still being processed.
    InProgress,
    /// A key first processed with another body.
    KeyReused,
    Invalid(String),
}

async fn post_message(
    AxumState(sandbox): AxumState<Arc<Sandbox>>,
    Extension(kill): Extension<ConnectionKill>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let key = headers
        .get(IDEMPOTENCY_KEY)
        .and_then(|value| value.to_str().ok())
        .filter(|key| !key.is_empty());
    // Read before anything can refuse the request: a refusal arrived all the same.
    let reference = serde_json::from_slice::<Referenced>(&body)
        .ok()
        .map(|r| r.reference);
    let (fault, outcome) = {
        let mut state = sandbox.lock();
        state.requests += 1;
        let arrived_at = OffsetDateTime::now_utc();
        let fault = faults::draw(&state.faults, false, state.requests, &mut rand::rng());
        let (fault, outcome) = match fault {
            Some(fault) if fault.is_before_processing() => (Some(fault), None),
            _ => (
                fault,
                Some(process(&sandbox, &mut state, key, &body, fault)),
            ),
        };
        state.arrivals.push_back(Arrival {
            reference,
            at: arrived_at,
            delivered: matches!(outcome, Some(Outcome::Delivered(_))),
        });
        while state.arrivals.len() > sandbox.history {
            state.arrivals.pop_front();
        }
        (fault, outcome)
    };
    let Some(outcome) = outcome else {
        return match fault {
            Some(Fault::RateLimited) => {
                tracing::info!("refused before processing (rate_limited)");
                let mut response =
                    problem(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "slow down");
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(sandbox.retry_after.as_secs()),
                );
                response
            }
            _ => {
                tracing::info!("refused before processing (unavailable_before_processing)");
                problem(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "not processed; try again",
                )
            }
        };
    };
    match fault {
        Some(Fault::AcceptThenDrop) => {
            kill.trip();
            // Never answer: the connection's owner drops this future with the connection.
            std::future::pending::<Response>().await
        }
        Some(Fault::Delay) => {
            tracing::info!(delay = ?sandbox.delay, "holding the answer (delay)");
            tokio::time::sleep(sandbox.delay).await;
            outcome.into_response()
        }
        Some(Fault::ErrorAfterProcessing) => {
            tracing::info!("answering 500 after processing (error_after_processing)");
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "something went wrong",
            )
        }
        _ => outcome.into_response(),
    }
}

/// The processing step proper, under the lock so that it is atomic per key.
fn process(
    sandbox: &Sandbox,
    state: &mut State,
    key: Option<&str>,
    body: &Bytes,
    fault: Option<Fault>,
) -> Outcome {
    let message: MessageIn = match serde_json::from_slice(body) {
        Ok(message) => message,
        Err(err) => return Outcome::Invalid(err.to_string()),
    };
    if message.reference.is_empty() || message.to.is_empty() {
        return Outcome::Invalid("`reference` and `to` must not be empty".to_owned());
    }
    let attachments = match received(&message.attachments) {
        Ok(attachments) => attachments,
        Err(invalid) => return Outcome::Invalid(invalid),
    };
    let now = Instant::now();
    let dedup_key = key.filter(|_| sandbox.profile == Profile::Idempotent);
    if let Some(stored) = dedup_key.and_then(|key| state.replays.get(key)) {
        let age = now.duration_since(stored.processed_at);
        if age < sandbox.idempotency_window {
            return if stored.request != digest(body) {
                Outcome::KeyReused
            } else if age < stored.in_progress_for {
                Outcome::InProgress
            } else {
                Outcome::Replayed(stored.body.clone())
            };
        }
    }

    let id = format!("sbx_{}", uuid::Uuid::now_v7());
    let answer = AcceptedBody {
        id: id.clone(),
        reference: message.reference.clone(),
        status: "accepted".to_owned(),
    };
    tracing::debug!(%id, reference = %message.reference, channel = %message.channel, "delivered");
    if let (Some((secret, http)), Some(target)) = (&sandbox.reporter, &state.callbacks) {
        callbacks::report(
            secret.clone(),
            target.clone(),
            http.clone(),
            id.clone(),
            message.reference.clone(),
            message.to.clone(),
        );
    }
    *state
        .deliveries
        .entry(message.reference.clone())
        .or_default() += 1;
    state.log.push_back(Delivery {
        id,
        reference: message.reference,
        accepted_at: OffsetDateTime::now_utc(),
        at: now,
        attachments,
    });
    while state.log.len() > sandbox.history {
        let Some(old) = state.log.pop_front() else {
            break;
        };
        if let Some(count) = state.deliveries.get_mut(&old.reference) {
            *count -= 1;
            if *count == 0 {
                state.deliveries.remove(&old.reference);
            }
        }
        state.forgotten_deliveries += 1;
    }
    if let Some(key) = dedup_key {
        let in_progress_for = match fault {
            Some(Fault::Delay) => sandbox.delay,
            _ => Duration::ZERO,
        };
        state.replays.insert(
            key.to_owned(),
            StoredAnswer {
                body: answer.clone(),
                request: digest(body),
                processed_at: now,
                in_progress_for,
            },
        );
        state.replay_order.push_back((key.to_owned(), now));
        forget_keys(sandbox, state, now);
    }
    Outcome::Delivered(answer)
}

/// Forgets the keys whose window has passed, and the oldest beyond the history.
fn forget_keys(sandbox: &Sandbox, state: &mut State, now: Instant) {
    while let Some((_, at)) = state.replay_order.front() {
        let expired = now.duration_since(*at) >= sandbox.idempotency_window;
        if !expired && state.replay_order.len() <= sandbox.history {
            break;
        }
        let Some((key, at)) = state.replay_order.pop_front() else {
            break;
        };
        // A key processed again after its window has a newer entry of its own.
        if state
            .replays
            .get(&key)
            .is_some_and(|s| s.processed_at == at)
        {
            state.replays.remove(&key);
            if !expired {
                state.forgotten_keys += 1;
            }
        }
    }
}

/// The attachments as the ledger records them, or why one is refused.
fn received(attachments: &[AttachmentIn]) -> Result<Vec<Attachment>, String> {
    attachments
        .iter()
        .enumerate()
        .map(|(i, a)| {
            Attachment::received(&a.filename, &a.content_type, &a.content)
                .ok_or_else(|| format!("`attachments[{i}].content` is not base64"))
        })
        .collect()
}

fn digest(body: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    body.hash(&mut hasher);
    hasher.finish()
}

impl IntoResponse for Outcome {
    fn into_response(self) -> Response {
        match self {
            Outcome::Delivered(body) => (StatusCode::ACCEPTED, Json(body)).into_response(),
            Outcome::Replayed(body) => (
                StatusCode::ACCEPTED,
                [(IDEMPOTENT_REPLAYED, "true")],
                Json(body),
            )
                .into_response(),
            Outcome::InProgress => problem(
                StatusCode::CONFLICT,
                "concurrent_idempotent_request",
                "a request with this Idempotency-Key is still being processed",
            ),
            Outcome::KeyReused => problem(
                StatusCode::UNPROCESSABLE_ENTITY,
                KEY_REUSED,
                "this Idempotency-Key was used with another request body",
            ),
            Outcome::Invalid(detail) => {
                problem(StatusCode::UNPROCESSABLE_ENTITY, "invalid_message", &detail)
            }
        }
    }
}

/// An error answer in the shape of RFC 9457, plus the vendor's own `code`.
fn problem(status: StatusCode, code: &str, detail: &str) -> Response {
    let body = json!({
        "type": "about:blank",
        "title": status.canonical_reason().unwrap_or("error"),
        "status": status.as_u16(),
        "code": code,
        "detail": detail,
    });
    let mut response = (status, Json(body)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

#[derive(Deserialize)]
struct ListQuery {
    reference: Option<String>,
}

async fn list_messages(
    AxumState(sandbox): AxumState<Arc<Sandbox>>,
    Query(query): Query<ListQuery>,
) -> Response {
    if sandbox.profile != Profile::Queryable {
        return problem(
            StatusCode::NOT_FOUND,
            "not_found",
            "this sandbox profile has no outcome query",
        );
    }
    let Some(reference) = query.reference.filter(|r| !r.is_empty()) else {
        return problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_query",
            "`reference` is required",
        );
    };
    let fault = {
        let mut state = sandbox.lock();
        state.lookups += 1;
        faults::draw(&state.faults, true, state.lookups, &mut rand::rng())
    };
    match fault {
        Some(Fault::LookupError) => {
            tracing::info!("failing a look-up (lookup_error)");
            return problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "the look-up failed",
            );
        }
        Some(Fault::LookupDelay) => {
            tracing::info!(delay = ?sandbox.delay, "holding a look-up's answer (lookup_delay)");
            tokio::time::sleep(sandbox.delay).await;
        }
        _ => {}
    }
    let now = Instant::now();
    let state = sandbox.lock();
    let data = state
        .log
        .iter()
        .filter(|d| d.reference == reference)
        .filter(|d| now.duration_since(d.at) >= sandbox.visibility_lag)
        .map(|d| DeliveryItem {
            id: d.id.clone(),
            reference: d.reference.clone(),
            accepted_at: d
                .accepted_at
                .format(&Rfc3339)
                .unwrap_or_else(|_| d.accepted_at.to_string()),
        })
        .collect();
    Json(DeliveryList { data }).into_response()
}

async fn read_ledger(AxumState(sandbox): AxumState<Arc<Sandbox>>) -> Json<Ledger> {
    let state = sandbox.lock();
    Json(Ledger {
        requests: state.requests,
        deliveries: state.deliveries.clone(),
        forgotten_deliveries: state.forgotten_deliveries,
        forgotten_keys: state.forgotten_keys,
        attachments: state
            .log
            .iter()
            .filter(|d| !d.attachments.is_empty())
            .map(|d| (d.reference.clone(), d.attachments.clone()))
            .collect(),
        arrivals: state.arrivals.iter().cloned().collect(),
    })
}

/// Forgets all history (requests, deliveries, idempotency records, the query log) but keeps the
/// configuration and fault rules, so a test starts from a clean vendor and `nth` counts anew.
async fn clear_ledger(AxumState(sandbox): AxumState<Arc<Sandbox>>) -> StatusCode {
    let mut state = sandbox.lock();
    let faults = std::mem::take(&mut state.faults);
    *state = State {
        faults,
        ..State::default()
    };
    StatusCode::NO_CONTENT
}

#[derive(Serialize)]
struct ProfileView {
    profile: Profile,
    idempotency_window_secs: f64,
    visibility_lag_ms: u128,
    delay_ms: u128,
    faults: Vec<FaultRule>,
}

async fn read_profile(AxumState(sandbox): AxumState<Arc<Sandbox>>) -> Json<ProfileView> {
    let faults = sandbox.lock().faults.clone();
    Json(ProfileView {
        profile: sandbox.profile,
        idempotency_window_secs: sandbox.idempotency_window.as_secs_f64(),
        visibility_lag_ms: sandbox.visibility_lag.as_millis(),
        delay_ms: sandbox.delay.as_millis(),
        faults,
    })
}

/// Replaces where new deliveries are reported (`null`: nowhere). 409 if the sandbox has no
/// secret to sign reports with.
async fn replace_callbacks(
    AxumState(sandbox): AxumState<Arc<Sandbox>>,
    Json(target): Json<Option<CallbackTarget>>,
) -> Response {
    if sandbox.reporter.is_none() {
        return problem(
            StatusCode::CONFLICT,
            "no_callback_secret",
            "this sandbox was started without a callback secret; it cannot sign reports",
        );
    }
    tracing::info!(?target, "callback target replaced");
    sandbox.lock().callbacks = target;
    StatusCode::NO_CONTENT.into_response()
}

async fn replace_faults(
    AxumState(sandbox): AxumState<Arc<Sandbox>>,
    Json(faults): Json<Vec<FaultRule>>,
) -> StatusCode {
    tracing::info!(?faults, "fault rules replaced");
    sandbox.lock().faults = faults;
    StatusCode::NO_CONTENT
}
