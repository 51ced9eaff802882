//! APNs' HTTP/2 contract as far as herald uses it: the path, the header names, the reasons of
//! its error answers and the JSON bodies, shared by the adapter and the fake so that the two
//! cannot drift apart.
//!
//! Sources: <https://developer.apple.com/documentation/usernotifications/sending-notification-requests-to-apns>,
//! <https://developer.apple.com/documentation/usernotifications/handling-notification-responses-from-apns>,
//! <https://developer.apple.com/documentation/usernotifications/establishing-a-token-based-connection-to-apns>.

use serde::{Deserialize, Serialize};

/// `POST /3/device/<device_token>`: the path below the base URL, before the device token.
pub const DEVICE_PATH: &str = "/3/device/";

/// Request and answer: a canonical UUID naming the notification; APNs echoes the request's.
pub const APNS_ID: &str = "apns-id";
/// The app's bundle id (with a suffix for some push types). Required with token auth.
pub const APNS_TOPIC: &str = "apns-topic";
/// What the payload is (`alert`, `background`, …).
pub const APNS_PUSH_TYPE: &str = "apns-push-type";
/// `10`, `5` or `1`; APNs' default is `10`.
pub const APNS_PRIORITY: &str = "apns-priority";
/// UNIX seconds (UTC) after which APNs stops trying; `0`: try once, store nothing.
pub const APNS_EXPIRATION: &str = "apns-expiration";
/// Notifications with the same value are merged into one on the device; at most 64 bytes.
pub const APNS_COLLAPSE_ID: &str = "apns-collapse-id";
/// A development-environment-only answer header, for Apple's Push Notifications Console.
pub const APNS_UNIQUE_ID: &str = "apns-unique-id";

/// The largest `apns-collapse-id`, in bytes ("must not exceed 64 bytes").
pub const MAX_COLLAPSE_ID_BYTES: usize = 64;
/// The largest payload of every push type but VoIP's: "a maximum size of 4 KB (4096 bytes)".
pub const MAX_PAYLOAD_BYTES: usize = 4096;

// The `reason`s herald tells apart (Apple's "Response error strings" table); the fake answers
// with the documented bodies of `fixtures/apns/errors/`.
pub const EXPIRED_PROVIDER_TOKEN: &str = "ExpiredProviderToken";
pub const INVALID_PROVIDER_TOKEN: &str = "InvalidProviderToken";
pub const UNREGISTERED: &str = "Unregistered";
pub const EXPIRED_TOKEN: &str = "ExpiredToken";
pub const TOO_MANY_PROVIDER_TOKEN_UPDATES: &str = "TooManyProviderTokenUpdates";

/// The body of a push: `{"aps": {"alert": {"title": …, "body": …}}}`.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Payload<'a> {
    #[serde(borrow)]
    pub aps: Aps<'a>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Aps<'a> {
    #[serde(borrow)]
    pub alert: Alert<'a>,
}

/// An alert's text; either part may be missing, never both (the adapter refuses that).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Alert<'a> {
    #[serde(skip_serializing_if = "Option::is_none", borrow)]
    pub title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none", borrow)]
    pub body: Option<&'a str>,
}

/// An error answer: `{"reason": "…"}`, and on a 410 `timestamp`, "the time, represented in
/// milliseconds since Epoch, at which APNs confirmed the token was no longer valid for the
/// topic".
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorBody {
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<u64>,
}

/// The `reason` of an error answer's body, if it is one.
pub fn reason_of(body: &str) -> Option<String> {
    let error: ErrorBody = serde_json::from_str(body).ok()?;
    (!error.reason.is_empty()).then_some(error.reason)
}

/// The provider token's claims: the team id and the time it was made, in UNIX seconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claims {
    pub iss: String,
    pub iat: u64,
}
