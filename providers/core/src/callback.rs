//! Vendor delivery callbacks: what an adapter reads out of one, once it has proved the vendor
//! sent it.
//!
//! A vendor tells herald afterwards what became of a message it accepted (sent, delivered,
//! bounced, complained about), late, out of order and more than once. An adapter that has
//! callbacks checks the vendor's own signature and turns the body into [`CallbackEvent`]s; herald
//! stores each once per vendor event id and moves the notification's receipt forward only.

use std::fmt;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use reqwest::header::{AUTHORIZATION, HeaderMap};
use secrecy::{ExposeSecret, SecretSlice, SecretString};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use time::OffsetDateTime;

use crate::signature::SigningSecret;

/// One callback request as herald received it.
#[derive(Debug, Clone, Copy)]
pub struct CallbackRequest<'a> {
    /// The raw query string (without `?`; empty if none): part of what Twilio signs.
    pub query: &'a str,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
    /// When herald received it, for timestamp tolerances.
    pub now: OffsetDateTime,
}

/// Where a message stands after the vendor accepted it. Ordered: a receipt only moves to a
/// status of higher rank (`sent` < `delivered` < `bounced` = `undeliverable` < `complained`),
/// so a `sent` arriving after `delivered` changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ReceiptStatus {
    /// No callback yet.
    None,
    /// The vendor handed it on (to the carrier, the receiving mail server, the push service).
    Sent,
    Delivered,
    /// The receiving server refused it (a hard bounce suppresses the recipient).
    Bounced,
    /// The vendor gave up on it after accepting it (Twilio `undelivered`/`failed`, Resend `failed`).
    Undeliverable,
    /// The recipient marked it as spam.
    Complained,
}

impl ReceiptStatus {
    pub const ALL: [ReceiptStatus; 6] = [
        ReceiptStatus::None,
        ReceiptStatus::Sent,
        ReceiptStatus::Delivered,
        ReceiptStatus::Bounced,
        ReceiptStatus::Undeliverable,
        ReceiptStatus::Complained,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptStatus::None => "none",
            ReceiptStatus::Sent => "sent",
            ReceiptStatus::Delivered => "delivered",
            ReceiptStatus::Bounced => "bounced",
            ReceiptStatus::Undeliverable => "undeliverable",
            ReceiptStatus::Complained => "complained",
        }
    }

    pub fn parse(s: &str) -> Option<ReceiptStatus> {
        ReceiptStatus::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// How far along a message this status is. A bounce can follow a delivery report (the
    /// receiving server accepted, then returned it) and a complaint can follow either, so they
    /// rank above `delivered`; `bounced` and `undeliverable` are both ends of the road and share
    /// a rank, so whichever came first stays.
    pub fn rank(self) -> u8 {
        match self {
            ReceiptStatus::None => 0,
            ReceiptStatus::Sent => 1,
            ReceiptStatus::Delivered => 2,
            ReceiptStatus::Bounced | ReceiptStatus::Undeliverable => 3,
            ReceiptStatus::Complained => 4,
        }
    }

    /// Whether a receipt standing at `current` moves to `self`.
    pub fn advances(self, current: ReceiptStatus) -> bool {
        self.rank() > current.rank()
    }
}

impl fmt::Display for ReceiptStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a callback names the message it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackRef {
    /// herald's provider key, which the adapter stamped on the send where the vendor echoes it
    /// back (a tag, `CustomID`, the status callback URL): names the attempts it settles.
    Key(String),
    /// The vendor's own message id (`provider_ref`), for a message herald learnt it of.
    ProviderRef(String),
}

