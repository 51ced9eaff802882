//! The provider token: an ES256 JWT, header `{alg: ES256, kid: <key id>}`, claims
//! `{iss: <team id>, iat: <UNIX seconds>}`, signed with the route's `.p8` key and sent as
//! `authorization: bearer <token>` (<https://developer.apple.com/documentation/usernotifications/establishing-a-token-based-connection-to-apns>).
//!
//! Apple's rule: "Refresh your token no more than once every 20 minutes and no less than once
//! every 60 minutes. APNs rejects any request whose token contains a timestamp that's more than
//! one hour old. Similarly, APNs report an error if you use a new token more than once every 20
//! minutes on the same connection." So `Tokens` keeps one token per route and:
//!
//! - mints it lazily, on the first send, and reuses it for every send until it is
//!   `REFRESH_AFTER` (50 minutes) old: inside the window, with ten minutes to spare before
//!   APNs would call it expired, and never sooner than 20 minutes after the last one;
//! - mints a new one sooner only where APNs refused the current one as expired or invalid
//!   (`403 ExpiredProviderToken` / `InvalidProviderToken`: "a new token should be generated"),
//!   and then at most once per [`MIN_UPDATE_INTERVAL`]: a token made on APNs' word that APNs
//!   refuses the same way was not refused for its age (a wrong key, team or clock), and minting
//!   more would only earn `429 TooManyProviderTokenUpdates`;
//! - mints under its lock, so concurrent sends that find no usable token make one between them
//!   (single flight), and a send refused with a token that another send has already replaced
//!   takes the replacement without minting again.
//!
//! The policy is two pure functions of the state and `now` (`due`, `may_force`), so that the
//! 20, 50 and 60 minutes are tested without waiting for them.

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use herald_provider::Redactor;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::header::HeaderValue;
use secrecy::{ExposeSecret, SecretString};

use crate::wire::Claims;

/// A token is reused until it is this old: inside Apple's 20–60 minute window.
pub(crate) const REFRESH_AFTER: Duration = Duration::from_secs(50 * 60);
/// Apple's shortest interval between two tokens ("no more than once every 20 minutes").
pub const MIN_UPDATE_INTERVAL: Duration = Duration::from_secs(20 * 60);
/// Apple refuses a token whose `iat` is older than this (`403 ExpiredProviderToken`).
pub const MAX_TOKEN_AGE: Duration = Duration::from_secs(60 * 60);

/// Seconds since the UNIX epoch now, the unit of `iat`: the crate's one clock in seconds (the
/// fake reads it too). A clock before 1970 reads 0.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Whether a send at `now` needs a new token: there is none yet, or the one there is has been
/// in use for `REFRESH_AFTER`. A clock that went back makes a token look younger, never older:
/// APNs then says whether it still takes it.
pub(crate) fn due(issued_at: Option<u64>, now: u64) -> bool {
    issued_at.is_none_or(|iat| now.saturating_sub(iat) >= REFRESH_AFTER.as_secs())
}

/// Whether a token APNs refused may be replaced at `now`, given when a token was last made on
/// APNs' word (`None`: never): at most once per [`MIN_UPDATE_INTERVAL`].
pub(crate) fn may_force(last_forced: Option<u64>, now: u64) -> bool {
    last_forced.is_none_or(|at| now.saturating_sub(at) >= MIN_UPDATE_INTERVAL.as_secs())
}

/// One minted token, as a send uses it. Cloned per send; the secret parts stay secret.
#[derive(Clone)]
pub(crate) struct Token {
    /// Which token this is: 1 for the first one minted, and so on.
    pub generation: u64,
    pub issued_at: u64,
    /// `bearer <jwt>`, marked sensitive so that no header dump shows it.
    pub authorization: HeaderValue,
    /// Scrubs the `.p8` key and this token, in every form, from whatever a vendor echoes.
    pub redactor: Redactor,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("generation", &self.generation)
            .field("issued_at", &self.issued_at)
            .field("authorization", &"[REDACTED]")
            .finish()
    }
}

