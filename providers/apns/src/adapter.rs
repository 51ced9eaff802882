//! Herald's APNs adapter (`provider = "apns"`): one `POST /3/device/<token>` per send over
//! HTTP/2, under a provider token that the `token` module keeps fresh, with herald's key as
//! `apns-id`, classified where the exchange ended.
//!
//! The crate docs state the classification table and the sources; this module implements it.
//! What differs from `herald_provider::http`'s shared table: the 200 is proven by the `apns-id`
//! APNs echoes, a 403 that refuses the provider token is sent once more with a new one, the two
//! 429s are told apart by their `reason`, and a 410 names a device token to suppress.

use std::fmt;
use std::time::{Duration, Instant};

use herald_provider::http::{
    self, Answer, StatusRules, UrlOwner, classify_failure_status, retry_after, unreadable_success,
    with_vendor_code,
};
use herald_provider::{
    Adapter, Capabilities, Channel, Evidence, Message, ProviderKey, Request, SendResult,
};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap};
use reqwest::{StatusCode, Url};
use secrecy::SecretString;
use serde::Deserialize;
use uuid::Uuid;

use crate::token::{self, MIN_UPDATE_INTERVAL, SigningError, Token, Tokens};
use crate::wire::{
    self, APNS_COLLAPSE_ID, APNS_EXPIRATION, APNS_ID, APNS_PRIORITY, APNS_PUSH_TYPE, APNS_TOPIC,
    APNS_UNIQUE_ID, Alert, Aps, DEVICE_PATH, MAX_COLLAPSE_ID_BYTES, MAX_PAYLOAD_BYTES, Payload,
};

/// APNs' production server.
pub const DEFAULT_BASE_URL: &str = "https://api.push.apple.com";
/// APNs' development server, for apps built with the development environment's entitlement.
pub const SANDBOX_BASE_URL: &str = "https://api.sandbox.push.apple.com";

/// The namespace of the name-based UUIDs made from keys that are not UUIDs themselves. Fixed
/// forever: changing it would give a notification in flight another `apns-id`.
const KEY_NAMESPACE: Uuid = Uuid::from_u128(0x5f0c_7a4e_93d1_4c2b_8e6a_0b9d_2f71_c3a8);

/// APNs documents neither 409 nor 503 as "not processed" (503 "The server is shutting down and
/// unavailable" says what the server is, not what became of the request), so the shared table
/// applies to both.
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// Where the prepared request keeps the device token (its path is `/3/device/<token>`).
const DEVICE_TOKEN: &str = "device_token";

/// `apns-push-type`: what the payload is. herald's payload is always an alert (`title`,
/// `body`); another type suits only an app that takes an alert under it (the topic must carry
/// the type's suffix, such as `.voip`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PushType {
    #[default]
    Alert,
    Background,
    Complication,
    Controls,
    Fileprovider,
    Liveactivity,
    Location,
    Mdm,
    Pushtotalk,
    Voip,
    Widgets,
}

impl PushType {
    pub fn as_str(self) -> &'static str {
        match self {
            PushType::Alert => "alert",
            PushType::Background => "background",
            PushType::Complication => "complication",
            PushType::Controls => "controls",
            PushType::Fileprovider => "fileprovider",
            PushType::Liveactivity => "liveactivity",
            PushType::Location => "location",
            PushType::Mdm => "mdm",
            PushType::Pushtotalk => "pushtotalk",
            PushType::Voip => "voip",
            PushType::Widgets => "widgets",
        }
    }
}

/// What a route sends as `apns-collapse-id`, which makes the device show notifications with the
/// same value as one ("When sending the same notification more than once, use the same value
/// in this header to merge the requests").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollapseId {
    /// No `apns-collapse-id`: every request APNs takes is a notification of its own.
    #[default]
    None,
    /// herald's notification id: every attempt of one notification, a resend after an
    /// ambiguous answer and a fallback route's send of it (for the same app) alike, shows as one
    /// notification on the device. Two notifications never merge.
    Notification,
}

