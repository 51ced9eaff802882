//! `/v1/notifications`: enqueue (one or a batch) with idempotency keys, read, list, cancel.
//!
//! Keys and their answers are [`super::idempotency`]'s. Requests that fail validation store
//! nothing, so they do not burn the key. Every answer that carries a notification carries the
//! same shape, [`NotificationBody`]: enqueue (new or replayed, alone or in a batch), show, list
//! and cancel, and review's resolve and requery.
//!
//! A batch is `batch`'s, cancellations `cancel`'s; the rest is here.

use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;
use time::OffsetDateTime;
use tracing::Instrument;
use utoipa::ToSchema;

use super::auth::Principal;
use super::idempotency::{self, Answer};
use super::problem::Problem;
use super::{AppState, json_object, typed};
use crate::domain::Scope;
use crate::domain::evidence;
use crate::domain::{
    Attempt, Certainty, IdempotencyKey, Notification, NotificationId, NotificationRequest, Receipt,
    ReceiptStatus, Resolution, State as NotificationState, check_metadata_key,
};
use crate::review::{Policy, Reason};
use crate::store::{ListFilter, NewAccept, NotificationDetail};

pub(super) mod batch;
pub(super) mod cancel;

pub use batch::create_batch;
pub use cancel::{cancel, cancel_by_key};

const DEFAULT_PAGE: u32 = 50;

const MAX_PAGE: u32 = 200;

/// The routes; the two that enqueue take bodies up to `enqueue_limit`, which leaves room for
/// attachments, and a body above `max_body_bytes` (one that carries attachments) only within
/// the process's budget for attachment bytes.
pub fn routes(state: &AppState, max_body_bytes: usize, enqueue_limit: usize) -> Router<AppState> {
    let limit = DefaultBodyLimit::max(enqueue_limit);
    let budget = axum::middleware::from_fn_with_state(
        Enqueues {
            state: state.clone(),
            max_body_bytes,
            enqueue_limit,
        },
        within_budget,
    );
    Router::new()
        .route(
            "/v1/notifications",
            post(create).layer(limit).layer(budget.clone()).get(list),
        )
        .route(
            "/v1/notifications/batch",
            post(create_batch).layer(limit).layer(budget),
        )
        .route("/v1/notifications/cancel", post(cancel_by_key))
        .route("/v1/notifications/{id}", get(show))
        .route("/v1/notifications/{id}/cancel", post(cancel))
}

/// An enqueue's body may pass `server.max_body_bytes` only by its attachments: text, HTML, a
/// webhook's payload or template data that large would otherwise ride on the room kept for
/// files. `items`: the notifications the body holds.
fn within_plain_limit<'a>(
    state: &AppState,
    length: usize,
    items: impl IntoIterator<Item = &'a Value>,
) -> Result<(), Problem> {
    // Each attachment as it is written: its strings and the JSON around them.
    let text = |v: &Value| v.as_str().map_or(0, str::len);
    let files: usize = items
        .into_iter()
        .filter_map(|item| item["attachments"].as_array())
        .flatten()
        .map(|a| text(&a["content"]) + text(&a["filename"]) + text(&a["content_type"]) + 64)
        .sum();
    let plain = length.saturating_sub(files);
    if plain > state.max_body_bytes {
        return Err(Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body-too-large",
            "The body is too large",
            format!(
                "the request body holds {plain} bytes besides its attachments, over \
                 server.max_body_bytes ({})",
                state.max_body_bytes
            ),
        ));
    }
    Ok(())
}

/// How long an enqueue with attachments waits for room in the budget before it is answered 503.
const BUDGET_WAIT: Duration = Duration::from_secs(10);

/// What an enqueue holds at its peak, in bodies: the body, its parsed form, the content decoded,
/// and the copies the database's driver makes to store it (measured: `tests/memory.rs`).
const ENQUEUE_FACTOR: usize = 6;

/// What [`within_budget`] knows: the state, and the enqueue routes' two body limits.
#[derive(Clone)]
struct Enqueues {
    state: AppState,
    max_body_bytes: usize,
    enqueue_limit: usize,
}