/// One vendor event, understood.
#[derive(Debug, Clone, PartialEq)]
pub struct CallbackEvent {
    /// The vendor's id of this event: a repeat of it changes nothing.
    pub event_id: String,
    pub reference: CallbackRef,
    /// The vendor's own id of the message, where the report names one beside herald's key (the
    /// id its send answer gave, which herald records as `provider_ref`): two ids under one key
    /// are two messages, the second one herald's record may not know of.
    pub message: Option<String>,
    pub status: ReceiptStatus,
    /// The vendor's own word for it (`delivered`, `email.bounced`, `undelivered/30003`).
    pub vendor_status: String,
    /// When the vendor says it happened, if it says.
    pub at: Option<OffsetDateTime>,
    /// The recipient asked not to get more, or cannot: a hard bounce, a complaint, an
    /// unsubscribe. herald suppresses the recipient on this channel for the tenant.
    pub suppress: bool,
}

/// Why a callback was not taken. Neither kind is stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallbackError {
    /// The signature (or basic auth) is missing, wrong, or its timestamp is outside the
    /// tolerance: it may not be the vendor's (answered 401).
    #[error("{0}")]
    Unauthenticated(String),
    /// Signed, but not a callback this adapter can read (answered 400).
    #[error("{0}")]
    Malformed(String),
    /// herald could not reach the vendor for what the check needs (SNS's signing certificate)
    /// or for what the callback asks of it (confirming an SNS subscription): answered 503, so
    /// the vendor sends it again.
    #[error("{0}")]
    Unreachable(String),
}

/// The callback side of an adapter.
#[async_trait::async_trait]
pub trait Callbacks: Send + Sync {
    /// Authenticates `request` and reads its events; events it does not map to a receipt
    /// (opens, clicks) are left out.
    fn read(&self, request: &CallbackRequest<'_>) -> Result<Vec<CallbackEvent>, CallbackError>;

    /// What herald calls for each callback request. Most vendors' checks need nothing but the
    /// request, and this reads it. A vendor whose check needs a key fetched first (SNS's
    /// signing certificate), or whose callbacks include a handshake to answer (SNS's
    /// subscription confirmation), does that here, then reads.
    async fn receive(
        &self,
        request: &CallbackRequest<'_>,
    ) -> Result<Vec<CallbackEvent>, CallbackError> {
        self.read(request)
    }
}

/// How far a signed timestamp may be from herald's clock, either way: Svix and Standard
/// Webhooks receivers use five minutes against replays.
pub const TIMESTAMP_TOLERANCE: Duration = Duration::from_secs(5 * 60);

/// The timestamp and the decoded signature of a request a vendor signs over a timestamp header
/// and the body (SendGrid's ECDSA, Telnyx's Ed25519), for the vendor's own check of the
/// signature: both headers present, the signature base64, the timestamp unix seconds within
/// [`TIMESTAMP_TOLERANCE`] of `now`.
pub fn stamped_signature<'a>(
    request: &CallbackRequest<'a>,
    timestamp_header: &str,
    signature_header: &str,
) -> Result<(&'a str, Vec<u8>), CallbackError> {
    let refused = |why: String| CallbackError::Unauthenticated(why);
    let header = |name: &str| {
        request
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .ok_or_else(|| refused(format!("header `{name}` is missing")))
    };
    let timestamp = header(timestamp_header)?;
    let signature = STANDARD
        .decode(header(signature_header)?.trim())
        .map_err(|_| refused(format!("`{signature_header}` is not base64")))?;
    let stamped: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| refused(format!("`{timestamp_header}` is not a number")))?;
    let skew = (request.now.unix_timestamp() - stamped).unsigned_abs();
    if skew > TIMESTAMP_TOLERANCE.as_secs() {
        return Err(refused(format!(
            "`{timestamp_header}` is {skew} s away from now; the tolerance is {} s",
            TIMESTAMP_TOLERANCE.as_secs()
        )));
    }
    Ok((timestamp, signature))
}