/// Why a token could not be made: the key does not sign ES256. Never quotes the key.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the signing key cannot sign an ES256 provider token ({0}); it must be the .p8 file Apple gave: a P-256 private key in PKCS#8 PEM"
)]
pub struct SigningError(String);

/// What signs the tokens: the key, its id and the team's id.
struct Signer {
    key: EncodingKey,
    header: Header,
    team_id: String,
    /// Scrubs the key's PEM and its base64 body.
    redactor: Redactor,
}

impl Signer {
    fn sign(&self, iat: u64) -> Result<SecretString, SigningError> {
        let claims = Claims {
            iss: self.team_id.clone(),
            iat,
        };
        jsonwebtoken::encode(&self.header, &claims, &self.key)
            .map(SecretString::from)
            .map_err(|err| SigningError(err.to_string()))
    }
}

/// The route's provider token and what it needs to make the next one.
pub(crate) struct Tokens {
    signer: Signer,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    current: Option<Token>,
    /// Tokens minted so far (the last one's generation).
    minted: u64,
    /// When a token was last minted because APNs refused the one before it.
    last_forced: Option<u64>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokens")
            .field("kid", &self.signer.header.kid)
            .field("iss", &self.signer.team_id)
            .field("signing_key", &"[REDACTED]")
            .field("minted", &self.minted())
            .finish()
    }
}

