//! `GET /v1/routes`: what each configured route is and how it stands now, for operators. No
//! setting that could hold a secret is shown: only what the route declares and its state.

use std::time::Instant;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use utoipa::ToSchema;

use super::{AppState, Principal, Problem};
use crate::domain::Scope;

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/routes", get(list))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RoutesBody {
    pub data: Vec<RouteBody>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RouteBody {
    pub name: String,
    /// The adapter: the route's `provider` (`smtp`, `resend`, `sparkpost`, `postmark`, `sendgrid`,
    /// `ses`, `mailjet`, `twilio`, `telnyx`, `onesignal`, `webhook`, `sandbox`).
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

/// Every route this tenant may use, with its capabilities, pace, fallback and circuit.
#[utoipa::path(get, path = "/v1/routes", operation_id = "list_routes", tag = "routes",
    security(("bearer" = [])),
    responses((status = 200, description = "The routes", body = RoutesBody)))]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<Json<RoutesBody>, Problem> {
    principal.require(Scope::Read)?;
    let now = Instant::now();
    let mut data: Vec<RouteBody> = state
        .routes
        .all()
        .filter_map(|route| {
            let info = state.routing.info(route.name())?;
            principal.tenant_may_use(info).then(|| {
                let capabilities = route.capabilities();
                let limits = route.limits();
                let (limit, paused) = route.pace(now);
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
                        idempotency_window_seconds: capabilities
                            .idempotency_window
                            .map(|w| w.as_secs()),
                        outcome_query: capabilities.query_visibility_lag.is_some(),
                        visibility_lag_ms: capabilities
                            .query_visibility_lag
                            .map(|lag| lag.as_millis() as u64),
                        max_payload_bytes: capabilities.max_payload_bytes,
                        tags: capabilities.tags,
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
                }
            })
        })
        .collect();
    data.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Json(RoutesBody { data }))
}
