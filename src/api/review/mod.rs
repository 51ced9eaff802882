//! Review (scope `review`): the queue of what a person must look at, resolutions one by one or
//! many by filter (a dry run that answers a preview, then its confirmation), and a requery of
//! the vendor's outcome query. The rules are [`crate::review`]'s; resolutions are fenced by the
//! generation the person read, so that two racing resolutions (or a resolution racing
//! dispatch) cannot both apply: the loser gets 409.
//!
//! A bulk preview is stored in the database under the hash of a random token (not signed into
//! the token): any herald process sharing the database can confirm it, it holds up to 1,000
//! ids without a token to match, and it is confirmed once. Bulk resolution lives in `bulk`.

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

use super::auth::Principal;
use super::notifications::{NotificationBody, parse_id};
use super::problem::Problem;
use super::{AppState, json_object, typed};
use crate::dispatch::{self, RequeryRefused};
use crate::domain::Scope;
use crate::domain::evidence;
use crate::domain::{FieldError, NotificationId, SettledBy};
use crate::review::{self, Ask, Outcome, Reason, Then};
use crate::store::{NewResolution, NotificationDetail, ReviewFilter};

pub(super) mod bulk;

pub(super) use bulk::run_many;
pub use bulk::{BulkBody, BulkListItem, BulkRequest, resolve_many};

const DEFAULT_PAGE: u32 = 50;

const MAX_PAGE: u32 = 200;

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
    pub(super) fn of(detail: NotificationDetail, policy: review::Policy) -> Option<ReviewItem> {
        let reason = review::reason(&detail.notification, &detail.attempts)?;
        let why = review::why(reason, &detail.notification, &detail.attempts);
        Some(ReviewItem {
            notification: NotificationBody::of(detail, policy),
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
    /// `unknown`, `duplicate_possible`, `exhausted` (dead letters that may pass), `rejected`
    /// (refused for good: final unless `[review] permanent_refusals = "review"`) or
    /// `contradicted` (reopened by later evidence), comma-separated; default: everything that
    /// waits for a person (`unknown`, `duplicate_possible`, `exhausted`, `contradicted`, and
    /// `rejected` where refusals wait).
    pub reason: Option<String>,
    /// Ended in review at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Ended in review before this time (RFC 3339).
    pub until: Option<String>,
}

impl Filter {
    /// The store's filter; without `reason`, what waits for a person by `policy`.
    pub(super) fn parse(
        &self,
        limit: u32,
        after: Option<NotificationId>,
        policy: review::Policy,
    ) -> Result<ReviewFilter, FieldError> {
        let time = |field: &str, value: &Option<String>| {
            value
                .as_deref()
                .map(|v| crate::domain::parse_time(field, v))
                .transpose()
        };
        let reasons = match &self.reason {
            None => policy.waiting(),
            Some(list) => list
                .split(',')
                .map(|r| {
                    Reason::parse(r.trim()).ok_or_else(|| {
                        FieldError::new(
                            "reason",
                            "must be unknown, duplicate_possible, exhausted, rejected or \
                             contradicted",
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(ReviewFilter {
            route: self
                .route
                .as_deref()
                .map(|r| crate::domain::text_without_nul("route", r))
                .transpose()?,
            reasons,
            since: time("since", &self.since)?,
            until: time("until", &self.until)?,
            after,
            limit,
        })
    }
}

/// What needs a person, oldest first: by default everything that waits for one (`unknown`,
/// unacknowledged `duplicate_possible`, `exhausted` dead letters); permanent refusals with
/// `reason=rejected`.
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
    let filter = filter
        .parse(limit + 1, after, state.review)
        .map_err(|e| bad(&e.field, &e.message))?;
    let mut data: Vec<ReviewItem> = state
        .store
        .review(&principal.tenant, &filter)
        .await?
        .into_iter()
        .filter_map(|detail| ReviewItem::of(detail, state.review))
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
    /// After `not_delivered`: `resend` or `close` (which ends the item: it leaves review).
    pub then: Option<Then>,
    /// Required: what you know and how.
    pub note: String,
    /// Resend a notification that failed for a permanent cause.
    #[serde(default)]
    pub force: bool,
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
    let note = review::parse_note(&request.note).map_err(Problem::invalid_field)?;
    let ask =
        Ask::new(request.outcome, request.then, request.force).map_err(Problem::invalid_field)?;
    let detail = state.store.notification(&principal.tenant, id).await?;
    apply(&state, &principal, detail, &ask, &note).await?;
    let detail = state.store.notification(&principal.tenant, id).await?;
    Ok(Json(NotificationBody::of(detail, state.review)))
}

/// Applies `ask`, with the person's `note`, to the notification as read in `detail`.
pub(super) async fn apply(
    state: &AppState,
    principal: &Principal,
    detail: NotificationDetail,
    ask: &Ask,
    note: &str,
) -> Result<(), Problem> {
    let change = change_for(state, &detail, ask)?;
    let n = &detail.notification;
    let resolution = NewResolution {
        principal: principal.name.clone(),
        outcome: ask.outcome,
        then: ask.then,
        note: note.to_owned(),
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
        notification: NotificationBody::of(detail, state.review),
        answer: evidence::for_api(serde_json::to_value(&requeried.answer).unwrap_or_default()),
        settled: requeried.settled,
    }))
}
