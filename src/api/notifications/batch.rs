//! `POST /v1/notifications/batch`: up to 1,000 notifications in one request, each answered on
//! its own, the good ones committed together.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use time::OffsetDateTime;
use tracing::Instrument;
use utoipa::ToSchema;

use super::{NotificationBody, TRACEPARENT_DOC, prepare, within_plain_limit};
use crate::api::auth::Principal;
use crate::api::idempotency::{self, Answer};
use crate::api::problem::Problem;
use crate::api::{AppState, json_object_of_items};
use crate::domain::NotificationRequest;
use crate::domain::Scope;
use crate::store::NewAccept;

pub const MAX_BATCH_ITEMS: usize = 1000;

/// Distinct attachment contents in one batch: one per item at most. A batch commits in one
/// transaction, and SQLite's one writer waits for every file it writes (10,000 small ones held
/// it 1.3 s); a flyer shared by every item is one.
pub const MAX_BATCH_FILES: usize = MAX_BATCH_ITEMS;

// Documentation only: the handler reads the items one by one, so that each bad item gets its
// own problem.
/// A batch of notifications to enqueue together.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct BatchRequest {
    #[schema(schema_with = batch_items_schema)]
    items: Vec<Value>,
}

/// Each item is a [`NotificationRequest`] with its own `idempotency_key`.
pub(super) fn batch_items_schema() -> utoipa::openapi::Array {
    use utoipa::openapi::schema::{Object, ObjectBuilder, Schema, Type};
    use utoipa::openapi::{ArrayBuilder, RefOr};
    let mut item = match <NotificationRequest as utoipa::PartialSchema>::schema() {
        RefOr::T(Schema::Object(object)) => object,
        _ => Object::new(),
    };
    item.properties.insert(
        "idempotency_key".into(),
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(255))
            .into(),
    );
    item.required.push("idempotency_key".into());
    ArrayBuilder::new()
        .items(item)
        .min_items(Some(1))
        .max_items(Some(MAX_BATCH_ITEMS))
        .build()
}

/// One item's result in a batch, in request order.
#[derive(Debug, Serialize, ToSchema)]
pub struct BatchResult {
    pub idempotency_key: Option<String>,
    pub status: u16,
    /// The original answer was replayed for a key used before with the same body.
    pub replayed: bool,
    /// The item's notification, for a `202` (new or replayed).
    #[schema(value_type = Option<NotificationBody>)]
    pub notification: Option<Value>,
    /// Why the item was refused, for any other status; nothing was stored for it.
    pub problem: Option<Problem>,
}

