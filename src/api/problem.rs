//! RFC 9457 problem details: every error herald answers is one of these, typed by a stable
//! URI, naming the offending field where there is one, and never carrying internals.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::FieldError;
use crate::store::{Outage, StoreError};

/// Problem types are references relative to the herald that answered (`/problems/not-found`):
/// they name no domain outside the deployment, and `GET` on one says what it means.
const TYPE_BASE: &str = "/problems/";

/// Every problem type herald answers, with what it means and what to do.
pub const TYPES: [(&str, &str); 32] = [
    (
        "batch-not-supported",
        "This endpoint takes one item per request.",
    ),
    (
        "body-timeout",
        "The request body did not arrive whole in time: within server.body_timeout_seconds, plus a second for every 64 KiB its Content-Length declared. Nothing was stored; send it again over a faster link.",
    ),
    (
        "body-too-large",
        "The request body is over server.max_body_bytes (an enqueue may pass it only by its attachments); send less, or a batch in parts.",
    ),
    (
        "busy",
        "Other requests and sends with attachments hold the memory this herald process sets aside for them; nothing was stored. Send the same request again after Retry-After.",
    ),
    (
        "callback-rate-limited",
        "The route took as many authenticated callbacks as its callback_rate_limit_per_second allows. Nothing was stored; send it again after Retry-After.",
    ),
    (
        "callback-unauthenticated",
        "The callback's signature (or basic auth) is missing or wrong, or its timestamp is too old: it may not be the vendor's. Nothing was stored.",
    ),
    (
        "callback-unknown-message",
        "The callback names a message that was never sent on this route. Nothing was stored.",
    ),
    (
        "callback-vendor-unreachable",
        "herald could not reach the vendor for what checking the callback needs (an SNS signing certificate) or for what it asks (confirming an SNS subscription). Nothing was stored; the vendor sends it again.",
    ),
    (
        "conflict",
        "The notification is not in a state this action applies to, or another change won a race; read it again.",
    ),
    (
        "database-unavailable",
        "herald cannot reach its database; nothing was stored. Retry after Retry-After.",
    ),
    (
        "event-not-mappable",
        "The event's type is mapped, but its data does not give what the mapping needs.",
    ),
    (
        "forbidden",
        "The token lacks the scope this endpoint needs.",
    ),
    (
        "idempotency-key-invalid",
        "Idempotency-Key must be 1 to 255 printable ASCII characters.",
    ),
    (
        "idempotency-key-missing",
        "This endpoint needs an Idempotency-Key header.",
    ),
    (
        "idempotency-key-reused",
        "This key was used with a different request; use a new key for a new request.",
    ),
    (
        "internal",
        "herald failed; the cause is in its log under this answer's X-Request-Id.",
    ),
    ("invalid-event", "The body is not a valid CloudEvent 1.0."),
    ("invalid-field", "A field is invalid; `field` names it."),
    (
        "invalid-parameter",
        "A query parameter is invalid; `field` names it.",
    ),
    (
        "malformed-request",
        "The body is not the JSON this endpoint takes.",
    ),
    (
        "method-not-allowed",
        "The path exists, but not with this method.",
    ),
    ("not-found", "No such resource for this token's tenant."),
    (
        "not-ready",
        "herald is starting or its database is away; retry after Retry-After.",
    ),
    (
        "preview-stale",
        "A bulk resolution's preview cannot be confirmed: it is unknown, expired or confirmed already, or the outcome or filter sent with it is not the one previewed. Make the dry run again and confirm what it shows.",
    ),
    (
        "rate-limited",
        "The token enqueued as many notifications as its rate_limit_per_second and burst allow in this herald process (a batch counts its items). Nothing was stored; send the same request, with the same idempotency keys, after Retry-After.",
    ),
    (
        "route-forbidden",
        "The token's grant does not include the route named.",
    ),
    (
        "route-not-operated",
        "Only an operator of the route may pause or resume it: a token with the operate (or admin) scope, of the tenant that operates the route (its operated_by, or the only tenant that uses it), that names the route.",
    ),
    (
        "storage-fault",
        "The database reported an I/O fault; nothing was stored. Retry after Retry-After.",
    ),
    (
        "storage-full",
        "The database's disk is full; nothing was stored. Retry after Retry-After.",
    ),
    (
        "storage-read-only",
        "The database is read-only (a standby); nothing was stored. Retry after Retry-After.",
    ),
    ("unauthorized", "A valid bearer token is required."),
    (
        "unmapped-event-type",
        "No [events] mapping names this event type.",
    ),
];

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// A reference naming the kind of problem, e.g. `/problems/invalid-field`, relative to the
    /// herald that answered; `GET` on it explains it.
    #[serde(rename = "type")]
    pub problem_type: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// The request field at fault, as the client spelled it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    #[serde(skip)]
    retry_after: Option<u32>,
}

