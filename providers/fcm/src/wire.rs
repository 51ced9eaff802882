//! FCM's HTTP contract as far as herald uses it — the service account key, the token exchange
//! and `messages:send` — shared by the adapter and the fake so that the two cannot drift apart.
//!
//! Sources: <https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages/send>,
//! <https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages>,
//! <https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode>,
//! <https://firebase.google.com/docs/cloud-messaging/error-codes> (the error envelope) and
//! <https://developers.google.com/identity/protocols/oauth2/service-account> (the assertion and
//! the token exchange).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// FCM's send endpoint below the base URL, for `project_id`.
pub fn send_path(project_id: &str) -> String {
    format!("/v1/projects/{project_id}/messages:send")
}

/// The same path as the fake routes it (axum's capture syntax).
#[cfg(feature = "fake")]
pub const SEND_ROUTE: &str = "/v1/projects/{project}/messages:send";

/// The token endpoint's path on the fake; a real key names Google's in its `token_uri`.
#[cfg(feature = "fake")]
pub const TOKEN_PATH: &str = "/token";

/// The scope a send needs ("Requires one of the following OAuth scopes": this one, or the
/// broader `cloud-platform`; herald asks for the narrow one).
pub const MESSAGING_SCOPE: &str = "https://www.googleapis.com/auth/firebase.messaging";

/// The token exchange's `grant_type` for a signed assertion (RFC 7523).
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// The longest an assertion may live: `exp` "has a maximum of 1 hour after the issued time".
pub const ASSERTION_LIFETIME_SECS: u64 = 3600;

/// The `@type` of the detail that carries FCM's own [`ErrorCode`] in an error answer.
///
/// [`ErrorCode`]: https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode
pub const FCM_ERROR_TYPE: &str = "type.googleapis.com/google.firebase.fcm.v1.FcmError";

/// FCM's error codes that herald reads (the `errorCode` of the `FcmError` detail).
pub const UNREGISTERED: &str = "UNREGISTERED";
pub const THIRD_PARTY_AUTH_ERROR: &str = "THIRD_PARTY_AUTH_ERROR";

/// The key of the message's `data` entry that carries herald's key.
pub const KEY_DATA: &str = "herald_key";

/// The fields of a service account key file (the JSON the console downloads) that the token
/// exchange needs, as the fake writes its test key. The file has more (`client_id`,
/// `auth_uri`, …). The adapter reads a key by these names too, field by field (`key.rs`), so
/// that no parse error can quote a secret.
#[cfg(feature = "fake")]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceAccountKey {
    #[serde(rename = "type")]
    pub kind: String,
    pub project_id: String,
    /// The key's id: the assertion's `kid`.
    pub private_key_id: String,
    /// The RSA private key, PKCS#8 PEM: the fake's test key, never a real one.
    pub private_key: String,
    /// The service account: the assertion's `iss`.
    pub client_email: String,
    /// Where the assertion is exchanged for an access token, and its `aud`.
    pub token_uri: String,
}

/// The claims of the assertion a service account signs (RS256) for the token exchange.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assertion {
    pub iss: String,
    pub scope: String,
    pub aud: String,
    pub iat: u64,
    pub exp: u64,
}

/// The token endpoint's answer to an accepted assertion, as the fake writes it. The adapter
/// reads one field by field (`token.rs`), so that no parse error can quote the token.
#[cfg(feature = "fake")]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Token {
    pub access_token: String,
    /// Seconds (Google's tokens last an hour: 3599 or 3600).
    pub expires_in: u64,
    pub token_type: String,
}

/// The token endpoint's refusal (RFC 6749 §5.2): `invalid_grant` for a key it does not accept.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OAuthError {
    pub error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_description: Option<String>,
}

/// `POST …/messages:send` as the adapter writes it, borrowed from herald's message.
#[derive(Debug, Serialize)]
pub struct SendMessage<'a> {
    pub message: Message<'a>,
}

#[derive(Debug, Serialize)]
pub struct Message<'a> {
    /// The registration token (herald's `to`).
    pub token: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notification: Option<Notification<'a>>,
    pub data: Data<'a>,
    /// Only with an expiry: `apns-expiration`, the notification's expiry as a Unix time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apns: Option<Apns>,
}

#[derive(Debug, Serialize)]
pub struct Notification<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<&'a str>,
}

/// The message's `data` map: herald's key alone, so that the app can drop a repeat.
#[derive(Debug, Serialize)]
pub struct Data<'a> {
    pub herald_key: &'a str,
}

#[derive(Debug, Serialize)]
pub struct Apns {
    pub headers: ApnsHeaders,
}

#[derive(Debug, Serialize)]
pub struct ApnsHeaders {
    /// Seconds since the epoch, as a string (APNs' header).
    #[serde(rename = "apns-expiration")]
    pub apns_expiration: String,
}

/// A 200 answer: the `Message` resource, of which only the output field `name`
/// (`projects/*/messages/{message_id}`) comes back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sent {
    #[serde(default)]
    pub name: String,
}

/// An error answer: `{"error": {"code", "message", "status", "details": [...]}}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorAnswer {
    pub error: Status,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    pub code: u16,
    #[serde(default)]
    pub message: String,
    /// The canonical status (`NOT_FOUND`, `UNAUTHENTICATED`, …).
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<Value>,
}

/// The code an error answer names: FCM's own `errorCode` where it has an `FcmError` detail,
/// else the canonical `status`; `None` for a body that is no error answer.
pub fn error_code(body: &str) -> Option<String> {
    let answer: ErrorAnswer = serde_json::from_str(body).ok()?;
    let fcm = answer.error.details.iter().find_map(|detail| {
        let typed = detail.get("@type").and_then(Value::as_str);
        (typed == Some(FCM_ERROR_TYPE)).then_some(())?;
        // proto3 JSON writes `errorCode`; the reference page shows the field as `error_code`.
        let code = detail.get("errorCode").or_else(|| detail.get("error_code"));
        code.and_then(Value::as_str).map(str::to_owned)
    });
    fcm.or_else(|| (!answer.error.status.is_empty()).then_some(answer.error.status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_is_fcms_own_where_a_detail_names_it_else_the_status() {
        let unregistered = r#"{"error": {"code": 404, "message": "x", "status": "NOT_FOUND",
            "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                         "errorCode": "UNREGISTERED"}]}}"#;
        assert_eq!(error_code(unregistered).as_deref(), Some("UNREGISTERED"));
        let bare = r#"{"error": {"code": 401, "message": "x", "status": "UNAUTHENTICATED"}}"#;
        assert_eq!(error_code(bare).as_deref(), Some("UNAUTHENTICATED"));
        let other_detail = r#"{"error": {"code": 400, "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest"}]}}"#;
        assert_eq!(
            error_code(other_detail).as_deref(),
            Some("INVALID_ARGUMENT")
        );
        assert_eq!(error_code("<html>502</html>"), None);
    }
}
