//! The web console at `/console`: the review queue, a notification's timeline with its
//! evidence, resolve forms, bulk resolution with its dry run shown first, and the routes with
//! an operator's pause and resume (for a token that operates the route). Server-rendered HTML
//! with no external assets and no script: it reads without JavaScript.
//!
//! A file a page: `queue` (the front page), `notification`, `bulk`, `routes_page`; `session`
//! holds sign-in, the session and the one extractor that checks every form's CSRF token.
//!
//! Sign-in takes a token with the `review` scope and sets a session cookie (`HttpOnly`,
//! `SameSite=Strict`, `Secure` behind HTTPS); every form carries the session's CSRF token, and
//! a post without it changes nothing. The sign-in form carries one too, bound to a cookie of
//! its own, so that no other site can sign a person in as someone else. Every page forbids
//! framing, scripts and caching by its headers. Sessions live in this process's memory: behind
//! several herald processes, route a person to one (or sign in again). Everything shown is escaped by
//! the templates: vendor evidence is untrusted text.

use std::time::Duration;

use axum::Router;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, LOCATION, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use minijinja::{Environment, context};
use time::OffsetDateTime;

use super::AppState;
use crate::review::{Outcome, Reason, Then};

mod bulk;
mod notification;
mod queue;
mod routes_page;
mod session;

use bulk::{bulk, bulk_form, list};
use notification::{notification, resolve};
use queue::queue;
use routes_page::{pause_route, resume_route, routes_page};
pub use session::Sessions;
use session::{login, login_form, logout};

const COOKIE_NAME: &str = "herald_console";
/// The sign-in form's CSRF token, before there is a session.
const LOGIN_COOKIE: &str = "herald_console_login";
/// A session ends this long after sign-in, whatever is going on.
const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// The queue page shows this many items; the API pages further.
const QUEUE_PAGE: u32 = 200;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console", get(queue))
        .route("/console/login", get(login_form).post(login))
        .route("/console/logout", post(logout))
        .route("/console/notifications/{id}", get(notification))
        .route("/console/notifications/{id}/resolve", post(resolve))
        .route("/console/bulk", get(bulk_form).post(bulk))
        .route("/console/list", post(list))
        .route("/console/routes", get(routes_page))
        .route("/console/routes/{name}/pause", post(pause_route))
        .route("/console/routes/{name}/resume", post(resume_route))
        .layer(axum::middleware::map_response(guarded))
}

/// Pages that load nothing from elsewhere, run no script, are never framed (a signed-in form
/// under another site's page) and are not kept by any cache.
async fn guarded(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (
            CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
        (X_FRAME_OPTIONS, "DENY"),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (CACHE_CONTROL, "no-store"),
        (REFERRER_POLICY, "same-origin"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The templates, autoescaped (their names end in `.html`).
fn templates() -> &'static Environment<'static> {
    static ENV: std::sync::OnceLock<Environment<'static>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        for (name, source) in [
            ("base.html", include_str!("templates/base.html")),
            ("login.html", include_str!("templates/login.html")),
            ("queue.html", include_str!("templates/queue.html")),
            (
                "notification.html",
                include_str!("templates/notification.html"),
            ),
            ("bulk.html", include_str!("templates/bulk.html")),
            ("list.html", include_str!("templates/list.html")),
            ("routes.html", include_str!("templates/routes.html")),
        ] {
            env.add_template(name, source)
                .expect("the console's templates are valid");
        }
        env
    })
}

fn page(name: &str, ctx: minijinja::Value) -> Response {
    match templates().get_template(name).and_then(|t| t.render(ctx)) {
        Ok(html) => Html(html).into_response(),
        Err(err) => {
            tracing::error!(%err, template = name, "cannot render a console page");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the page could not be rendered",
            )
                .into_response()
        }
    }
}

fn redirect(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, to.to_owned())]).into_response()
}

fn failure(status: StatusCode, message: impl Into<String>) -> Response {
    page(
        "base.html",
        context! { title => "Something went wrong", error => message.into(), status => status.as_u16() },
    )
    .into_response()
    .map_status(status)
}

trait MapStatus {
    fn map_status(self, status: StatusCode) -> Response;
}

impl MapStatus for Response {
    fn map_status(mut self, status: StatusCode) -> Response {
        *self.status_mut() = status;
        self
    }
}

/// A review reason in words, for people (the API's token stays in the page's classes).
fn reason_label(reason: Reason) -> &'static str {
    match reason {
        Reason::Unknown => "Unknown outcome",
        Reason::DuplicatePossible => "Possible duplicate",
        Reason::Exhausted => "Dead letter",
        Reason::Rejected => "Refused for good",
        Reason::Contradicted => "Contradicted by later evidence",
        Reason::MayHaveSent => "Cancelled, may have been sent",
    }
}

/// The choices of "what happened", as the forms post them and as people read them.
const ACTIONS: [(&str, &str); 4] = [
    ("delivered", "Delivered: the vendor has it"),
    ("not_delivered+resend", "Not delivered: send it again"),
    ("not_delivered+close", "Not delivered: close it, no resend"),
    ("acknowledged", "Acknowledge the possible duplicate"),
];

fn action_label(action: &str) -> &'static str {
    ACTIONS
        .iter()
        .find(|(value, _)| *value == action)
        .map_or("", |(_, label)| label)
}

/// A form's `action`, as an outcome and what follows it.
fn outcome_of(action: &str) -> Result<(Outcome, Option<Then>), String> {
    match action {
        "delivered" => Ok((Outcome::Delivered, None)),
        "acknowledged" => Ok((Outcome::Acknowledged, None)),
        "not_delivered+resend" => Ok((Outcome::NotDelivered, Some(Then::Resend))),
        "not_delivered+close" => Ok((Outcome::NotDelivered, Some(Then::Close))),
        "" => Err("choose what happened".to_owned()),
        other => Err(format!("unknown action `{other}`")),
    }
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.to_string())
}

fn status_of(problem: &super::Problem) -> StatusCode {
    StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_is_escaped_where_it_is_shown() {
        let html = templates()
            .get_template("base.html")
            .unwrap()
            .render(
                context! { title => "t", error => "<script>alert(1)</script>\"><img onerror=x>" },
            )
            .unwrap();
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"),
            "{html}"
        );
    }
}
