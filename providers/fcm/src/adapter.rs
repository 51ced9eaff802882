//! Herald's adapter for FCM HTTP v1 (`provider = "fcm"`): one `messages:send` per send, with
//! an access token minted from the route's service account key, classified where the exchange
//! ended.
//!
//! The crate docs state the classification table and its sources; this module implements it.
//! What differs from `herald_provider::http`'s shared table: a 401 that refuses the access
//! token is answered by minting a new one and sending once more within the same deadline, a
//! 429 (`QUOTA_EXCEEDED`) waits at least FCM's documented minute, and the error code is FCM's
//! own (`UNREGISTERED`, …) where the answer has one.

use std::fmt;
use std::time::{Duration, Instant};

use herald_provider::http::{
    Answer, StatusRules, classify_failure_status, exchange, retry_after, unreadable_success,
    with_vendor_code,
};
use herald_provider::{
    Adapter, Capabilities, Channel, Evidence, Message, ProviderKey, Redactor, Request, SendResult,
};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::key::{Key, KeyError};
use crate::token::{AUTH_STAGE, Bearer, Tokens, left};
use crate::wire::{
    self, Apns, ApnsHeaders, Data, Notification, SendMessage, Sent, THIRD_PARTY_AUTH_ERROR,
    UNREGISTERED, send_path,
};

/// FCM's public API root.
pub const DEFAULT_BASE_URL: &str = "https://fcm.googleapis.com";

/// "4096 bytes for most messages" (2048 for topics, which herald does not send to), "both the
/// keys and the values" (<https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode>,
/// INVALID_ARGUMENT, "Message too big").
pub const MAX_PAYLOAD_BYTES: usize = 4096;

/// `QUOTA_EXCEEDED`: "use exponential backoff with a minimum initial delay of 1 minute"
/// (<https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode>). Every 429 waits as
/// long: FCM answers 429 "until the quota is refilled in the following minute", and asks that
/// a 429 met in overload be handled "in accordance with the published recommendations"
/// (<https://firebase.google.com/docs/cloud-messaging/throttling-and-quotas>).
pub const QUOTA_BACKOFF: Duration = Duration::from_secs(60);

/// The longest lifespan FCM stores a message for: "from 0 to 2,419,200 seconds (28 days)"
/// (<https://firebase.google.com/docs/cloud-messaging/customize-messages/setting-message-lifespan>).
const MAX_TTL_SECS: i64 = 2_419_200;

/// FCM documents neither 409 nor 503 as "not processed" (503 UNAVAILABLE: "the server couldn't
/// process the request in time"), so the shared table applies.
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// A route's settings, already resolved by herald.
#[derive(Debug, Clone)]
pub struct FcmRoute {
    /// [`DEFAULT_BASE_URL`], or a stand-in such as the fake's.
    pub base_url: String,
    /// The Firebase project to send for; `None`: the service account key's `project_id`.
    pub project_id: Option<String>,
    /// The service account key file's content (JSON). Its `token_uri` is where tokens are
    /// minted, as Google's own libraries do.
    pub service_account: SecretString,
    /// The whole send, token exchange included, connect to last body byte.
    pub timeout: Duration,
}

