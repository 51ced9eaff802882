//! FCM's token endpoint and `messages:send` as the fake speaks them, and everything it
//! remembers: the access tokens it issued, the ledger, the pending faults, the last send.
//!
//! All of it sits behind one `Mutex`, so that counting a send, checking its token, drawing its
//! fault and processing it is one atomic step. No lock is held across an `.await`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use herald_provider::fake::{FaultAnswers, Kill};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::{Delivery, FakeConfig, Fault, Faults, Ledger};
use crate::MAX_PAYLOAD_BYTES;
use crate::token::unix_now;
use crate::wire::{
    ASSERTION_LIFETIME_SECS, Assertion, JWT_BEARER_GRANT, KEY_DATA, MESSAGING_SCOPE, OAuthError,
    SEND_ROUTE, Sent, TOKEN_PATH, Token,
};

// The documented answers, shared with the tests through `fixtures/fcm/`.
const UNAUTHENTICATED: &str =
    include_str!("../../../../fixtures/fcm/errors/unauthenticated.401.json");
const PERMISSION_DENIED: &str =
    include_str!("../../../../fixtures/fcm/errors/permission-denied.403.json");
const INVALID_ARGUMENT: &str =
    include_str!("../../../../fixtures/fcm/errors/invalid-argument.400.json");
const UNREGISTERED: &str = include_str!("../../../../fixtures/fcm/errors/unregistered.404.json");
const INVALID_GRANT: &str = include_str!("../../../../fixtures/fcm/token/invalid-grant.400.json");
const FAULT_ANSWERS: FaultAnswers = FaultAnswers {
    rate_limited: include_str!("../../../../fixtures/fcm/errors/quota-exceeded.429.json"),
    server_error: include_str!("../../../../fixtures/fcm/errors/internal.500.json"),
};

/// The `aud` Google's docs name for every access token request.
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The `scope` Google also takes for a send: every Google Cloud API.
const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// How far ahead of the fake's clock an assertion's `iat` may be, as Google allows for skew.
const LEEWAY_SECS: u64 = 60;

/// What one `messages:send` carried, minus the token: tests check the request's shape here.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// The `Authorization` scheme (`Bearer`); the token itself is checked, never kept.
    pub auth_scheme: Option<String>,
    pub user_agent: Option<String>,
    pub content_type: Option<String>,
    /// The project of the path.
    pub project: String,
    /// The JSON body, or `Value::Null` if it was not JSON.
    pub body: Value,
}

/// The fake vendor: fixed settings, and the state behind its lock, whose accessors are the
/// vendor's own.
pub struct Vendor {
    config: FakeConfig,
    /// The public key assertions are verified with; `None` if the configured one is not an
    /// RSA public key in PEM, and then every assertion is refused.
    verifier: Option<DecodingKey>,
    /// `http://127.0.0.1:<port>`, set once the server is bound: the token endpoint's URL, and
    /// so the `aud` it expects, derive from it.
    base_url: OnceLock<String>,
    state: Mutex<VendorState>,
}

#[derive(Default)]
struct VendorState {
    ledger: Ledger,
    faults: Faults,
    last_request: Option<ReceivedRequest>,
    /// Every access token issued, with the moment it stops being accepted.
    tokens: HashMap<String, Instant>,
    /// Assertions accepted, each for one token.
    exchanges: u64,
    last_assertion: Option<String>,
    /// The key is refused: every exchange answers `invalid_grant`.
    revoked: bool,
}

impl Vendor {
    pub(super) fn new(config: FakeConfig) -> Vendor {
        Vendor {
            verifier: DecodingKey::from_rsa_pem(config.public_key.as_bytes()).ok(),
            config,
            base_url: OnceLock::new(),
            state: Mutex::new(VendorState::default()),
        }
    }

    pub(super) fn bound_at(&self, base_url: &str) {
        let _ = self.base_url.set(base_url.to_owned());
    }

    fn lock(&self) -> MutexGuard<'_, VendorState> {
        // No code panics while holding the lock, so a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The token endpoint's URL: the `token_uri` of a key for this fake, and the `aud` it
    /// expects.
    pub fn token_uri(&self) -> String {
        let base = self.base_url.get().map_or("", String::as_str);
        format!("{base}{TOKEN_PATH}")
    }

    /// A service account key file (JSON) whose `token_uri` is this fake's: a route's
    /// `service_account`.
    pub fn service_account(&self) -> String {
        self.config.service_account(&self.token_uri())
    }

    /// The project it serves.
    pub fn project_id(&self) -> &str {
        &self.config.project_id
    }

    /// A snapshot of the ledger.
    pub fn ledger(&self) -> Ledger {
        self.lock().ledger.clone()
    }

    /// Replaces the pending faults of sends.
    pub fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// The last `messages:send` received, whatever became of it.
    pub fn last_request(&self) -> Option<ReceivedRequest> {
        self.lock().last_request.clone()
    }

    /// How many assertions the token endpoint accepted, one token each.
    pub fn exchanges(&self) -> u64 {
        self.lock().exchanges
    }