impl BatchResult {
    fn problem(key: Option<String>, problem: Problem) -> Self {
        BatchResult {
            idempotency_key: key,
            status: problem.status,
            replayed: false,
            notification: None,
            problem: Some(problem),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BatchBody {
    pub results: Vec<BatchResult>,
}

/// Enqueue up to 1,000 notifications in one transaction, each with its own `idempotency_key`.
/// Items that fail validation are answered with their problem and store nothing; the rest
/// commit together.
#[utoipa::path(post, path = "/v1/notifications/batch", operation_id = "enqueue_notifications",
    tag = "notifications",
    request_body = BatchRequest,
    params(("traceparent" = Option<String>, Header, description = TRACEPARENT_DOC)),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Per-item results in request order", body = BatchBody),
        (status = 400, description = "The body is not a JSON object", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "No items, or more than 1,000", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The token is over its `rate_limit_per_second`, counting every item (`/problems/rate-limited`): nothing was stored; send the same request again after Retry-After", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u32, description = "Seconds until the token may enqueue this many again"))),
        (status = 503, description = "Nothing was stored: the database is away, or other requests and sends with attachments hold this process's memory for them (`/problems/busy`); send the same request again after Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create_batch(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    principal.require(Scope::Send)?;
    let items = items_of(&state, body)?;
    // Each item counts, valid or not: the work of reading it is done either way.
    principal.admit(items.len())?;
    let now = OffsetDateTime::now_utc();
    let (mut results, accepted) = prepare_all(&state, &principal, items, now);
    within_file_limit(&accepted)?;
    if !accepted.is_empty() {
        store_all(&state, &principal, &headers, accepted, &mut results).await?;
    }
    let results = results
        .into_iter()
        .map(|r| r.expect("every item has a result"))
        .collect();
    Ok(Json(BatchBody { results }).into_response())
}

/// The request's items: an array of 1 to [`MAX_BATCH_ITEMS`], within the body limit for
/// what they carry.
fn items_of(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Vec<Value>, Problem> {
    let length = body.as_ref().map_or(0, Bytes::len);
    let mut body = json_object_of_items(body)?;
    let items = match body.get_mut("items").map(Value::take) {
        Some(Value::Array(items)) => {
            within_plain_limit(state, length, &items)?;
            items
        }
        _ => {
            return Err(Problem::invalid_field(crate::domain::FieldError::new(
                "items",
                "must be an array of notifications",
            )));
        }
    };
    if items.is_empty() || items.len() > MAX_BATCH_ITEMS {
        return Err(Problem::invalid_field(crate::domain::FieldError::new(
            "items",
            format!("must hold 1 to {MAX_BATCH_ITEMS} notifications"),
        )));
    }
    Ok(items)
}

/// Each item checked as a single enqueue would be: a result now for the ones refused (their
/// fields named by position), and the others, with their positions, to store.
fn prepare_all(
    state: &AppState,
    principal: &Principal,
    items: Vec<Value>,
    now: OffsetDateTime,
) -> (Vec<Option<BatchResult>>, Vec<(usize, NewAccept)>) {
    let mut results: Vec<Option<BatchResult>> = Vec::with_capacity(items.len());
    let mut accepted: Vec<(usize, NewAccept)> = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let field = |f: &str| format!("items[{i}].{f}");
        let Value::Object(mut object) = item else {
            results.push(Some(BatchResult::problem(
                None,
                Problem::malformed(format!("items[{i}] must be a JSON object")),
            )));
            continue;
        };
        let key = idempotency::key_of_item(&mut object);
        let key_text = key.as_ref().ok().map(|k| k.as_str().to_owned());
        let prepared = key
            .map_err(Problem::invalid_field)
            .and_then(|key| prepare(state, principal, key, Value::Object(object), now));
        match prepared {
            Ok(prepared) => {
                accepted.push((i, prepared));
                results.push(None);
            }
            Err(mut problem) => {
                problem.field = problem.field.map(|f| field(&f));
                results.push(Some(BatchResult::problem(key_text, problem)));
            }
        }
    }
    (results, accepted)
}

/// A batch carries at most [`MAX_BATCH_FILES`] distinct attachment files.
fn within_file_limit(accepted: &[(usize, NewAccept)]) -> Result<(), Problem> {
    let files: std::collections::HashSet<&str> = accepted
        .iter()
        .flat_map(|(_, item)| item.files.iter().map(|f| f.sha256.as_str()))
        .collect();
    if files.len() > MAX_BATCH_FILES {
        return Err(Problem::invalid_field(crate::domain::FieldError::new(
            "items",
            format!(
                "carry {} distinct attachment files; a batch carries at most {MAX_BATCH_FILES} \
                 (send it in parts)",
                files.len()
            ),
        )));
    }
    Ok(())
}

/// Stores the accepted items in one transaction and fills in their results: created,
/// replayed, or refused by their key.
async fn store_all(
    state: &AppState,
    principal: &Principal,
    headers: &HeaderMap,
    accepted: Vec<(usize, NewAccept)>,
    results: &mut [Option<BatchResult>],
) -> Result<(), Problem> {
    let (positions, mut items): (Vec<usize>, Vec<NewAccept>) = accepted.into_iter().unzip();
    let enqueue = tracing::info_span!("enqueue", items = items.len(), tenant = %principal.tenant);
    let outcomes = async {
        // The enqueue span's context, so that a send's span follows from it.
        let trace_parent = crate::traces::current_or(crate::api::trace_parent(headers));
        for item in &mut items {
            item.notification.trace_parent = trace_parent.clone();
        }
        state.store.accept(&items).await
    }
    .instrument(enqueue)
    .await?;
    let mut created = 0;
    for ((i, item), outcome) in positions.into_iter().zip(items).zip(outcomes) {
        let key = Some(item.key.as_str().to_owned());
        results[i] = Some(match idempotency::answer(outcome, item.response) {
            Answer::Created(body) => {
                created += 1;
                BatchResult {
                    idempotency_key: key,
                    status: 202,
                    replayed: false,
                    notification: Some(body),
                    problem: None,
                }
            }
            Answer::Replayed { status, body } => BatchResult {
                idempotency_key: key,
                status,
                replayed: true,
                notification: Some(body),
                problem: None,
            },
            Answer::Refused(problem) => BatchResult::problem(key, problem),
        });
    }
    if created > 0 {
        metrics::counter!("herald_notifications_accepted_total").increment(created);
        state.enqueued();
    }
    Ok(())
}
