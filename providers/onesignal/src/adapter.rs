//! Herald's adapter for OneSignal push (`provider = "onesignal"`): one create-message request
//! per send, carrying a UUID derived from the notification's stable key as `idempotency_key`,
//! classified where the exchange ended.
//!
//! The crate docs state the classification table and the sources; this module implements it.
//! What differs from `herald_provider::http`'s shared table is only the 200 without an `id`:
//! OneSignal's documented way of saying that nothing was created.

use std::fmt;
use std::time::Duration;

use herald_provider::http::{
    self, Answer, StatusRules, classify_failure_status, exchange, unreadable_success,
    with_vendor_code,
};
use herald_provider::{
    Adapter, Capabilities, Evidence, Message, ProviderKey, Redactor, Request, SendResult,
};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use uuid::Uuid;

use crate::wire::{
    CreateMessage, Created, English, IDEMPOTENT_REPLAYED, NOTIFICATIONS_PATH, errors_of,
    first_error,
};

/// OneSignal's public API root.
pub const DEFAULT_BASE_URL: &str = "https://api.onesignal.com";

/// "This key is only idempotent for 30 days"
/// (<https://documentation.onesignal.com/reference/idempotent-notification-requests>).
pub const IDEMPOTENCY_WINDOW: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// The namespace of the name-based UUIDs made from keys that are not UUIDs themselves. Fixed
/// forever: changing it would give a notification in flight a new key, and a resend of it a
/// second delivery.
const KEY_NAMESPACE: Uuid = Uuid::from_u128(0x8cb3798a_60fc_4b01_b85d_e64945a094b8);

