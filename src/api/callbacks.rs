//! After the send: `POST /v1/callbacks/{route}`, where vendors report what became of a message,
//! and the suppression list that their reports (and people) fill.
//!
//! A callback carries no bearer token: the route's adapter checks the vendor's own signature
//! (or basic auth) before anything is read, and a refused one stores nothing. Events are taken
//! once per (route, vendor event id); a repeat answers 200 and changes nothing, so a vendor
//! that retries, or sends one event 46 times, does no harm.

use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{delete, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};

use super::auth::Principal;
use super::problem::Problem;
use super::{AppState, body_bytes, json_object, typed};
use crate::dispatch::Route;
use crate::domain::Scope;
use crate::domain::{
    Channel, FieldError, SettledBy, Suppression, SuppressionReason, suppression_recipient,
    text_without_nul,
};
use crate::review::parse_note;
use crate::store::{LiftSuppression, NewCallbacks, NewSuppression, StoreError, SuppressionFilter};
use herald_provider::callback::{
    CallbackError, CallbackEvent, CallbackRef, CallbackRequest, Callbacks,
};

const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 200;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/callbacks/{route}", post(receive))
        .route("/v1/suppressions", post(add).get(list))
        .route("/v1/suppressions/{channel}/{recipient}", delete(lift))
}

/// What a callback request did.
#[derive(Debug, Serialize, ToSchema)]
pub struct CallbackReceipt {
    /// Events herald understood in it (opens, clicks and the like are left out).
    pub events: usize,
    /// Events seen for the first time, whose effects were applied.
    pub new: usize,
    /// Events seen before: nothing changed for them.
    pub repeats: usize,
    /// Events about messages never sent on this route (the vendor account may send for
    /// others too): left alone.
    pub unknown: usize,
}

/// Take a vendor's delivery callback for a route.
#[utoipa::path(post, path = "/v1/callbacks/{route}", operation_id = "receive_callback",
    tag = "callbacks",
    params(("route" = String, Path, description = "The route whose vendor sends the callback")),
    request_body(content = String, content_type = "application/json",
        description = "The vendor's own body: JSON (Resend, SparkPost, Postmark, SendGrid, Telnyx, \
                       Mailjet, the sandbox, an SNS message from Amazon SES) or a form (Twilio), signed as that vendor signs."),
    responses(
        (status = 200, description = "Taken; repeats of events seen before changed nothing", body = CallbackReceipt),
        (status = 400, description = "Signed, but not a callback this route's adapter can read", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing or wrong signature, or a timestamp outside the tolerance; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such route, a route without callbacks, or no event about a message sent on it; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Authenticated, but over the route's callback rate; nothing stored, send again after Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database is unavailable, or the vendor could not be reached for what the check needs (an SNS signing certificate, a subscription confirmation); nothing was stored", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn receive(
    State(state): State<AppState>,
    Path(route_name): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CallbackReceipt>, Problem> {
    let body = body_bytes(body)?;
    let Some(route) = state.routes.get(&route_name) else {
        return Err(Problem::not_found());
    };
    let Some(reader) = route.callbacks() else {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "not-found",
            "Not found",
            format!(
                "route `{route_name}` takes no callbacks: its adapter has none, or the route configures no callback secret"
            ),
        ));
    };
    let request = CallbackRequest {
        query: query.as_deref().unwrap_or(""),
        headers: &headers,
        body: &body,
        now: OffsetDateTime::now_utc(),
    };
    take(&state, route, reader, &request)
        .await
        .map(Json)
        .map_err(|refused| refused.answer(&route_name))
}

