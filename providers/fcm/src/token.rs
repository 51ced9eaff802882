//! The access token every send carries: minted from the service account key (a signed
//! assertion exchanged at the key's `token_uri`), cached until shortly before it expires, and
//! minted again at once when FCM refuses it.
//!
//! Every exchange happens before a send is written, so however it ends nothing can have been
//! delivered by that send: a failure is a `Rejected` at stage [`AUTH_STAGE`], transient when
//! another try may get a token (no connection, a timeout, a 5xx, a 429, a 1xx or 3xx, a 2xx
//! without a usable token) and permanent when the token endpoint refused the key itself. The
//! evidence says what the exchange did; the adapter adds what that means for the message (sent
//! not at all, or not sent again after a 401).
//!
//! One lock guards the cache and is held across its exchange: the sends that need a token
//! while one is being minted wait for that one instead of minting their own.
//!
//! An answer of the token endpoint may hold an access token, which is a credential: a 2xx is
//! never quoted (its evidence names only what was wrong with it), and any `access_token` an
//! error answer holds is scrubbed from it.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use herald_provider::http::{Answer, exchange, retry_after};
use herald_provider::timeout::within;
use herald_provider::{Evidence, Redactor, SendResult};
use reqwest::Url;
use reqwest::header::HeaderValue;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::key::Key;
use crate::wire::{JWT_BEARER_GRANT, OAuthError};

/// The evidence stage of a send that ended in the token exchange: no send was written.
pub const AUTH_STAGE: &str = "auth";

/// How long before its expiry a token is replaced: "shortly before", so that no send carries a
/// token that expires on the way. A token that lives less than twice this is replaced halfway.
pub(crate) const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// The status a refusal of the key is recorded with, whatever the token endpoint answered
/// (Google answers `invalid_grant` with 400): herald reads 401–403 as a refusal of the route's
/// own credential, which moves its work to the fallback rather than failing each message.
const KEY_REFUSED: u16 = 401;

/// Seconds since the UNIX epoch now: the unit of an assertion's `iat` and `exp`. A clock before
/// 1970 reads 0.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// The time left before `deadline`; zero once it has passed.
pub(crate) fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// An access token as a send carries it.
#[derive(Clone)]
pub struct Bearer {
    /// `Bearer <token>`, marked sensitive so that no header dump shows it.
    pub header: HeaderValue,
    pub token: SecretString,
}

struct Cached {
    bearer: Bearer,
    refresh_at: Instant,
}

/// The route's access tokens.
pub struct Tokens {
    key: Key,
    token_url: Url,
    http: reqwest::Client,
    cached: tokio::sync::Mutex<Option<Cached>>,
}

