//! Bulk resolution: a filter or a list of ids, its dry run shown before anything changes.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::context;
use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;

use super::queue::QueueQuery;
use super::session::{SignedForm, SignedIn};
use super::{ACTIONS, MapStatus, action_label, outcome_of, page, reason_label};
use crate::api::AppState;
use crate::api::review::{self, Filter};
use crate::review::Reason;

#[derive(Deserialize, Default)]
pub(super) struct BulkForm {
    #[serde(default)]
    reason: String,
    #[serde(default)]
    route: String,
    #[serde(default)]
    since: String,
    #[serde(default)]
    until: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    note: String,
    force: Option<String>,
    /// The preview shown, which the confirmation applies.
    #[serde(default)]
    preview: String,
    /// Present on the confirmation of a preview.
    confirm: Option<String>,
}

pub(super) async fn bulk_form(
    SignedIn { session, .. }: SignedIn,
    Query(query): Query<QueueQuery>,
) -> Response {
    page(
        "bulk.html",
        context! {
            title => "Resolve many",
            csrf => session.csrf,
            principal => session.principal.name,
            choices => Reason::ALL.iter().map(|r| (r.as_str(), reason_label(*r))).collect::<Vec<_>>(),
            actions => ACTIONS,
            form => context! { reason => query.reason, route => query.route },
        },
    )
}

/// The first post is a dry run: it shows what would change, each item with its recipient, age
/// and why, and keeps a preview of exactly those. The confirmation applies that preview, and
/// is refused if the form now says another outcome or filter than the one previewed.
pub(super) async fn bulk(
    State(state): State<AppState>,
    SignedForm { session, form, .. }: SignedForm<BulkForm>,
) -> Response {
    let confirm = form.confirm.is_some();
    let render = |error: Option<(StatusCode, String)>, body: Option<review::BulkBody>| {
        let now = OffsetDateTime::now_utc();
        let (items, refused) = shown(body.as_ref(), now, |_| action_label(&form.action));
        let (status, error) = error.map_or((StatusCode::OK, None), |(status, e)| (status, Some(e)));
        page(
            "bulk.html",
            context! {
                title => "Resolve many",
                csrf => session.csrf.clone(),
                principal => session.principal.name.clone(),
                choices => Reason::ALL.iter().map(|r| (r.as_str(), reason_label(*r))).collect::<Vec<_>>(),
                actions => ACTIONS,
                form => context! {
                    reason => form.reason.clone(), route => form.route.clone(),
                    since => form.since.clone(), until => form.until.clone(),
                    action => form.action.clone(), note => form.note.clone(),
                    force => form.force.is_some(),
                },
                action_label => action_label(&form.action),
                error => error,
                dry_run => body.as_ref().is_some_and(|b| b.dry_run),
                shown => body.is_some(),
                items => items,
                refused => refused,
                more => body.as_ref().is_some_and(|b| b.more),
                preview => body.as_ref().and_then(|b| b.preview.clone()),
                expires => body.as_ref().and_then(|b| b.expires_at).map(|t| crate::review::age_in_words(t - now)),
            },
        )
        .map_status(status)
    };
    let (outcome, then) = match outcome_of(&form.action) {
        Ok(asked) => asked,
        Err(e) => return render(Some((StatusCode::UNPROCESSABLE_ENTITY, e)), None),
    };
    let optional = |value: &str| Some(value.to_owned()).filter(|v| !v.trim().is_empty());
    let request = review::BulkRequest {
        preview: confirm.then(|| form.preview.clone()),
        items: None,
        filter: Some(Filter {
            route: optional(&form.route),
            reason: optional(&form.reason),
            since: optional(&form.since),
            until: optional(&form.until),
        }),
        outcome: Some(outcome),
        then,
        note: optional(&form.note),
        force: Some(form.force.is_some()),
        dry_run: !confirm,
        max: None,
    };
    match review::run_many(&state, &session.principal, &request).await {
        Ok(body) => render(None, Some(body)),
        Err(problem) => render(Some((problem.status(), problem.detail)), None),
    }
}