impl Problem {
    pub fn new(status: StatusCode, slug: &str, title: &str, detail: impl Into<String>) -> Self {
        debug_assert!(
            TYPES.iter().any(|(known, _)| *known == slug),
            "problem type `{slug}` is not in TYPES"
        );
        Problem {
            problem_type: format!("{TYPE_BASE}{slug}"),
            title: title.to_owned(),
            status: status.as_u16(),
            detail: detail.into(),
            field: None,
            retry_after: None,
        }
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn with_retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    pub fn invalid_field(err: FieldError) -> Self {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-field",
            "A field is invalid",
            err.to_string(),
        )
        .with_field(err.field)
    }

    pub fn malformed(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "malformed-request",
            "The request is malformed",
            detail,
        )
    }

    pub fn not_found() -> Self {
        Problem::new(
            StatusCode::NOT_FOUND,
            "not-found",
            "Not found",
            "no such resource",
        )
    }

    pub fn unauthorized() -> Self {
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Authentication required",
            "send a valid token as `Authorization: Bearer <token>`",
        )
    }

    pub fn internal() -> Self {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal error",
            "herald failed to handle the request; the cause is in its log",
        )
    }
}

impl Problem {
    /// 409: the request does not fit the resource's current state.
    pub fn conflict(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::CONFLICT,
            "conflict",
            "Conflict with the current state",
            detail,
        )
    }
}

impl Problem {
    /// 409: a bulk resolution's preview cannot be confirmed (`detail` says why).
    pub fn preview_stale(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::CONFLICT,
            "preview-stale",
            "The preview cannot be confirmed",
            detail,
        )
    }
}

impl Problem {
    /// 503 naming why the database refuses work, with how long to wait before retrying.
    pub fn unavailable(outage: Outage) -> Self {
        let (slug, title, why, retry_after) = match outage {
            Outage::Unreachable | Outage::Schema => (
                "database-unavailable",
                "The database is unavailable",
                "herald cannot reach its database right now",
                1,
            ),
            Outage::Busy => (
                "database-unavailable",
                "The database is unavailable",
                "herald's database is too busy right now",
                1,
            ),
            Outage::DiskFull => (
                "storage-full",
                "The database's disk is full",
                "herald's database has no disk space left",
                10,
            ),
            Outage::ReadOnly => (
                "storage-read-only",
                "The database refuses writes",
                "herald's database is read-only right now (a read-only file system or a standby)",
                10,
            ),
            Outage::Storage => (
                "storage-fault",
                "The database's storage is failing",
                "herald's database reports I/O errors",
                10,
            ),
        };
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            slug,
            title,
            format!("{why}; nothing was stored, retry later"),
        )
        .with_retry_after(retry_after)
    }
}

impl From<StoreError> for Problem {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound => Problem::not_found(),
            StoreError::Conflict(detail) => Problem::conflict(detail),
            StoreError::Unavailable(outage, cause) => {
                tracing::warn!(%outage, %cause, "database unavailable");
                Problem::unavailable(outage)
            }
            StoreError::Internal(cause) => {
                tracing::error!(cause = format!("{cause:#}"), "store error");
                Problem::internal()
            }
            StoreError::Unjustified(cause) => {
                tracing::error!(%cause, "the store refused a certainty the evidence does not hold");
                Problem::internal()
            }
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = (self.status(), axum::Json(&self)).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == 401 {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
