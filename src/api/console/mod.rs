//! The web console at `/console`: the review queue, a notification's timeline with its
//! evidence, resolve forms, and bulk resolution with its dry run shown first. Server-rendered
//! HTML with no external assets and no script: it reads without JavaScript.
//!
//! Sign-in takes a token with the `review` scope and sets a session cookie (`HttpOnly`,
//! `SameSite=Strict`, `Secure` behind HTTPS); every form carries the session's CSRF token, and
//! a post without it changes nothing. Sessions live in this process's memory: behind several
//! herald processes, route a person to one (or sign in again). Everything shown is escaped by
//! the templates: vendor evidence is untrusted text.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::header::{COOKIE, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use minijinja::{Environment, context};
use serde::Deserialize;
use serde_json::Value;
use subtle::ConstantTimeEq;
use time::OffsetDateTime;

use super::AppState;
use super::auth::{Principal, Scope};
use super::notifications::{NotificationBody, parse_id};
use super::review::{self, Filter, ReviewItem};
use crate::review::{Ask, Outcome, Reason, Then};

const COOKIE_NAME: &str = "herald_console";
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
}

/// Signed-in people, by session id.
#[derive(Default)]
pub struct Sessions(Mutex<HashMap<String, Session>>);

#[derive(Clone)]
struct Session {
    principal: Principal,
    csrf: String,
    expires: Instant,
}

impl Sessions {
    fn open(&self, principal: Principal) -> (String, Session) {
        let id = random_token();
        let session = Session {
            principal,
            csrf: random_token(),
            expires: Instant::now() + SESSION_LIFETIME,
        };
        let mut sessions = self.0.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, s| s.expires > Instant::now());
        sessions.insert(id.clone(), session.clone());
        (id, session)
    }

    fn get(&self, headers: &HeaderMap) -> Option<(String, Session)> {
        let id = cookie(headers)?;
        let sessions = self.0.lock().unwrap_or_else(|e| e.into_inner());
        sessions
            .get(&id)
            .filter(|s| s.expires > Instant::now())
            .map(|s| (id, s.clone()))
    }

    fn close(&self, id: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
    }
}

fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    hex::encode(bytes)
}

fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.to_owned())
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

/// A form post must carry this session's CSRF token.
fn forged(session: &Session, presented: &str) -> bool {
    !bool::from(session.csrf.as_bytes().ct_eq(presented.as_bytes()))
}

fn refused_as_forged() -> Response {
    (
        StatusCode::FORBIDDEN,
        "this form is stale or did not come from the console: reload the page and try again",
    )
        .into_response()
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

async fn login_form(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if state.sessions.get(&headers).is_some() {
        return redirect("/console");
    }
    page("login.html", context! { title => "Sign in" })
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let presented = form.token.trim();
    let principal = (!presented.is_empty())
        .then(|| state.tokens.authenticate(presented))
        .flatten()
        .cloned();
    let Some(principal) = principal.filter(|p| p.has(Scope::Review)) else {
        return page(
            "login.html",
            context! { title => "Sign in", error => "That token is not valid for review." },
        )
        .map_status(StatusCode::UNAUTHORIZED);
    };
    let (id, _) = state.sessions.open(principal);
    let secure = headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
    let cookie = format!(
        "{COOKIE_NAME}={id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}{}",
        SESSION_LIFETIME.as_secs(),
        if secure { "; Secure" } else { "" }
    );
    let mut response = redirect("/console");
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    response
}

#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    let Some((id, session)) = state.sessions.get(&headers) else {
        return redirect("/console/login");
    };
    if forged(&session, &form.csrf) {
        return refused_as_forged();
    }
    state.sessions.close(&id);
    let mut response = redirect("/console/login");
    response.headers_mut().insert(
        SET_COOKIE,
        HeaderValue::from_static(
            "herald_console=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0",
        ),
    );
    response
}

/// A metric's value from `/metrics`' own text (summed over its series), for the front page.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[derive(Deserialize)]
struct QueueQuery {
    reason: Option<String>,
    route: Option<String>,
    done: Option<String>,
}