/// Reads a callback with its route's reader, then stores what it reports: each step either
/// passes it on or refuses it, and [`Refused::answer`] says how.
async fn take(
    state: &AppState,
    route: &Route,
    reader: &dyn Callbacks,
    request: &CallbackRequest<'_>,
) -> Result<CallbackReceipt, Refused> {
    let route_name = route.name();
    let events = reader.receive(request).await.map_err(Refused::Reader)?;
    // A replay of reports this process stored lately (a captured callback sent again and
    // again) is the repeat it is: answered so without the database, and without spending the
    // budget the vendor's next real report needs.
    if !events.is_empty() && route.reported_lately(events.iter().map(|e| e.event_id.as_str())) {
        counted(route_name, "repeat");
        return Ok(CallbackReceipt {
            events: events.len(),
            new: 0,
            repeats: events.len(),
            unknown: 0,
        });
    }
    // Counted once the vendor's signature holds: forged requests (a 401 each, after one HMAC)
    // never spend the genuine reports' budget, which keeps a storm of real ones (or of a leaked
    // secret) from the database.
    route
        .admit_callback(std::time::Instant::now())
        .map_err(Refused::RateLimited)?;
    // A vendor's time that herald could not store and read back is left out, as an unreadable
    // one is: the report is taken, timed at its arrival. Text it cannot store is refused.
    let events: Vec<_> = events
        .into_iter()
        .map(|mut event| {
            event.at = event.at.and_then(crate::domain::in_range);
            event
        })
        .collect();
    if let Some(what) = events.iter().find_map(holds_nul) {
        return Err(Refused::Nul(what));
    }
    let count = events.len();
    let ids: Vec<String> = events.iter().map(|e| e.event_id.clone()).collect();
    let taken = state
        .store
        .receive_callbacks(&NewCallbacks {
            route: route_name.to_owned(),
            events,
            idempotency_window: route.capabilities().idempotency_window,
            received_at: request.now,
        })
        .await
        .map_err(|err| match err {
            StoreError::NotFound => Refused::UnknownMessage,
            other => Refused::Store(other),
        })?;
    // Reports that named no message may name one later: only a callback whose every report
    // the store holds is remembered.
    if taken.unknown == 0 {
        route.remember_reports(ids.into_iter());
    }
    counted(
        route_name,
        match (taken.new, taken.repeats) {
            (0, 0) => "ignored",
            (0, _) => "repeat",
            _ => "taken",
        },
    );
    for id in &taken.settled {
        tracing::info!(route = %route_name, notification_id = %id, "a vendor report settled an ambiguous send");
        crate::telemetry::settled(route_name, SettledBy::Callback, true);
    }
    Ok(CallbackReceipt {
        events: count,
        new: taken.new,
        repeats: taken.repeats,
        unknown: taken.unknown,
    })
}

/// Counts one callback request by its result (`herald_callbacks_total`).
fn counted(route: &str, result: &'static str) {
    metrics::counter!("herald_callbacks_total", "route" => route.to_owned(), "result" => result)
        .increment(1);
}

/// What of a report holds the NUL character, which neither database stores as text.
fn holds_nul(event: &CallbackEvent) -> Option<&'static str> {
    let (CallbackRef::Key(reference) | CallbackRef::ProviderRef(reference)) = &event.reference;
    [
        ("event id", &event.event_id),
        ("message reference", reference),
        ("status", &event.vendor_status),
    ]
    .into_iter()
    .find_map(|(what, text)| text.contains('\0').then_some(what))
}