/// Checks a Standard Webhooks (or Svix, with `svix-` in place of `webhook-`) signature: the
/// three headers named `{prefix}-id`, `{prefix}-timestamp` and `{prefix}-signature`, signed
/// with one of `secrets`, stamped within [`TIMESTAMP_TOLERANCE`] of `now`. Returns the id,
/// which is the vendor's event id.
pub fn verify_standard_webhook(
    request: &CallbackRequest<'_>,
    prefix: &str,
    secrets: &[SigningSecret],
) -> Result<String, CallbackError> {
    let header = |name: &str| {
        let name = format!("{prefix}-{name}");
        request
            .headers
            .get(name.as_str())
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| CallbackError::Unauthenticated(format!("header `{name}` is missing")))
    };
    let id = header("id")?;
    let timestamp: i64 = header("timestamp")?.trim().parse().map_err(|_| {
        CallbackError::Unauthenticated(format!("`{prefix}-timestamp` is not a number"))
    })?;
    let signature = header("signature")?;
    let skew = (request.now.unix_timestamp() - timestamp).unsigned_abs();
    if skew > TIMESTAMP_TOLERANCE.as_secs() {
        return Err(CallbackError::Unauthenticated(format!(
            "`{prefix}-timestamp` is {skew} s away from now; the tolerance is {} s",
            TIMESTAMP_TOLERANCE.as_secs()
        )));
    }
    if !secrets
        .iter()
        .any(|secret| secret.verifies(signature, id, timestamp, request.body))
    {
        return Err(CallbackError::Unauthenticated(format!(
            "`{prefix}-signature` does not match the configured secret"
        )));
    }
    Ok(id.to_owned())
}

/// The HTTP Basic credentials a vendor that signs nothing sends with each callback (written into
/// the callback URL, or configured beside it): all that tells its requests from anyone's.
#[derive(Clone)]
pub struct BasicCredentials {
    /// `username:password`, as the `Authorization` header carries them once decoded.
    credentials: SecretSlice<u8>,
    /// The credentials' own digest (HMAC-SHA256 keyed with them), the other side of every
    /// comparison: comparing digests takes the same time whatever was sent, its length too.
    expected: [u8; 32],
}

/// By hand: the digest would let anyone who reads a log guess the password offline.
impl fmt::Debug for BasicCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasicCredentials")
            .field("credentials", &"[REDACTED]")
            .finish()
    }
}

/// The shortest callback password a route takes: as long as herald's own token secrets, for it
/// alone lets a caller write delivery reports.
pub const MIN_CALLBACK_PASSWORD_CHARS: usize = 32;

/// What is wrong with a route's `callback_username` and `callback_password`; says which, never
/// what the password is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    #[error(
        "needs a callback_username, without `:` (HTTP Basic cannot carry one), alongside its \
         callback_password"
    )]
    Username,
    #[error(
        "needs a callback_password of at least {MIN_CALLBACK_PASSWORD_CHARS} characters \
         alongside its callback_username: it is all that guards a public URL (e.g. \
         `openssl rand -hex 24`)"
    )]
    Password,
}

impl BasicCredentials {
    /// A route's callback credentials: both or neither, a user name HTTP Basic can carry, and
    /// a password of at least [`MIN_CALLBACK_PASSWORD_CHARS`].
    pub fn configured(
        username: Option<&str>,
        password: Option<&SecretString>,
    ) -> Result<Option<Self>, CredentialsError> {
        match (username, password) {
            (None, None) => Ok(None),
            (Some(user), Some(password)) => {
                if user.is_empty() || user.contains(':') {
                    return Err(CredentialsError::Username);
                }
                if password.expose_secret().chars().count() < MIN_CALLBACK_PASSWORD_CHARS {
                    return Err(CredentialsError::Password);
                }
                Ok(Some(BasicCredentials::new(user, password)))
            }
            (None, Some(_)) => Err(CredentialsError::Username),
            (Some(_), None) => Err(CredentialsError::Password),
        }
    }

    fn new(username: &str, password: &SecretString) -> Self {
        let credentials =
            SecretSlice::from(format!("{username}:{}", password.expose_secret()).into_bytes());
        let expected = hmac_sha256(credentials.expose_secret(), credentials.expose_secret());
        BasicCredentials {
            credentials,
            expected,
        }
    }