async fn queue(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<QueueQuery>,
) -> Response {
    let Some((_, session)) = state.sessions.get(&headers) else {
        return redirect("/console/login");
    };
    let tenant = &session.principal.tenant;
    let now = OffsetDateTime::now_utc();
    let filter = Filter {
        route: query.route.clone().filter(|r| !r.is_empty()),
        reason: query.reason.clone().filter(|r| !r.is_empty()),
        ..Filter::default()
    };
    let filter = match filter.parse(QUEUE_PAGE, None) {
        Ok(f) => f,
        Err(e) => {
            return failure(
                StatusCode::BAD_REQUEST,
                format!("{}: {}", e.field, e.message),
            );
        }
    };
    let all = crate::store::ReviewFilter {
        reasons: Reason::ALL.to_vec(),
        limit: 10_000,
        ..Default::default()
    };
    let (items, everything) = match tokio::try_join!(
        state.store.review(tenant, &filter),
        state.store.review(tenant, &all),
    ) {
        Ok(both) => both,
        Err(err) => return failure(StatusCode::SERVICE_UNAVAILABLE, err.to_string()),
    };
    let rows: Vec<Value> = items
        .into_iter()
        .filter_map(ReviewItem::of)
        .map(|item| {
            let age = now - item.notification.notification.updated_at;
            serde_json::json!({
                "id": item.notification.notification.id.to_string(),
                "reason": item.reason,
                "route": item.notification.notification.route,
                "to": item.notification.notification.to,
                "why": item.why,
                "age": human(age),
            })
        })
        .collect();
    // Counts over everything in review: by reason, by route, by age.
    let mut by_reason: HashMap<&str, u64> = HashMap::new();
    let mut by_route: HashMap<String, u64> = HashMap::new();
    let mut by_age = [0u64; 3];
    for detail in &everything {
        let Some(reason) = crate::review::reason(&detail.notification, &detail.attempts) else {
            continue;
        };
        *by_reason.entry(reason.as_str()).or_default() += 1;
        *by_route
            .entry(detail.notification.route.clone())
            .or_default() += 1;
        let hours = (now - detail.notification.updated_at).whole_hours();
        by_age[if hours < 1 {
            0
        } else if hours < 24 {
            1
        } else {
            2
        }] += 1;
    }
    let mut by_route: Vec<(String, u64)> = by_route.into_iter().collect();
    by_route.sort();
    let text = state.metrics.render();
    let accepted = metric(&text, "herald_notifications_accepted_total");
    let replays = metric(&text, "herald_idempotency_replays_total");
    let hit_rate = if accepted + replays > 0.0 {
        format!("{:.1} %", 100.0 * replays / (accepted + replays))
    } else {
        "—".to_owned()
    };
    let queue_age = match state.store.queue_stats(now).await {
        Ok(stats) => stats
            .oldest_due
            .map(|d| human(now - d))
            .unwrap_or_else(|| "none due".to_owned()),
        Err(_) => "?".to_owned(),
    };
    page(
        "queue.html",
        context! {
            title => "Review queue",
            csrf => session.csrf,
            principal => session.principal.name,
            items => rows,
            reasons => Reason::ALL.iter().map(|r| (r.as_str(), by_reason.get(r.as_str()).copied().unwrap_or(0))).collect::<Vec<_>>(),
            routes => by_route,
            ages => by_age,
            hit_rate => hit_rate,
            queue_age => queue_age,
            outbox_backlog => metric(&text, "herald_outbox_backlog"),
            reason => query.reason,
            route => query.route,
            done => query.done,
        },
    )
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.to_string())
}

