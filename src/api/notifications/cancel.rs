//! Cancellations: one notification by id, or every queued one under a cancellation key or an
//! idempotency key.

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::{NotificationBody, parse_id};
use crate::api::auth::Principal;
use crate::api::problem::Problem;
use crate::api::{AppState, json_object, typed};
use crate::domain::Scope;
use crate::domain::{IdempotencyKey, NotificationId, State as NotificationState};
use crate::store::CancelKey;

/// Cancel a notification that is still `queued`; the answer is the notification as it now
/// stands, as `GET /v1/notifications/{id}` shows it.
#[utoipa::path(post, path = "/v1/notifications/{id}/cancel", operation_id = "cancel_notification",
    tag = "notifications", security(("bearer" = [])),
    params(("id" = String, Path, format = Uuid, description = "The notification id")),
    responses(
        (status = 200, description = "Cancelled", body = NotificationBody),
        (status = 404, description = "No such notification for this tenant", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Not queued any more", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn cancel(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<Json<NotificationBody>, Problem> {
    principal.require(Scope::Send)?;
    let id = parse_id(&id)?;
    state
        .store
        .cancel(&principal.tenant, id, OffsetDateTime::now_utc())
        .await?;
    // Read again for the attempts and review: a queued notification may have tried before.
    let detail = state.store.notification(&principal.tenant, id).await?;
    Ok(Json(NotificationBody::of(detail, state.review)))
}

/// `POST /v1/notifications/cancel`: exactly one of the two keys.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelByKey {
    /// Cancels every notification enqueued with this `cancellation_key` that is still queued.
    #[schema(example = "signup-flow/user-42")]
    pub cancellation_key: Option<String>,
    /// Cancels the notification enqueued under this `Idempotency-Key`, if it is still queued.
    pub idempotency_key: Option<String>,
}

/// What a cancellation by key did.
#[derive(Debug, Serialize, ToSchema)]
pub struct CancelledByKey {
    /// The notifications the key names that were queued and are now cancelled.
    #[schema(value_type = Vec<String>)]
    pub cancelled: Vec<NotificationId>,
    /// Those it names that it did not cancel, with the state each stands in: claimed,
    /// ended or cancelled before — or enqueued under the key while it ran (`queued`).
    pub not_cancelled: Vec<NotCancelled>,
}

/// A notification a cancellation by key named but could not cancel.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotCancelled {
    #[schema(value_type = String, format = Uuid)]
    pub id: NotificationId,
    pub state: NotificationState,
}

/// Cancel, in one transaction, every notification of the tenant's still `queued` under a
/// `cancellation_key` (or the one enqueued under an `Idempotency-Key`), and say what became of
/// the rest. A key that names none answers two empty lists.
#[utoipa::path(post, path = "/v1/notifications/cancel", operation_id = "cancel_notifications_by_key",
    tag = "notifications", security(("bearer" = [])),
    request_body = CancelByKey,
    responses(
        (status = 200, description = "Cancelled what was queued", body = CancelledByKey),
        (status = 400, description = "Not a JSON object", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Neither key, both, or one that is not 1 to 255 printable ASCII characters", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn cancel_by_key(
    State(state): State<AppState>,
    principal: Principal,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CancelledByKey>, Problem> {
    principal.require(Scope::Send)?;
    let body: CancelByKey = typed(json_object(body)?)?;
    let (field, key, named): (_, _, fn(String) -> CancelKey) =
        match (body.cancellation_key, body.idempotency_key) {
            (Some(key), None) => ("cancellation_key", key, CancelKey::Cancellation),
            (None, Some(key)) => ("idempotency_key", key, CancelKey::Idempotency),
            _ => {
                return Err(Problem::invalid_field(crate::domain::FieldError::new(
                    "cancellation_key",
                    "give exactly one of cancellation_key and idempotency_key",
                )));
            }
        };
    // Both keys follow the Idempotency-Key's rule, and are stored as given.
    IdempotencyKey::parse(field, &key).map_err(Problem::invalid_field)?;
    let key = named(key);
    let done = state
        .store
        .cancel_by_key(&principal.tenant, &key, OffsetDateTime::now_utc())
        .await?;
    Ok(Json(CancelledByKey {
        cancelled: done.cancelled,
        not_cancelled: done
            .not_cancelled
            .into_iter()
            .map(|(id, state)| NotCancelled { id, state })
            .collect(),
    }))
}
