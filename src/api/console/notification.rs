//! One notification's page: its timeline and evidence, and the form that resolves it.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::context;
use serde::Deserialize;
use serde_json::Value;

use super::session::{Session, SignedForm, SignedIn};
use super::{ACTIONS, MapStatus, failure, outcome_of, page, reason_label, redirect, rfc3339};
use crate::api::AppState;
use crate::api::notifications::{NotificationBody, parse_id};
use crate::api::review;
use crate::review::{Ask, Reason};

pub(super) async fn notification(
    State(state): State<AppState>,
    SignedIn { session, .. }: SignedIn,
    Path(id): Path<String>,
) -> Response {
    show(&state, &session, &id, None).await
}

/// A notification's page, with `error` above its form when a resolution was refused.
async fn show(state: &AppState, session: &Session, id: &str, error: Option<String>) -> Response {
    let Ok(id) = parse_id(id) else {
        return failure(StatusCode::NOT_FOUND, "no such notification");
    };
    let detail = match state
        .store
        .notification(&session.principal.tenant, id)
        .await
    {
        Ok(d) => d,
        Err(crate::store::StoreError::NotFound) => {
            return failure(StatusCode::NOT_FOUND, "no such notification");
        }
        Err(err) => return failure(StatusCode::SERVICE_UNAVAILABLE, err.to_string()),
    };
    let body = NotificationBody::of(detail, state.review);
    let attempts: Vec<Value> = body
        .attempts
        .iter()
        .map(|a| {
            serde_json::json!({
                "n": a.n, "route": a.route, "key": a.provider_idempotency_key,
                "failover": a.evidence["failover"]["to"],
                "started_at": rfc3339(a.started_at), "finished_at": a.finished_at.map(rfc3339),
                "result": a.result, "permanent": a.permanent, "provider_ref": a.provider_ref,
                "settled_by": a.settled_by,
                "evidence": serde_json::to_string_pretty(&a.evidence).unwrap_or_default(),
            })
        })
        .collect();
    let n = &body.notification;
    let reason = body.review.as_ref().and_then(|r| r.reason);
    // What a person may do, by why it waits: words, and no choice made for them.
    let actions: Vec<(&str, &str)> = match reason {
        Some(Reason::Unknown) => vec![
            ACTIONS[0],
            ACTIONS[1],
            ("not_delivered+close", "Not delivered: close it as failed"),
        ],
        Some(Reason::DuplicatePossible | Reason::Contradicted) => vec![ACTIONS[3]],
        Some(Reason::MayHaveSent) => vec![
            ACTIONS[0],
            (
                "not_delivered+close",
                "Not delivered: close it, it stays cancelled",
            ),
        ],
        Some(Reason::Exhausted | Reason::Rejected) => vec![
            ("not_delivered+resend", "Send it again"),
            ("not_delivered+close", "Close it: it no longer matters"),
        ],
        None => Vec::new(),
    };
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let payload = n.content.payload.as_ref().map(pretty);
    let blocks = n.content.blocks.as_ref().map(pretty);
    let data = n
        .content
        .data
        .as_ref()
        .map(|d| serde_json::to_string_pretty(d).unwrap_or_default());
    page(
        "notification.html",
        context! {
            title => format!("Notification {}", n.id),
            csrf => session.csrf,
            principal => session.principal.name,
            n => serde_json::to_value(n).unwrap_or_default(),
            payload => payload,
            blocks => blocks,
            data => data,
            failure_reason => body.failure_reason,
            settled_by => body.settled_by,
            attempts => attempts,
            receipts => serde_json::to_value(&body.receipts).unwrap_or_default(),
            resolutions => body.review.as_ref().map(|r| serde_json::to_value(&r.resolutions).unwrap_or_default()),
            reason => reason.map(|r| r.as_str()),
            label => reason.map(reason_label),
            why => body.review.as_ref().and_then(|r| r.why.clone()),
            actions => actions,
            error => error,
        },
    )
}

#[derive(Deserialize)]
pub(super) struct ResolveForm {
    /// `delivered`, `not_delivered+resend`, `not_delivered+close` or `acknowledged`.
    #[serde(default)]
    action: String,
    #[serde(default)]
    note: String,
    force: Option<String>,
}

pub(super) async fn resolve(
    State(state): State<AppState>,
    Path(id): Path<String>,
    SignedForm { session, form, .. }: SignedForm<ResolveForm>,
) -> Response {
    let asked = outcome_of(&form.action).and_then(|(outcome, then)| {
        let note = crate::review::parse_note(&form.note);
        let ask = Ask::new(outcome, then, form.force.is_some());
        match (ask, note) {
            (Ok(ask), Ok(note)) => Ok((ask, note)),
            (Err(e), _) | (_, Err(e)) => Err(format!("{}: {}", e.field, e.message)),
        }
    });
    let (ask, note) = match asked {
        Ok(asked) => asked,
        Err(e) => {
            return show(&state, &session, &id, Some(e))
                .await
                .map_status(StatusCode::UNPROCESSABLE_ENTITY);
        }
    };
    let Ok(nid) = parse_id(&id) else {
        return failure(StatusCode::NOT_FOUND, "no such notification");
    };
    let detail = match state
        .store
        .notification(&session.principal.tenant, nid)
        .await
    {
        Ok(d) => d,
        Err(err) => return failure(StatusCode::NOT_FOUND, err.to_string()),
    };
    match review::apply(&state, &session.principal, detail, &ask, &note).await {
        Ok(()) => redirect(&format!("/console?done={nid}")),
        Err(problem) => show(&state, &session, &id, Some(problem.detail.clone()))
            .await
            .map_status(StatusCode::CONFLICT),
    }
}
