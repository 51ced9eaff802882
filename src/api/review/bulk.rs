//! Bulk resolution: a filter or a list of items, a dry run that shows what would change under a
//! token, and the confirmation that applies exactly that.

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use time::{Duration, OffsetDateTime};
use utoipa::ToSchema;

use super::{Filter, apply, change_for};
use crate::api::auth::Principal;
use crate::api::problem::Problem;
use crate::api::{AppState, json_object, typed};
use crate::domain::Scope;
use crate::domain::{FieldError, NotificationId};
use crate::review::{self, Ask, Outcome, Reason, Then};
use crate::store::{NotificationDetail, ReviewFilter, ReviewPreview, StoreError};

/// The most one bulk resolution may change, whatever its `max`.
pub const MAX_BULK: u32 = 1000;

/// How long a dry run's preview may be confirmed.
pub const PREVIEW_LIFETIME: Duration = Duration::minutes(15);

/// A bulk resolution, in two steps. The dry run (`"dry_run": true`, with `outcome`, `then`,
/// `filter`, `max`, or with `items`, each with its own outcome) shows what would change and
/// answers a `preview`; the real run sends that `preview` with a `note` and changes exactly the
/// notifications the dry run listed, with their outcomes. Anything else the real run sends
/// (`outcome`, `then`, `force`, `filter`, `max`, `items`) must be what the dry run was made
/// with.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// Real run: the `preview` a dry run answered (required unless `dry_run`).
    pub preview: Option<String>,
    /// Instead of `filter` and one outcome: the notifications to resolve, each with its own
    /// outcome (1 to 1,000, each id once), as a person settles them after asking the vendor
    /// one by one.
    pub items: Option<Vec<BulkListItem>>,
    /// Which items (default: everything that waits for a person).
    pub filter: Option<Filter>,
    /// Required on the dry run.
    pub outcome: Option<Outcome>,
    /// After `not_delivered`: `resend` or `close`.
    pub then: Option<Then>,
    /// Required on the real run: what you know and how, kept with every resolution.
    pub note: Option<String>,
    /// Resend notifications that failed for a permanent cause.
    pub force: Option<bool>,
    /// List what would change and answer a preview to confirm; change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// The most items this call may change (default and cap 1,000).
    pub max: Option<u32>,
}

/// One notification of a list, with the resolution a person chose for it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkListItem {
    #[schema(format = Uuid)]
    pub id: String,
    pub outcome: Outcome,
    /// After `not_delivered`: `resend` or `close`.
    pub then: Option<Then>,
    /// Resend one that failed for a permanent cause.
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BulkBody {
    pub dry_run: bool,
    /// The notifications that would change (dry run) or did.
    #[schema(value_type = Vec<String>)]
    pub ids: Vec<NotificationId>,
    /// The same notifications as a person reads them: recipient, route, why, since when.
    pub items: Vec<BulkItem>,
    /// Items that this resolution does not apply to (or no longer applies to), with why.
    pub refused: Vec<BulkRefusal>,
    /// More items matched than `max` allowed; run again for the rest.
    pub more: bool,
    /// Dry run: the token to confirm exactly these `ids` with this outcome (`null` when nothing
    /// would change). It can be confirmed once, until `expires_at`.
    pub preview: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<OffsetDateTime>,
}

impl BulkBody {
    fn empty(dry_run: bool) -> Self {
        BulkBody {
            dry_run,
            ids: Vec::new(),
            items: Vec::new(),
            refused: Vec::new(),
            more: false,
            preview: None,
            expires_at: None,
        }
    }
}

/// One notification of a bulk resolution, as a person checks it before confirming.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BulkItem {
    #[schema(value_type = String)]
    pub id: NotificationId,
    #[schema(schema_with = crate::domain::channel_component)]
    pub channel: crate::domain::Channel,
    pub to: String,
    pub route: String,
    pub reason: Reason,
    pub why: String,
    /// What this resolution does to it: `delivered`, `not_delivered + resend`, …
    pub resolution: String,
    /// When it ended in review.
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub waiting_since: OffsetDateTime,
}