/// Lets an enqueue whose body is larger than `max_body_bytes` (it carries attachments; one of
/// unknown length may be up to `enqueue_limit`) go only with room in the attachment budget for
/// what it holds at its peak ([`ENQUEUE_FACTOR`] bodies), held until it is answered.
/// Without room within [`BUDGET_WAIT`], a 503 asks the client to try again: nothing is stored.
/// A request that no token with scope `send` makes goes on at once, to be refused before its
/// body is read: a stranger cannot spend the budget.
async fn within_budget(
    State(enqueues): State<Enqueues>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let body = declared
        .unwrap_or(enqueues.enqueue_limit)
        .min(enqueues.enqueue_limit);
    let (mut parts, request_body) = request.into_parts();
    let sender = Principal::from_request_parts(&mut parts, &enqueues.state)
        .await
        .is_ok_and(|p| p.has(Scope::Send));
    let request = axum::extract::Request::from_parts(parts, request_body);
    if body <= enqueues.max_body_bytes || !sender {
        return next.run(request).await;
    }
    match enqueues
        .state
        .attachments
        .reserve(
            ENQUEUE_FACTOR * body,
            std::time::Instant::now() + BUDGET_WAIT,
        )
        .await
    {
        Some(_room) => next.run(request).await,
        None => Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "Busy with attachments",
            "other requests and sends with attachments hold this process's memory for them \
             now; nothing was stored: send the same request again shortly",
        )
        .with_retry_after(1)
        .into_response(),
    }
}

/// A notification as the API shows it: with its attempts and, where a person is or was
/// involved, its review.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotificationBody {
    #[serde(flatten)]
    pub notification: Notification,
    /// Why it failed, for a `failed` notification: `suppressed` (the recipient is on the
    /// suppression list; nothing was sent), `expired` (its expiry came before an attempt could
    /// start; nothing was sent), `rejected` (refused for good) or `exhausted` (retries spent on
    /// causes that may pass). (A review item's own `reason` says why it is
    /// in review.)
    pub failure_reason: Option<String>,
    /// `person` where its `known` certainty rests on a person's word in review (they settled a
    /// send nothing could prove: delivered, or not delivered and closed or sent again), not on
    /// what herald proved; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, example = "person")]
    pub settled_by: Option<&'static str>,
    pub attempts: Vec<Attempt>,
    pub review: Option<ReviewBody>,
    /// Where the message stands by the vendor's callbacks; `none` until one arrives.
    pub receipt: ReceiptBody,
    /// The receipt's history, oldest first: it only moves forward.
    pub receipts: Vec<Receipt>,
}

/// The latest receipt, or `status: none` and nulls before any callback.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReceiptBody {
    pub status: ReceiptStatus,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub at: Option<OffsetDateTime>,
    pub source: Option<String>,
    pub vendor_status: Option<String>,
}

impl ReceiptBody {
    fn of(receipts: &[Receipt]) -> Self {
        match receipts.last() {
            Some(r) => ReceiptBody {
                status: r.status,
                at: Some(r.at),
                source: Some(r.source.clone()),
                vendor_status: Some(r.vendor_status.clone()),
            },
            None => ReceiptBody {
                status: ReceiptStatus::None,
                at: None,
                source: None,
                vendor_status: None,
            },
        }
    }
}

/// Where a notification stands with review: present while it is in review, and once a person
/// resolved it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReviewBody {
    /// Waiting for a person: in the review queue's default view (`GET /v1/review` without
    /// `reason`).
    pub open: bool,
    /// Why it is in review (`null` once a person closed or settled it); a permanent refusal
    /// (`rejected`) is listed with `reason=rejected` and, unless configured to, does not wait.
    pub reason: Option<Reason>,
    /// One sentence for a person: why it is in review, with the last attempt's evidence.
    pub why: Option<String>,
    pub resolutions: Vec<Resolution>,
}

