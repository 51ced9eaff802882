//! The web console at `/console`: the review queue, a notification's timeline with its
//! evidence, resolve forms, bulk resolution with its dry run shown first, and the routes with
//! an operator's pause and resume (for a token that operates the route). Server-rendered HTML
//! with no external assets and no script: it reads without JavaScript.
//!
//! Sign-in takes a token with the `review` scope and sets a session cookie (`HttpOnly`,
//! `SameSite=Strict`, `Secure` behind HTTPS); every form carries the session's CSRF token, and
//! a post without it changes nothing. The sign-in form carries one too, bound to a cookie of
//! its own, so that no other site can sign a person in as someone else. Every page forbids
//! framing, scripts and caching by its headers. Sessions live in this process's memory: behind
//! several herald processes, route a person to one (or sign in again). Everything shown is escaped by
//! the templates: vendor evidence is untrusted text.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Form, FromRequestParts, Path, Query, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, COOKIE, LOCATION, REFERRER_POLICY, SET_COOKIE,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use minijinja::{Environment, context};
use serde::Deserialize;
use serde_json::Value;
use subtle::ConstantTimeEq;
use time::OffsetDateTime;

use super::AppState;
use super::auth::Principal;
use super::notifications::{NotificationBody, parse_id};
use super::review::{self, Filter, ReviewItem};
use crate::domain::Scope;
use crate::review::{Ask, Outcome, Reason, Then};

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
        let id = cookie(headers, COOKIE_NAME)?;
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

/// A console request's signed-in person: a handler that takes one runs only for a live
/// session; anyone else is sent to the login page.
struct SignedIn {
    id: String,
    session: Session,
}

impl FromRequestParts<AppState> for SignedIn {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let (id, session) = state
            .sessions
            .get(&parts.headers)
            .ok_or_else(|| redirect("/console/login"))?;
        Ok(SignedIn { id, session })
    }
}

/// A form a signed-in person posted: the handler runs only for a live session whose CSRF token
/// the form carries (`csrf`), and gets the rest of the form as `F`. A post without it, or with
/// another session's, is refused before any of the form is read; one without a session is sent
/// to the login page.
struct SignedForm<F> {
    id: String,
    session: Session,
    form: F,
}

impl<F: serde::de::DeserializeOwned> axum::extract::FromRequest<AppState> for SignedForm<F> {
    type Rejection = Response;

    async fn from_request(
        request: axum::extract::Request,
        state: &AppState,
    ) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let SignedIn { id, session } = SignedIn::from_request_parts(&mut parts, state).await?;
        let request = axum::extract::Request::from_parts(parts, body);
        let body = bytes::Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let csrf = url::form_urlencoded::parse(&body)
            .find(|(name, _)| name == "csrf")
            .map(|(_, value)| value.into_owned())
            .unwrap_or_default();
        if !same_token(&session.csrf, &csrf) {
            return Err(refused_as_forged());
        }
        let form = serde_urlencoded::from_bytes(&body).map_err(|err| {
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("this form cannot be read: {err}"),
            )
                .into_response()
        })?;
        Ok(SignedForm { id, session, form })
    }
}

fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    hex::encode(bytes)
}

fn cookie(headers: &HeaderMap, wanted: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == wanted)
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

/// Compared in constant time: how long a refusal takes says nothing of the token.
fn same_token(expected: &str, presented: &str) -> bool {
    !expected.is_empty() && bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
}

/// `; Secure` for a cookie set behind HTTPS (as the proxy says), else nothing.
fn secure(headers: &HeaderMap) -> &'static str {
    let https = headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
    if https { "; Secure" } else { "" }
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
    let csrf = random_token();
    let mut response = page("login.html", context! { title => "Sign in", csrf => csrf });
    let cookie = format!(
        "{LOGIN_COOKIE}={csrf}; Path=/console/login; HttpOnly; SameSite=Strict; Max-Age=3600{}",
        secure(&headers)
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    response
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
    #[serde(default)]
    csrf: String,
}

async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    // The form must be the one this herald served to this browser: a cross-site post carries
    // no `SameSite=Strict` cookie, so it cannot sign a person in under an attacker's token.
    let expected = cookie(&headers, LOGIN_COOKIE).unwrap_or_default();
    if !same_token(&expected, &form.csrf) {
        return refused_as_forged();
    }
    let presented = form.token.trim();
    let principal = (!presented.is_empty())
        .then(|| state.tokens.authenticate(presented))
        .flatten()
        .cloned();
    let Some(principal) = principal.filter(|p| p.has(Scope::Review)) else {
        return page(
            "login.html",
            context! {
                title => "Sign in", csrf => form.csrf, error => "That token is not valid for review."
            },
        )
        .map_status(StatusCode::UNAUTHORIZED);
    };
    let (id, _) = state.sessions.open(principal);
    let cookie = format!(
        "{COOKIE_NAME}={id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}{}",
        SESSION_LIFETIME.as_secs(),
        secure(&headers)
    );
    let mut response = redirect("/console");
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    response
}