impl BulkItem {
    fn of(detail: &NotificationDetail, reason: Reason, ask: Ask) -> BulkItem {
        let n = &detail.notification;
        BulkItem {
            id: n.id,
            channel: n.channel,
            to: n.to.clone(),
            route: n.route.clone(),
            reason,
            why: review::why(reason, &detail.notification, &detail.attempts),
            resolution: described(ask),
            waiting_since: n.updated_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BulkRefusal {
    #[schema(value_type = String)]
    pub id: NotificationId,
    pub detail: String,
}

/// Resolves many items that share one cause (a vendor outage, say), in two steps: a dry run
/// shows what would change and answers a preview; the real run confirms that preview and
/// changes exactly what it showed.
#[utoipa::path(post, path = "/v1/review/resolve", operation_id = "resolve_review",
    tag = "review", security(("bearer" = [])),
    request_body = BulkRequest,
    responses(
        (status = 200, description = "What would change, with its preview (dry run), or what did", body = BulkBody),
        (status = 400, description = "The body is not a JSON object", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The preview is unknown, expired or confirmed already, or the outcome or filter is not the one previewed (`/problems/preview-stale`)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is invalid, or a real run without a preview", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn resolve_many(
    State(state): State<AppState>,
    principal: Principal,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<BulkBody>, Problem> {
    principal.require(Scope::Review)?;
    let request: BulkRequest = typed(json_object(body)?)?;
    run_many(&state, &principal, &request).await.map(Json)
}

/// A dry run ([`preview_many`]) or the real run that confirms one ([`confirm_many`]).
pub(in crate::api) async fn run_many(
    state: &AppState,
    principal: &Principal,
    request: &BulkRequest,
) -> Result<BulkBody, Problem> {
    if request.dry_run {
        preview_many(state, principal, request).await
    } else {
        confirm_many(state, principal, request).await
    }
}

/// What a preview was made for; a confirmation that names any of it must name the same.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub(super) enum Previewed {
    Filter { ask: Ask, filter: Value, max: u32 },
    List { list: Vec<(NotificationId, Ask)> },
}

impl BulkRequest {
    /// The list, each item's outcome checked; `None` for a resolution by filter. A list stands
    /// alone: an outcome, filter or max beside it would say two things at once.
    fn list(&self) -> Result<Option<Vec<(NotificationId, Ask)>>, Problem> {
        let Some(items) = &self.items else {
            return Ok(None);
        };
        if self.filter.is_some()
            || self.outcome.is_some()
            || self.then.is_some()
            || self.force.is_some()
            || self.max.is_some()
        {
            return Err(Problem::invalid_field(FieldError::new(
                "items",
                "is instead of `filter`, `outcome`, `then`, `force` and `max`: give each item \
                 its own outcome",
            )));
        }
        if items.is_empty() || items.len() > MAX_BULK as usize {
            return Err(Problem::invalid_field(FieldError::new(
                "items",
                format!("must hold 1 to {MAX_BULK} notifications"),
            )));
        }
        let mut list: Vec<(NotificationId, Ask)> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let at = |e: FieldError| {
                Problem::invalid_field(FieldError::new(
                    format!("items[{i}].{}", e.field),
                    e.message,
                ))
            };
            let id = NotificationId::parse(&item.id)
                .ok_or_else(|| at(FieldError::new("id", "must be a notification's id")))?;
            if list.iter().any(|(seen, _)| *seen == id) {
                return Err(at(FieldError::new("id", "is listed twice")));
            }
            let ask = Ask::new(item.outcome, item.then, item.force).map_err(at)?;
            list.push((id, ask));
        }
        Ok(Some(list))
    }

    fn ask(&self) -> Result<Ask, Problem> {
        let outcome = self
            .outcome
            .ok_or_else(|| FieldError::new("outcome", "is required"))
            .map_err(Problem::invalid_field)?;
        Ask::new(outcome, self.then, self.force.unwrap_or(false)).map_err(Problem::invalid_field)
    }

    fn max(&self) -> Result<u32, Problem> {
        let max = self.max.unwrap_or(MAX_BULK);
        if !(1..=MAX_BULK).contains(&max) {
            return Err(Problem::invalid_field(FieldError::new(
                "max",
                format!("must be from 1 to {MAX_BULK}"),
            )));
        }
        Ok(max)
    }

    fn filter(&self, limit: u32, policy: review::Policy) -> Result<ReviewFilter, Problem> {
        self.filter
            .as_ref()
            .unwrap_or(&Filter::default())
            .parse(limit, None, policy)
            .map_err(|mut e| {
                e.field = format!("filter.{}", e.field);
                Problem::invalid_field(e)
            })
    }
}

/// The filter as a preview keeps it: parsed, so that the same selection written another way
/// (reasons in another order, a time in another zone) is the same.
pub(super) fn canonical(filter: &ReviewFilter) -> Value {
    let mut reasons: Vec<&str> = filter.reasons.iter().map(|r| r.as_str()).collect();
    reasons.sort_unstable();
    reasons.dedup();
    let time = |t: Option<OffsetDateTime>| t.map(|t| t.unix_timestamp_nanos().to_string());
    json!({"route": filter.route, "reasons": reasons, "since": time(filter.since),
           "until": time(filter.until)})
}

pub(super) fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// The dry run: what `request` would change, stored as a preview to confirm.
pub(super) async fn preview_many(
    state: &AppState,
    principal: &Principal,
    request: &BulkRequest,
) -> Result<BulkBody, Problem> {
    if request.preview.is_some() {
        return Err(Problem::invalid_field(FieldError::new(
            "preview",
            "is what a real run confirms; a dry run makes a new one",
        )));
    }
    let list = request.list()?;
    if let Some(note) = &request.note {
        review::parse_note(note).map_err(Problem::invalid_field)?;
    }
    let mut body = BulkBody::empty(true);
    let (chosen, made_for) = match list {
        Some(list) => {
            let mut chosen = Vec::with_capacity(list.len());
            for &(id, ask) in &list {
                match state.store.notification(&principal.tenant, id).await {
                    Ok(detail) => chosen.push((detail, ask)),
                    Err(StoreError::NotFound) => body.refused.push(BulkRefusal {
                        id,
                        detail: "no such notification".to_owned(),
                    }),
                    Err(err) => return Err(err.into()),
                }
            }
            (chosen, Previewed::List { list })
        }
        None => {
            let ask = request.ask()?;
            let max = request.max()?;
            let filter = request.filter(max + 1, state.review)?;
            let mut selected = state.store.review(&principal.tenant, &filter).await?;
            body.more = selected.len() > max as usize;
            selected.truncate(max as usize);
            let chosen = selected.into_iter().map(|detail| (detail, ask)).collect();
            let filter = canonical(&filter);
            (chosen, Previewed::Filter { ask, filter, max })
        }
    };
    let mut previewed = Vec::new();
    for (detail, ask) in chosen {
        let id = detail.notification.id;
        match change_for(state, &detail, &ask) {
            Ok(_) => {
                if let Some(reason) = review::reason(&detail.notification, &detail.attempts) {
                    body.items.push(BulkItem::of(&detail, reason, ask));
                }
                body.ids.push(id);
                previewed.push((id, detail.generation));
            }
            Err(problem) => body.refused.push(BulkRefusal {
                id,
                detail: problem.detail,
            }),
        }
    }
    if previewed.is_empty() {
        return Ok(body);
    }
    let token = hex::encode(rand::random::<[u8; 32]>());
    let now = OffsetDateTime::now_utc();
    let preview = ReviewPreview {
        token_hash: token_hash(&token),
        tenant: principal.tenant.clone(),
        principal: principal.name.clone(),
        request: json!(made_for),
        items: previewed,
        created_at: now,
        expires_at: now + PREVIEW_LIFETIME,
    };
    state.store.save_review_preview(&preview).await?;
    body.preview = Some(token);
    body.expires_at = Some(preview.expires_at);
    Ok(body)
}

/// The real run: confirms a preview and applies its outcome to exactly its notifications, each
/// only if nothing changed it since the dry run read it.
pub(super) async fn confirm_many(
    state: &AppState,
    principal: &Principal,
    request: &BulkRequest,
) -> Result<BulkBody, Problem> {
    let Some(token) = request.preview.as_deref() else {
        return Err(Problem::invalid_field(FieldError::new(
            "preview",
            "is required to resolve many: make a dry run first (\"dry_run\": true), check what \
             it lists, then send its preview with your note",
        )));
    };
    let note = review::parse_note(request.note.as_deref().unwrap_or_default())
        .map_err(Problem::invalid_field)?;
    let hash = token_hash(token);
    let stored = live_preview(state, principal, &hash).await?;
    let asks = confirmed_asks(state, request, &stored)?;
    state
        .store
        .use_review_preview(&principal.tenant, &hash)
        .await
        .map_err(|err| match err {
            StoreError::Conflict(detail) => Problem::preview_stale(detail),
            err => err.into(),
        })?;
    let mut body = BulkBody::empty(false);
    for (id, generation) in stored.items {
        let refuse = |detail: String| BulkRefusal { id, detail };
        let detail = match state.store.notification(&principal.tenant, id).await {
            Ok(detail) => detail,
            Err(StoreError::NotFound) => {
                body.refused.push(refuse("it no longer exists".to_owned()));
                continue;
            }
            Err(err) => return Err(err.into()),
        };
        if detail.generation != generation {
            body.refused.push(refuse(
                "it changed since the preview (another resolution, a vendor's report, or \
                 dispatch); look at it again"
                    .to_owned(),
            ));
            continue;
        }
        let Some(&ask) = asks.get(&id) else {
            tracing::error!(notification_id = %id, "a stored preview lists an id without its outcome");
            return Err(Problem::internal());
        };
        let item = review::reason(&detail.notification, &detail.attempts)
            .map(|reason| BulkItem::of(&detail, reason, ask));
        match apply(state, principal, detail, &ask, &note).await {
            Ok(()) => {
                body.ids.push(id);
                body.items.extend(item);
            }
            Err(problem) if problem.status == StatusCode::CONFLICT.as_u16() => {
                body.refused.push(refuse(problem.detail))
            }
            Err(problem) => return Err(problem),
        }
    }
    Ok(body)
}

/// The preview `hash` names, if this tenant made it and it has not expired.
async fn live_preview(
    state: &AppState,
    principal: &Principal,
    hash: &[u8],
) -> Result<ReviewPreview, Problem> {
    let stored = match state.store.review_preview(&principal.tenant, hash).await {
        Ok(stored) => stored,
        Err(StoreError::NotFound) => {
            return Err(Problem::preview_stale(
                "no such preview: it was never made for this tenant, was confirmed already, or \
                 expired; make the dry run again",
            ));
        }
        Err(err) => return Err(err.into()),
    };
    if stored.expires_at <= OffsetDateTime::now_utc() {
        return Err(Problem::preview_stale(format!(
            "this preview expired at {}; make the dry run again",
            stored
                .expires_at
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default()
        )));
    }
    Ok(stored)
}

/// Each previewed notification's outcome, once the request is the one the preview was made
/// for: the same filter and outcome, or the same list, or only the preview and a note.
fn confirmed_asks(
    state: &AppState,
    request: &BulkRequest,
    stored: &ReviewPreview,
) -> Result<HashMap<NotificationId, Ask>, Problem> {
    let said: Previewed = serde_json::from_value(stored.request.clone()).map_err(|err| {
        tracing::error!(%err, "a stored preview does not hold what it was made for");
        Problem::internal()
    })?;
    Ok(match said {
        Previewed::Filter { ask, filter, max } => {
            if request.items.is_some() {
                return Err(Problem::preview_stale(
                    "the preview was made for a filter, and this sends a list; make the dry run \
                     for the list",
                ));
            }
            if request.outcome.is_some() || request.then.is_some() || request.force.is_some() {
                let now = request.ask()?;
                if now != ask {
                    return Err(Problem::preview_stale(format!(
                        "the outcome changed since the preview: it showed what `{}` would \
                         change, and this asks for `{}`; make the dry run for the new outcome",
                        described(ask),
                        described(now)
                    )));
                }
            }
            if request.filter.is_some() || request.max.is_some() {
                let now = request.max()?;
                if filter != canonical(&request.filter(now + 1, state.review)?) || max != now {
                    return Err(Problem::preview_stale(
                        "the filter changed since the preview; make the dry run for the new filter",
                    ));
                }
            }
            stored.items.iter().map(|(id, _)| (*id, ask)).collect()
        }
        Previewed::List { list } => {
            if let Some(now) = request.list()?
                && now != list
            {
                return Err(Problem::preview_stale(
                    "the list changed since the preview (its items or their outcomes); make the \
                     dry run for the new list",
                ));
            }
            if request.items.is_none()
                && (request.outcome.is_some()
                    || request.then.is_some()
                    || request.force.is_some()
                    || request.filter.is_some()
                    || request.max.is_some())
            {
                return Err(Problem::preview_stale(
                    "the preview was made for a list, each item with its own outcome; confirm \
                     it with its preview and your note alone",
                ));
            }
            list.into_iter().collect()
        }
    })
}

/// An outcome as the API spells it: `not_delivered + close`, `delivered (forced)`.
pub(super) fn described(ask: Ask) -> String {
    format!(
        "{}{}{}",
        ask.outcome.as_str(),
        ask.then
            .map(|t| format!(" + {}", t.as_str()))
            .unwrap_or_default(),
        if ask.force { " (forced)" } else { "" }
    )
}
