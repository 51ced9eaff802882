//! The HTTP API (docs/api.md): routes by resource, bearer auth with tenants, RFC 9457 errors.
//!
//! Bodies are read as bytes and parsed here rather than by axum's `Json` extractor, so that
//! every malformed body, wrong type and oversized request gets a problem+json answer that names
//! the field at fault.

pub mod auth;
mod body;
mod callbacks;
mod console;
mod events;
mod idempotency;
mod notifications;
mod ops;
mod problem;
mod review;
mod routes;
mod unsubscribe;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::BytesRejection;
use axum::http::{Request, StatusCode};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

pub use auth::{NewToken, Principal, Tokens};
pub use problem::Problem;

use crate::domain::{Routing, Templates};
use crate::inbox::Inbox;
use crate::store::Store;

/// What every handler may reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    /// Single enqueues, committed in groups.
    pub enqueue: crate::store::GroupCommit<crate::store::Accepts>,
    pub tokens: Arc<Tokens>,
    pub routing: Arc<Routing>,
    /// The routes at run time: their capabilities and outcome queries, for review.
    pub routes: Arc<crate::dispatch::Routes>,
    pub templates: Arc<Templates>,
    /// Upstream events in: `POST /v1/events`.
    pub inbox: Arc<Inbox>,
    /// Signalled after a commit that made work due, so the dispatcher starts at once.
    pub wake: Arc<tokio::sync::Notify>,
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    /// The web console's signed-in people.
    pub sessions: Arc<console::Sessions>,
    /// What waits for a person (`[review]`).
    pub review: crate::review::Policy,
    /// The process's budget for attachment bytes, which enqueues with attachments share with
    /// the sends (`[attachments] memory_bytes`).
    pub attachments: Arc<crate::dispatch::Budget>,
    /// `server.max_body_bytes`: every body's limit, and an enqueue's besides its attachments'
    /// content.
    pub max_body_bytes: usize,
}

impl AppState {
    /// New notifications were committed: their work is due (the store wakes the relay itself).
    pub fn enqueued(&self) {
        self.wake.notify_one();
    }
}

pub fn router(state: AppState, body_timeout: std::time::Duration) -> Router {
    let request_id = axum::http::HeaderName::from_static("x-request-id");
    let max_body_bytes = state.max_body_bytes;
    Router::new()
        .merge(notifications::routes(
            &state,
            max_body_bytes,
            max_body_bytes + state.routing.attachments().body_allowance(),
        ))
        .merge(review::routes())
        .merge(routes::routes())
        .merge(console::routes())
        .merge(events::routes())
        .merge(callbacks::routes())
        .merge(unsubscribe::routes())
        .merge(ops::routes())
        .fallback(|| async { Problem::not_found() })
        .method_not_allowed_fallback(|| async {
            Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method-not-allowed",
                "Method not allowed",
                "this resource does not answer that method",
            )
        })
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(tower::util::MapRequestLayer::new(move |request| {
            body::deadlined(request, body_timeout)
        }))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_response(response_status),
        )
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
        .layer(axum::middleware::from_fn(plain_request_id))
        .layer(axum::middleware::from_fn(observe))
        .with_state(state)
}

/// The longest `X-Request-Id` herald takes from a client.
const MAX_REQUEST_ID: usize = 64;

/// A client's `X-Request-Id` is kept only in a plain, bounded form — up to [`MAX_REQUEST_ID`]
/// letters, digits, `-`, `_` and `.` — and otherwise replaced by herald's own: it is echoed in
/// every answer and written into every log line of the request, where a long one bloats both and
/// one with spaces or quotes could forge a field in a text log.
async fn plain_request_id(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let plain = |id: &[u8]| {
        (1..=MAX_REQUEST_ID).contains(&id.len())
            && id
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
    };
    if request
        .headers()
        .get_all("x-request-id")
        .iter()
        .any(|id| !plain(id.as_bytes()))
        || request.headers().get_all("x-request-id").iter().count() > 1
    {
        request.headers_mut().remove("x-request-id");
    }
    next.run(request).await
}

