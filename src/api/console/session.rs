//! Sign-in, sign-out and the session: its cookie, the signed-in extractors, the CSRF check.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use axum::extract::{Form, FromRequestParts, State};
use axum::http::header::{COOKIE, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use minijinja::context;
use serde::Deserialize;
use subtle::ConstantTimeEq;

use super::{COOKIE_NAME, LOGIN_COOKIE, MapStatus, SESSION_LIFETIME, page, redirect};
use crate::api::AppState;
use crate::api::auth::Principal;
use crate::domain::Scope;

/// Signed-in people, by session id.
#[derive(Default)]
pub struct Sessions(Mutex<HashMap<String, Session>>);

#[derive(Clone)]
pub(super) struct Session {
    pub(super) principal: Principal,
    pub(super) csrf: String,
    pub(super) expires: Instant,
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
pub(super) struct SignedIn {
    pub(super) id: String,
    pub(super) session: Session,
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
pub(super) struct SignedForm<F> {
    pub(super) id: String,
    pub(super) session: Session,
    pub(super) form: F,
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

pub(super) async fn login_form(State(state): State<AppState>, headers: HeaderMap) -> Response {
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
pub(super) struct LoginForm {
    token: String,
    #[serde(default)]
    csrf: String,
}

pub(super) async fn login(
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

pub(super) async fn logout(
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

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use axum::http::header::COOKIE;

    use super::*;

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
}