impl Tokens {
    /// A signer for `key_id` and `team_id` with the `.p8` PEM `signing_key`, checked by signing
    /// once, so that a key that cannot sign is refused when the route is built, not at its first
    /// send.
    pub fn new(
        signing_key: &SecretString,
        key_id: &str,
        team_id: &str,
    ) -> Result<Self, SigningError> {
        let pem = signing_key.expose_secret();
        let key = EncodingKey::from_ec_pem(pem.as_bytes())
            .map_err(|err| SigningError(err.to_string()))?;
        // Apple's header is `alg` and `kid` only.
        let mut header = Header::new(Algorithm::ES256);
        header.typ = None;
        header.kid = Some(key_id.to_owned());
        let signer = Signer {
            key,
            header,
            team_id: team_id.to_owned(),
            redactor: Redactor::secret(pem.trim()).with_secret(&pem_body(pem)),
        };
        signer.sign(unix_now())?;
        Ok(Tokens {
            signer,
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing panics while holding the lock, so a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Scrubs the key, in every form, from text that no token has been sent with yet.
    pub fn key_redactor(&self) -> &Redactor {
        &self.signer.redactor
    }

    /// How many tokens this route has minted.
    pub fn minted(&self) -> u64 {
        self.lock().minted
    }

    /// The token for a send at `now`: the current one, or a new one where it is `due`.
    pub fn current(&self, now: u64) -> Result<Token, SigningError> {
        let mut state = self.lock();
        match &state.current {
            Some(token) if !due(Some(token.issued_at), now) => Ok(token.clone()),
            _ => self.mint(&mut state, now),
        }
    }

    /// APNs refused `rejected` as expired or invalid at `now`: the token to send again with,
    /// or `None` where the refusal stands. Another send may have replaced it already; then that
    /// replacement. Otherwise a new one, where `may_force` allows; its `iat` is at least one
    /// second after the refused one's, so that it is a new token even within the same second.
    pub fn after_rejection(
        &self,
        rejected: &Token,
        now: u64,
    ) -> Option<Result<Token, SigningError>> {
        let mut state = self.lock();
        match &state.current {
            Some(current) if current.generation != rejected.generation => {
                return Some(Ok(current.clone()));
            }
            _ => {}
        }
        if !may_force(state.last_forced, now) {
            return None;
        }
        state.last_forced = Some(now);
        let iat = now.max(rejected.issued_at + 1);
        Some(self.mint(&mut state, iat))
    }

    fn mint(&self, state: &mut State, iat: u64) -> Result<Token, SigningError> {
        let jwt = self.signer.sign(iat)?;
        let mut authorization = HeaderValue::from_str(&format!("bearer {}", jwt.expose_secret()))
            .map_err(|err| SigningError(err.to_string()))?;
        authorization.set_sensitive(true);
        state.minted += 1;
        let token = Token {
            generation: state.minted,
            issued_at: iat,
            authorization,
            redactor: self
                .signer
                .redactor
                .clone()
                .with_secret(jwt.expose_secret()),
        };
        tracing::debug!(
            generation = token.generation,
            iat,
            "minted an APNs provider token"
        );
        state.current = Some(token.clone());
        Ok(token)
    }
}

/// The base64 body of a PEM block, its lines joined: how the key's bytes would show if
/// anything ever echoed them without the armour.
fn pem_body(pem: &str) -> String {
    pem.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("-----"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: u64 = 60;

    #[test]
    fn a_token_is_due_when_there_is_none_or_it_is_fifty_minutes_old() {
        let t0 = 1_700_000_000;
        assert!(due(None, t0));
        assert!(!due(Some(t0), t0));
        assert!(
            !due(Some(t0), t0 + 20 * MINUTE),
            "not refreshed at 20 minutes"
        );
        assert!(!due(Some(t0), t0 + 50 * MINUTE - 1));
        assert!(due(Some(t0), t0 + 50 * MINUTE));
        assert!(
            due(Some(t0), t0 + 60 * MINUTE),
            "long before APNs' hour runs out"
        );
        // A clock that went back makes the token look younger, not due.
        assert!(!due(Some(t0), t0 - 3600));
    }

    #[test]
    fn a_refused_token_is_replaced_at_most_once_per_twenty_minutes() {
        let t0 = 1_700_000_000;
        assert!(may_force(None, t0));
        assert!(!may_force(Some(t0), t0 + 19 * MINUTE));
        assert!(may_force(Some(t0), t0 + 20 * MINUTE));
    }

    #[test]
    fn the_window_sits_inside_apples() {
        assert!(REFRESH_AFTER >= MIN_UPDATE_INTERVAL);
        assert!(REFRESH_AFTER < MAX_TOKEN_AGE);
    }

    #[test]
    fn the_pem_body_is_its_base64_lines_joined() {
        let pem = "-----BEGIN PRIVATE KEY-----\nAAAA\nBBBB\n-----END PRIVATE KEY-----\n";
        assert_eq!(pem_body(pem), "AAAABBBB");
    }

    /// The cache itself, with a real key: `now` is passed in, so 50 minutes pass at once.
    #[cfg(feature = "fake")]
    mod cache {
        use super::super::*;
        use crate::fake::TestKey;

        const T0: u64 = 1_700_000_000;
        const MINUTE: u64 = 60;

        fn tokens() -> (Tokens, TestKey) {
            let key = TestKey::generate();
            let secret = SecretString::from(key.private_pem.clone());
            (
                Tokens::new(&secret, "ABC123DEFG", "DEF123GHIJ").unwrap(),
                key,
            )
        }

        fn claims_of(token: &Token, key: &TestKey) -> Claims {
            let value = token.authorization.to_str().unwrap();
            let jwt = value.strip_prefix("bearer ").unwrap();
            let header = jsonwebtoken::decode_header(jwt).unwrap();
            assert_eq!(header.alg, Algorithm::ES256);
            assert_eq!(header.kid.as_deref(), Some("ABC123DEFG"));
            assert_eq!(header.typ, None, "Apple's header is alg and kid only");
            let mut validation = jsonwebtoken::Validation::new(Algorithm::ES256);
            validation.required_spec_claims.clear();
            validation.validate_exp = false;
            validation.set_issuer(&["DEF123GHIJ"]);
            let decoding =
                jsonwebtoken::DecodingKey::from_ec_pem(key.public_pem.as_bytes()).unwrap();
            jsonwebtoken::decode::<Claims>(jwt, &decoding, &validation)
                .unwrap()
                .claims
        }

        #[test]
        fn a_token_is_minted_on_first_use_and_reused_until_it_is_fifty_minutes_old() {
            let (tokens, key) = tokens();
            assert_eq!(tokens.minted(), 0, "nothing is minted before a send");
            let first = tokens.current(T0).unwrap();
            assert_eq!(claims_of(&first, &key).iat, T0);
            assert_eq!(claims_of(&first, &key).iss, "DEF123GHIJ");
            for later in [1, 20 * MINUTE, 50 * MINUTE - 1] {
                let again = tokens.current(T0 + later).unwrap();
                assert_eq!(again.generation, first.generation, "{later} s later");
                assert_eq!(again.authorization, first.authorization);
            }
            let renewed = tokens.current(T0 + 50 * MINUTE).unwrap();
            assert_eq!(renewed.generation, 2);
            assert_eq!(claims_of(&renewed, &key).iat, T0 + 50 * MINUTE);
            assert_eq!(tokens.minted(), 2);
        }

        #[test]
        fn a_refused_token_is_replaced_once_and_a_second_refusal_within_twenty_minutes_stands() {
            let (tokens, key) = tokens();
            let first = tokens.current(T0).unwrap();
            let second = tokens.after_rejection(&first, T0).unwrap().unwrap();
            assert_eq!(second.generation, 2);
            assert_eq!(
                claims_of(&second, &key).iat,
                T0 + 1,
                "a new token even within the same second"
            );
            assert_ne!(second.authorization, first.authorization);
            assert_eq!(tokens.current(T0 + 2).unwrap().generation, 2);

            assert!(
                tokens.after_rejection(&second, T0 + 19 * MINUTE).is_none(),
                "the token made on APNs' word was refused too: no third within 20 minutes"
            );
            let third = tokens
                .after_rejection(&second, T0 + 20 * MINUTE)
                .unwrap()
                .unwrap();
            assert_eq!(third.generation, 3);
            assert_eq!(tokens.minted(), 3);
        }

        #[test]
        fn a_send_refused_with_a_token_already_replaced_takes_the_replacement() {
            let (tokens, _) = tokens();
            let first = tokens.current(T0).unwrap();
            let replaced = tokens.after_rejection(&first, T0).unwrap().unwrap();
            // A second send that went out with the first token is refused too.
            let taken = tokens.after_rejection(&first, T0 + 1).unwrap().unwrap();
            assert_eq!(taken.generation, replaced.generation);
            assert_eq!(tokens.minted(), 2, "one mint between them");
        }

        #[test]
        fn concurrent_sends_mint_one_token_between_them() {
            let (tokens, _) = tokens();
            let tokens = std::sync::Arc::new(tokens);
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let tokens = std::sync::Arc::clone(&tokens);
                    std::thread::spawn(move || tokens.current(T0).unwrap().generation)
                })
                .collect();
            for thread in threads {
                assert_eq!(thread.join().unwrap(), 1);
            }
            assert_eq!(tokens.minted(), 1);
        }

        #[test]
        fn a_key_that_is_not_a_p256_pkcs8_pem_is_refused_without_being_quoted() {
            for pem in [
                "not a key",
                "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            ] {
                let err = Tokens::new(&SecretString::from(pem), "ABC123DEFG", "DEF123GHIJ")
                    .unwrap_err()
                    .to_string();
                assert!(!err.contains("AAAA") && !err.contains("not a key"), "{err}");
            }
        }

        #[test]
        fn no_debug_shows_the_key_or_a_token() {
            let (tokens, key) = tokens();
            let token = tokens.current(T0).unwrap();
            let jwt = token.authorization.to_str().unwrap().to_owned();
            for shown in [
                format!("{tokens:?}"),
                format!("{token:?}"),
                format!("{key:?}"),
            ] {
                assert!(!shown.contains(&key.private_pem), "{shown}");
                assert!(
                    !shown.contains(jwt.trim_start_matches("bearer ")),
                    "{shown}"
                );
            }
        }
    }
}