/// The span of one request, after OpenTelemetry's HTTP server conventions: named by its method
/// and route template, never by the raw path (which holds ids, and an unsubscribe link's
/// token), and a child of the caller's trace where a valid `traceparent` came with it.
fn request_span<B>(request: &Request<B>) -> tracing::Span {
    let id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unmatched", |path| path.as_str());
    let span = tracing::info_span!(
        "request",
        otel.name = %format!("{} {route}", request.method()),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = %request.method(),
        http.route = route,
        http.response.status_code = tracing::field::Empty,
        request_id = %id,
        trace_id = tracing::field::Empty,
    );
    if let Some(caller) = trace_parent(request.headers()) {
        crate::traces::continue_trace(&span, &caller);
    }
    crate::traces::record_trace_id(&span);
    span
}

/// Puts the answer's status on the request's span; a 5xx is the span's error.
fn response_status<B>(
    response: &axum::http::Response<B>,
    latency: std::time::Duration,
    span: &tracing::Span,
) {
    tracing::debug!(
        status = response.status().as_u16(),
        latency_ms = latency.as_millis() as u64,
        "finished processing request"
    );
    span.record("http.response.status_code", response.status().as_u16());
    if response.status().is_server_error() {
        span.record("otel.status_code", "error");
    }
}

/// The caller's `traceparent` header, where it is a valid one; any other value is ignored.
fn trace_parent(headers: &axum::http::HeaderMap) -> Option<crate::domain::TraceParent> {
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(crate::domain::TraceParent::parse)
}

/// Counts and times every request by its route's path template (never the raw path, which
/// holds ids): `herald_http_requests_total{method,route,status}` and
/// `herald_http_request_seconds{method,route}`. A path no route serves is `unmatched`, and a
/// method outside HTTP's usual ones `other`, so that no request can make a series of its own.
async fn observe(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::Method;
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unmatched", |path| path.as_str())
        .to_owned();
    let method = match *request.method() {
        Method::GET
        | Method::POST
        | Method::PUT
        | Method::PATCH
        | Method::DELETE
        | Method::HEAD
        | Method::OPTIONS => request.method().as_str().to_owned(),
        _ => "other".to_owned(),
    };
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    metrics::counter!("herald_http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => response.status().as_u16().to_string())
        .increment(1);
    metrics::histogram!("herald_http_request_seconds", "method" => method, "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}

/// A body that must be a JSON object: 413 over the limit, 400 when it is not JSON or not an
/// object, 422 where a string holds a NUL.
fn json_object(body: Result<Bytes, BytesRejection>) -> Result<Value, Problem> {
    let value = json_object_of_items(body)?;
    crate::domain::without_nul(&value, "").map_err(Problem::invalid_field)?;
    Ok(value)
}

/// [`json_object`] for a body of items that are checked one by one (a batch): each item's NUL
/// is its own problem.
fn json_object_of_items(body: Result<Bytes, BytesRejection>) -> Result<Value, Problem> {
    let body = body_bytes(body)?;
    let value = crate::domain::json::from_slice(&body)
        .map_err(|e| Problem::malformed(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(Problem::malformed("the body must be a JSON object"));
    }
    Ok(value)
}

/// A body's bytes: 413 over the limit, 408 past its deadline, 400 when it could not be read.
fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, Problem> {
    body.map_err(|rejection| {
        if body::is_deadline(&rejection) {
            Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "body-timeout",
                "The body arrived too slowly",
                format!(
                    "the request body did not arrive whole within server.body_timeout_seconds \
                     and one more second for each {} KiB it declared",
                    body::MIN_BODY_RATE / 1024
                ),
            )
        } else if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body-too-large",
                "The body is too large",
                "the request body is over the configured limit (server.max_body_bytes)",
            )
        } else {
            Problem::malformed(rejection.body_text())
        }
    })
}

/// Deserializes `value`, naming the field at fault: a wrong type at its path, a missing or
/// unknown field by its name.
fn typed<T: DeserializeOwned>(value: Value) -> Result<T, Problem> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let message = err.inner().to_string();
        // A missing field is reported at the object that lacks it, an unknown one at itself;
        // either is named by the message alone at the top.
        let named = message.split('`').nth(1);
        let field = match (path.as_str(), named) {
            (".", named) => named.unwrap_or("body").to_owned(),
            (_, Some(name)) if message.starts_with("missing field") => format!("{path}.{name}"),
            _ => path,
        };
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-field",
            "A field is invalid",
            format!("{field}: {message}"),
        )
        .with_field(field)
    })
}
