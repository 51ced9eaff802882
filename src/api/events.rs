//! `POST /v1/events`: an upstream CloudEvent in, the notifications its mapping makes out, once
//! per (`source`, `id`) per tenant (see [`crate::inbox`]).
//!
//! Both modes of the CloudEvents HTTP binding: *structured* (`Content-Type:
//! application/cloudevents+json`, the body is the event) and *binary* (`ce-` headers, the body is
//! the data). A new event answers `202` with the ids of the notifications it created; a repeat
//! answers `200` with the same ids and `Idempotent-Replayed: true`, and creates nothing.

use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use bytes::Bytes;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Principal;
use super::idempotency::REPLAYED_HEADER;
use super::problem::Problem;
use super::{AppState, body_bytes};
use crate::domain::Scope;
use crate::domain::cloudevent::{
    BATCH_JSON, CloudEvent, HEADER_PREFIX, STRUCTURED_JSON, media_type,
};
use crate::domain::{FieldError, NotificationId};
use crate::inbox::{Received, Refusal, Rejected};

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/events", post(receive))
}

// Documentation of the body only: the handler parses the bytes itself, so that each problem
// names its attribute.
/// A CloudEvents 1.0 event in structured mode.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct CloudEventBody {
    /// Must be `1.0`.
    #[schema(example = "1.0")]
    specversion: String,
    /// Unique per `source`: a repeat of (`source`, `id`) creates nothing.
    #[schema(example = "evt-90", min_length = 1)]
    id: String,
    #[schema(example = "academy.exports", min_length = 1)]
    source: String,
    /// Must have a mapping (`[events."…"]` in herald.toml).
    #[serde(rename = "type")]
    #[schema(example = "ExportCompleted", min_length = 1)]
    event_type: String,
    subject: Option<String>,
    #[schema(format = DateTime)]
    time: Option<String>,
    #[schema(example = "application/json")]
    datacontenttype: Option<String>,
    /// The event's payload; a mapping renders from it (a JSON object).
    #[schema(value_type = Option<Object>)]
    data: Option<serde_json::Value>,
}

/// What became of an event.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventReceipt {
    pub source: String,
    pub id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    /// The notifications the event created (the first time it came).
    #[schema(value_type = Vec<String>)]
    pub notification_ids: Vec<NotificationId>,
    /// `true` when the event was received before and nothing new was created.
    pub duplicate: bool,
}

/// Take an upstream CloudEvent and create the notifications its type maps to, once.
#[utoipa::path(post, path = "/v1/events", operation_id = "receive_event", tag = "events",
    request_body(content = CloudEventBody, content_type = "application/cloudevents+json",
        description = "Structured mode. Binary mode is accepted too: `ce-specversion`, `ce-id`, \
                       `ce-source`, `ce-type` … headers, the data as the body, its media type as \
                       `Content-Type`."),
    security(("bearer" = [])),
    responses(
        (status = 202, description = "New: the notifications it created", body = EventReceipt),
        (status = 200, description = "Received before: the same ids, nothing created", body = EventReceipt,
            headers(("Idempotent-Replayed" = String, description = "`true`: this event was received before"))),
        (status = 400, description = "The body is not a JSON event", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "A mapping names a route this token or its tenant may not send through", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "A batch of events, which herald does not take", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A missing or invalid attribute, a wrong specversion, an unmapped type, or data its mapping cannot render; names the attribute or variable", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The token is over its `rate_limit_per_second` (`/problems/rate-limited`; an event counts as one): nothing was stored; send it again after Retry-After", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u32, description = "Seconds until the token may send this again"))),
    ))]
pub async fn receive(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    principal.require(Scope::Send)?;
    principal.admit(1)?;
    let body = body_bytes(body)?;
    let event = parse(&headers, &body)?;
    let received = state
        .inbox
        .receive(&principal.tenant, principal.routes(), &event)
        .await;
    let (status, ids, duplicate) = match received {
        Ok(Received::Created(ids)) => {
            state.enqueued();
            (StatusCode::ACCEPTED, ids, false)
        }
        Ok(Received::Duplicate(ids)) => (StatusCode::OK, ids, true),
        Err(Refusal::Invalid(rejected)) => return Err(refused(rejected)),
        Err(Refusal::Store(err)) => return Err(err.into()),
    };
    let receipt = EventReceipt {
        source: event.source,
        id: event.id,
        event_type: event.event_type,
        notification_ids: ids,
        duplicate,
    };
    let mut response = (status, Json(receipt)).into_response();
    if duplicate {
        response
            .headers_mut()
            .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
    Ok(response)
}

/// The event in a request, by its mode.
fn parse(headers: &HeaderMap, body: &[u8]) -> Result<CloudEvent, Problem> {
    let content_type = match headers.get(header::CONTENT_TYPE).map(|v| v.to_str()) {
        None => None,
        Some(Ok(value)) => Some(value),
        Some(Err(_)) => {
            return Err(invalid(FieldError::new("Content-Type", "is not ASCII")));
        }
    };
    let media = content_type.map(media_type);
    if media.as_deref() == Some(BATCH_JSON) {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "batch-not-supported",
            "Batches are not supported",
            "send one event per request, in structured or binary mode",
        )
        .with_field("Content-Type"));
    }
    if media.as_deref() == Some(STRUCTURED_JSON) {
        return CloudEvent::from_structured(body).map_err(|err| {
            if err.field == "body" {
                Problem::malformed(err.to_string())
            } else {
                invalid(err)
            }
        });
    }
    let mut attributes = Vec::new();
    for (name, value) in headers {
        if !name.as_str().starts_with(HEADER_PREFIX) {
            continue;
        }
        let value = value
            .to_str()
            .map_err(|_| invalid(FieldError::new(name.as_str(), "is not ASCII")))?;
        attributes.push((name.as_str(), value));
    }
    if !attributes.iter().any(|(name, _)| *name == "ce-specversion") {
        return Err(invalid(FieldError::new(
            "specversion",
            "is missing: send the event in structured mode (Content-Type: \
             application/cloudevents+json) or in binary mode with ce-specversion, ce-id, \
             ce-source and ce-type headers",
        )));
    }
    CloudEvent::from_binary(attributes, content_type, body).map_err(invalid)
}

fn invalid(err: FieldError) -> Problem {
    refused(Rejected::attribute(err))
}

/// A refused event as problem+json, naming the attribute or variable at fault: 403 for a route
/// its sender may not use, else 422.
fn refused(rejected: Rejected) -> Problem {
    if rejected.reason == "route" {
        return Problem::new(
            StatusCode::FORBIDDEN,
            "route-forbidden",
            "Route not allowed",
            rejected.to_string(),
        )
        .with_field(rejected.field);
    }
    let (slug, title) = match rejected.reason {
        "unmapped" => ("unmapped-event-type", "No mapping for this event type"),
        "mapping" => ("event-not-mappable", "The event cannot be mapped"),
        _ => ("invalid-event", "The event is invalid"),
    };
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        slug,
        title,
        rejected.to_string(),
    )
    .with_field(rejected.field)
}
