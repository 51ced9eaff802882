//! Review (scope `review`): the queue of what a person must look at, resolutions one by one or
//! many by filter (with a dry run), and a requery of the vendor's outcome query. The rules are
//! [`crate::review`]'s; resolutions are fenced by the generation the person read, so that two
//! racing resolutions (or a resolution racing dispatch) cannot both apply: the loser gets 409.

use std::collections::HashMap;

use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};

use super::auth::{Principal, Scope};
use super::evidence;
use super::notifications::{NotificationBody, parse_id};
use super::problem::Problem;
use super::{AppState, json_object, typed};
use crate::dispatch::{self, RequeryRefused};
use crate::domain::{FieldError, NotificationId, SettledBy};
use crate::review::{self, Ask, Outcome, Reason, Then};
use crate::store::{NewResolution, NotificationDetail, ReviewFilter};

const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 200;
/// The most one bulk resolution may change, whatever its `max`.
pub const MAX_BULK: u32 = 1000;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/review", get(list))
        .route("/v1/review/resolve", post(resolve_many))
        .route("/v1/notifications/{id}/resolve", post(resolve_one))
        .route("/v1/notifications/{id}/requery", post(requery))
}

/// An item in review: the notification with its attempts and evidence, and why it is here.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReviewItem {
    #[serde(flatten)]
    pub notification: NotificationBody,
    pub reason: Reason,
    /// One sentence for a person: why it waits, with the last attempt's evidence.
    pub why: String,
}