/// A bulk answer's items as the pages show them (each with its `resolution` in words, by its
/// id), and its refusals as (id, why).
fn shown(
    body: Option<&review::BulkBody>,
    now: OffsetDateTime,
    resolution: impl Fn(&str) -> &'static str,
) -> (Vec<Value>, Vec<(String, String)>) {
    let items = body
        .iter()
        .flat_map(|b| &b.items)
        .map(|item| {
            let id = item.id.to_string();
            serde_json::json!({
                "to": item.to, "route": item.route, "reason": item.reason,
                "label": reason_label(item.reason), "why": item.why,
                "age": crate::review::age_in_words(now - item.waiting_since),
                "resolution": resolution(&id), "id": id,
            })
        })
        .collect();
    let refused = body
        .iter()
        .flat_map(|b| &b.refused)
        .map(|r| (r.id.to_string(), r.detail.clone()))
        .collect();
    (items, refused)
}

/// The queue's per-item choices (`pick:<id>`, an action each) as one list resolution, for a
/// person who asked the vendor item by item: the first post shows each chosen item with what
/// will be done to it and keeps a preview; the confirmation, which sends the same choices back
/// with the preview and a note, resolves exactly that, and is refused if the choices changed.
pub(super) async fn list(
    State(state): State<AppState>,
    SignedForm { session, form, .. }: SignedForm<Vec<(String, String)>>,
) -> Response {
    let (mut note, mut preview, mut confirm) = (String::new(), String::new(), false);
    let mut picks: Vec<(String, String)> = Vec::new();
    for (name, value) in form {
        match name.as_str() {
            "csrf" => {}
            "note" => note = value,
            "preview" => preview = value,
            "confirm" => confirm = true,
            name => {
                if let Some(id) = name.strip_prefix("pick:")
                    && !value.is_empty()
                {
                    picks.push((id.to_owned(), value));
                }
            }
        }
    }
    let render = |error: Option<(StatusCode, String)>, body: Option<review::BulkBody>| {
        let now = OffsetDateTime::now_utc();
        let (items, refused) = shown(body.as_ref(), now, |id| {
            picks
                .iter()
                .find(|(picked, _)| picked == id)
                .map_or("", |(_, action)| action_label(action))
        });
        let (status, error) = error.map_or((StatusCode::OK, None), |(status, e)| (status, Some(e)));
        page(
            "list.html",
            context! {
                title => "Resolve the chosen",
                csrf => session.csrf.clone(),
                principal => session.principal.name.clone(),
                picks => picks.clone(),
                note => note.clone(),
                error => error,
                dry_run => body.as_ref().is_some_and(|b| b.dry_run),
                shown => body.is_some(),
                items => items,
                refused => refused,
                preview => body.as_ref().and_then(|b| b.preview.clone()),
                expires => body.as_ref().and_then(|b| b.expires_at).map(|t| crate::review::age_in_words(t - now)),
            },
        )
        .map_status(status)
    };
    let mut items = Vec::with_capacity(picks.len());
    for (id, action) in &picks {
        match outcome_of(action) {
            Ok((outcome, then)) => items.push(review::BulkListItem {
                id: id.clone(),
                outcome,
                then,
                force: false,
            }),
            Err(e) => return render(Some((StatusCode::UNPROCESSABLE_ENTITY, e)), None),
        }
    }
    if items.is_empty() {
        return render(
            Some((
                StatusCode::UNPROCESSABLE_ENTITY,
                "choose what happened to at least one item in the queue".to_owned(),
            )),
            None,
        );
    }
    let request = review::BulkRequest {
        preview: confirm.then(|| preview.clone()),
        items: Some(items),
        note: Some(note.clone()).filter(|n| !n.trim().is_empty()),
        dry_run: !confirm,
        ..review::BulkRequest::default()
    };
    match review::run_many(&state, &session.principal, &request).await {
        Ok(body) => render(None, Some(body)),
        Err(problem) => render(Some((problem.status(), problem.detail)), None),
    }
}
