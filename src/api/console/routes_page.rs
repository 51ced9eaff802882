//! The routes page: how each route stands, and its operator's pause and resume.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use minijinja::context;
use serde::Deserialize;

use super::session::{Session, SignedForm, SignedIn};
use super::{MapStatus, failure, page, redirect, status_of};
use crate::api::AppState;

/// The routes, how each stands and who paused it; for a route's operator, the forms that pause
/// and resume it in every process.
pub(super) async fn routes_page(
    State(state): State<AppState>,
    SignedIn { session, .. }: SignedIn,
    Query(query): Query<RoutesQuery>,
) -> Response {
    routes_shown(&state, &session, query.done, None).await
}

async fn routes_shown(
    state: &AppState,
    session: &Session,
    done: Option<String>,
    error: Option<String>,
) -> Response {
    let routes = match crate::api::routes::listed(state, &session.principal).await {
        Ok(routes) => routes,
        Err(problem) => return failure(status_of(&problem), problem.detail),
    };
    page(
        "routes.html",
        context! {
            title => "Routes",
            csrf => session.csrf,
            principal => session.principal.name,
            routes => routes,
            done => done,
            error => error,
        },
    )
}

#[derive(Deserialize, Default)]
pub(super) struct RoutesQuery {
    done: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct PauseForm {
    #[serde(default)]
    note: String,
    to_fallback: Option<String>,
}

pub(super) async fn pause_route(
    State(state): State<AppState>,
    Path(name): Path<String>,
    SignedForm { session, form, .. }: SignedForm<PauseForm>,
) -> Response {
    let paused = crate::api::routes::pause_route(
        &state,
        &session.principal,
        &name,
        &form.note,
        form.to_fallback.is_some(),
    )
    .await;
    route_changed(&state, &session, &name, "paused", paused).await
}

pub(super) async fn resume_route(
    State(state): State<AppState>,
    Path(name): Path<String>,
    SignedForm { session, form, .. }: SignedForm<PauseForm>,
) -> Response {
    let resumed =
        crate::api::routes::resume_route(&state, &session.principal, &name, &form.note).await;
    route_changed(&state, &session, &name, "resumed", resumed).await
}

/// Back to the routes, saying what changed, or the page again with why nothing did.
async fn route_changed<T>(
    state: &AppState,
    session: &Session,
    name: &str,
    what: &str,
    changed: Result<T, crate::api::Problem>,
) -> Response {
    match changed {
        Ok(_) => redirect(&format!(
            "/console/routes?done={}",
            url::form_urlencoded::byte_serialize(format!("{name} {what}").as_bytes())
                .collect::<String>()
        )),
        Err(problem) => {
            let status = status_of(&problem);
            routes_shown(state, session, None, Some(problem.detail))
                .await
                .map_status(status)
        }
    }
}
