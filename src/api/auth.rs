//! Bearer tokens: each maps to a principal (recorded in audits), a tenant and scopes. Secrets
//! are compared as SHA-256 digests in constant time, against every token, so neither the match
//! nor its position leaks through timing.

use std::collections::HashSet;

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AppState;
use super::problem::Problem;
use crate::domain::Scope;

/// Who is calling: resolved from the `Authorization` header of every authenticated request.
#[derive(Debug, Clone)]
pub struct Principal {
    pub name: String,
    pub tenant: String,
    scopes: HashSet<Scope>,
    /// The routes it may send through; `None`: every route its tenant may use.
    routes: Option<HashSet<String>>,
}

impl Principal {
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

impl Tokens {
    pub fn new(
        tokens: impl IntoIterator<
            Item = (
                String,
                String,
                Vec<Scope>,
                Option<HashSet<String>>,
                SecretString,
            ),
        >,
    ) -> Self {
        Tokens(
            tokens
                .into_iter()
                .map(|(name, tenant, scopes, routes, secret)| Token {
                    digest: Sha256::digest(secret.expose_secret().as_bytes()).into(),
                    principal: Principal {
                        name,
                        tenant,
                        scopes: scopes.into_iter().collect(),
                        routes,
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
