//! Bearer tokens: each maps to a principal (recorded in audits), a tenant and scopes. Secrets
//! are compared as SHA-256 digests in constant time, against every token, so neither the match
//! nor its position leaks through timing.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AppState;
use super::problem::Problem;
use crate::dispatch::pacing::Pace;
use crate::domain::Scope;

/// Who is calling: resolved from the `Authorization` header of every authenticated request.
#[derive(Debug, Clone)]
pub struct Principal {
    pub name: String,
    pub tenant: String,
    scopes: HashSet<Scope>,
    /// The routes it may send through; `None`: every route its tenant may use.
    routes: Option<HashSet<String>>,
    /// Its enqueue rate in this process, shared by every request with the token.
    rate: Option<Arc<Pace>>,
}

impl Principal {
    /// Counts `items` notifications against the token's enqueue rate, before anything is
    /// stored or a key looked up: over it, `429 rate-limited` with when to send the same
    /// request again.
    pub fn admit(&self, items: usize) -> Result<(), Problem> {
        let Some(rate) = &self.rate else {
            return Ok(());
        };
        let items = u32::try_from(items).unwrap_or(u32::MAX);
        rate.try_take_n(Instant::now(), items).map_err(|wait| {
            metrics::counter!("herald_rate_limited_total", "token" => self.name.clone())
                .increment(1);
            let seconds = u32::try_from(wait.as_secs().saturating_add(1)).unwrap_or(u32::MAX);
            Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate-limited",
                "Too many notifications",
                format!(
                    "token `{}` may enqueue at most its rate_limit_per_second (a batch counts \
                     its items); nothing was stored, send the same request again after \
                     Retry-After",
                    self.name
                ),
            )
            .with_retry_after(seconds)
        })
    }

    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.iter().any(|held| held.grants(scope))
    }

    /// Whether it may pause and resume a route: it holds `operate`, its tenant operates the
    /// route, and its token names the route (or every route).
    pub fn operates(&self, name: &str, info: &crate::domain::RouteInfo) -> bool {
        self.has(Scope::Operate)
            && info.operated_by(&self.tenant)
            && self.routes.as_ref().is_none_or(|r| r.contains(name))
    }

    /// Whether its tenant may use a route: the route does not keep to other tenants.
    pub fn tenant_may_use(&self, info: &crate::domain::RouteInfo) -> bool {
        info.admits(&self.tenant)
    }

    /// The routes its token names; `None`: every route its tenant may use.
    pub fn routes(&self) -> Option<&HashSet<String>> {
        self.routes.as_ref()
    }

    /// Whether it may send through `route`: its token names the route (or all), and its tenant
    /// may use it.
    pub fn may_use(&self, route: &str, info: &crate::domain::RouteInfo) -> Result<(), Problem> {
        let granted = self.routes.as_ref().is_none_or(|r| r.contains(route));
        if granted && self.tenant_may_use(info) {
            Ok(())
        } else {
            Err(Problem::new(
                StatusCode::FORBIDDEN,
                "route-forbidden",
                "Route not allowed",
                format!("this token may not send through route `{route}`"),
            )
            .with_field("route"))
        }
    }

    pub fn require(&self, scope: Scope) -> Result<(), Problem> {
        if self.has(scope) {
            Ok(())
        } else {
            Err(Problem::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "Missing scope",
                format!("this token lacks the `{}` scope", scope.as_str()),
            ))
        }
    }
}

struct Token {
    digest: [u8; 32],
    principal: Principal,
}

/// The configured tokens.
pub struct Tokens(Vec<Token>);

/// A token as configured, its secret resolved.
pub struct NewToken {
    pub name: String,
    pub tenant: String,
    pub scopes: Vec<Scope>,
    /// See [`Principal`]'s routes.
    pub routes: Option<HashSet<String>>,
    pub secret: SecretString,
    /// Enqueues per second and burst, per process.
    pub rate_limit: Option<(f64, u32)>,
}

impl Tokens {
    pub fn new(tokens: impl IntoIterator<Item = NewToken>) -> Self {
        Tokens(
            tokens
                .into_iter()
                .map(|token| Token {
                    digest: Sha256::digest(token.secret.expose_secret().as_bytes()).into(),
                    principal: Principal {
                        name: token.name,
                        tenant: token.tenant,
                        scopes: token.scopes.into_iter().collect(),
                        routes: token.routes,
                        rate: token.rate_limit.map(|(per_second, burst)| {
                            Arc::new(Pace::new(Some(per_second), burst))
                        }),
                    },
                })
                .collect(),
        )
    }

    /// The tenants its tokens belong to.
    pub fn tenants(&self) -> std::collections::BTreeSet<&str> {
        self.0.iter().map(|t| t.principal.tenant.as_str()).collect()
    }

    /// The principal of a presented token secret, compared in constant time.
    pub fn authenticate(&self, presented: &str) -> Option<&Principal> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for token in &self.0 {
            if bool::from(token.digest.ct_eq(&digest)) {
                found = Some(&token.principal);
            }
        }
        found
    }
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(Problem::unauthorized)?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .ok_or_else(Problem::unauthorized)?;
        let token = token.trim();
        if token.is_empty() {
            return Err(Problem::unauthorized());
        }
        state
            .tokens
            .authenticate(token)
            .cloned()
            .ok_or_else(Problem::unauthorized)
    }
}
