//! Operations endpoints: liveness, readiness, Prometheus metrics, the OpenAPI document.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Components, Ref, RefOr};
use utoipa::{OpenApi, ToSchema};

use super::problem::Problem;
use super::{AppState, callbacks, events, notifications, review, routes, unsubscribe};
use crate::domain::evidence;
use crate::store::StoreError;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .route("/problems/{slug}", get(problem_type))
}

/// What a problem type means: the page a problem's `type` reference points at.
#[utoipa::path(get, path = "/problems/{slug}", tag = "operations",
    params(("slug" = String, Path, description = "The last part of a problem's `type`, e.g. `invalid-field`")),
    responses(
        (status = 200, description = "The problem type's meaning, in prose", body = String, content_type = "text/plain"),
        (status = 404, description = "No such problem type", body = Problem, content_type = "application/problem+json"),
    ))]
async fn problem_type(
    axum::extract::Path(slug): axum::extract::Path<String>,
) -> axum::response::Response {
    match super::problem::TYPES
        .iter()
        .find(|(known, _)| *known == slug)
    {
        Some((slug, meaning)) => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("herald problem type `{slug}`\n\n{meaning}\n"),
        )
            .into_response(),
        None => Problem::not_found().into_response(),
    }
}

/// A health check's answer.
#[derive(Serialize, ToSchema)]
struct Health {
    /// `ok` from `/healthz`, `ready` from `/readyz`.
    #[schema(example = "ok")]
    status: &'static str,
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "Up", body = Health)))]
async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// The database answers, its migrations are current and a write commits.
#[utoipa::path(get, path = "/readyz", tag = "operations", responses(
    (status = 200, description = "Ready", body = Health),
    (status = 500, description = "The check failed for a reason herald logs", body = Problem, content_type = "application/problem+json"),
    (status = 503, description = "Not ready, and why", body = Problem, content_type = "application/problem+json"),
))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, Problem> {
    match state.store.check_ready(OffsetDateTime::now_utc()).await {
        Ok(()) => Ok(Json(Health { status: "ready" })),
        // Anyone may ask, so the answer names the kind of outage only: the database's own
        // words (role and database names, paths) go to the log.
        Err(StoreError::Unavailable(outage, cause)) => {
            tracing::warn!(%outage, %cause, "not ready");
            Err(Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not-ready",
                "Not ready",
                format!("database {outage}; herald's log says why"),
            )
            .with_retry_after(1))
        }
        Err(err) => Err(err.into()),
    }
}

/// Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, description = "Prometheus text", body = String, content_type = "text/plain")))]
async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}

#[derive(OpenApi)]
#[openapi(
    info(title = "herald", description = "A notification dispatcher that never claims more than it knows."),
    paths(healthz, readyz, metrics, problem_type,
          notifications::create, notifications::batch::create_batch, notifications::show,
          notifications::list, notifications::cancel::cancel, notifications::cancel::cancel_by_key,
          events::receive,
          review::list, review::resolve_one, review::bulk::resolve_many, review::requery,
          routes::list, routes::pause, routes::resume, callbacks::receive, callbacks::list, callbacks::add, callbacks::lift,
          unsubscribe::one_click, unsubscribe::page),
    components(schemas(Problem)),
    // Relative, so that it names wherever the document was fetched from: herald behind a proxy
    // or a port mapping does not know the address its clients use.
    servers((url = "/", description = "The herald that serves this document")),
    modifiers(&CommonAnswers),
)]
pub struct ApiDoc;

struct CommonAnswers;

impl utoipa::Modify for CommonAnswers {
    /// Declares the bearer scheme, the evidence and channel schemas, and what operations
    /// share, so that each handler lists only what is its own: a `channel` parameter is of the
    /// one `Channel` type (the type lives in the provider crate, so a handler cannot name its
    /// schema); on every operation that needs a
    /// token (each reads or writes the database) 401 (no valid token), 403 (missing scope), 500
    /// (a fault that herald logs) and 503 (database unavailable); `WWW-Authenticate` on every
    /// 401, `Retry-After` on every 503, and `X-Request-Id` on every answer.
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        add_components(openapi.components.get_or_insert_default());
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                add_shared_answers(operation);
            }
        }
    }
}

/// The bearer scheme, and the schemas no handler can name: evidence, the channel, a route's
/// provider.
fn add_components(components: &mut Components) {
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
    );
    components
        .schemas
        .insert(evidence::SCHEMA_NAME.to_owned(), evidence::schema());
    components.schemas.insert(
        crate::domain::CHANNEL_SCHEMA.to_owned(),
        crate::domain::channel_component().into(),
    );
    // A route's `provider`, named as the vendors this build has: a list written by hand
    // falls behind the registry (it named 12 of 15). Said, not an enum: a client generated
    // today must still read a route of a vendor added tomorrow.
    // (The committed document, which the clients test compares, shows it was put in.)
    if let Some(RefOr::T(Schema::Object(route))) = components.schemas.get_mut("RouteBody") {
        let names: Vec<String> = crate::config::ProviderConfig::NAMES
            .iter()
            .map(|name| format!("`{name}`"))
            .collect();
        let providers = ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(format!(
                "The adapter: the route's `provider`; this build has {}.",
                names.join(", ")
            )));
        route
            .properties
            .insert("provider".to_owned(), providers.into());
    }
}

/// The channel parameter's type, the answers every operation with a token shares, and each
/// answer's headers.
fn add_shared_answers(operation: &mut Operation) {
    for parameter in operation.parameters.iter_mut().flatten() {
        if parameter.name == "channel" {
            parameter.schema = Some(Ref::from_schema_name(crate::domain::CHANNEL_SCHEMA).into());
        }
    }
    let responses = &mut operation.responses.responses;
    if operation.security.is_some() {
        for (status, description) in [
            ("401", "No valid token"),
            ("403", "The token lacks the scope"),
            (
                "500",
                "herald failed to handle the request; the cause is in its log",
            ),
            ("503", "The database is unavailable; nothing was stored"),
        ] {
            responses
                .entry(status.to_owned())
                .or_insert_with(|| problem_answer(description));
        }
    }
    for (status, response) in responses.iter_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        response.headers.insert(
            "X-Request-Id".to_owned(),
            answer_header(
                Type::String,
                "The request's own X-Request-Id, or a new UUID: quote it when \
                 asking about a request in herald's log",
            ),
        );
        match status.as_str() {
            "401" => response.headers.insert(
                "WWW-Authenticate".to_owned(),
                answer_header(Type::String, "`Bearer`"),
            ),
            "503" => response.headers.insert(
                "Retry-After".to_owned(),
                answer_header(Type::Integer, "Seconds to wait before retrying"),
            ),
            _ => None,
        };
    }
}

fn answer_header(schema_type: Type, description: &str) -> Header {
    HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(schema_type))
        .description(Some(description))
        .build()
}

fn problem_answer(description: &str) -> RefOr<Response> {
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
}

/// The OpenAPI 3.1 document, generated from the handlers and types above.
async fn openapi() -> impl IntoResponse {
    Json(ApiDoc::openapi())
}