impl Tokens {
    pub fn new(key: Key, token_url: Url, http: reqwest::Client) -> Tokens {
        Tokens {
            key,
            token_url,
            http,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    pub fn key(&self) -> &Key {
        &self.key
    }

    pub fn token_url(&self) -> &Url {
        &self.token_url
    }

    /// A token for a send that must be written by `deadline`: the cached one, unless it is due
    /// for refresh or is `refused` (FCM answered it with a 401), else a new one from one
    /// exchange, which the sends waiting meanwhile share.
    pub async fn bearer(
        &self,
        deadline: Instant,
        refused: Option<&Bearer>,
    ) -> Result<Bearer, SendResult> {
        if left(deadline).is_zero() {
            return Err(no_token(
                "no time was left before the send's deadline for a token",
            ));
        }
        let Some(mut cached) = within(left(deadline), self.cached.lock()).await else {
            return Err(no_token(
                "the token exchange another send started did not end within this send's timeout",
            ));
        };
        if let Some(current) = cached.as_ref() {
            let refused = refused.is_some_and(|refused| {
                refused.token.expose_secret() == current.bearer.token.expose_secret()
            });
            if !refused && Instant::now() < current.refresh_at {
                return Ok(current.bearer.clone());
            }
        }
        *cached = None;
        let (bearer, lifetime) = self.exchange(deadline).await?;
        *cached = Some(Cached {
            bearer: bearer.clone(),
            refresh_at: Instant::now() + refresh_after(lifetime),
        });
        Ok(bearer)
    }

    /// One exchange of a fresh assertion for a token, and how long the token lives.
    async fn exchange(&self, deadline: Instant) -> Result<(Bearer, Duration), SendResult> {
        let assertion = self.key.assertion(unix_now()).map_err(|why| {
            SendResult::permanent(Evidence::new(AUTH_STAGE, why).with_status(KEY_REFUSED))
        })?;
        // The assertion is a credential too (an hour's worth of tokens): an endpoint that
        // echoes the request must not put it into evidence.
        let redactor = Redactor::secret(assertion.expose_secret());
        let request = self.http.post(self.token_url.clone()).form(&[
            ("grant_type", JWT_BEARER_GRANT),
            ("assertion", assertion.expose_secret()),
        ]);
        let answer = exchange(request, left(deadline))
            .await
            .map_err(|result| redactor.send(before_the_send(result)))?;
        self.read(answer).map_err(|result| redactor.send(result))
    }

    /// The token endpoint's answer: a token, or why there is none.
    fn read(&self, answer: Answer) -> Result<(Bearer, Duration), SendResult> {
        let Answer {
            status,
            headers,
            body,
        } = answer;
        let at = self.token_url.as_str();
        if status.is_success() {
            // The 2xx cannot be used: retrying may get a usable one, and no send was made. Its
            // body is left out: it may hold an access token (one the adapter refused, but a
            // credential all the same), so the evidence names only what was wrong with it.
            return bearer_of(&body).map_err(|wrong| {
                SendResult::transient(
                    Evidence::new(
                        AUTH_STAGE,
                        format!(
                            "the token exchange at {at} answered {status} without a usable \
                             bearer token: {wrong} (the body is left out: it may hold a token)"
                        ),
                    )
                    .with_status(status.as_u16()),
                    None,
                )
            });
        }
        // An error answer is quoted, but never with a token it may hold.
        let body = access_tokens_in(&body)
            .iter()
            .fold(Redactor::default(), |redactor, token| {
                redactor.with_secret(token)
            })
            .scrub(&body);
        let detail = |what: &str| format!("the token exchange at {at} {what}: {status} {body}");
        let code = serde_json::from_str::<OAuthError>(&body)
            .ok()
            .map(|refusal| refusal.error);
        let result = match status.as_u16() {
            408 | 425 | 429 | 500.. => SendResult::transient(
                Evidence::new(AUTH_STAGE, detail("failed")).with_status(status.as_u16()),
                retry_after(&headers),
            ),
            // The key itself was refused (`invalid_grant`: a deleted or disabled key, a wrong
            // `kid`, a clock far off): no send can be made with it.
            400..=499 => SendResult::permanent(
                Evidence::new(AUTH_STAGE, detail("refused the service account key"))
                    .with_status(KEY_REFUSED),
            ),
            // A 1xx or 3xx (reqwest follows redirects, so one that is left is a loop or has no
            // `Location`): no token, and another try may get one.
            _ => SendResult::transient(
                Evidence::new(AUTH_STAGE, detail("answered unexpectedly"))
                    .with_status(status.as_u16()),
                None,
            ),
        };
        Err(match code {
            Some(code) => result.map_evidence(|evidence| evidence.with_vendor_code(code)),
            None => result,
        })
    }
}

/// The bearer token of a 2xx body and how long it lives, or what is wrong with the body. Read
/// field by field from a `serde_json::Value`, as the key file is: serde's type errors quote the
/// value they met, which here may be the token. What is wrong is named, never quoted.
fn bearer_of(body: &str) -> Result<(Bearer, Duration), &'static str> {
    let value: Value = serde_json::from_str(body).map_err(|_| "the body is not JSON")?;
    let fields = value.as_object().ok_or("the body is not a JSON object")?;
    let access_token = match fields.get("access_token") {
        None => return Err("no `access_token`"),
        Some(Value::String(token)) if !token.is_empty() => token,
        Some(_) => return Err("the `access_token` is not a non-empty string"),
    };
    match fields.get("token_type").and_then(Value::as_str) {
        None => return Err("no `token_type` string"),
        Some(kind) if !kind.eq_ignore_ascii_case("bearer") => {
            return Err("the `token_type` is not `Bearer`");
        }
        Some(_) => {}
    }
    let lifetime = match fields.get("expires_in") {
        None => return Err("no `expires_in`: how long the token lives is unknown"),
        Some(seconds) => seconds
            .as_u64()
            .map(Duration::from_secs)
            .ok_or("the `expires_in` is not a whole number of seconds")?,
    };
    let mut header = HeaderValue::from_str(&format!("Bearer {access_token}"))
        .map_err(|_| "the `access_token` cannot be an HTTP header value")?;
    header.set_sensitive(true);
    let token = SecretString::from(access_token.clone());
    Ok((Bearer { header, token }, lifetime))
}

/// Every `access_token` string in a JSON body, at any depth; none in a body that is not JSON.
fn access_tokens_in(body: &str) -> Vec<String> {
    fn collect(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(fields) => {
                for (name, field) in fields {
                    match field {
                        Value::String(token) if name == "access_token" => {
                            found.push(token.clone());
                        }
                        _ => collect(field, found),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| collect(item, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        collect(&value, &mut found);
    }
    found
}

/// How long after it was received a token of `lifetime` is replaced.
fn refresh_after(lifetime: Duration) -> Duration {
    lifetime.saturating_sub(REFRESH_MARGIN.min(lifetime / 2))
}

fn no_token(why: &str) -> SendResult {
    SendResult::transient(Evidence::new(AUTH_STAGE, why), None)
}

/// A token exchange that ended without an answer, as the send's result: whatever the exchange
/// itself was (a timeout, a reset), no send was written with its token, so it is a transient
/// refusal. Only a request that could not even be built (a local fault) stays permanent.
fn before_the_send(result: SendResult) -> SendResult {
    let permanent = matches!(
        result,
        SendResult::Rejected {
            permanent: true,
            ..
        }
    );
    let evidence = result.evidence();
    let detail = format!(
        "the token exchange ended at {}: {}",
        evidence.stage, evidence.detail
    );
    let evidence = Evidence::new(AUTH_STAGE, detail);
    if permanent {
        SendResult::permanent(evidence)
    } else {
        SendResult::transient(evidence, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_replaced_five_minutes_before_it_expires_or_halfway_if_it_is_short() {
        assert_eq!(
            refresh_after(Duration::from_secs(3599)),
            Duration::from_secs(3299)
        );
        assert_eq!(
            refresh_after(Duration::from_secs(4)),
            Duration::from_secs(2)
        );
        assert_eq!(refresh_after(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn a_usable_token_answer_gives_the_bearer_and_its_lifetime() {
        let (bearer, lifetime) =
            bearer_of(r#"{"access_token": "ya29.t", "expires_in": 3599, "token_type": "Bearer"}"#)
                .unwrap();
        assert_eq!(bearer.token.expose_secret(), "ya29.t");
        assert_eq!(bearer.header, "Bearer ya29.t");
        assert!(bearer.header.is_sensitive());
        assert_eq!(lifetime, Duration::from_secs(3599));
    }

    #[test]
    fn an_unusable_token_answer_is_named_by_what_is_wrong() {
        let token = r#""access_token": "ya29.t""#;
        for (body, wrong) in [
            ("ya29.t".to_owned(), "not JSON"),
            (r#"["ya29.t"]"#.to_owned(), "not a JSON object"),
            (
                r#"{"expires_in": 1, "token_type": "Bearer"}"#.to_owned(),
                "no `access_token`",
            ),
            (format!("{{{token}, \"expires_in\": 1}}"), "no `token_type`"),
            (
                format!("{{{token}, \"expires_in\": 1, \"token_type\": \"mac\"}}"),
                "not `Bearer`",
            ),
            (
                format!("{{{token}, \"token_type\": \"Bearer\"}}"),
                "no `expires_in`",
            ),
            (
                format!("{{{token}, \"expires_in\": \"1\", \"token_type\": \"Bearer\"}}"),
                "whole number of seconds",
            ),
            (
                r#"{"access_token": "ya29.t\n", "expires_in": 1, "token_type": "Bearer"}"#
                    .to_owned(),
                "header value",
            ),
        ] {
            let named = bearer_of(&body).err().expect("an unusable answer");
            assert!(named.contains(wrong), "{body}: {named}");
        }
    }

    #[test]
    fn every_access_token_of_an_error_answer_is_found() {
        let body = r#"{"error": "x", "access_token": "a", "nested": [{"access_token": "b"}],
                       "other": {"access_token": 7}}"#;
        assert_eq!(access_tokens_in(body), ["a", "b"]);
        assert!(access_tokens_in("<html>access_token</html>").is_empty());
    }

    #[test]
    fn an_exchange_that_ended_without_an_answer_is_a_transient_refusal_of_the_send() {
        let lost = SendResult::Ambiguous {
            evidence: Evidence::new("awaiting_response", "timed out"),
        };
        match before_the_send(lost) {
            SendResult::Rejected {
                permanent: false,
                evidence,
                ..
            } => {
                assert_eq!(evidence.stage, AUTH_STAGE);
                assert!(
                    evidence.detail.contains("ended at awaiting_response"),
                    "{evidence:?}"
                );
            }
            other => panic!("expected a transient refusal, got {other:?}"),
        }
    }
}