    /// The last assertion the token endpoint accepted, as it came.
    pub fn last_assertion(&self) -> Option<String> {
        self.lock().last_assertion.clone()
    }

    /// Every access token issued so far is refused from now on (401 `UNAUTHENTICATED`), as
    /// when they expire or are revoked; tokens issued later are accepted.
    pub fn expire_tokens(&self) {
        let now = Instant::now();
        for expiry in self.lock().tokens.values_mut() {
            *expiry = now;
        }
    }

    /// The service account's key is refused from now on: every exchange answers
    /// `invalid_grant`, as for a key deleted in the console.
    pub fn revoke_key(&self) {
        self.lock().revoked = true;
    }

    /// Whether `assertion` is one Google would exchange: `Err` is the OAuth `error` and its
    /// `error_description`.
    fn check(&self, assertion: &str) -> Result<(), (&'static str, &'static str)> {
        self.verify(assertion).map_err(|why| match why {
            NO_SCOPE => ("invalid_scope", why),
            _ => ("invalid_grant", why),
        })
    }

    /// The assertion's signature, header and claims; `Err` is the `error_description`.
    fn verify(&self, assertion: &str) -> Result<(), &'static str> {
        const BAD_SIGNATURE: &str = "Invalid JWT Signature.";
        let verifier = self.verifier.as_ref().ok_or(BAD_SIGNATURE)?;
        let header = jsonwebtoken::decode_header(assertion).map_err(|_| BAD_SIGNATURE)?;
        if header.alg != Algorithm::RS256
            || header.kid.as_deref() != Some(self.config.private_key_id.as_str())
        {
            return Err(BAD_SIGNATURE);
        }
        let mut validation = Validation::new(Algorithm::RS256);
        // The audience Google's docs say it "always" is, as google-auth sends it whatever the
        // key's token_uri, or the token endpoint's own URL, as golang.org/x/oauth2 and herald
        // send it (the two are one for Google's keys).
        validation.set_audience(&[self.token_uri().as_str(), GOOGLE_TOKEN_URI]);
        validation.set_issuer(&[&self.config.client_email]);
        validation.set_required_spec_claims(&["exp", "iat", "aud", "iss"]);
        validation.leeway = LEEWAY_SECS;
        let claims = jsonwebtoken::decode::<Assertion>(assertion, verifier, &validation)
            .map_err(|err| match err.kind() {
                ErrorKind::ExpiredSignature | ErrorKind::ImmatureSignature => SHORT_LIVED,
                ErrorKind::InvalidAudience => "Invalid JWT: Failed audience check.",
                ErrorKind::InvalidIssuer => "Invalid JWT: Failed issuer check.",
                _ => BAD_SIGNATURE,
            })?
            .claims;
        let now = unix_now();
        if claims.exp <= claims.iat
            || claims.exp - claims.iat > ASSERTION_LIFETIME_SECS
            || claims.iat > now + LEEWAY_SECS
        {
            return Err(SHORT_LIVED);
        }
        let scopes: Vec<&str> = claims.scope.split_whitespace().collect();
        if !scopes.contains(&MESSAGING_SCOPE) && !scopes.contains(&CLOUD_PLATFORM_SCOPE) {
            return Err(NO_SCOPE);
        }
        Ok(())
    }

    /// Whether `headers` carry a token this fake issued and still accepts.
    fn authorized(&self, state: &VendorState, headers: &HeaderMap) -> bool {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        token
            .and_then(|token| state.tokens.get(token))
            .is_some_and(|expiry| Instant::now() < *expiry)
    }

    /// A send proper, under the lock: a delivery, or FCM's documented refusal.
    fn deliver(&self, state: &mut VendorState, payload: Option<Value>, project: &str) -> Response {
        let Some(message) = payload.as_ref().and_then(|body| body.get("message")) else {
            return fixture(StatusCode::BAD_REQUEST, INVALID_ARGUMENT);
        };
        let Some(to) = message
            .get("token")
            .and_then(Value::as_str)
            .filter(|to| !to.is_empty())
        else {
            return fixture(StatusCode::BAD_REQUEST, INVALID_ARGUMENT);
        };
        let data = message.get("data").cloned().unwrap_or_default();
        let strings_only = match &data {
            Value::Null => true,
            Value::Object(fields) => fields.values().all(Value::is_string),
            _ => false,
        };
        let size = |value: Option<&Value>| value.map_or(0, |value| value.to_string().len());
        if !strings_only
            || size(message.get("notification")) + size(Some(&data)) > MAX_PAYLOAD_BYTES
        {
            return fixture(StatusCode::BAD_REQUEST, INVALID_ARGUMENT);
        }
        if self.config.unregistered.iter().any(|gone| gone == to) {
            return fixture(StatusCode::NOT_FOUND, UNREGISTERED);
        }
        let name = format!(
            "projects/{project}/messages/0:{}%{}",
            state.ledger.deliveries.len() + 1,
            uuid::Uuid::new_v4().simple()
        );
        let key = data
            .get(KEY_DATA)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        tracing::debug!(%name, %key, "delivered");
        state
            .ledger
            .deliveries
            .push(Delivery::now(name.clone(), key, to.to_owned()));
        Json(Sent { name }).into_response()
    }
}

