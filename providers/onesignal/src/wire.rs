//! OneSignal's HTTP contract as far as herald uses it: the path, header names and JSON bodies of
//! create message (`POST /notifications`), shared by the adapter and the fake so that the two
//! cannot drift apart.
//!
//! Sources: <https://documentation.onesignal.com/reference/push-notification>,
//! <https://documentation.onesignal.com/reference/idempotent-notification-requests>, and
//! OneSignal's API description (`api/openapi.yaml` in OneSignal/onesignal-go-api).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The create-message endpoint, below the base URL (the path OneSignal's own SDKs post to; the
/// docs' `?c=push` only tells the per-channel reference pages apart).
pub const NOTIFICATIONS_PATH: &str = "/notifications";
/// Set to `true` on an answer that repeats the result of an earlier request with the same
/// `idempotency_key` (read by OneSignal's own SDK helpers).
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// `POST /notifications` as the adapter writes it, borrowed from herald's message.
#[derive(Debug, Serialize)]
pub struct CreateMessage<'a> {
    pub app_id: &'a str,
    /// A UUID; see `idempotency_key_for`.
    pub idempotency_key: String,
    /// The one subscription (device) the message goes to. No `target_channel`: a subscription
    /// id already names its channel, and the docs pair `target_channel` with `include_aliases`.
    pub include_subscription_ids: [&'a str; 1],
    /// Required, with English, unless a template is used; absent only if herald's message has
    /// no text, and then OneSignal refuses the request rather than the adapter guessing one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contents: Option<English<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headings: Option<English<'a>>,
}

/// A language map with English only: `{"en": "…"}`.
#[derive(Debug, Serialize)]
pub struct English<'a> {
    pub en: &'a str,
}

/// A 200 answer. A non-empty `id` means the notification was created (`errors` may then list
/// skipped recipients); an empty or missing `id` means nothing was created and `errors` says why.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Created {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Value>,
}

/// The first human-readable reason in an `errors` field, whichever of OneSignal's shapes it
/// has: a list of strings, one string, or an object keyed by kind (`invalid_player_ids`, …).
pub fn first_error(errors: &Value) -> Option<String> {
    match errors {
        Value::String(text) if !text.is_empty() => Some(text.clone()),
        Value::Array(items) => items.iter().find_map(first_error),
        Value::Object(map) => map.keys().next().cloned(),
        _ => None,
    }
}

/// The `errors` of any answer body, if it is JSON and has them.
pub fn errors_of(body: &str) -> Option<Value> {
    let mut value: Value = serde_json::from_str(body).ok()?;
    Some(value.get_mut("errors")?.take())
}
