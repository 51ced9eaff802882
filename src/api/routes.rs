//! `GET /v1/routes`: what each configured route is and how it stands now, for operators. No
//! setting that could hold a secret is shown: only what the route declares and its state. Its
//! operator (a token with `operate` of the tenant that operates it) pauses and resumes it for
//! every process, audited; the other tenants that use it see that it is paused, not who paused
//! it or why.

use std::time::Instant;

use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::{AppState, Principal, Problem, json_object, typed};
use crate::dispatch::Route;
use crate::domain::{FieldError, RouteInfo, RoutePause, Scope};
use crate::review::parse_note;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/routes", get(list))
        .route("/v1/routes/{name}/pause", post(pause))
        .route("/v1/routes/{name}/resume", post(resume))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RoutesBody {
    pub data: Vec<RouteBody>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RouteBody {
    pub name: String,
    /// The adapter: the route's `provider`. (Its schema's description names the vendors this
    /// build has, put in by the OpenAPI document's `modify` from the registry.)
    pub provider: String,
    /// The channels it carries, and those it is the default route of.
    pub channels: Vec<String>,
    pub default_for: Vec<String>,
    /// The delivery policy of notifications that do not choose one.
    pub delivery: String,
    pub capabilities: CapabilitiesBody,
    /// Sends in flight at once, one call's limit, and the caps on tries.
    pub concurrency: usize,
    pub timeout_seconds: u64,
    pub max_attempts: u32,
    pub max_age_seconds: u64,
    pub pace: PaceBody,
    /// Where its notifications go once it is known not to have taken them.
    pub fallback: Option<String>,
    pub circuit: CircuitBody,
    /// Whether this token may pause and resume it: its tenant operates the route.
    pub operable: bool,
    /// An operator's pause, in every process: its work waits until it is resumed. `null`: not
    /// paused.
    pub paused_by_operator: Option<PauseShown>,
}

/// An operator's pause as a tenant sees it: who and why only for the tenant that operates the
/// route.
#[derive(Debug, Serialize, ToSchema)]
pub struct PauseShown {
    /// Who paused it (the token's principal), and why; `null` to a tenant that does not
    /// operate the route.
    pub principal: Option<String>,
    pub note: Option<String>,
    /// Its work goes to the route's fallback (`true`) rather than waiting for the resume.
    pub to_fallback: bool,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub at: OffsetDateTime,
}

/// What the route's vendor offers, as the adapter declares it: what settles an ambiguous send.
#[derive(Debug, Serialize, ToSchema)]
pub struct CapabilitiesBody {
    /// The vendor deduplicates a provider key for this long; `null`: it keeps no keys.
    pub idempotency_window_seconds: Option<u64>,
    /// The vendor can be asked what became of a send.
    pub outcome_query: bool,
    /// How long a send may take to show in that look-up.
    pub visibility_lag_ms: Option<u64>,
    pub max_payload_bytes: Option<usize>,
    /// It keeps an email's `tags`.
    pub tags: bool,
    /// It takes an email's `attachments`.
    pub attachments: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PaceBody {
    /// herald's own limit on calls; `null`: none.
    pub rate_limit_per_second: Option<f64>,
    pub burst: Option<u32>,
    /// How much longer a vendor's "slow down" (a `Retry-After`) pauses the route, in this
    /// process; 0 when it is not paused.
    pub paused_for_ms: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CircuitBody {
    /// `closed`, `open` or `half_open`, in this process.
    pub state: String,
    /// Known-not-sent failures in a row that open it; `null`: it never opens.
    pub failures_to_open: Option<u32>,
    pub open_seconds: u64,
}

/// Every route this tenant may use or operates, with its capabilities, pace, fallback, circuit
/// and pause.
#[utoipa::path(get, path = "/v1/routes", operation_id = "list_routes", tag = "routes",
    security(("bearer" = [])),
    responses((status = 200, description = "The routes", body = RoutesBody)))]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<Json<RoutesBody>, Problem> {
    principal.require(Scope::Read)?;
    Ok(Json(RoutesBody {
        data: listed(&state, &principal).await?,
    }))
}

/// Every route the principal's tenant may use or operates, by name, as the API shows it.
pub(super) async fn listed(
    state: &AppState,
    principal: &Principal,
) -> Result<Vec<RouteBody>, Problem> {
    let pauses = state.store.route_pauses().await?;
    let mut data: Vec<RouteBody> = state
        .routes
        .all()
        .filter_map(|route| {
            let info = state.routing.info(route.name())?;
            let pause = pauses.iter().find(|p| p.route == route.name()).cloned();
            visible(principal, info).then(|| shown(state, principal, route, info, pause))
        })
        .collect();
    data.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(data)
}

/// `POST /v1/routes/{name}/pause`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseBody {
    /// Why, for the audit trail.
    #[schema(example = "the vendor is sending duplicates; waiting for their incident to end")]
    pub note: String,
    /// Send the route's work to its fallback meanwhile, rather than hold it until the resume;
    /// only on a route that has one.
    #[serde(default)]
    pub to_fallback: bool,
}

