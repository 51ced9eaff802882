//! Operations endpoints: liveness, readiness, Prometheus metrics, the OpenAPI document.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use time::OffsetDateTime;
use utoipa::OpenApi;

use super::problem::Problem;
use super::{AppState, events, notifications, review};
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

/// The database answers, its migrations are current and a write commits.
#[utoipa::path(get, path = "/readyz", responses(
    (status = 200, description = "Ready"),
    (status = 503, description = "Not ready, and why", body = Problem, content_type = "application/problem+json"),
))]
async fn readyz(State(state): State<AppState>) -> Result<impl IntoResponse, Problem> {
    match state.store.check_ready(OffsetDateTime::now_utc()).await {
        Ok(()) => Ok(Json(json!({"status": "ready"}))),
        Err(StoreError::Unavailable(outage, cause)) => Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not-ready",
            "Not ready",
            format!("database {outage}: {}", first_line(&cause)),
        )
        .with_retry_after(1)),
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
          notifications::list, notifications::cancel, events::receive,
          review::list, review::resolve_one, review::resolve_many, review::requery),
    components(schemas(Problem)),
    modifiers(&BearerAuth),
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    /// Declares the bearer scheme, and on every operation that needs a token, the answers any
    /// such operation can give: 401 (no valid token), 403 (missing scope) and 503 (database
    /// unavailable), so that each handler lists only what is its own.
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::content::ContentBuilder;
        use utoipa::openapi::response::ResponseBuilder;
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        use utoipa::openapi::{Ref, RefOr};
        openapi
            .components
            .get_or_insert_default()
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
        let problem = |description: &str| {
            RefOr::T(
                ResponseBuilder::new()
                    .description(description)
                    .content(
                        "application/problem+json",
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("Problem")))
                            .build(),
                    )
                    .build(),
            )
        };
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                if operation.security.is_none() {
                    continue;
                }
                let responses = &mut operation.responses.responses;
                for (status, description) in [
                    ("401", "No valid token"),
                    ("403", "The token lacks the scope"),
                    ("503", "The database is unavailable; nothing was stored"),
                ] {
                    responses
                        .entry(status.to_owned())
                        .or_insert_with(|| problem(description));
                }
            }
        }
    }
}

/// The OpenAPI 3.1 document, generated from the handlers and types above.
async fn openapi() -> impl IntoResponse {
    Json(ApiDoc::openapi())
}