/// Why herald refused a callback: nothing of it was stored.
enum Refused {
    /// The route's reader refused it: not the vendor's, not readable, or not checkable now.
    Reader(CallbackError),
    /// Over the route's callback rate: sent again after the wait.
    RateLimited(std::time::Duration),
    /// A report's text holds the NUL character.
    Nul(&'static str),
    /// No report names a message sent on the route.
    UnknownMessage,
    /// The database failed.
    Store(StoreError),
}

impl Refused {
    /// The answer to a refused callback, counted by its result (a database's failure is not a
    /// callback's result, and counts nothing).
    fn answer(self, route: &str) -> Problem {
        let (result, problem) = match self {
            Refused::Reader(err) => {
                tracing::info!(route = %route, %err, "callback refused");
                match err {
                    CallbackError::Unauthenticated(detail) => (
                        "unauthenticated",
                        Problem::new(
                            StatusCode::UNAUTHORIZED,
                            "callback-unauthenticated",
                            "The callback is not authenticated",
                            detail,
                        ),
                    ),
                    CallbackError::Malformed(detail) => ("malformed", Problem::malformed(detail)),
                    CallbackError::Unreachable(detail) => (
                        "vendor_unreachable",
                        Problem::new(
                            StatusCode::SERVICE_UNAVAILABLE,
                            "callback-vendor-unreachable",
                            "The vendor could not be reached to check the callback",
                            detail,
                        ),
                    ),
                }
            }
            Refused::RateLimited(wait) => ("rate_limited", rate_limited(route, wait)),
            Refused::Nul(what) => (
                "malformed",
                Problem::malformed(format!(
                    "the report's {what} holds the NUL character (U+0000)"
                )),
            ),
            Refused::UnknownMessage => (
                "unknown_message",
                Problem::new(
                    StatusCode::NOT_FOUND,
                    "callback-unknown-message",
                    "No such message",
                    format!("no event of the callback names a message sent on route `{route}`"),
                ),
            ),
            Refused::Store(err) => return err.into(),
        };
        counted(route, result);
        problem
    }
}

/// The answer to a callback over its route's rate: nothing read, sent again after `wait`.
fn rate_limited(route: &str, wait: std::time::Duration) -> Problem {
    let seconds = u32::try_from(wait.as_secs().saturating_add(1)).unwrap_or(u32::MAX);
    Problem::new(
        StatusCode::TOO_MANY_REQUESTS,
        "callback-rate-limited",
        "Too many callbacks",
        format!(
            "route `{route}` takes at most its callback_rate_limit_per_second; nothing was \
             stored, send it again after Retry-After"
        ),
    )
    .with_retry_after(seconds)
}

/// A page of suppressions.
#[derive(Debug, Serialize, ToSchema)]
pub struct SuppressionPage {
    pub data: Vec<Suppression>,
    /// Pass as `cursor` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SuppressionQuery {
    /// Only this channel's.
    pub channel: Option<String>,
    /// At most this many (default 50, at most 200).
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The tenant's suppressed recipients, by channel and recipient.
#[utoipa::path(get, path = "/v1/suppressions", operation_id = "list_suppressions",
    tag = "suppressions", params(SuppressionQuery), security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of suppressions", body = SuppressionPage),
        (status = 400, description = "A query parameter is not of its type", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A parameter is invalid", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    query: Result<Query<SuppressionQuery>, QueryRejection>,
) -> Result<Json<SuppressionPage>, Problem> {
    principal.require(Scope::Read)?;
    let Query(query) = query.map_err(invalid_query)?;
    let channel = query
        .channel
        .as_deref()
        .map(|c| parse_channel("channel", c))
        .transpose()?;
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(Problem::invalid_field(FieldError::new(
            "limit",
            format!("must be 1 to {MAX_PAGE}"),
        )));
    }
    let after = query.cursor.as_deref().map(parse_cursor).transpose()?;
    let data = state
        .store
        .suppressions(
            &principal.tenant,
            &SuppressionFilter {
                channel,
                recipient: None,
                after,
                limit,
            },
        )
        .await?;
    let next_cursor = (data.len() == limit as usize)
        .then(|| {
            data.last().map(|s| {
                let category = s.category.as_deref().unwrap_or_default();
                format!("{}/{category}/{}", s.channel, s.recipient)
            })
        })
        .flatten();
    Ok(Json(SuppressionPage { data, next_cursor }))
}

/// `POST /v1/suppressions`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSuppressionBody {
    #[schema(schema_with = crate::domain::channel_component)]
    pub channel: String,
    #[schema(example = "ada@example.com")]
    pub recipient: String,
    /// Only notifications of this configured category; absent: every notification.
    #[schema(example = "digest")]
    pub category: Option<String>,
    /// Why, for the audit trail.
    #[schema(example = "asked by phone not to be mailed")]
    pub note: String,
}

/// Suppress a recipient on a channel for the tenant: its notifications then fail `known`,
/// reason `suppressed`, without a vendor call.
#[utoipa::path(post, path = "/v1/suppressions", operation_id = "add_suppression",
    tag = "suppressions", request_body = NewSuppressionBody, security(("bearer" = [])),
    responses(
        (status = 201, description = "Suppressed", body = Suppression),
        (status = 200, description = "It was suppressed already: the suppression as it stands", body = Suppression),
        (status = 400, description = "The body is not a JSON object", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is invalid (the note is required)", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn add(
    State(state): State<AppState>,
    principal: Principal,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Suppression>), Problem> {
    principal.require(Scope::Admin)?;
    let body: NewSuppressionBody = typed(json_object(body)?)?;
    let channel = parse_channel("channel", &body.channel)?;
    let recipient = parse_recipient(channel, &body.recipient)?;
    let category = body
        .category
        .as_deref()
        .map(|name| state.routing.categories().leavable(name))
        .transpose()
        .map_err(Problem::invalid_field)?;
    let note = parse_note(&body.note).map_err(Problem::invalid_field)?;
    let suppression = Suppression {
        channel,
        recipient: recipient.clone(),
        category: category.clone(),
        reason: SuppressionReason::Manual,
        source: principal.name.clone(),
        evidence: Value::Object(Default::default()),
        note: Some(note),
        created_at: OffsetDateTime::now_utc(),
    };
    let added = state
        .store
        .suppress(&NewSuppression {
            tenant: principal.tenant.clone(),
            suppression: suppression.clone(),
            principal: principal.name.clone(),
        })
        .await?;
    if added {
        return Ok((StatusCode::CREATED, Json(suppression)));
    }
    let standing = state
        .store
        .suppressions(
            &principal.tenant,
            &SuppressionFilter {
                channel: Some(channel),
                recipient: Some(recipient),
                after: None,
                limit: MAX_PAGE,
            },
        )
        .await?
        .into_iter()
        .find(|s| s.category == category);
    match standing {
        Some(standing) => Ok((StatusCode::OK, Json(standing))),
        // Lifted between the insert that found it and this read: nothing stands to show.
        None => Err(Problem::conflict(
            "the suppression was lifted while this request added it; send it again",
        )),
    }
}

/// `DELETE /v1/suppressions/{channel}/{recipient}?category=`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct LiftQuery {
    /// The category the suppression holds for; absent: the one for every notification.
    pub category: Option<String>,
}