/// `POST /v1/routes/{name}/resume`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeBody {
    /// Why, for the audit trail.
    #[schema(example = "the vendor's incident is over")]
    pub note: String,
}

/// Pause a route in every process: no call starts on it (one already under way finishes). Its
/// notifications wait, queued, until it is resumed, or go to the route's fallback where the
/// pause says `to_fallback`; nothing fails.
#[utoipa::path(post, path = "/v1/routes/{name}/pause", operation_id = "pause_route",
    tag = "routes", params(("name" = String, Path, description = "The route")),
    request_body = PauseBody, security(("bearer" = [])),
    responses(
        (status = 200, description = "Paused (or it was already: the standing pause)", body = RouteBody),
        (status = 400, description = "The body is not a JSON object", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token lacks `operate`, or may not operate this route (`route-not-operated`)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such route for this tenant", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Resumed while this pause was given (send it again), or paused already the other way (resume it first)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The note is missing, or `to_fallback` on a route without a fallback", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn pause(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<RouteBody>, Problem> {
    let body: PauseBody = typed(json_object(body)?)?;
    Ok(Json(
        pause_route(&state, &principal, &name, &body.note, body.to_fallback).await?,
    ))
}

/// Its operator's pause of route `name`, as the API and the console take it.
pub(super) async fn pause_route(
    state: &AppState,
    principal: &Principal,
    name: &str,
    note: &str,
    to_fallback: bool,
) -> Result<RouteBody, Problem> {
    let (route, info) = operated(state, principal, name)?;
    if to_fallback && route.fallback().is_none() {
        return Err(Problem::invalid_field(FieldError::new(
            "to_fallback",
            format!("route `{name}` has no fallback"),
        )));
    }
    let mut by = pause_by(principal, name, note)?;
    by.to_fallback = to_fallback;
    let standing = state.store.pause_route(&by).await?;
    if standing.to_fallback != to_fallback {
        return Err(Problem::conflict(format!(
            "route `{name}` is already paused by {} ({}); resume it first to pause it the other way",
            standing.principal,
            if standing.to_fallback {
                "its work going to the fallback"
            } else {
                "its work waiting"
            }
        )));
    }
    Ok(shown(state, principal, route, info, Some(standing)))
}

/// Resume a paused route in every process; its waiting notifications go as due.
#[utoipa::path(post, path = "/v1/routes/{name}/resume", operation_id = "resume_route",
    tag = "routes", params(("name" = String, Path, description = "The route")),
    request_body = ResumeBody, security(("bearer" = [])),
    responses(
        (status = 200, description = "Resumed", body = RouteBody),
        (status = 400, description = "The body is not a JSON object", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token lacks `operate`, or may not operate this route (`route-not-operated`)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such route for this tenant", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The route is not paused", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The note is missing", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn resume(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<RouteBody>, Problem> {
    let body: ResumeBody = typed(json_object(body)?)?;
    Ok(Json(
        resume_route(&state, &principal, &name, &body.note).await?,
    ))
}

/// Its operator's resume of route `name`, as the API and the console take it.
pub(super) async fn resume_route(
    state: &AppState,
    principal: &Principal,
    name: &str,
    note: &str,
) -> Result<RouteBody, Problem> {
    let (route, info) = operated(state, principal, name)?;
    let by = pause_by(principal, name, note)?;
    if state.store.resume_route(&by).await?.is_none() {
        return Err(Problem::conflict(format!("route `{name}` is not paused")));
    }
    Ok(shown(state, principal, route, info, None))
}

/// Route `name`, for a principal who would pause or resume it. A route its tenant neither uses
/// nor operates is not found; one it uses but does not operate (or its token does not name) is
/// forbidden.
fn operated<'s>(
    state: &'s AppState,
    principal: &Principal,
    name: &str,
) -> Result<(&'s Route, &'s RouteInfo), Problem> {
    principal.require(Scope::Operate)?;
    let (Some(route), Some(info)) = (state.routes.get(name), state.routing.info(name)) else {
        return Err(Problem::not_found());
    };
    if !visible(principal, info) {
        return Err(Problem::not_found());
    }
    if !principal.operates(name, info) {
        let whose = match &info.operator {
            Some(tenant) if *tenant == principal.tenant => {
                "this token does not name it in its `routes`".to_owned()
            }
            Some(_) => "another tenant operates it".to_owned(),
            None => "tenants share it and the config names no operator (`operated_by`)".to_owned(),
        };
        return Err(Problem::new(
            StatusCode::FORBIDDEN,
            "route-not-operated",
            "Route not operated by this token",
            format!("this token may not pause or resume route `{name}`: {whose}"),
        ));
    }
    Ok((route, info))
}

/// Whether the principal's tenant sees a route: it may use it, or operates it.
fn visible(principal: &Principal, info: &RouteInfo) -> bool {
    principal.tenant_may_use(info) || info.operated_by(&principal.tenant)
}

/// The audit record of who pauses or resumes route `name` now, and why (a note is required).
fn pause_by(principal: &Principal, name: &str, note: &str) -> Result<RoutePause, Problem> {
    Ok(RoutePause {
        route: name.to_owned(),
        principal: principal.name.clone(),
        note: parse_note(note).map_err(Problem::invalid_field)?,
        at: OffsetDateTime::now_utc(),
        to_fallback: false,
    })
}

/// What the API shows `principal` of a route now, with its operator's `pause` if one stands.
fn shown(
    state: &AppState,
    principal: &Principal,
    route: &Route,
    info: &RouteInfo,
    pause: Option<RoutePause>,
) -> RouteBody {
    let operable = principal.operates(route.name(), info);
    let operator = info.operated_by(&principal.tenant);
    let paused_by_operator = pause.map(|p| PauseShown {
        principal: operator.then_some(p.principal),
        note: operator.then_some(p.note),
        to_fallback: p.to_fallback,
        at: p.at,
    });
    let capabilities = route.capabilities();
    let limits = route.limits();
    let (limit, paused) = route.pace(Instant::now());
    let (circuit, failures_to_open, open_for) = route.circuit();
    let names = |channels: &[crate::domain::Channel]| {
        channels.iter().map(|c| c.as_str().to_owned()).collect()
    };
    RouteBody {
        name: route.name().to_owned(),
        provider: route.provider().to_owned(),
        channels: names(&info.channels),
        default_for: names(&state.routing.default_for(route.name())),
        delivery: info.delivery.as_str().to_owned(),
        capabilities: CapabilitiesBody {
            idempotency_window_seconds: capabilities.idempotency_window.map(|w| w.as_secs()),
            outcome_query: capabilities.query_visibility_lag.is_some(),
            visibility_lag_ms: capabilities
                .query_visibility_lag
                .map(|lag| lag.as_millis() as u64),
            max_payload_bytes: capabilities.max_payload_bytes,
            tags: capabilities.tags,
            attachments: capabilities.attachments,
        },
        concurrency: route.concurrency(),
        timeout_seconds: limits.timeout.as_secs(),
        max_attempts: limits.max_attempts,
        max_age_seconds: limits.max_age.as_secs(),
        pace: PaceBody {
            rate_limit_per_second: limit.map(|(rate, _)| rate),
            burst: limit.map(|(_, burst)| burst),
            paused_for_ms: paused.as_millis() as u64,
        },
        fallback: route.fallback().map(str::to_owned),
        circuit: CircuitBody {
            state: circuit.as_str().to_owned(),
            failures_to_open,
            open_seconds: open_for.as_secs(),
        },
        operable,
        paused_by_operator,
    }
}