/// A route's settings, already resolved by herald.
#[derive(Debug, Clone)]
pub struct ApnsRoute {
    /// [`DEFAULT_BASE_URL`], [`SANDBOX_BASE_URL`], or a stand-in such as the fake's.
    pub base_url: String,
    /// The 10-character Team ID: the token's `iss`.
    pub team_id: String,
    /// The 10-character Key ID of the signing key: the token's `kid`.
    pub key_id: String,
    /// The `.p8` file's content: a P-256 private key in PKCS#8 PEM. Signs tokens, is never sent.
    pub signing_key: SecretString,
    /// `apns-topic`: the app's bundle id (with the push type's suffix where it needs one).
    pub topic: String,
    pub push_type: PushType,
    /// `apns-priority`: 10, 5 or 1; `None` sends none (APNs' default is 10).
    pub priority: Option<u8>,
    pub collapse_id: CollapseId,
    /// Extra CA certificates to trust, PEM (the fake's test CA); the system's are trusted too.
    pub extra_root_certificate_pem: Option<String>,
    /// The whole send, connect to last body byte, a resend with a new token included.
    pub timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ApnsError {
    #[error("the APNs base_url `{url}` is not an http(s) URL: {reason}")]
    BaseUrl { url: String, reason: String },
    #[error("the team_id `{0}` is not Apple's 10-character Team ID (letters and digits)")]
    TeamId(String),
    #[error("the key_id `{0}` is not Apple's 10-character Key ID (letters and digits)")]
    KeyId(String),
    /// Never quotes the key.
    #[error(transparent)]
    SigningKey(#[from] SigningError),
    #[error("the topic `{0}` is not a bundle id an HTTP header can carry")]
    Topic(String),
    #[error("the priority {0} is not one APNs takes: 10, 5 or 1")]
    Priority(u8),
    #[error(
        "the push type `background` needs priority 5 (Apple: \"Always use priority 5. Using priority 10 is an error.\")"
    )]
    BackgroundPriority,
    #[error("the root certificate is not PEM certificates: {0}")]
    Certificate(String),
    #[error("cannot build the HTTP/2 client: {0}")]
    Client(#[source] reqwest::Error),
}

pub struct ApnsAdapter {
    /// How long one send may take, a resend with a new token included: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    /// `<base>/3/device/`, to which a send adds the device token.
    device_url: Url,
    team_id: String,
    key_id: String,
    topic: String,
    push_type: PushType,
    priority: Option<u8>,
    collapse_id: CollapseId,
    /// Whether the base URL is `https`: then HTTP/2 only, negotiated as `h2` by ALPN.
    tls: bool,
    tokens: Tokens,
    capabilities: Capabilities,
}

impl fmt::Debug for ApnsAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApnsAdapter")
            .field("device_url", &self.device_url.as_str())
            .field("team_id", &self.team_id)
            .field("key_id", &self.key_id)
            .field("topic", &self.topic)
            .field("push_type", &self.push_type)
            .field("priority", &self.priority)
            .field("collapse_id", &self.collapse_id)
            .field("signing_key", &"[REDACTED]")
            .field("provider_token", &"[REDACTED]")
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

/// The `apns-id` APNs sees for herald's `key`: a canonical (lower-case) UUID, as APNs takes
/// only those. herald's keys are UUIDs and pass through in canonical form; any other key (a
/// fallback route's `-f1`) becomes the UUIDv5 of its text in a fixed namespace, so every
/// attempt of a notification carries the same `apns-id`.
pub fn apns_id_for(key: &ProviderKey) -> String {
    let uuid = Uuid::try_parse(key.as_str())
        .unwrap_or_else(|_| Uuid::new_v5(&KEY_NAMESPACE, key.as_str().as_bytes()));
    uuid.hyphenated().to_string()
}

/// The `apns-collapse-id` for a notification id: the id itself where it fits APNs' 64 bytes
/// (herald's are UUIDs), else the UUIDv5 of it, so that it is always the same for one
/// notification.
pub(crate) fn collapse_id_for(notification_id: &str) -> String {
    if !notification_id.is_empty() && notification_id.len() <= MAX_COLLAPSE_ID_BYTES {
        notification_id.to_owned()
    } else {
        Uuid::new_v5(&KEY_NAMESPACE, notification_id.as_bytes())
            .hyphenated()
            .to_string()
    }
}

fn is_apple_id(id: &str) -> bool {
    id.len() == 10 && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

impl ApnsAdapter {
    /// Builds the adapter at start-up: checks the ids and the key (by signing once), and builds
    /// the HTTP/2 client. reqwest needs a rustls crypto provider to be installed first (herald's
    /// main installs ring); without one, building the client panics inside reqwest.
    pub fn new(route: ApnsRoute) -> Result<Self, ApnsError> {
        let device_url =
            http::endpoint(&route.base_url, DEVICE_PATH).map_err(|reason| ApnsError::BaseUrl {
                url: route.base_url.clone(),
                reason,
            })?;
        if !is_apple_id(&route.team_id) {
            return Err(ApnsError::TeamId(route.team_id));
        }
        if !is_apple_id(&route.key_id) {
            return Err(ApnsError::KeyId(route.key_id));
        }
        let topic_ok = !route.topic.is_empty() && route.topic.bytes().all(|b| b.is_ascii_graphic());
        if !topic_ok {
            return Err(ApnsError::Topic(route.topic));
        }
        if let Some(priority) = route.priority
            && ![10, 5, 1].contains(&priority)
        {
            return Err(ApnsError::Priority(priority));
        }
        if route.push_type == PushType::Background && route.priority != Some(5) {
            return Err(ApnsError::BackgroundPriority);
        }
        let tokens = Tokens::new(&route.signing_key, &route.key_id, &route.team_id)?;
        let tls = device_url.scheme() == "https";
        let http = client(&route, tls)?;
        Ok(ApnsAdapter {
            timeout: route.timeout,
            http,
            device_url,
            team_id: route.team_id,
            key_id: route.key_id,
            topic: route.topic,
            push_type: route.push_type,
            priority: route.priority,
            collapse_id: route.collapse_id,
            tls,
            tokens,
            capabilities: Capabilities {
                // `apns-id` names a notification; APNs deduplicates nothing by it.
                idempotency_window: None,
                // No look-up: `apns-unique-id` and the Push Notifications Console's delivery
                // log exist in the development environment only, for people.
                query_visibility_lag: None,
                max_payload_bytes: Some(MAX_PAYLOAD_BYTES),
                tags: false,
                attachments: false,
            },
        })
    }

    /// How many provider tokens this route has minted: one per 50 minutes of sending, and one
    /// more each time APNs refused the current one as expired or invalid.
    pub fn provider_tokens_minted(&self) -> u64 {
        self.tokens.minted()
    }

    /// Whether this route speaks HTTP/2 only (an `https` base URL: ALPN offers `h2` alone).
    pub fn http2_only(&self) -> bool {
        self.tls
    }

    /// One request under `token`, read whole and classified.
    async fn post(
        &self,
        url: &Url,
        request: &Request,
        token: &Token,
        apns_id: &str,
        timeout: Duration,
    ) -> SendResult {
        let mut builder = self
            .http
            .post(url.clone())
            .header(AUTHORIZATION, token.authorization.clone())
            .header(CONTENT_TYPE, "application/json");
        for (name, value) in &request.parts {
            if name != DEVICE_TOKEN {
                builder = builder.header(name.as_str(), value.as_str());
            }
        }
        let builder = builder.body(request.body.clone());
        // The path names the device: a recipient's, kept out of traces and error texts.
        match http::exchange_to(builder, timeout, UrlOwner::Recipient).await {
            Ok(Answer {
                status,
                headers,
                body,
            }) => classify(status, &headers, &body, apns_id),
            Err(result) => result,
        }
    }

    /// The send proper; [`Adapter::send_prepared`] scrubs its result.
    async fn deliver(&self, request: &Request) -> (SendResult, Vec<Token>) {
        let started = Instant::now();
        let refused = |detail: String| SendResult::permanent(Evidence::new("request", detail));
        let Some(device_token) = request.parts.get(DEVICE_TOKEN) else {
            return (
                refused("the stored request names no device token".into()),
                vec![],
            );
        };
        let Some(apns_id) = request.parts.get(APNS_ID) else {
            return (refused("the stored request has no apns-id".into()), vec![]);
        };
        let url = match self.device_url.join(device_token) {
            Ok(url) => url,
            Err(err) => {
                return (
                    refused(format!("cannot name the device's URL: {err}")),
                    vec![],
                );
            }
        };
        let token = match self.tokens.current(token::unix_now()) {
            Ok(token) => token,
            Err(err) => return (refused(err.to_string()), vec![]),
        };
        let first = self
            .post(&url, request, &token, apns_id, self.timeout)
            .await;
        if !refuses_the_token(&first) {
            return (first, vec![token]);
        }
        // A 403 on the provider token proves the request was not processed: "APNs validates the
        // request using … the provided authentication token … If validation succeeds, APNs uses
        // the provided device token". Once more, with a new token, if time is left.
        let Some(fresh) = self.tokens.after_rejection(&token, token::unix_now()) else {
            return (first, vec![token]);
        };
        let fresh = match fresh {
            Ok(fresh) => fresh,
            Err(err) => return (refused(err.to_string()), vec![token]),
        };
        let left = self.timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            let evidence = first.evidence().clone();
            let detail = format!(
                "not sent again, no time left; the next attempt carries a new provider token: {}",
                evidence.detail
            );
            let evidence = Evidence {
                detail: herald_provider::excerpt(&detail),
                ..evidence
            };
            return (SendResult::transient(evidence, None), vec![token, fresh]);
        }
        let code = first.evidence().vendor_code.clone().unwrap_or_default();
        let again = self.post(&url, request, &fresh, apns_id, left).await;
        let again = again.map_evidence(|evidence| Evidence {
            detail: herald_provider::excerpt(&format!(
                "sent again with a new provider token after 403 {code}: {}",
                evidence.detail
            )),
            ..evidence
        });
        (again, vec![token, fresh])
    }
}

#[async_trait::async_trait]
impl Adapter for ApnsAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The payload and the headers APNs sees besides the credential (`apns-id`, `apns-topic`,
    /// `apns-push-type`, and where set `apns-priority`, `apns-expiration`, `apns-collapse-id`),
    /// and the device token, in `Request::parts`: herald stores them at the first attempt and
    /// every later attempt sends them byte for byte.
    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let refuse = |detail: String| Evidence::new("request", detail);
        if message.channel != Channel::Push {
            return Err(refuse(format!(
                "an APNs route sends push, not {}",
                message.channel
            )));
        }
        if !message.email.attachments.is_empty() || !message.email.tags.is_empty() {
            return Err(refuse("APNs takes no attachments and no tags".to_owned()));
        }
        let device_token = message.to.trim();
        if device_token.is_empty() || !device_token.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(refuse(format!(
                "`{}` is not an APNs device token (hexadecimal digits)",
                message.to
            )));
        }
        let alert = Alert {
            title: message.subject.as_deref().filter(|s| !s.is_empty()),
            body: message.text.as_deref().filter(|s| !s.is_empty()),
        };
        if alert.title.is_none() && alert.body.is_none() {
            return Err(refuse(
                "a push needs a subject or a text to show: the message has neither".into(),
            ));
        }
        let mut request = Request::json(&Payload { aps: Aps { alert } })?;
        if request.body.len() > MAX_PAYLOAD_BYTES {
            return Err(refuse(format!(
                "the payload is {} bytes; APNs takes at most {MAX_PAYLOAD_BYTES}",
                request.body.len()
            )));
        }
        let mut part = |name: &str, value: String| request.parts.insert(name.to_owned(), value);
        part(DEVICE_TOKEN, device_token.to_owned());
        part(APNS_ID, apns_id_for(key));
        part(APNS_TOPIC, self.topic.clone());
        part(APNS_PUSH_TYPE, self.push_type.as_str().to_owned());
        if let Some(priority) = self.priority {
            part(APNS_PRIORITY, priority.to_string());
        }
        if let Some(expires_at) = message.expires_at {
            let seconds = expires_at.unix_timestamp();
            if seconds <= 0 {
                return Err(refuse(format!(
                    "the notification expires at {expires_at}, before APNs' clock starts"
                )));
            }
            part(APNS_EXPIRATION, seconds.to_string());
        }
        if self.collapse_id == CollapseId::Notification {
            part(APNS_COLLAPSE_ID, collapse_id_for(&message.notification_id));
        }
        Ok(request)
    }

    async fn send_prepared(
        &self,
        request: &Request,
        _message: &Message,
        _key: &ProviderKey,
    ) -> SendResult {
        let (result, tokens) = self.deliver(request).await;
        // Anything APNs (or whatever answered) echoes is scrubbed of the key and of every token
        // this send carried before it becomes evidence.
        let result = self.tokens.key_redactor().send(result);
        tokens
            .iter()
            .fold(result, |result, token| token.redactor.send(result))
    }

    /// A 410 `Unregistered` or `ExpiredToken`: "There is no need to send further pushes to the
    /// same device token". Not a 400 `BadDeviceToken`: Apple says to "verify … that the token
    /// matches the environment", so a route pointed at the wrong environment would have herald
    /// suppress good device tokens for every route of the tenant.
    fn unsubscribed(&self, evidence: &Evidence) -> bool {
        evidence.status == Some(410)
            && matches!(
                evidence.vendor_code.as_deref(),
                Some(wire::UNREGISTERED | wire::EXPIRED_TOKEN)
            )
    }
}