/// OneSignal documents neither 409 nor 503 as "not processed", so the shared table applies.
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// A route's settings, already resolved by herald.
#[derive(Debug, Clone)]
pub struct OneSignalRoute {
    /// [`DEFAULT_BASE_URL`], or a stand-in such as the fake's.
    pub base_url: String,
    /// The OneSignal app the subscriptions belong to (a UUID; public, not a secret).
    pub app_id: String,
    /// The app's REST API key; sent as `Authorization: Key <key>` and nowhere else.
    pub api_key: SecretString,
    /// The whole exchange, connect to last body byte.
    pub timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum OneSignalError {
    #[error("the OneSignal base_url `{url}` is not an http(s) URL: {reason}")]
    BaseUrl { url: String, reason: String },
    /// The key itself is never part of the message.
    #[error("the OneSignal API key has characters that an HTTP header cannot carry")]
    ApiKey,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

pub struct OneSignalAdapter {
    /// How long one call may take: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    notifications_url: Url,
    app_id: String,
    /// `Key <key>`, marked sensitive so that no header dump shows it.
    authorization: HeaderValue,
    /// Scrubs the key, in every form, from anything a vendor answer might echo.
    redactor: Redactor,
    capabilities: Capabilities,
}

impl fmt::Debug for OneSignalAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OneSignalAdapter")
            .field("notifications_url", &self.notifications_url.as_str())
            .field("app_id", &self.app_id)
            .field("api_key", &"[REDACTED]")
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

/// The `idempotency_key` OneSignal sees for herald's `key`. OneSignal takes only UUIDs
/// (<https://documentation.onesignal.com/reference/idempotent-notification-requests>): herald's
/// keys are UUIDs and pass through in canonical form; any other key becomes the UUIDv5 of its
/// text in a fixed namespace, so every resend of a notification still carries the same key.
pub fn idempotency_key_for(key: &ProviderKey) -> String {
    let uuid = Uuid::try_parse(key.as_str())
        .unwrap_or_else(|_| Uuid::new_v5(&KEY_NAMESPACE, key.as_str().as_bytes()));
    uuid.hyphenated().to_string()
}

impl OneSignalAdapter {
    /// Builds the adapter at start-up. reqwest needs a rustls crypto provider to be installed
    /// first (herald's main installs ring); without one, building the client panics inside
    /// reqwest.
    pub fn new(route: OneSignalRoute) -> Result<Self, OneSignalError> {
        let notifications_url = endpoint(&route.base_url)?;
        // The current scheme for App API keys; the older `Basic` scheme served legacy keys
        // (<https://documentation.onesignal.com/docs/keys-and-ids>).
        let mut authorization =
            HeaderValue::from_str(&format!("Key {}", route.api_key.expose_secret()))
                .map_err(|_| OneSignalError::ApiKey)?;
        authorization.set_sensitive(true);
        let http = reqwest::Client::builder()
            .timeout(route.timeout)
            .user_agent(concat!("herald-onesignal/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(OneSignalError::Client)?;
        Ok(OneSignalAdapter {
            timeout: route.timeout,
            http,
            notifications_url,
            app_id: route.app_id,
            authorization,
            redactor: Redactor::secret(route.api_key.expose_secret()),
            capabilities: Capabilities {
                idempotency_window: Some(IDEMPOTENCY_WINDOW),
                // A notification can be viewed by OneSignal's own id only; a look-up by our
                // key is not documented, so a replay inside the window reconciles.
                query_visibility_lag: None,
                // OneSignal documents display guidance (title ~50, content ~150 characters),
                // not a byte limit of its own; the platforms' limits (APNs 4 KB) include
                // OneSignal's own fields, so no number here would be truthful.
                max_payload_bytes: None,
                tags: false,
                attachments: false,
            },
        })
    }

    /// One create-message request, classified; [`Adapter::send_prepared`] scrubs the key from
    /// the result.
    async fn create_message(&self, request: &Request, message: &Message) -> SendResult {
        let request = self
            .http
            .post(self.notifications_url.clone())
            .header(AUTHORIZATION, self.authorization.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(request.body.clone());
        let Answer {
            status,
            headers,
            body: text,
        } = match exchange(request, self.timeout).await {
            Ok(answer) => answer,
            Err(result) => return result,
        };
        if !status.is_success() {
            return with_vendor_code(
                classify_failure_status(status, &headers, &text, RULES),
                errors_of(&text).as_ref().and_then(first_error),
            );
        }
        classify_success(status, &headers, &text, &message.to)
    }
}

#[async_trait::async_trait]
impl Adapter for OneSignalAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The create-message body, with the key in it: herald stores it at the first attempt and
    /// replays it byte for byte.
    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let body = CreateMessage {
            app_id: &self.app_id,
            idempotency_key: idempotency_key_for(key),
            include_subscription_ids: [&message.to],
            contents: message.text.as_deref().map(|en| English { en }),
            headings: message.subject.as_deref().map(|en| English { en }),
        };
        Request::json(&body)
    }

    async fn send_prepared(
        &self,
        request: &Request,
        message: &Message,
        _key: &ProviderKey,
    ) -> SendResult {
        // Anything OneSignal echoes is scrubbed of the key before it becomes evidence.
        let result = self.create_message(request, message).await;
        self.redactor.send(result)
    }
}

/// A 2xx answer to a message for `target`: created (an `id`), documented as not created (no
/// `id`, `errors` says why), created without reaching `target`, or unreadable.
fn classify_success(
    status: StatusCode,
    headers: &HeaderMap,
    text: &str,
    target: &str,
) -> SendResult {
    let created: Created = match serde_json::from_str(text) {
        Ok(created) => created,
        Err(err) => return unreadable_success(status, format!("{err}: {text}")),
    };
    let replayed = headers
        .get(IDEMPOTENT_REPLAYED)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"true"));
    let detail = if replayed {
        format!("idempotent replay of an earlier request: {text}")
    } else {
        text.to_owned()
    };
    let skipped = created
        .errors
        .as_ref()
        .filter(|errors| mentions(errors, target));
    match created.id.filter(|id| !id.is_empty()) {
        // Created, but our one recipient is among those it lists as skipped ("marks devices
        // that exist in the provided app_id but are no longer subscribed"): nothing will
        // reach it, and a repeat of the key answers the same.
        Some(_) if skipped.is_some() => SendResult::permanent(with_code(
            Evidence::new("response", detail).with_status(status.as_u16()),
            skipped.and_then(first_error),
        )),
        Some(id) => SendResult::Accepted {
            provider_ref: Some(id),
            evidence: Evidence::new("response", detail).with_status(status.as_u16()),
        },
        // "If `id` is an empty string, no notification was created": the documented way of
        // refusing, e.g. "All included players are not subscribed". Retrying cannot help — a
        // repeat of the key answers the same result for 30 days.
        None => match created.errors.as_ref().and_then(first_error) {
            Some(code) => SendResult::permanent(
                Evidence::new("response", detail)
                    .with_status(status.as_u16())
                    .with_vendor_code(code),
            ),
            None => unreadable_success(status, format!("neither an id nor errors: {text}")),
        },
    }
}

fn endpoint(base_url: &str) -> Result<Url, OneSignalError> {
    http::endpoint(base_url, NOTIFICATIONS_PATH).map_err(|reason| OneSignalError::BaseUrl {
        url: base_url.to_owned(),
        reason,
    })
}

/// Whether `errors`, in any of its shapes, names `target` (a skipped recipient).
fn mentions(errors: &serde_json::Value, target: &str) -> bool {
    match errors {
        serde_json::Value::String(text) => text == target,
        serde_json::Value::Array(items) => items.iter().any(|item| mentions(item, target)),
        serde_json::Value::Object(map) => map.values().any(|value| mentions(value, target)),
        _ => false,
    }
}

fn with_code(evidence: Evidence, code: Option<String>) -> Evidence {
    match code {
        Some(code) => evidence.with_vendor_code(code),
        None => evidence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: &str = "1dd608f2-c6a1-11e3-851d-000c2940e62c";

    #[test]
    fn a_uuid_key_passes_through_in_canonical_form() {
        let key = ProviderKey::new("01970000-0000-7000-8000-000000000001");
        assert_eq!(idempotency_key_for(&key), key.as_str());
        let upper = ProviderKey::new("01970000-0000-7000-8000-00000000000A");
        assert_eq!(
            idempotency_key_for(&upper),
            "01970000-0000-7000-8000-00000000000a"
        );
    }

    #[test]
    fn any_other_key_becomes_the_same_uuid_v5_every_time() {
        let key = ProviderKey::new("welcome-user/123456789");
        let derived = idempotency_key_for(&key);
        assert_eq!(derived, idempotency_key_for(&key));
        let uuid = Uuid::parse_str(&derived).unwrap();
        assert_eq!(uuid.get_version_num(), 5);
        assert_ne!(
            derived,
            idempotency_key_for(&ProviderKey::new("welcome-user/123456780"))
        );
    }

    #[test]
    fn a_200_without_an_id_is_a_permanent_rejection_with_the_reason_as_code() {
        let body = r#"{"id":"","errors":["All included players are not subscribed"]}"#;
        match classify_success(StatusCode::OK, &HeaderMap::new(), body, TARGET) {
            SendResult::Rejected {
                permanent: true,
                evidence,
                ..
            } => assert_eq!(
                evidence.vendor_code.as_deref(),
                Some("All included players are not subscribed")
            ),
            other => panic!("expected a permanent rejection, got {other:?}"),
        }
    }

    #[test]
    fn a_200_with_an_id_and_other_skipped_recipients_is_an_acceptance() {
        let body = r#"{"id":"b3a0c8bd-3a4c-4b22-9a73-3f1a8c2d1b88",
                       "errors":{"invalid_player_ids":["someone-else"]}}"#;
        match classify_success(StatusCode::OK, &HeaderMap::new(), body, TARGET) {
            SendResult::Accepted {
                provider_ref,
                evidence,
            } => {
                assert_eq!(
                    provider_ref.as_deref(),
                    Some("b3a0c8bd-3a4c-4b22-9a73-3f1a8c2d1b88")
                );
                assert!(evidence.detail.contains("invalid_player_ids"));
            }
            other => panic!("expected an acceptance, got {other:?}"),
        }
    }

    #[test]
    fn a_200_with_an_id_that_skipped_our_recipient_is_a_permanent_rejection() {
        let body = format!(
            r#"{{"id":"b3a0c8bd-3a4c-4b22-9a73-3f1a8c2d1b88",
                  "errors":{{"invalid_aliases":{{"subscription_id":["{TARGET}"]}}}}}}"#
        );
        match classify_success(StatusCode::OK, &HeaderMap::new(), &body, TARGET) {
            SendResult::Rejected {
                permanent: true,
                evidence,
                ..
            } => assert_eq!(evidence.vendor_code.as_deref(), Some("invalid_aliases")),
            other => panic!("expected a permanent rejection, got {other:?}"),
        }
    }

    #[test]
    fn a_200_with_neither_id_nor_errors_is_ambiguous() {
        for body in ["{}", "not json", r#"{"id":""}"#] {
            assert!(
                matches!(
                    classify_success(StatusCode::OK, &HeaderMap::new(), body, TARGET),
                    SendResult::Ambiguous { .. }
                ),
                "{body}"
            );
        }
    }
}
