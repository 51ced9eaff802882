//! The service account key: read from the key file's JSON, and used for one thing only, to sign
//! the assertion the token endpoint exchanges for an access token.
//!
//! The file is read field by field from a `serde_json::Value` rather than deserialized into a
//! struct, because serde's type errors quote the value they met ("invalid type: string
//! \"-----BEGIN PRIVATE KEY…\""): a [`KeyError`] names a field or a position, never content.

use std::fmt;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::wire::{ASSERTION_LIFETIME_SECS, Assertion, MESSAGING_SCOPE};

/// Why a key file cannot be used. Never quotes the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the service account key is not JSON (line {line}, column {column})")]
    NotJson { line: usize, column: usize },
    #[error("the service account key is not a JSON object")]
    NotAnObject,
    #[error("the service account key has no `{0}` string")]
    Missing(&'static str),
    #[error("the key file is not a service account key (its `type` is not `service_account`)")]
    NotAServiceAccount,
    #[error("the service account key's `private_key` is not an RSA private key in PEM")]
    PrivateKey,
}

/// A service account key, read. Its `Debug` shows the account, never the private key.
pub struct Key {
    pub project_id: Option<String>,
    pub private_key_id: String,
    pub client_email: String,
    pub token_uri: String,
    signer: EncodingKey,
    /// The PEM as the key file holds it, kept only to scrub it from evidence.
    private_key: SecretString,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("client_email", &self.client_email)
            .field("private_key_id", &self.private_key_id)
            .field("token_uri", &self.token_uri)
            .field("private_key", &"[REDACTED]")
            .finish_non_exhaustive()
    }
}

impl Key {
    /// Reads a service account key file's content.
    pub fn parse(json: &SecretString) -> Result<Key, KeyError> {
        let value: Value =
            serde_json::from_str(json.expose_secret()).map_err(|err| KeyError::NotJson {
                line: err.line(),
                column: err.column(),
            })?;
        let object = value.as_object().ok_or(KeyError::NotAnObject)?;
        let text = |name: &'static str| {
            object
                .get(name)
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
                .ok_or(KeyError::Missing(name))
        };
        if text("type")? != "service_account" {
            return Err(KeyError::NotAServiceAccount);
        }
        let private_key = text("private_key")?;
        let signer =
            EncodingKey::from_rsa_pem(private_key.as_bytes()).map_err(|_| KeyError::PrivateKey)?;
        Ok(Key {
            project_id: text("project_id").ok().map(str::to_owned),
            private_key_id: text("private_key_id")?.to_owned(),
            client_email: text("client_email")?.to_owned(),
            token_uri: text("token_uri")?.to_owned(),
            signer,
            private_key: SecretString::from(private_key.to_owned()),
        })
    }

    /// The assertion for the token exchange, issued at `now` (seconds since the epoch), RS256
    /// with the key's id as `kid`: `iss` the account, `aud` the token URI, the messaging scope,
    /// and the longest lifetime Google takes, an hour.
    pub fn assertion(&self, now: u64) -> Result<SecretString, String> {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(self.private_key_id.clone());
        let claims = Assertion {
            iss: self.client_email.clone(),
            scope: MESSAGING_SCOPE.to_owned(),
            aud: self.token_uri.clone(),
            iat: now,
            exp: now + ASSERTION_LIFETIME_SECS,
        };
        jsonwebtoken::encode(&header, &claims, &self.signer)
            .map(SecretString::from)
            // jsonwebtoken's errors name a kind ("InvalidRsaKey"), never key material.
            .map_err(|err| format!("cannot sign the assertion: {err}"))
    }

    /// Every form in which the private key could show up in an answer: the PEM as it is, as
    /// the key file's JSON escapes it, and each line of its base64 body (an echo may be cut
    /// or re-wrapped). For the adapter's redactor only.
    pub fn secret_forms(&self) -> Vec<String> {
        let pem = self.private_key.expose_secret();
        let mut forms = vec![pem.to_owned(), pem.replace('\n', "\\n")];
        forms.extend(
            pem.lines()
                .map(str::trim)
                .filter(|line| !line.starts_with("-----") && line.len() >= 16)
                .map(str::to_owned),
        );
        forms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Key, KeyError> {
        Key::parse(&SecretString::from(json.to_owned()))
    }

    #[test]
    fn a_key_file_that_is_not_one_is_refused_without_quoting_it() {
        let secret = "-----BEGIN PRIVATE KEY-----\\nMIIsecret\\n-----END PRIVATE KEY-----";
        let cases = [
            (format!("\"{secret}\""), KeyError::NotAnObject),
            (
                format!("{{\"private_key\": \"{secret}\""),
                KeyError::NotJson { line: 0, column: 0 },
            ),
            (
                format!("{{\"type\": \"service_account\", \"private_key\": \"{secret}\"}}"),
                KeyError::PrivateKey,
            ),
            (
                format!("{{\"type\": \"authorized_user\", \"private_key\": \"{secret}\"}}"),
                KeyError::NotAServiceAccount,
            ),
            (
                r#"{"type": "service_account"}"#.to_owned(),
                KeyError::Missing("private_key"),
            ),
        ];
        for (json, expected) in cases {
            let err = parse(&json).unwrap_err();
            // A position is all a syntax error shows; which one is serde_json's to say.
            assert_eq!(
                std::mem::discriminant(&err),
                std::mem::discriminant(&expected),
                "{json}: {err}"
            );
            assert!(!err.to_string().contains("secret"), "{err}");
        }
    }
}