    /// Checks `Authorization: Basic …` against the credentials, in constant time.
    pub fn authenticate(&self, request: &CallbackRequest<'_>) -> Result<(), CallbackError> {
        let refused = |why: &str| Err(CallbackError::Unauthenticated(why.to_owned()));
        let Some(header) = request.headers.get(AUTHORIZATION) else {
            return refused(
                "header `Authorization` is missing: the callback URL's credentials were not sent",
            );
        };
        let header = header.as_bytes().trim_ascii();
        let encoded = match header.split_at_checked(6) {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case(b"basic ") => rest.trim_ascii(),
            _ => return refused("`Authorization` is not HTTP Basic"),
        };
        let Ok(sent) = STANDARD.decode(encoded) else {
            return refused("`Authorization` is not base64");
        };
        let mut mac = Hmac::<Sha256>::new_from_slice(self.credentials.expose_secret())
            .expect("HMAC-SHA256 accepts keys of any length");
        mac.update(&sent);
        if mac.verify_slice(&self.expected).is_err() {
            return refused("`Authorization` does not carry this route's callback credentials");
        }
        Ok(())
    }
}

/// HMAC-SHA256 of `data` keyed with `key`.
fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(key).expect("HMAC-SHA256 accepts keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use reqwest::header::HeaderValue;
    use secrecy::SecretString;

    fn secret(byte: u8) -> SigningSecret {
        SigningSecret::parse(&SecretString::from(format!(
            "whsec_{}",
            STANDARD.encode([byte; 32])
        )))
        .unwrap()
    }

    fn signed(secret: &SigningSecret, timestamp: i64, body: &[u8]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("svix-id", HeaderValue::from_static("msg_1"));
        headers.insert("svix-timestamp", timestamp.to_string().parse().unwrap());
        let signature = secret.sign("msg_1", timestamp, body);
        headers.insert("svix-signature", signature.parse().unwrap());
        headers
    }

    #[test]
    fn a_receipt_moves_forward_only() {
        use ReceiptStatus::*;
        assert!(Delivered.advances(Sent));
        assert!(!Sent.advances(Delivered));
        assert!(Bounced.advances(Delivered));
        assert!(!Undeliverable.advances(Bounced));
        assert!(Complained.advances(Bounced));
        assert!(!Delivered.advances(Delivered));
        for status in ReceiptStatus::ALL {
            assert_eq!(ReceiptStatus::parse(status.as_str()), Some(status));
        }
    }

    #[test]
    fn a_standard_webhook_verifies_only_in_time_and_with_its_secret() {
        let now = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let body = br#"{"type":"email.delivered"}"#;
        let request = |headers: &'static HeaderMap, body: &'static [u8]| CallbackRequest {
            query: "",
            headers,
            body,
            now,
        };
        let good: &'static HeaderMap = Box::leak(Box::new(signed(&secret(1), 1_800_000_000, body)));
        assert_eq!(
            verify_standard_webhook(&request(good, body), "svix", &[secret(2), secret(1)]),
            Ok("msg_1".to_owned())
        );
        assert!(matches!(
            verify_standard_webhook(&request(good, body), "svix", &[secret(2)]),
            Err(CallbackError::Unauthenticated(_))
        ));
        assert!(matches!(
            verify_standard_webhook(&request(good, b"{}"), "svix", &[secret(1)]),
            Err(CallbackError::Unauthenticated(_))
        ));
        assert!(matches!(
            verify_standard_webhook(&request(good, body), "webhook", &[secret(1)]),
            Err(CallbackError::Unauthenticated(_))
        ));
        let old: &'static HeaderMap =
            Box::leak(Box::new(signed(&secret(1), 1_800_000_000 - 301, body)));
        assert!(matches!(
            verify_standard_webhook(&request(old, body), "svix", &[secret(1)]),
            Err(CallbackError::Unauthenticated(m)) if m.contains("tolerance")
        ));
    }
}