impl NotificationBody {
    /// The notification as the API shows it, its review as `policy` says what waits.
    pub fn of(d: NotificationDetail, policy: Policy) -> Self {
        let n = &d.notification;
        let reason = crate::review::reason(n, &d.attempts);
        let settled_by = crate::review::settled_by_person(n, &d.attempts).then_some("person");
        let review = (reason.is_some() || !d.resolutions.is_empty()).then(|| ReviewBody {
            open: reason.is_some_and(|r| policy.waits(r)),
            reason,
            why: reason.map(|r| crate::review::why(r, n, &d.attempts)),
            resolutions: d.resolutions,
        });
        let failure_reason = (n.state == NotificationState::Failed).then(|| {
            crate::review::not_made(&d.attempts)
                .unwrap_or_else(|| crate::review::dead_letter_cause(&d.attempts).as_str())
                .to_owned()
        });
        let attempts = d
            .attempts
            .into_iter()
            .map(|mut attempt| {
                attempt.evidence = evidence::for_api(attempt.evidence);
                attempt
            })
            .collect();
        NotificationBody {
            failure_reason,
            settled_by,
            receipt: ReceiptBody::of(&d.receipts),
            receipts: d.receipts,
            notification: d.notification,
            attempts,
            review,
        }
    }
}

fn location(id: NotificationId) -> HeaderValue {
    HeaderValue::from_str(&format!("/v1/notifications/{id}"))
        .expect("a UUID path is a valid header")
}

/// Validates one request and prepares what the store commits for it.
fn prepare(
    state: &AppState,
    principal: &Principal,
    key: IdempotencyKey,
    body: Value,
    now: OffsetDateTime,
) -> Result<NewAccept, Problem> {
    crate::domain::without_nul(&body, "").map_err(Problem::invalid_field)?;
    let request_hash = idempotency::request_hash(&body);
    let request: NotificationRequest = typed(body)?;
    let (notification, files) = request
        .parse(&principal.tenant, &state.routing, &state.templates, now)
        .map_err(Problem::invalid_field)?;
    if let Some(info) = state.routing.info(&notification.route) {
        principal.may_use(&notification.route, info)?;
    }
    let response = serde_json::to_value(NotificationBody {
        notification: notification.clone(),
        failure_reason: None,
        settled_by: None,
        attempts: Vec::new(),
        review: None,
        receipt: ReceiptBody::of(&[]),
        receipts: Vec::new(),
    })
    .map_err(|e| {
        tracing::error!(%e, "cannot serialize a notification");
        Problem::internal()
    })?;
    Ok(NewAccept {
        key,
        request_hash,
        notification,
        files,
        response,
    })
}

/// What the `traceparent` header of an enqueue does, for the OpenAPI document.
const TRACEPARENT_DOC: &str = "W3C Trace Context of the caller's trace: the request continues it, \
    and each notification's attempts link to it. A value that is not a valid `traceparent` is \
    ignored, not refused.";

