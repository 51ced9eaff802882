//! Operations endpoints: liveness, readiness, Prometheus metrics, the OpenAPI document.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use utoipa::OpenApi;

use super::problem::Problem;
use super::{AppState, notifications};
use crate::store::StoreError;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "Up")))]
async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

/// The database answers and its migrations are current.
#[utoipa::path(get, path = "/readyz", responses(
    (status = 200, description = "Ready"),
    (status = 503, description = "Not ready, and why", body = Problem, content_type = "application/problem+json"),
))]
async fn readyz(State(state): State<AppState>) -> Result<impl IntoResponse, Problem> {
    match state.store.check_ready().await {
        Ok(()) => Ok(Json(json!({"status": "ready"}))),
        Err(StoreError::Unavailable(cause)) => Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not-ready",
            "Not ready",
            format!("database: {}", first_line(&cause)),
        )),
        Err(err) => Err(err.into()),
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus text", content_type = "text/plain")))]
async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}

#[derive(OpenApi)]
#[openapi(
    info(title = "herald", description = "A notification dispatcher that never claims more than it knows."),
    paths(healthz, readyz, metrics,
          notifications::create, notifications::create_batch, notifications::show,
          notifications::list, notifications::cancel),
    components(schemas(Problem)),
    modifiers(&BearerAuth),
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        openapi
            .components
            .get_or_insert_default()
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
    }
}

/// The OpenAPI 3.1 document, generated from the handlers and types above.
async fn openapi() -> impl IntoResponse {
    Json(ApiDoc::openapi())
}