/// Why a route cannot be built. Never quotes the key.
#[derive(Debug, thiserror::Error)]
pub enum FcmError {
    #[error("the FCM base_url `{url}` is not an http(s) URL: {reason}")]
    BaseUrl { url: String, reason: String },
    #[error(transparent)]
    ServiceAccount(#[from] KeyError),
    #[error("the service account key's token_uri `{url}` is not an http(s) URL")]
    TokenUri { url: String },
    #[error("no project_id: the route names none and the service account key has none")]
    NoProject,
    #[error("the project_id `{0}` cannot be part of FCM's URL")]
    ProjectId(String),
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

pub struct FcmAdapter {
    /// How long one send may take, its token exchange included: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    send_url: Url,
    project_id: String,
    tokens: Tokens,
    /// Scrubs the private key, in every form, from anything an answer might echo; each send
    /// adds the access tokens it carried.
    redactor: Redactor,
    capabilities: Capabilities,
}

impl fmt::Debug for FcmAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FcmAdapter")
            .field("send_url", &self.send_url.as_str())
            .field("project_id", &self.project_id)
            .field("service_account", self.tokens.key())
            .field("token_url", &self.tokens.token_url().as_str())
            .field("access_token", &"[REDACTED]")
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

impl FcmAdapter {
    /// Builds the adapter at start-up. reqwest needs a rustls crypto provider to be installed
    /// first (herald's main installs ring); without one, building the client panics inside
    /// reqwest.
    pub fn new(route: FcmRoute) -> Result<Self, FcmError> {
        let key = Key::parse(&route.service_account)?;
        let project_id = route
            .project_id
            .or_else(|| key.project_id.clone())
            .ok_or(FcmError::NoProject)?;
        let fits_a_path = |c: char| c.is_ascii_alphanumeric() || "-_.:".contains(c);
        if project_id.is_empty() || !project_id.chars().all(fits_a_path) {
            return Err(FcmError::ProjectId(project_id));
        }
        let send_url = herald_provider::http::endpoint(&route.base_url, &send_path(&project_id))
            .map_err(|reason| FcmError::BaseUrl {
                url: route.base_url.clone(),
                reason,
            })?;
        // Posted to exactly as the key names it: it is the assertion's `aud` too.
        let token_url = Url::parse(&key.token_uri)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https"))
            .ok_or_else(|| FcmError::TokenUri {
                url: key.token_uri.clone(),
            })?;
        let http = reqwest::Client::builder()
            .user_agent(concat!("herald-fcm/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(FcmError::Client)?;
        let redactor = key
            .secret_forms()
            .iter()
            .fold(Redactor::default(), |redactor, form| {
                redactor.with_secret(form)
            });
        Ok(FcmAdapter {
            timeout: route.timeout,
            tokens: Tokens::new(key, token_url, http.clone()),
            http,
            send_url,
            project_id,
            redactor,
            capabilities: Capabilities {
                // No idempotency key: a resend is a second message. herald's key rides in the
                // message's data, so that the app can drop a repeat.
                idempotency_window: None,
                // No look-up: FCM answers a send with its id and keeps nothing to ask later.
                query_visibility_lag: None,
                max_payload_bytes: Some(MAX_PAYLOAD_BYTES),
                tags: false,
                attachments: false,
            },
        })
    }

    /// Sends `body` with a token, and once more with a new token if FCM refused the first
    /// (an expired or revoked token: a 401 proves the message was not processed), all before
    /// `deadline`. `used` collects the tokens carried, for the redactor.
    async fn send_authorized(
        &self,
        body: &str,
        deadline: Instant,
        used: &mut Vec<Bearer>,
    ) -> SendResult {
        let bearer = match self.tokens.bearer(deadline, None).await {
            Ok(bearer) => bearer,
            Err(refused) => return in_context(refused, NOT_SENT),
        };
        used.push(bearer.clone());
        let answer = match self.post(body, &bearer, deadline).await {
            Some(Posted::TokenRefused(_)) => {
                let fresh = match self.tokens.bearer(deadline, Some(&bearer)).await {
                    Ok(fresh) => fresh,
                    Err(refused) => return in_context(refused, NOT_SENT_AGAIN),
                };
                used.push(fresh.clone());
                match self.post(body, &fresh, deadline).await {
                    Some(answer) => answer,
                    None => return no_time_left(NOT_SENT_AGAIN),
                }
            }
            Some(answered) => answered,
            None => return no_time_left(NOT_SENT),
        };
        match answer {
            // A second refusal of a token minted for this very send: the route's credential
            // does not reach FCM (the account lacks the permission, the API is off).
            Posted::TokenRefused(answer) => classify_failure(answer),
            Posted::Answered(answer) if answer.status.is_success() => classify_success(answer),
            Posted::Answered(answer) => classify_failure(answer),
            Posted::Ended(result) => result,
        }
    }

    /// One `messages:send` with `bearer`, written only if there is time left before
    /// `deadline`; `None` where there is none.
    async fn post(&self, body: &str, bearer: &Bearer, deadline: Instant) -> Option<Posted> {
        let left = left(deadline);
        if left.is_zero() {
            return None;
        }
        let request = self
            .http
            .post(self.send_url.clone())
            .header(AUTHORIZATION, bearer.header.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_owned());
        Some(match exchange(request, left).await {
            Ok(answer)
                if answer.status == StatusCode::UNAUTHORIZED
                    && wire::error_code(&answer.body).as_deref()
                        != Some(THIRD_PARTY_AUTH_ERROR) =>
            {
                Posted::TokenRefused(answer)
            }
            Ok(answer) => Posted::Answered(answer),
            Err(result) => Posted::Ended(result),
        })
    }
}

/// What a send that ended before its first `messages:send` means for the message.
const NOT_SENT: &str = "nothing was sent";

/// What a send that ended after FCM refused its first token (401, not processed) and before
/// the send once more means for the message.
const NOT_SENT_AGAIN: &str =
    "FCM refused the access token (401: not processed) and the message was not sent again";

/// A send that ended at stage [`AUTH_STAGE`] without a token, its evidence led by what that
/// means for the message (`NOT_SENT` or `NOT_SENT_AGAIN`).
fn in_context(result: SendResult, meaning: &str) -> SendResult {
    result.map_evidence(|evidence| Evidence {
        detail: herald_provider::excerpt(&format!("{meaning}: {}", evidence.detail)),
        ..evidence
    })
}

/// The send's deadline came before a `messages:send` could be written (the token took the
/// time, or the first send did): a transient refusal, stage [`AUTH_STAGE`].
fn no_time_left(meaning: &str) -> SendResult {
    SendResult::transient(
        Evidence::new(
            AUTH_STAGE,
            format!("{meaning}: no time was left before the send's deadline"),
        ),
        None,
    )
}

/// How one `messages:send` ended.
enum Posted {
    /// 401 for the access token itself (not `THIRD_PARTY_AUTH_ERROR`, which is the project's
    /// APNs or web push credential).
    TokenRefused(Answer),
    Answered(Answer),
    /// No answer to classify: the shared transport classification.
    Ended(SendResult),
}

#[async_trait::async_trait]
impl Adapter for FcmAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The `messages:send` body, with herald's key in its `data`: herald stores it at the
    /// first attempt and every attempt sends it byte for byte, but where the notification
    /// expires, with Android's and web push's time left added at the end of its `message`
    /// (`body_for_attempt`).
    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let refuse = |why: String| Evidence::new("request", why);
        if message.channel != Channel::Push {
            return Err(refuse(format!(
                "an FCM route sends push, not {}",
                message.channel
            )));
        }
        if message.to.trim().is_empty() {
            return Err(refuse("a push needs a registration token".to_owned()));
        }
        if !message.email.attachments.is_empty() || !message.email.tags.is_empty() {
            return Err(refuse("FCM takes no attachments and no tags".to_owned()));
        }
        let notification =
            (message.subject.is_some() || message.text.is_some()).then_some(Notification {
                title: message.subject.as_deref(),
                body: message.text.as_deref(),
            });
        let data = Data {
            herald_key: key.as_str(),
        };
        let payload = json_len(&notification) + json_len(&data);
        if payload > MAX_PAYLOAD_BYTES {
            return Err(refuse(format!(
                "the notification and data come to {payload} bytes; FCM takes at most \
                 {MAX_PAYLOAD_BYTES}"
            )));
        }
        // APNs' expiry is a time, fixed with the notification: it belongs in the stored
        // request. Android's and web push's are durations, counted at each attempt.
        let apns = message.expires_at.map(|at| Apns {
            headers: ApnsHeaders {
                apns_expiration: at.unix_timestamp().to_string(),
            },
        });
        Request::json(&SendMessage {
            message: wire::Message {
                token: &message.to,
                notification,
                data,
                apns,
            },
        })
    }

    async fn send_prepared(
        &self,
        request: &Request,
        message: &Message,
        _key: &ProviderKey,
    ) -> SendResult {
        let deadline = Instant::now() + self.timeout;
        let body = body_for_attempt(&request.body, message);
        let mut used = Vec::new();
        let result = self.send_authorized(&body, deadline, &mut used).await;
        // Anything an answer echoes is scrubbed of the key and of the tokens this send carried.
        let redactor = used.iter().fold(self.redactor.clone(), |redactor, bearer| {
            redactor.with_secret(bearer.token.expose_secret())
        });
        redactor.send(result)
    }

    /// `UNREGISTERED`: "the token used is no longer valid and a new one must be used …
    /// remove this registration token from the app server and stop using it".
    fn unsubscribed(&self, evidence: &Evidence) -> bool {
        evidence.status == Some(404) && evidence.vendor_code.as_deref() == Some(UNREGISTERED)
    }
}

/// The stored body as this attempt sends it: where the notification expires, Android's
/// `ttl` and web push's `TTL` are the seconds left now, so that FCM drops what it cannot hand
/// on in time. Counted per attempt, as the clock must be: the stored request never reads it.
///
/// Every byte of the stored body is sent as it was stored: the two fields are added at the end
/// of its `message` object, never by re-serializing it (serde_json, built here without
/// `preserve_order`, would sort its keys).
fn body_for_attempt(stored: &str, message: &Message) -> String {
    let Some(expires_at) = message.expires_at else {
        return stored.to_owned();
    };
    let left = (expires_at - time::OffsetDateTime::now_utc()).whole_seconds();
    // Past FCM's own longest lifespan, its default already drops it sooner.
    if left > MAX_TTL_SECS {
        return stored.to_owned();
    }
    let left = left.max(1);
    let fields = format!(
        r#""android":{},"webpush":{}"#,
        json!({ "ttl": format!("{left}s") }),
        json!({ "headers": { "TTL": left.to_string() } })
    );
    appended(stored, &fields).unwrap_or_else(|| stored.to_owned())
}

/// `stored` with `fields` (JSON members, `"name":value,…`) added at the end of its `message`
/// object, every other byte as it was. `None` for a body `prepare` does not write: not
/// `{"message": {…}}` alone, or one whose message has either field already; it is sent as
/// stored.
fn appended(stored: &str, fields: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Stored {
        message: serde_json::Map<String, Value>,
    }
    let Stored { message } = serde_json::from_str(stored).ok()?;
    if message.contains_key("android") || message.contains_key("webpush") {
        return None;
    }
    // `message` is the body's only member, so its object closes at the last `}` before the
    // body's own.
    let inside = stored.trim_end().strip_suffix('}')?.trim_end();
    let close = inside.strip_suffix('}')?.len();
    let comma = if message.is_empty() { "" } else { "," };
    Some(format!(
        "{}{comma}{fields}{}",
        &stored[..close],
        &stored[close..]
    ))
}

/// A 2xx: the message resource, named; or, unreadable, ambiguous.
fn classify_success(answer: Answer) -> SendResult {
    let Answer { status, body, .. } = answer;
    match serde_json::from_str::<Sent>(&body) {
        Ok(sent) if !sent.name.is_empty() => SendResult::Accepted {
            provider_ref: Some(sent.name),
            evidence: Evidence::new("response", &body).with_status(status.as_u16()),
        },
        Ok(_) => unreadable_success(status, format!("no message name: {body}")),
        Err(err) => unreadable_success(status, format!("{err}: {body}")),
    }
}

/// Any other status, by FCM's own code where the answer names one.
fn classify_failure(answer: Answer) -> SendResult {
    let Answer {
        status,
        headers,
        body,
    } = answer;
    let code = wire::error_code(&body);
    let result = match status.as_u16() {
        429 => {
            let wait = retry_after(&headers).unwrap_or_default().max(QUOTA_BACKOFF);
            SendResult::transient(
                Evidence::new("response", &body).with_status(status.as_u16()),
                Some(wait),
            )
        }
        _ => classify_failure_status(status, &headers, &body, RULES),
    };
    with_vendor_code(result, code)
}

/// The length of `value` as JSON, as FCM counts a payload: keys and values.
fn json_len(value: &impl serde::Serialize) -> usize {
    serde_json::to_vec(value).map_or(0, |json| json.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUOTA_EXCEEDED: &str = "QUOTA_EXCEEDED";
    use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};

    fn answer(status: u16, body: &str, retry: Option<&str>) -> Answer {
        let mut headers = HeaderMap::new();
        if let Some(retry) = retry {
            headers.insert(RETRY_AFTER, HeaderValue::from_str(retry).unwrap());
        }
        Answer {
            status: StatusCode::from_u16(status).unwrap(),
            headers,
            body: body.to_owned(),
        }
    }

    fn fcm_error(code: u16, status: &str, error_code: &str) -> String {
        format!(
            r#"{{"error": {{"code": {code}, "message": "m", "status": "{status}", "details": [
                {{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                  "errorCode": "{error_code}"}}]}}}}"#
        )
    }

    #[test]
    fn quota_exceeded_waits_at_least_a_minute_or_longer_if_fcm_says_so() {
        let quota = fcm_error(429, "RESOURCE_EXHAUSTED", QUOTA_EXCEEDED);
        for (retry, wait) in [(None, 60), (Some("1"), 60), (Some("120"), 120)] {
            match classify_failure(answer(429, &quota, retry)) {
                SendResult::Rejected {
                    permanent: false,
                    retry_after,
                    evidence,
                } => {
                    assert_eq!(retry_after, Some(Duration::from_secs(wait)), "{retry:?}");
                    assert_eq!(evidence.vendor_code.as_deref(), Some(QUOTA_EXCEEDED));
                }
                other => panic!("expected a transient refusal, got {other:?}"),
            }
        }
    }

    #[test]
    fn internal_and_unavailable_are_ambiguous_with_their_code() {
        for (status, name) in [(500, "INTERNAL"), (503, "UNAVAILABLE")] {
            let result = classify_failure(answer(status, &fcm_error(status, name, name), None));
            match result {
                SendResult::Ambiguous { evidence } => {
                    assert_eq!(evidence.vendor_code.as_deref(), Some(name))
                }
                other => panic!("{status}: expected an ambiguity, got {other:?}"),
            }
        }
    }

    #[test]
    fn an_expiry_becomes_the_seconds_left_for_android_and_web_push() {
        let mut message = push();
        let stored = r#"{"message":{"token":"t","data":{"herald_key":"k"}}}"#;
        assert_eq!(body_for_attempt(stored, &message), stored);
        message.expires_at = Some(time::OffsetDateTime::now_utc() + time::Duration::minutes(10));
        let sent: Value = serde_json::from_str(&body_for_attempt(stored, &message)).unwrap();
        let ttl = sent["message"]["android"]["ttl"].as_str().unwrap();
        let seconds: i64 = ttl.strip_suffix('s').unwrap().parse().unwrap();
        assert!((595..=600).contains(&seconds), "{ttl}");
        assert_eq!(
            sent["message"]["webpush"]["headers"]["TTL"],
            json!(seconds.to_string())
        );
        assert_eq!(sent["message"]["data"]["herald_key"], "k");
        // Beyond FCM's 28 days, FCM's own default is sooner: sent as stored.
        message.expires_at = Some(time::OffsetDateTime::now_utc() + time::Duration::days(29));
        assert_eq!(body_for_attempt(stored, &message), stored);
    }

    #[test]
    fn the_stored_body_is_sent_byte_for_byte_with_the_ttls_added_at_the_end_of_its_message() {
        let mut message = push();
        message.expires_at = Some(time::OffsetDateTime::now_utc() + time::Duration::minutes(10));
        // prepare's key order, which is not sorted, and a stored body with spaces.
        for stored in [
            r#"{"message":{"token":"t","notification":{"title":"a","body":"b"},"data":{"herald_key":"k"},"apns":{"headers":{"apns-expiration":"1"}}}}"#,
            "{ \"message\" : { \"token\": \"t\" , \"data\": {\"herald_key\": \"k\"} } }\n",
        ] {
            let sent = body_for_attempt(stored, &message);
            // Where the message object closes: the last `}` but the body's own.
            let close = stored[..stored.rfind('}').unwrap()].rfind('}').unwrap();
            let (kept, rest) = sent.split_at(close);
            assert_eq!(kept, &stored[..close], "{sent}");
            assert!(rest.starts_with(r#","android":{"ttl":""#), "{sent}");
            assert!(rest.ends_with(&stored[close..]), "{sent}");
            let added = &rest[..rest.len() - (stored.len() - close)];
            let seconds = added
                .trim_start_matches(r#","android":{"ttl":""#)
                .split('s')
                .next()
                .unwrap();
            assert_eq!(
                added,
                format!(
                    r#","android":{{"ttl":"{seconds}s"}},"webpush":{{"headers":{{"TTL":"{seconds}"}}}}"#
                )
            );
            serde_json::from_str::<Value>(&sent).expect("still JSON");
        }
    }

    #[test]
    fn a_body_prepare_does_not_write_is_sent_as_stored() {
        let mut message = push();
        message.expires_at = Some(time::OffsetDateTime::now_utc() + time::Duration::minutes(10));
        for stored in [
            "not json",
            r#"{"message":{"token":"t"},"validate_only":true}"#,
            r#"{"message":{"token":"t","android":{"ttl":"5s"}}}"#,
            r#"{"message":[]}"#,
        ] {
            assert_eq!(body_for_attempt(stored, &message), stored);
        }
        assert_eq!(
            body_for_attempt(r#"{"message":{}}"#, &message)
                .split("\"android\"")
                .next(),
            Some(r#"{"message":{"#)
        );
    }

    /// A push to `t`, read as herald hands it over (its optional fields left out).
    fn push() -> Message {
        serde_json::from_value(json!({"notification_id": "n", "channel": "push", "to": "t"}))
            .unwrap()
    }
}