/// Enqueue one notification.
#[utoipa::path(post, path = "/v1/notifications", operation_id = "enqueue_notification", tag = "notifications",
    request_body = NotificationRequest,
    params(("Idempotency-Key" = String, Header, min_length = 1, max_length = 255, pattern = "^[ -~]+$",
            description = "1–255 printable ASCII characters; retries with the same key are safe"),
           ("traceparent" = Option<String>, Header, description = TRACEPARENT_DOC)),
    security(("bearer" = [])),
    responses(
        (status = 202, description = "Accepted; or, for a key used before with the same body, \
                                      the first answer again, marked `Idempotent-Replayed: true`",
            body = NotificationBody, headers(
                ("Location" = String, description = "The notification: `/v1/notifications/{id}`"),
                ("Idempotent-Replayed" = String, description = "`true` when this is the first \
                                                                answer replayed; absent otherwise"),
                ("Herald-Locale-Fallback" = String, description = "`true` when no translation of \
                    the template serves the `locale` asked for, so its default language was \
                    rendered (the notification says `locale_fallback: true`); absent otherwise"),
            )),
        (status = 400, description = "No key, an invalid key, or a body that is not a JSON object", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token lacks the `send` scope, or may not send through the route", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is invalid, or the key was used before with another body", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The token is over its `rate_limit_per_second` (`/problems/rate-limited`): nothing was stored; send the same request again after Retry-After", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u32, description = "Seconds until the token may enqueue this again"))),
        (status = 503, description = "Nothing was stored: the database is away, or other requests and sends with attachments hold this process's memory for them (`/problems/busy`); send the same request again after Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    principal.require(Scope::Send)?;
    principal.admit(1)?;
    let key = idempotency::key_from_header(&headers)?;
    let length = body.as_ref().map_or(0, Bytes::len);
    let body = json_object(body)?;
    within_plain_limit(&state, length, [&body])?;
    let mut item = prepare(&state, &principal, key, body, OffsetDateTime::now_utc())?;
    let id = item.notification.id;
    let response = item.response.clone();
    let enqueue = tracing::info_span!("enqueue", notification_id = %id, tenant = %principal.tenant);
    let outcome = async {
        item.notification.trace_parent = crate::traces::current_or(super::trace_parent(&headers));
        state.enqueue.submit(item).await
    }
    .instrument(enqueue)
    .await?;
    match idempotency::answer(outcome, response) {
        Answer::Created(body) => {
            metrics::counter!("herald_notifications_accepted_total").increment(1);
            state.enqueued();
            let mut response = (
                StatusCode::ACCEPTED,
                [(header::LOCATION, location(id))],
                Json(&body),
            )
                .into_response();
            warn_of_locale_fallback(response.headers_mut(), &body);
            Ok(response)
        }
        Answer::Replayed { status, body } => Ok(replayed(status, body)),
        Answer::Refused(problem) => Err(problem),
    }
}

/// The stored answer again, marked as a replay.
fn replayed(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::ACCEPTED);
    let mut response = (status, Json(&body)).into_response();
    let headers = response.headers_mut();
    headers.insert(
        idempotency::REPLAYED_HEADER,
        HeaderValue::from_static("true"),
    );
    if let Some(id) = body
        .get("id")
        .and_then(Value::as_str)
        .and_then(NotificationId::parse)
    {
        headers.insert(header::LOCATION, location(id));
    }
    warn_of_locale_fallback(headers, &body);
    response
}

/// Says, beside the answer, what a client reading only the status would miss: the template was
/// rendered in its default language because no translation serves the `locale` asked for.
fn warn_of_locale_fallback(headers: &mut HeaderMap, body: &Value) {
    if body["locale_fallback"] == true {
        headers.insert(LOCALE_FALLBACK_HEADER, HeaderValue::from_static("true"));
    }
}

/// See [`warn_of_locale_fallback`].
const LOCALE_FALLBACK_HEADER: &str = "herald-locale-fallback";

pub(super) fn parse_id(id: &str) -> Result<NotificationId, Problem> {
    // An id that cannot exist is simply not found: the same answer as another tenant's id.
    NotificationId::parse(id).ok_or_else(Problem::not_found)
}

/// One notification with its attempts and review.
#[utoipa::path(get, path = "/v1/notifications/{id}", operation_id = "show_notification",
    tag = "notifications", security(("bearer" = [])),
    params(("id" = String, Path, format = Uuid, description = "The notification id")),
    responses(
        (status = 200, description = "The notification", body = NotificationBody),
        (status = 404, description = "No such notification for this tenant", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn show(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<Json<NotificationBody>, Problem> {
    principal.require(Scope::Read)?;
    let detail = state
        .store
        .notification(&principal.tenant, parse_id(&id)?)
        .await?;
    Ok(Json(NotificationBody::of(detail, state.review)))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ListBody {
    pub data: Vec<NotificationBody>,
    /// Pass as `cursor` for the next (older) page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// Notifications, newest first, cursor-paginated, each as `GET /v1/notifications/{id}` shows
/// it. Every filter given must hold.
///
/// Metadata filters: any number of `metadata.<key>=<value>` parameters (for example
/// `metadata.export=export-intent-7`); each keeps only notifications whose metadata has that key
/// with exactly that value. Keys follow the rule of enqueue: 1 to 40 characters.
#[utoipa::path(get, path = "/v1/notifications", operation_id = "list_notifications",
    tag = "notifications", security(("bearer" = [])),
    params(
        ("state" = Option<NotificationState>, Query, description = "Only this state"),
        ("certainty" = Option<Certainty>, Query, description = "Only this certainty"),
        ("channel" = Option<String>, Query, description = "Only this channel"),
        ("route" = Option<String>, Query, description = "Only this route"),
        ("created_after" = Option<String>, Query, format = DateTime,
            description = "Only those created at or after this time (RFC 3339, e.g. `2026-11-30T12:00:00Z`)"),
        ("created_before" = Option<String>, Query, format = DateTime,
            description = "Only those created before this time (RFC 3339, e.g. `2026-11-30T12:00:00Z`)"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 200, description = "Page size, default 50"),
        ("cursor" = Option<String>, Query, format = Uuid, description = "`next_cursor` of the previous page"),
    ),
    responses(
        (status = 200, description = "A page", body = ListBody),
        (status = 400, description = "A bad query parameter", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<ListBody>, Problem> {
    principal.require(Scope::Read)?;
    let mut filter = list_filter(&params)?;
    let limit = filter.limit as usize;
    // One row more than asked tells whether another page exists.
    filter.limit += 1;
    let mut data: Vec<NotificationBody> = state
        .store
        .list(&principal.tenant, &filter)
        .await?
        .into_iter()
        .map(|detail| NotificationBody::of(detail, state.review))
        .collect();
    let next_cursor = if data.len() > limit {
        data.truncate(limit);
        data.last().map(|n| n.notification.id.to_string())
    } else {
        None
    };
    Ok(Json(ListBody { data, next_cursor }))
}

/// The list's query as a filter: each parameter at most once, none unknown.
fn list_filter(params: &[(String, String)]) -> Result<ListFilter, Problem> {
    let bad = |name: &str, detail: &str| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-parameter",
            "A query parameter is invalid",
            detail,
        )
        .with_field(name)
    };
    // PostgreSQL cannot compare text holding U+0000 and SQLite can: refused on both alike.
    let text = |name: &str, value: &str| {
        crate::domain::text_without_nul(name, name)
            .and_then(|_| crate::domain::text_without_nul(name, value))
            .map_err(|e| bad(&e.field, &e.message))
    };
    let time = |name: &str, value: &str| {
        crate::domain::parse_time(name, value).map_err(|e| bad(&e.field, &e.message))
    };
    let mut filter = ListFilter {
        limit: DEFAULT_PAGE,
        ..ListFilter::default()
    };
    let mut given = HashSet::new();
    for (name, value) in params {
        // Filters must all hold, so a second value for one of them could only match nothing or
        // silently replace the first.
        if !given.insert(name.as_str()) {
            return Err(bad(name, "must be given at most once"));
        }
        match name.as_str() {
            "state" => {
                filter.state = Some(
                    NotificationState::parse(value).ok_or_else(|| bad(name, "unknown state"))?,
                )
            }
            "certainty" => {
                filter.certainty =
                    Some(Certainty::parse(value).ok_or_else(|| bad(name, "unknown certainty"))?)
            }
            "channel" => {
                filter.channel = Some(
                    crate::domain::parse_channel(name, value)
                        .map_err(|e| bad(&e.field, &e.message))?,
                )
            }
            "route" => filter.route = Some(text(name, value)?),
            "created_after" => filter.created_after = Some(time(name, value)?),
            "created_before" => filter.created_before = Some(time(name, value)?),
            "limit" => {
                filter.limit = value
                    .parse()
                    .ok()
                    .filter(|l| (1..=MAX_PAGE).contains(l))
                    .ok_or_else(|| bad(name, "must be a number from 1 to 200"))?
            }
            "cursor" => {
                filter.before = Some(
                    NotificationId::parse(value)
                        .ok_or_else(|| bad(name, "not a cursor from this API"))?,
                )
            }
            _ => match name.strip_prefix("metadata.") {
                Some(key) => {
                    check_metadata_key(key).map_err(|detail| bad(name, &detail))?;
                    filter.metadata.insert(key.to_owned(), text(name, value)?);
                }
                None => return Err(bad(name, "unknown query parameter")),
            },
        }
    }
    Ok(filter)
}