impl ReviewItem {
    pub(super) fn of(detail: NotificationDetail) -> Option<ReviewItem> {
        let reason = review::reason(&detail.notification, &detail.attempts)?;
        let why = review::why(reason, &detail.attempts);
        Some(ReviewItem {
            notification: detail.into(),
            reason,
            why,
        })
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReviewPage {
    pub data: Vec<ReviewItem>,
    /// Pass as `cursor` for the next (newer) page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// The filters of `GET /v1/review`, also the `filter` of a bulk resolution.
#[derive(Debug, Default, Deserialize, IntoParams, ToSchema)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct Filter {
    /// Only this route.
    pub route: Option<String>,
    /// `unknown`, `duplicate_possible`, `exhausted` (dead letters that may pass) or `rejected`
    /// (failed for good), comma-separated; default `unknown,duplicate_possible`.
    pub reason: Option<String>,
    /// Ended in review at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Ended in review before this time (RFC 3339).
    pub until: Option<String>,
}

impl Filter {
    pub(super) fn parse(
        &self,
        limit: u32,
        after: Option<NotificationId>,
    ) -> Result<ReviewFilter, FieldError> {
        let time = |field: &str, value: &Option<String>| {
            value
                .as_deref()
                .map(|v| super::rfc3339_parameter(field, v))
                .transpose()
        };
        let reasons = match &self.reason {
            None => Vec::new(),
            Some(list) => list
                .split(',')
                .map(|r| {
                    Reason::parse(r.trim()).ok_or_else(|| {
                        FieldError::new(
                            "reason",
                            "must be unknown, duplicate_possible, exhausted or rejected",
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(ReviewFilter {
            route: self.route.clone(),
            reasons,
            since: time("since", &self.since)?,
            until: time("until", &self.until)?,
            after,
            limit,
        })
    }
}

/// What needs a person, oldest first: `unknown` notifications and unacknowledged
/// `duplicate_possible` ones by default; dead letters with `reason=exhausted` (or `rejected`).
#[utoipa::path(get, path = "/v1/review", operation_id = "list_review", tag = "review",
    security(("bearer" = [])),
    params(Filter,
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 200),
        ("cursor" = Option<String>, Query, format = Uuid, description = "`next_cursor` of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of the review queue", body = ReviewPage),
        (status = 400, description = "A query parameter is invalid", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Query(mut params): Query<HashMap<String, String>>,
) -> Result<Json<ReviewPage>, Problem> {
    principal.require(Scope::Review)?;
    let bad = |field: &str, detail: &str| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-parameter",
            "A query parameter is invalid",
            detail,
        )
        .with_field(field)
    };
    let limit = match params.remove("limit") {
        None => DEFAULT_PAGE,
        Some(l) => l
            .parse()
            .ok()
            .filter(|l| (1..=MAX_PAGE).contains(l))
            .ok_or_else(|| bad("limit", "must be a number from 1 to 200"))?,
    };
    let after = params
        .remove("cursor")
        .map(|c| {
            NotificationId::parse(&c).ok_or_else(|| bad("cursor", "not a cursor from this API"))
        })
        .transpose()?;
    let filter: Filter = serde_json::to_value(&params)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or_else(|| {
            let unknown = params
                .keys()
                .find(|k| !["route", "reason", "since", "until"].contains(&k.as_str()))
                .cloned()
                .unwrap_or_default();
            bad(&unknown, "unknown query parameter")
        })?;
    let mut filter = filter
        .parse(limit + 1, after)
        .map_err(|e| bad(&e.field, &e.message))?;
    filter.limit = limit + 1;
    let mut data: Vec<ReviewItem> = state
        .store
        .review(&principal.tenant, &filter)
        .await?
        .into_iter()
        .filter_map(ReviewItem::of)
        .collect();
    let next_cursor = if data.len() > limit as usize {
        data.truncate(limit as usize);
        data.last()
            .map(|i| i.notification.notification.id.to_string())
    } else {
        None
    };
    Ok(Json(ReviewPage { data, next_cursor }))
}

/// A person's resolution.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveRequest {
    pub outcome: Outcome,
    /// After `not_delivered`: `resend` or `close`.
    pub then: Option<Then>,
    /// Required: what you know and how.
    pub note: String,
    /// Resend a notification that failed for a permanent cause.
    #[serde(default)]
    pub force: bool,
}

impl ResolveRequest {
    fn ask(&self) -> Result<Ask, Problem> {
        Ask::new(self.outcome, self.then, &self.note, self.force).map_err(Problem::invalid_field)
    }
}

/// Resolves one notification in review; the answer is the notification as it now stands.
#[utoipa::path(post, path = "/v1/notifications/{id}/resolve", operation_id = "resolve_notification",
    tag = "review", security(("bearer" = [])),
    params(("id" = String, Path, format = Uuid)),
    request_body = ResolveRequest,
    responses(
        (status = 200, description = "Resolved", body = NotificationBody),
        (status = 400, description = "The body is not a JSON object", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such notification", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Not in review, not resolvable that way, or resolved meanwhile", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is invalid", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn resolve_one(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<NotificationBody>, Problem> {
    principal.require(Scope::Review)?;
    let id = parse_id(&id)?;
    let request: ResolveRequest = typed(json_object(body)?)?;
    let ask = request.ask()?;
    let detail = state.store.notification(&principal.tenant, id).await?;
    apply(&state, &principal, detail, &ask).await?;
    let detail = state.store.notification(&principal.tenant, id).await?;
    Ok(Json(detail.into()))
}

/// Applies `ask` to the notification as read in `detail`.
pub(super) async fn apply(
    state: &AppState,
    principal: &Principal,
    detail: NotificationDetail,
    ask: &Ask,
) -> Result<(), Problem> {
    let change = change_for(state, &detail, ask)?;
    let n = &detail.notification;
    let resolution = NewResolution {
        principal: principal.name.clone(),
        outcome: ask.outcome,
        then: ask.then,
        note: ask.note.clone(),
        change,
        before: (n.state, n.certainty),
    };
    state
        .store
        .resolve(
            &principal.tenant,
            n.id,
            detail.generation,
            &resolution,
            OffsetDateTime::now_utc(),
        )
        .await?;
    if resolution.change.resend.is_some() {
        state.wake.notify_one();
    }
    if let Some(accepted) = resolution.change.settle {
        crate::telemetry::settled(&n.route, SettledBy::Review, accepted);
    }
    tracing::info!(notification_id = %n.id, principal = %principal.name,
        outcome = ask.outcome.as_str(), then = ask.then.map(|t| t.as_str()), "resolved");
    Ok(())
}

pub(super) fn change_for(
    state: &AppState,
    detail: &NotificationDetail,
    ask: &Ask,
) -> Result<review::Change, Problem> {
    let n = &detail.notification;
    let window = state
        .routes
        .get(&n.route)
        .and_then(|route| route.capabilities().idempotency_window);
    review::resolve(n, &detail.attempts, ask, window, OffsetDateTime::now_utc())
        .map_err(|refused| Problem::conflict(refused.0))
}

/// A bulk resolution: every item the filter selects, up to `max`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    #[serde(default)]
    pub filter: Filter,
    pub outcome: Outcome,
    pub then: Option<Then>,
    pub note: String,
    #[serde(default)]
    pub force: bool,
    /// List what would change, and change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// The most items this call may change (default and cap 1,000).
    pub max: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BulkBody {
    pub dry_run: bool,
    /// The notifications that would change (dry run) or did.
    #[schema(value_type = Vec<String>)]
    pub ids: Vec<NotificationId>,
    /// Selected items that this resolution does not apply to, with why.
    pub refused: Vec<BulkRefusal>,
    /// More items matched than `max` allowed; run again for the rest.
    pub more: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BulkRefusal {
    #[schema(value_type = String)]
    pub id: NotificationId,
    pub detail: String,
}

/// Resolves every item a filter selects, for items that share one cause (a vendor outage, say).
/// Run it with `"dry_run": true` first: the answer lists what would change.
#[utoipa::path(post, path = "/v1/review/resolve", operation_id = "resolve_review",
    tag = "review", security(("bearer" = [])),
    request_body = BulkRequest,
    responses(
        (status = 200, description = "What would change (dry run) or did", body = BulkBody),
        (status = 400, description = "The body is not a JSON object", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is invalid", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn resolve_many(
    State(state): State<AppState>,
    principal: Principal,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<BulkBody>, Problem> {
    principal.require(Scope::Review)?;
    let request: BulkRequest = typed(json_object(body)?)?;
    let ask = Ask::new(request.outcome, request.then, &request.note, request.force)
        .map_err(Problem::invalid_field)?;
    let max = request.max.unwrap_or(MAX_BULK);
    if !(1..=MAX_BULK).contains(&max) {
        return Err(Problem::invalid_field(FieldError::new(
            "max",
            format!("must be from 1 to {MAX_BULK}"),
        )));
    }
    let filter = request.filter.parse(max + 1, None).map_err(|mut e| {
        e.field = format!("filter.{}", e.field);
        Problem::invalid_field(e)
    })?;
    let mut selected = state.store.review(&principal.tenant, &filter).await?;
    let more = selected.len() > max as usize;
    selected.truncate(max as usize);
    let mut body = BulkBody {
        dry_run: request.dry_run,
        ids: Vec::new(),
        refused: Vec::new(),
        more,
    };
    for detail in selected {
        let id = detail.notification.id;
        let outcome = if request.dry_run {
            change_for(&state, &detail, &ask).map(|_| ())
        } else {
            apply(&state, &principal, detail, &ask).await
        };
        match outcome {
            Ok(()) => body.ids.push(id),
            Err(problem) if problem.status == StatusCode::CONFLICT.as_u16() => {
                body.refused.push(BulkRefusal {
                    id,
                    detail: problem.detail.clone(),
                })
            }
            Err(problem) => return Err(problem),
        }
    }
    Ok(Json(body))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RequeryBody {
    /// The notification as it now stands.
    pub notification: NotificationBody,
    /// What the vendor's look-up answered.
    #[schema(schema_with = evidence::schema_ref)]
    pub answer: Value,
    /// Whether the answer settled the ambiguity.
    pub settled: bool,
}

/// Asks the route's outcome query again, now; the answer is stored as evidence and may settle
/// the notification (delivered, or proven not sent and queued again).
#[utoipa::path(post, path = "/v1/notifications/{id}/requery", operation_id = "requery_notification",
    tag = "review", security(("bearer" = [])),
    params(("id" = String, Path, format = Uuid)),
    responses(
        (status = 200, description = "Asked; see `settled`", body = RequeryBody),
        (status = 404, description = "No such notification", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Not unknown, or the route has no outcome query", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn requery(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<Json<RequeryBody>, Problem> {
    principal.require(Scope::Review)?;
    let id = parse_id(&id)?;
    let detail = state.store.notification(&principal.tenant, id).await?;
    let requeried = match dispatch::requery(&*state.store, &state.routes, detail).await {
        Ok(requeried) => requeried,
        Err(RequeryRefused::Store(err)) => return Err(err.into()),
        Err(refused) => return Err(Problem::conflict(refused.to_string())),
    };
    if requeried.settled {
        state.wake.notify_one();
    }
    let detail = state.store.notification(&principal.tenant, id).await?;
    Ok(Json(RequeryBody {
        notification: detail.into(),
        answer: evidence::for_api(serde_json::to_value(&requeried.answer).unwrap_or_default()),
        settled: requeried.settled,
    }))
}
