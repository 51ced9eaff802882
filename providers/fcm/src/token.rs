//! The access token every send carries: minted from the service account key (a signed
//! assertion exchanged at the key's `token_uri`), cached until shortly before it expires, and
//! minted again at once when FCM refuses it.
//!
//! Every exchange happens before a send is written, so however it ends nothing can have been
//! delivered: a failure is a `Rejected` at stage [`AUTH_STAGE`], transient when another try may
//! get a token (no connection, a timeout, a 5xx, a 429) and permanent when the token endpoint
//! refused the key itself.
//!
//! One lock guards the cache and is held across its exchange: the sends that need a token
//! while one is being minted wait for that one instead of minting their own.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use herald_provider::http::{Answer, exchange, retry_after};
use herald_provider::timeout::within;
use herald_provider::{Evidence, Redactor, SendResult};
use reqwest::Url;
use reqwest::header::HeaderValue;
use secrecy::{ExposeSecret, SecretString};

use crate::key::Key;
use crate::wire::{JWT_BEARER_GRANT, OAuthError, Token};

/// The evidence stage of a send that ended in the token exchange: no send was written.
pub const AUTH_STAGE: &str = "auth";

/// How long before its expiry a token is replaced: "shortly before", so that no send carries a
/// token that expires on the way. A token that lives less than twice this is replaced halfway.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// The status a refusal of the key is recorded with, whatever the token endpoint answered
/// (Google answers `invalid_grant` with 400): herald reads 401–403 as a refusal of the route's
/// own credential, which moves its work to the fallback rather than failing each message.
const KEY_REFUSED: u16 = 401;

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
        let Some(mut cached) = within(left(deadline), self.cached.lock()).await else {
            return Err(no_token(
                "no token within the send's timeout: nothing was sent",
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
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let assertion = self.key.assertion(now).map_err(|why| {
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
        let detail = |what: &str| format!("the token exchange at {at} {what}: {status} {body}");
        if status.is_success() {
            let token = serde_json::from_str::<Token>(&body)
                .ok()
                .filter(|token| {
                    token.token_type.eq_ignore_ascii_case("bearer")
                        && !token.access_token.is_empty()
                })
                .and_then(|token| {
                    let mut header =
                        HeaderValue::from_str(&format!("Bearer {}", token.access_token)).ok()?;
                    header.set_sensitive(true);
                    let lifetime = Duration::from_secs(token.expires_in);
                    let token = SecretString::from(token.access_token);
                    Some((Bearer { header, token }, lifetime))
                });
            // The 200 cannot be read: retrying may get a readable one, and no send was made.
            return token.ok_or_else(|| {
                SendResult::transient(
                    Evidence::new(AUTH_STAGE, detail("gave no bearer token"))
                        .with_status(status.as_u16()),
                    None,
                )
            });
        }
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

/// How long after it was received a token of `lifetime` is replaced.
fn refresh_after(lifetime: Duration) -> Duration {
    lifetime.saturating_sub(REFRESH_MARGIN.min(lifetime / 2))
}

fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

fn no_token(why: &str) -> SendResult {
    SendResult::transient(Evidence::new(AUTH_STAGE, why), None)
}

/// A token exchange that ended without an answer, as the send's result: whatever the exchange
/// itself was (a timeout, a reset), the send was never written, so it is a transient refusal.
/// Only a request that could not even be built (a local fault) stays permanent.
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
        "the token exchange ended at {}: {}; nothing was sent",
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
                assert!(evidence.detail.contains("nothing was sent"), "{evidence:?}");
            }
            other => panic!("expected a transient refusal, got {other:?}"),
        }
    }
}