/// The description of an assertion that asks for no scope a send can use (the fake's words).
const NO_SCOPE: &str = "The assertion asks for no scope that can send messages.";

/// `Invalid JWT: …` for an assertion outside its hour, in Google's words.
const SHORT_LIVED: &str = "Invalid JWT: Token must be a short-lived token (60 minutes) and in a \
                           reasonable timeframe. Check your iat and exp values in the JWT claim.";

pub(super) fn router(vendor: Arc<Vendor>) -> Router {
    Router::new()
        .route(TOKEN_PATH, post(token))
        .route(SEND_ROUTE, post(send))
        .with_state(vendor)
}

async fn token(
    State(vendor): State<Arc<Vendor>>,
    Form(form): Form<BTreeMap<String, String>>,
) -> Response {
    if form.get("grant_type").map(String::as_str) != Some(JWT_BEARER_GRANT) {
        return oauth_error("unsupported_grant_type", "Invalid grant_type");
    }
    let Some(assertion) = form.get("assertion") else {
        return oauth_error("invalid_request", "Missing required parameter: assertion");
    };
    let checked = vendor.check(assertion);
    let mut state = vendor.lock();
    if state.revoked {
        return fixture(StatusCode::BAD_REQUEST, INVALID_GRANT);
    }
    if let Err((error, why)) = checked {
        tracing::info!(error, why, "refused an assertion");
        return oauth_error(error, why);
    }
    let access_token = format!("ya29.fake-{}", uuid::Uuid::new_v4().simple());
    let lifetime = vendor.config.token_lifetime;
    state
        .tokens
        .insert(access_token.clone(), Instant::now() + lifetime);
    state.exchanges += 1;
    state.last_assertion = Some(assertion.clone());
    Json(Token {
        access_token,
        expires_in: lifetime.as_secs(),
        token_type: "Bearer".to_owned(),
    })
    .into_response()
}

async fn send(
    State(vendor): State<Arc<Vendor>>,
    Path(project): Path<String>,
    Extension(kill): Extension<Kill>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header_text = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let payload = serde_json::from_slice::<Value>(&body).ok();
    let (fault, processed) = {
        let mut state = vendor.lock();
        state.ledger.requests += 1;
        state.last_request = Some(ReceivedRequest {
            auth_scheme: header_text(header::AUTHORIZATION)
                .and_then(|value| value.split_whitespace().next().map(str::to_owned)),
            user_agent: header_text(header::USER_AGENT),
            content_type: header_text(header::CONTENT_TYPE),
            project: project.clone(),
            body: payload.clone().unwrap_or(Value::Null),
        });
        if !vendor.authorized(&state, &headers) {
            return fixture(StatusCode::UNAUTHORIZED, UNAUTHENTICATED);
        }
        if project != vendor.config.project_id {
            return fixture(StatusCode::FORBIDDEN, PERMISSION_DENIED);
        }
        let fault = state.faults.draw();
        let processed = (!fault.is_some_and(Fault::is_before_processing))
            .then(|| vendor.deliver(&mut state, payload, &project));
        (fault, processed)
    };
    FAULT_ANSWERS
        .answer(fault, processed, kill, vendor.config.delay)
        .await
}

fn oauth_error(error: &str, description: &str) -> Response {
    let refusal = OAuthError {
        error: error.to_owned(),
        error_description: Some(description.to_owned()),
    };
    (StatusCode::BAD_REQUEST, Json(refusal)).into_response()
}

fn fixture(status: StatusCode, body: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The fixtures must parse as the adapter reads them.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::error_code;

    #[test]
    fn the_documented_errors_name_their_codes() {
        assert_eq!(error_code(UNREGISTERED).as_deref(), Some("UNREGISTERED"));
        assert_eq!(
            error_code(INVALID_ARGUMENT).as_deref(),
            Some("INVALID_ARGUMENT")
        );
        assert_eq!(
            error_code(FAULT_ANSWERS.rate_limited).as_deref(),
            Some("QUOTA_EXCEEDED")
        );
        assert_eq!(
            error_code(FAULT_ANSWERS.server_error).as_deref(),
            Some("INTERNAL")
        );
        assert_eq!(
            error_code(UNAUTHENTICATED).as_deref(),
            Some("UNAUTHENTICATED")
        );
        let refusal: OAuthError = serde_json::from_str(INVALID_GRANT).unwrap();
        assert_eq!(refusal.error, "invalid_grant");
        let documented: Token = serde_json::from_str(include_str!(
            "../../../../fixtures/fcm/token/token.response.json"
        ))
        .unwrap();
        assert_eq!(documented.token_type, "Bearer");
        assert_eq!(documented.expires_in, 3600);
    }
}
