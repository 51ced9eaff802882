//! Standard Webhooks symmetric signatures: `whsec_` secrets and `v1,` HMAC-SHA256 signatures.
//!
//! The signed content is `{webhook-id}.{webhook-timestamp}.{body}`, byte for byte the body that
//! goes on the wire; the header carries one `v1,<base64>` signature per secret, separated by
//! spaces, so that a receiver can rotate its secret without a gap (spec, "Webhook headers").
//! Shared by everything in herald that signs or checks Standard Webhooks (and Svix, the same
//! scheme under other header names): the webhook adapter, the sandbox and Resend callbacks.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use secrecy::{ExposeSecret, SecretSlice, SecretString};
use sha2::Sha256;

/// The prefix that marks a Standard Webhooks symmetric secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// The prefix of a symmetric (HMAC-SHA256) signature in `webhook-signature`.
pub const SIGNATURE_PREFIX: &str = "v1,";
/// The spec's bounds on a symmetric secret: "at least 24 bytes (192 bits, 512 maximum)".
pub const SECRET_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// A decoded signing secret. Its bytes stay inside `secrecy` (zeroed on drop, redacted in
/// `Debug`), and no error about it ever quotes them.
#[derive(Debug, Clone)]
pub struct SigningSecret(SecretSlice<u8>);

/// Why a configured secret is not a Standard Webhooks secret. Says what is wrong with its
/// form, never what it contains: a decoder's message would quote the offending character.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("does not start with `whsec_`")]
    Prefix,
    #[error("is not standard base64 after `whsec_`")]
    Base64,
    #[error("decodes to {0} bytes; Standard Webhooks secrets are 24 to 64 bytes")]
    Length(usize),
}

impl SigningSecret {
    /// Parses `whsec_<base64>` (standard alphabet, padded, as the spec's examples are).
    pub fn parse(secret: &SecretString) -> Result<SigningSecret, SecretError> {
        let encoded = secret
            .expose_secret()
            .trim()
            .strip_prefix(SECRET_PREFIX)
            .ok_or(SecretError::Prefix)?;
        let bytes = SecretSlice::from(STANDARD.decode(encoded).map_err(|_| SecretError::Base64)?);
        let len = bytes.expose_secret().len();
        if !SECRET_BYTES.contains(&len) {
            return Err(SecretError::Length(len));
        }
        Ok(SigningSecret(bytes))
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes keys of any length, so this cannot fail for any secret that parsed.
        Hmac::<Sha256>::new_from_slice(self.0.expose_secret())
            .expect("HMAC-SHA256 accepts keys of any length")
    }

    /// `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = self.mac();
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!(
            "{SIGNATURE_PREFIX}{}",
            STANDARD.encode(mac.finalize().into_bytes())
        )
    }

    /// Whether any `v1,` signature in a `webhook-signature` header was made with this secret,
    /// compared in constant time (the spec requires it of receivers). Other schemes (`v1a,`)
    /// and malformed entries are skipped, as a receiver must to stay forward compatible.
    pub fn verifies(&self, header: &str, id: &str, timestamp: i64, body: &[u8]) -> bool {
        header.split(' ').any(|entry| {
            let Some(encoded) = entry.strip_prefix(SIGNATURE_PREFIX) else {
                return false;
            };
            let Ok(signature) = STANDARD.decode(encoded) else {
                return false;
            };
            let mut mac = self.mac();
            mac.update(format!("{id}.{timestamp}.").as_bytes());
            mac.update(body);
            mac.verify_slice(&signature).is_ok()
        })
    }
}

/// The `webhook-signature` value: one signature per secret, in the order given, space-separated.
pub fn signature_header(
    secrets: &[SigningSecret],
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    secrets
        .iter()
        .map(|secret| secret.sign(id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(s: &str) -> Result<SigningSecret, SecretError> {
        SigningSecret::parse(&SecretString::from(s))
    }

    #[test]
    fn malformed_secrets_are_refused_without_quoting_them() {
        assert_eq!(
            secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap_err(),
            SecretError::Prefix
        );
        assert_eq!(
            secret("whsec_not base64!").unwrap_err(),
            SecretError::Base64
        );
        // 16 bytes: below the spec's 24-byte minimum.
        assert_eq!(
            secret("whsec_AAAAAAAAAAAAAAAAAAAAAA==").unwrap_err(),
            SecretError::Length(16)
        );
        let long = format!("whsec_{}", STANDARD.encode([7u8; 65]));
        assert_eq!(secret(&long).unwrap_err(), SecretError::Length(65));
        assert!(secret(&format!("whsec_{}", STANDARD.encode([7u8; 64]))).is_ok());
    }

    #[test]
    fn a_signature_verifies_only_with_its_own_secret_and_content() {
        let a = secret(&format!("whsec_{}", STANDARD.encode([1u8; 32]))).unwrap();
        let b = secret(&format!("whsec_{}", STANDARD.encode([2u8; 32]))).unwrap();
        let header = signature_header(std::slice::from_ref(&a), "msg_1", 1_700_000_000, b"{}");
        assert!(a.verifies(&header, "msg_1", 1_700_000_000, b"{}"));
        assert!(!b.verifies(&header, "msg_1", 1_700_000_000, b"{}"));
        assert!(!a.verifies(&header, "msg_2", 1_700_000_000, b"{}"));
        assert!(!a.verifies(&header, "msg_1", 1_700_000_001, b"{}"));
        assert!(!a.verifies(&header, "msg_1", 1_700_000_000, b"{ }"));
    }
}