/// `DELETE /v1/suppressions/{channel}/{recipient}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LiftBody {
    /// Why, for the audit trail.
    #[schema(example = "the address works again; confirmed with the customer")]
    pub note: String,
}

/// Lift a suppression; the audit trail keeps who lifted it, when and why.
#[utoipa::path(delete, path = "/v1/suppressions/{channel}/{recipient}",
    operation_id = "lift_suppression", tag = "suppressions",
    params(("channel" = String, Path, description = "The channel"),
           ("recipient" = String, Path, description = "The recipient, percent-encoded"),
           LiftQuery),
    request_body = LiftBody, security(("bearer" = [])),
    responses(
        (status = 200, description = "Lifted: the suppression that was", body = Suppression),
        (status = 400, description = "The body is not a JSON object", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not suppressed", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is invalid (the note is required)", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn lift(
    State(state): State<AppState>,
    principal: Principal,
    Path((channel, recipient)): Path<(String, String)>,
    query: Result<Query<LiftQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Suppression>, Problem> {
    principal.require(Scope::Admin)?;
    let body: LiftBody = typed(json_object(body)?)?;
    let channel = parse_channel("channel", &channel)?;
    let note = parse_note(&body.note).map_err(Problem::invalid_field)?;
    let lifted = state
        .store
        .lift_suppression(&LiftSuppression {
            tenant: principal.tenant.clone(),
            channel,
            recipient: suppression_recipient(
                channel,
                &text_without_nul("recipient", &recipient).map_err(Problem::invalid_field)?,
            ),
            category: query.map_err(invalid_query)?.0.category,
            principal: principal.name.clone(),
            note,
            at: OffsetDateTime::now_utc(),
        })
        .await?;
    Ok(Json(lifted))
}

/// axum answers a query parameter of the wrong type in plain text; herald answers problems.
fn invalid_query(rejection: QueryRejection) -> Problem {
    Problem::new(
        StatusCode::BAD_REQUEST,
        "invalid-parameter",
        "A query parameter is invalid",
        rejection.body_text(),
    )
}

fn parse_channel(field: &str, value: &str) -> Result<Channel, Problem> {
    crate::domain::parse_channel(field, value).map_err(Problem::invalid_field)
}

/// A recipient as the send would hold it: validated and written as the channel's recipients are.
fn parse_recipient(channel: Channel, value: &str) -> Result<String, Problem> {
    let to = crate::domain::parse_recipient("recipient", channel, value)
        .map_err(Problem::invalid_field)?;
    Ok(suppression_recipient(channel, &to))
}

/// `channel/category/recipient` (the category empty for one that holds for every
/// notification): a category's name has no `/`, a recipient (a webhook URL) may.
fn parse_cursor(cursor: &str) -> Result<(Channel, String, Option<String>), Problem> {
    let invalid =
        || Problem::invalid_field(FieldError::new("cursor", "is not a cursor herald gave"));
    let mut parts = cursor.splitn(3, '/');
    let (Some(channel), Some(category), Some(recipient)) =
        (parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid());
    };
    Ok((
        Channel::parse(channel).ok_or_else(invalid)?,
        text_without_nul("cursor", recipient).map_err(Problem::invalid_field)?,
        Some(category.to_owned()).filter(|c| !c.is_empty()),
    ))
}