fn human(d: time::Duration) -> String {
    let s = d.whole_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

async fn notification(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let Some((_, session)) = state.sessions.get(&headers) else {
        return redirect("/console/login");
    };
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
    let reason = crate::review::reason(&detail.notification, &detail.attempts);
    let why = reason.map(|r| crate::review::why(r, &detail.attempts));
    let body: NotificationBody = detail.into();
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
    page(
        "notification.html",
        context! {
            title => format!("Notification {}", n.id),
            csrf => session.csrf,
            principal => session.principal.name,
            n => serde_json::to_value(n).unwrap_or_default(),
            attempts => attempts,
            receipts => serde_json::to_value(&body.receipts).unwrap_or_default(),
            resolutions => body.review.as_ref().map(|r| serde_json::to_value(&r.resolutions).unwrap_or_default()),
            reason => reason.map(|r| r.as_str()),
            why => why,
            error => error,
        },
    )
}

#[derive(Deserialize)]
struct ResolveForm {
    #[serde(default)]
    csrf: String,
    /// `delivered`, `not_delivered+resend`, `not_delivered+close` or `acknowledged`.
    action: String,
    #[serde(default)]
    note: String,
    force: Option<String>,
}

fn ask_of(action: &str, note: &str, force: bool) -> Result<Ask, String> {
    let (outcome, then) = match action {
        "delivered" => (Outcome::Delivered, None),
        "acknowledged" => (Outcome::Acknowledged, None),
        "not_delivered+resend" => (Outcome::NotDelivered, Some(Then::Resend)),
        "not_delivered+close" => (Outcome::NotDelivered, Some(Then::Close)),
        other => return Err(format!("unknown action `{other}`")),
    };
    Ask::new(outcome, then, note, force).map_err(|e| format!("{}: {}", e.field, e.message))
}

async fn resolve(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<ResolveForm>,
) -> Response {
    let Some((_, session)) = state.sessions.get(&headers) else {
        return redirect("/console/login");
    };
    if forged(&session, &form.csrf) {
        return refused_as_forged();
    }
    let ask = match ask_of(&form.action, &form.note, form.force.is_some()) {
        Ok(ask) => ask,
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
    match review::apply(&state, &session.principal, detail, &ask).await {
        Ok(()) => redirect(&format!("/console?done={nid}")),
        Err(problem) => show(&state, &session, &id, Some(problem.detail.clone()))
            .await
            .map_status(StatusCode::CONFLICT),
    }
}

#[derive(Deserialize, Default)]
struct BulkForm {
    #[serde(default)]
    csrf: String,
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
    /// Present on the confirmation, after the dry run was shown.
    confirm: Option<String>,
}

async fn bulk_form(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<QueueQuery>,
) -> Response {
    let Some((_, session)) = state.sessions.get(&headers) else {
        return redirect("/console/login");
    };
    page(
        "bulk.html",
        context! {
            title => "Resolve many",
            csrf => session.csrf,
            principal => session.principal.name,
            form => context! { reason => query.reason, route => query.route },
        },
    )
}

/// The first post shows what would change (a dry run); the confirmation applies exactly that
/// filter again, and shows what changed.
async fn bulk(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<BulkForm>,
) -> Response {
    let Some((_, session)) = state.sessions.get(&headers) else {
        return redirect("/console/login");
    };
    if forged(&session, &form.csrf) {
        return refused_as_forged();
    }
    let confirm = form.confirm.is_some();
    let rerender = |error: Option<String>, ids: Vec<String>, refused: Vec<(String, String)>| {
        page(
            "bulk.html",
            context! {
                title => "Resolve many",
                csrf => session.csrf.clone(),
                principal => session.principal.name.clone(),
                form => context! {
                    reason => form.reason.clone(), route => form.route.clone(),
                    since => form.since.clone(), until => form.until.clone(),
                    action => form.action.clone(), note => form.note.clone(),
                    force => form.force.is_some(),
                },
                error => error,
                dry_run => !confirm,
                ids => ids,
                refused => refused,
                shown => true,
            },
        )
    };
    let ask = match ask_of(&form.action, &form.note, form.force.is_some()) {
        Ok(ask) => ask,
        Err(e) => return rerender(Some(e), Vec::new(), Vec::new()),
    };
    let filter = Filter {
        route: Some(form.route.clone()).filter(|r| !r.is_empty()),
        reason: Some(form.reason.clone()).filter(|r| !r.is_empty()),
        since: Some(form.since.clone()).filter(|r| !r.is_empty()),
        until: Some(form.until.clone()).filter(|r| !r.is_empty()),
    };
    let filter = match filter.parse(review::MAX_BULK, None) {
        Ok(f) => f,
        Err(e) => {
            return rerender(
                Some(format!("{}: {}", e.field, e.message)),
                Vec::new(),
                Vec::new(),
            );
        }
    };
    let selected = match state.store.review(&session.principal.tenant, &filter).await {
        Ok(s) => s,
        Err(err) => return failure(StatusCode::SERVICE_UNAVAILABLE, err.to_string()),
    };
    let (mut ids, mut refused) = (Vec::new(), Vec::new());
    for detail in selected {
        let id = detail.notification.id.to_string();
        let outcome = if confirm {
            review::apply(&state, &session.principal, detail, &ask).await
        } else {
            review::change_for(&state, &detail, &ask).map(|_| ())
        };
        match outcome {
            Ok(()) => ids.push(id),
            Err(problem) => refused.push((id, problem.detail.clone())),
        }
    }
    rerender(None, ids, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_is_summed_over_its_series_and_not_confused_with_a_longer_name() {
        let text = "# TYPE x counter\nherald_outbox_backlog{sink=\"a\"} 3\nherald_outbox_backlog{sink=\"b\"} 4\nherald_outbox_backlog_total 100\n";
        assert_eq!(metric(text, "herald_outbox_backlog"), 7.0);
        assert_eq!(metric(text, "herald_missing"), 0.0);
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            COOKIE,
            HeaderValue::from_static("a=1; herald_console=abc; b=2"),
        );
        assert_eq!(cookie(&headers).as_deref(), Some("abc"));
    }

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