/// The HTTP client: HTTP/2 only over TLS (reqwest then offers ALPN `h2` alone, and a server
/// that cannot speak it fails the handshake, before anything is written); a plain `http` base
/// URL (only the conformance kit's HTTP/1.1 server) is spoken as reqwest's default, HTTP/1.1.
/// Connections are kept as Apple asks ("Reuse a connection as long as possible … you may send a
/// HTTP2 PING frame after an hour of inactivity").
fn client(route: &ApnsRoute, tls: bool) -> Result<reqwest::Client, ApnsError> {
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("herald-apns/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(route.timeout)
        .pool_idle_timeout(None)
        .http2_keep_alive_interval(Some(Duration::from_secs(60 * 60)))
        .http2_keep_alive_timeout(route.timeout)
        .http2_keep_alive_while_idle(true);
    if tls {
        builder = builder.http2_prior_knowledge();
    }
    if let Some(pem) = &route.extra_root_certificate_pem {
        let certificates = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
            .map_err(|err| ApnsError::Certificate(err.to_string()))?;
        if certificates.is_empty() {
            return Err(ApnsError::Certificate("no CERTIFICATE block".to_owned()));
        }
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder.build().map_err(ApnsError::Client)
}

/// Whether `result` is APNs refusing the provider token: a 403 `ExpiredProviderToken` or
/// `InvalidProviderToken`, after which a new token may be sent.
fn refuses_the_token(result: &SendResult) -> bool {
    let evidence = result.evidence();
    evidence.status == Some(403)
        && matches!(
            evidence.vendor_code.as_deref(),
            Some(wire::EXPIRED_PROVIDER_TOKEN | wire::INVALID_PROVIDER_TOKEN)
        )
}

/// An answer read whole, to a request sent with `apns_id`.
fn classify(status: StatusCode, headers: &HeaderMap, body: &str, apns_id: &str) -> SendResult {
    if status.is_success() {
        return classify_success(status, headers, body, apns_id);
    }
    let reason = wire::reason_of(body);
    let evidence = || Evidence::new("response", body).with_status(status.as_u16());
    let result = match (status.as_u16(), reason.as_deref()) {
        // Our token, not the device: every send on the route meets it until APNs takes the new
        // token, which Apple allows 20 minutes after the last one. Without a `Retry-After`, the
        // route waits those 20 minutes rather than spend every notification's attempts.
        (429, Some(wire::TOO_MANY_PROVIDER_TOKEN_UPDATES)) => SendResult::transient(
            evidence(),
            retry_after(headers).or(Some(MIN_UPDATE_INTERVAL)),
        ),
        // "Too many requests were made consecutively to the same device token": this device's
        // limit, not the route's. A `Retry-After` (Apple documents none) is honoured, and holds
        // the route; without one this notification backs off on its own ("You can retry with
        // a delay") and the route goes on sending to other devices.
        (429, _) => SendResult::transient(evidence(), retry_after(headers)),
        _ => classify_failure_status(status, headers, body, RULES),
    };
    with_vendor_code(result, reason)
}

/// A 2xx: APNs' success is a 200 with an empty body and the request's `apns-id` echoed. The
/// echo is what proves it was APNs that took the push, so any 2xx with it is accepted (Apple
/// documents only 200); a body that is not JSON (a proxy's page) or a missing or other
/// `apns-id` proves nothing.
fn classify_success(
    status: StatusCode,
    headers: &HeaderMap,
    body: &str,
    apns_id: &str,
) -> SendResult {
    let echoed = headers
        .get(APNS_ID)
        .and_then(|value| value.to_str().ok())
        .map(str::trim);
    let body_ok = body.trim().is_empty() || serde_json::from_str::<serde_json::Value>(body).is_ok();
    match echoed {
        Some(echoed) if body_ok && echoed.eq_ignore_ascii_case(apns_id) => {
            let mut detail = format!("apns-id: {echoed}");
            if let Some(unique) = headers.get(APNS_UNIQUE_ID).and_then(|v| v.to_str().ok()) {
                detail.push_str(&format!(", apns-unique-id: {unique}"));
            }
            if !body.trim().is_empty() {
                detail.push_str(&format!("; {body}"));
            }
            SendResult::Accepted {
                provider_ref: Some(echoed.to_ascii_lowercase()),
                evidence: Evidence::new("response", detail).with_status(status.as_u16()),
            }
        }
        Some(echoed) if body_ok => unreadable_success(
            status,
            format!("the answer names apns-id {echoed}, not the {apns_id} sent: {body}"),
        ),
        None if body_ok => unreadable_success(status, format!("no apns-id in the answer: {body}")),
        _ => unreadable_success(status, format!("a body that is not APNs': {body}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderName, HeaderValue, RETRY_AFTER};

    const ID: &str = "01970000-0000-7000-8000-00000000c0de";

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn a_uuid_key_is_the_apns_id_in_canonical_form_and_any_other_key_its_uuid_v5() {
        let key = ProviderKey::new("01970000-0000-7000-8000-00000000000A");
        assert_eq!(apns_id_for(&key), "01970000-0000-7000-8000-00000000000a");
        let fallback = ProviderKey::new("01970000-0000-7000-8000-00000000000a-f1");
        let derived = apns_id_for(&fallback);
        assert_eq!(derived, apns_id_for(&fallback));
        assert_eq!(Uuid::parse_str(&derived).unwrap().get_version_num(), 5);
        assert_ne!(derived, apns_id_for(&key));
    }

    #[test]
    fn a_collapse_id_is_the_notification_id_or_a_uuid_that_fits_64_bytes() {
        assert_eq!(collapse_id_for(ID), ID);
        let long = "n".repeat(65);
        let derived = collapse_id_for(&long);
        assert!(derived.len() <= MAX_COLLAPSE_ID_BYTES);
        assert_eq!(derived, collapse_id_for(&long));
    }

    #[test]
    fn a_200_is_accepted_only_with_our_apns_id_echoed() {
        let ok = classify(StatusCode::OK, &headers(&[(APNS_ID, ID)]), "", ID);
        match ok {
            SendResult::Accepted {
                provider_ref,
                evidence,
            } => {
                assert_eq!(provider_ref.as_deref(), Some(ID));
                assert_eq!(evidence.status, Some(200));
            }
            other => panic!("expected an acceptance, got {other:?}"),
        }
        let other_id = "eabeae54-14a8-11e5-b60b-1697f925ec7b";
        for (headers, body) in [
            (headers(&[]), ""),
            (headers(&[(APNS_ID, other_id)]), ""),
            (headers(&[(APNS_ID, ID)]), "<html>OK</html>"),
        ] {
            let result = classify(StatusCode::OK, &headers, body, ID);
            assert!(matches!(result, SendResult::Ambiguous { .. }), "{result:?}");
        }
    }

    #[test]
    fn the_two_429s_are_told_apart_by_their_reason() {
        let device = classify(
            StatusCode::TOO_MANY_REQUESTS,
            &headers(&[]),
            r#"{"reason":"TooManyRequests"}"#,
            ID,
        );
        assert_eq!(
            device,
            SendResult::Rejected {
                permanent: false,
                retry_after: None,
                evidence: Evidence::new("response", r#"{"reason":"TooManyRequests"}"#)
                    .with_status(429)
                    .with_vendor_code("TooManyRequests"),
            }
        );
        let asked = classify(
            StatusCode::TOO_MANY_REQUESTS,
            &headers(&[(RETRY_AFTER.as_str(), "7")]),
            r#"{"reason":"TooManyRequests"}"#,
            ID,
        );
        assert!(matches!(
            asked,
            SendResult::Rejected { retry_after: Some(wait), .. } if wait == Duration::from_secs(7)
        ));
        let updates = classify(
            StatusCode::TOO_MANY_REQUESTS,
            &headers(&[]),
            r#"{"reason":"TooManyProviderTokenUpdates"}"#,
            ID,
        );
        assert!(matches!(
            updates,
            SendResult::Rejected { permanent: false, retry_after: Some(wait), .. }
                if wait == MIN_UPDATE_INTERVAL
        ));
    }

    #[test]
    fn a_403_on_the_token_is_one_a_new_token_may_cure_and_no_other() {
        let refused = |reason: &str| {
            classify(
                StatusCode::FORBIDDEN,
                &headers(&[]),
                &format!(r#"{{"reason":"{reason}"}}"#),
                ID,
            )
        };
        assert!(refuses_the_token(&refused("ExpiredProviderToken")));
        assert!(refuses_the_token(&refused("InvalidProviderToken")));
        assert!(!refuses_the_token(&refused("MissingProviderToken")));
        assert!(!refuses_the_token(&refused("Forbidden")));
    }
}