async fn logout(
    State(state): State<AppState>,
    SignedForm { id, .. }: SignedForm<serde::de::IgnoredAny>,
) -> Response {
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

/// A metric's value from `/metrics`' own text (summed over its series), for the front page;
/// 0 where it has no series.
fn metric(text: &str, name: &str) -> f64 {
    // A fold from +0.0, not `sum()`: the sum of no floats is -0.0, which prints as "-0.0".
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |sum, value| sum + value)
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

#[derive(Deserialize)]
struct QueueQuery {
    reason: Option<String>,
    route: Option<String>,
    since: Option<String>,
    until: Option<String>,
    done: Option<String>,
}

/// The links of the front page's age counters: each lists exactly the items it counts
/// (`since` inclusive, `until` exclusive, on the time an item ended in review, which is its
/// `updated_at` while it waits).
fn age_buckets(now: OffsetDateTime) -> [(Option<OffsetDateTime>, Option<OffsetDateTime>); 3] {
    let hour = now - time::Duration::hours(1);
    let day = now - time::Duration::days(1);
    [
        (Some(hour), None),
        (Some(day), Some(hour)),
        (None, Some(day)),
    ]
}

async fn queue(
    State(state): State<AppState>,
    SignedIn { session, .. }: SignedIn,
    Query(query): Query<QueueQuery>,
) -> Response {
    let tenant = &session.principal.tenant;
    let now = OffsetDateTime::now_utc();
    let given = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
    let filter = Filter {
        route: given(&query.route),
        reason: given(&query.reason),
        since: given(&query.since),
        until: given(&query.until),
    };
    let filter = match filter.parse(QUEUE_PAGE, None, state.review) {
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
        .filter_map(|detail| ReviewItem::of(detail, state.review))
        .map(|item| {
            let n = &item.notification.notification;
            serde_json::json!({
                "id": n.id.to_string(),
                "reason": item.reason,
                "label": reason_label(item.reason),
                "route": n.route,
                "to": n.to,
                "why": item.why,
                "age": crate::review::age_in_words(now - n.updated_at),
            })
        })
        .collect();
    // Counters, each the size of the list its link shows: by reason (`?reason=`), and over
    // what waits for a person (the default view) by route (`?route=`) and by age.
    let buckets = age_buckets(now);
    let mut by_reason: HashMap<Reason, u64> = HashMap::new();
    let mut by_route: HashMap<String, u64> = HashMap::new();
    let mut by_age = [0u64; 3];
    for detail in &everything {
        let n = &detail.notification;
        let Some(reason) = crate::review::reason(n, &detail.attempts) else {
            continue;
        };
        *by_reason.entry(reason).or_default() += 1;
        if !state.review.waits(reason) {
            continue;
        }
        *by_route.entry(n.route.clone()).or_default() += 1;
        if let Some(slot) = buckets.iter().position(|(since, until)| {
            since.is_none_or(|s| n.updated_at >= s) && until.is_none_or(|u| n.updated_at < u)
        }) {
            by_age[slot] += 1;
        }
    }
    let mut by_route: Vec<(String, u64)> = by_route.into_iter().collect();
    by_route.sort();
    let ages: Vec<Value> = ["under an hour", "under a day", "older"]
        .iter()
        .zip(buckets)
        .zip(by_age)
        .map(|((label, (since, until)), count)| {
            let mut link = Vec::new();
            if let Some(since) = since {
                link.push(format!("since={}", rfc3339(since)));
            }
            if let Some(until) = until {
                link.push(format!("until={}", rfc3339(until)));
            }
            serde_json::json!({"label": label, "count": count, "query": link.join("&")})
        })
        .collect();
    let reasons: Vec<Value> = Reason::ALL
        .iter()
        .map(|r| {
            serde_json::json!({
                "reason": r.as_str(),
                "label": reason_label(*r),
                "count": by_reason.get(r).copied().unwrap_or(0),
                "waits": state.review.waits(*r),
            })
        })
        .collect();
    let text = state.metrics.render();
    let accepted = metric(&text, "herald_notifications_accepted_total");
    let replays = metric(&text, "herald_idempotency_replays_total");
    let hit_rate = if accepted + replays > 0.0 {
        format!(
            "{:.1} % ({replays} of {})",
            100.0 * replays / (accepted + replays),
            accepted + replays
        )
    } else {
        "no requests yet".to_owned()
    };
    let queue_age = match state.store.queue_stats(now).await {
        Ok(stats) => stats
            .oldest_due
            .map(|d| crate::review::age_in_words(now - d))
            .unwrap_or_else(|| "none due".to_owned()),
        Err(_) => "?".to_owned(),
    };
    let next = rows
        .iter()
        .find(|row| Some(row["id"].as_str().unwrap_or_default()) != query.done.as_deref())
        .map(|row| row["id"].clone());
    page(
        "queue.html",
        context! {
            title => "Review queue",
            csrf => session.csrf,
            principal => session.principal.name,
            items => rows,
            actions => ACTIONS,
            reasons => reasons,
            choices => Reason::ALL.iter().map(|r| (r.as_str(), reason_label(*r))).collect::<Vec<_>>(),
            routes => by_route,
            ages => ages,
            hit_rate => hit_rate,
            queue_age => queue_age,
            // A count of events: a whole number, whatever the exposition's float says.
            outbox_backlog => metric(&text, "herald_outbox_backlog").round() as i64,
            reason => query.reason,
            route => query.route,
            done => query.done,
            next => next,
        },
    )
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.to_string())
}

async fn notification(
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
struct ResolveForm {
    /// `delivered`, `not_delivered+resend`, `not_delivered+close` or `acknowledged`.
    #[serde(default)]
    action: String,
    #[serde(default)]
    note: String,
    force: Option<String>,
}

async fn resolve(
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

#[derive(Deserialize, Default)]
struct BulkForm {
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

/// The routes, how each stands and who paused it; for a route's operator, the forms that pause
/// and resume it in every process.
async fn routes_page(
    State(state): State<AppState>,
    SignedIn { session, .. }: SignedIn,
    Query(query): Query<RoutesQuery>,
) -> Response {
    routes_shown(&state, &session, query.done, None).await
}

async fn routes_shown(
    state: &AppState,
    session: &Session,
    done: Option<String>,
    error: Option<String>,
) -> Response {
    let routes = match super::routes::listed(state, &session.principal).await {
        Ok(routes) => routes,
        Err(problem) => return failure(status_of(&problem), problem.detail),
    };
    page(
        "routes.html",
        context! {
            title => "Routes",
            csrf => session.csrf,
            principal => session.principal.name,
            routes => routes,
            done => done,
            error => error,
        },
    )
}

#[derive(Deserialize, Default)]
struct RoutesQuery {
    done: Option<String>,
}

#[derive(Deserialize)]
struct PauseForm {
    #[serde(default)]
    note: String,
    to_fallback: Option<String>,
}

async fn pause_route(
    State(state): State<AppState>,
    Path(name): Path<String>,
    SignedForm { session, form, .. }: SignedForm<PauseForm>,
) -> Response {
    let paused = super::routes::pause_route(
        &state,
        &session.principal,
        &name,
        &form.note,
        form.to_fallback.is_some(),
    )
    .await;
    route_changed(&state, &session, &name, "paused", paused).await
}

async fn resume_route(
    State(state): State<AppState>,
    Path(name): Path<String>,
    SignedForm { session, form, .. }: SignedForm<PauseForm>,
) -> Response {
    let resumed = super::routes::resume_route(&state, &session.principal, &name, &form.note).await;
    route_changed(&state, &session, &name, "resumed", resumed).await
}

/// Back to the routes, saying what changed, or the page again with why nothing did.
async fn route_changed<T>(
    state: &AppState,
    session: &Session,
    name: &str,
    what: &str,
    changed: Result<T, super::Problem>,
) -> Response {
    match changed {
        Ok(_) => redirect(&format!(
            "/console/routes?done={}",
            url::form_urlencoded::byte_serialize(format!("{name} {what}").as_bytes())
                .collect::<String>()
        )),
        Err(problem) => {
            let status = status_of(&problem);
            routes_shown(state, session, None, Some(problem.detail))
                .await
                .map_status(status)
        }
    }
}

fn status_of(problem: &super::Problem) -> StatusCode {
    StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

async fn bulk_form(
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
async fn bulk(
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
async fn list(
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
            HeaderValue::from_static("a=1; herald_console_login=xyz; herald_console=abc; b=2"),
        );
        assert_eq!(cookie(&headers, COOKIE_NAME).as_deref(), Some("abc"));
        assert_eq!(cookie(&headers, LOGIN_COOKIE).as_deref(), Some("xyz"));
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
