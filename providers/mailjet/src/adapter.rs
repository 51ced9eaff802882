//! Herald's adapter for Mailjet: Send API v3.1 to send, the `/message` resource filtered by
//! `CustomID` to look a send up. The crate docs state what is classified how, and why.

use std::time::Duration;

use herald_provider::callback::{BasicCredentials, Callbacks, CredentialsError};
use herald_provider::http::{
    Answer, StatusRules, classify_failure_status, exchange, look_up, unreadable_success,
    with_vendor_code,
};
use herald_provider::{
    Adapter, Capabilities, Channel, Encoding, Evidence, Message, ProviderKey, QueryResult,
    Redactor, Request, SendResult,
};
use reqwest::header::HeaderMap;
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use time::OffsetDateTime;

use crate::callback::MailjetCallbacks;
use crate::wire::{
    Address, Attachment, MessageList, MessageResult, OutMessage, SendAnswer, SendBody, id_text,
};

/// Mailjet's public REST endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.mailjet.com";

/// See [`MailjetRoute::visibility_lag`].
pub const DEFAULT_VISIBILITY_LAG: Duration = Duration::from_secs(15 * 60);

/// "Size of all attachments, including inline, may not exceed 15 MB total"; the docs state no
/// other payload limit.
pub const MAX_PAYLOAD_BYTES: usize = 15 * 1024 * 1024;

/// Allowed disagreement between herald's clock (which stamped the notification id) and
/// Mailjet's, for the look-up's lower bound. Generous, because a wider window costs nothing
/// here: the `CustomID` decides what matches.
const CLOCK_SKEW: Duration = Duration::from_secs(60 * 60);

/// Mailjet documents nothing special about 409 or 503, so both keep the cautious default.
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// A Mailjet route, as herald's configuration resolves it.
#[derive(Debug, Clone)]
pub struct MailjetRoute {
    /// [`DEFAULT_BASE_URL`], or a fake's address in tests.
    pub base_url: String,
    /// The Basic auth user name.
    pub api_key: String,
    /// The Basic auth password.
    pub api_secret: SecretString,
    /// A sender address validated in the Mailjet account.
    pub from: String,
    pub from_name: Option<String>,
    /// How long after its acceptance a message may still be missing from `/message`.
    ///
    /// Mailjet documents no bound: `/message` lists *processed* messages, and an accepted
    /// message first waits in the account's scheduling queue (the docs' `Priority` property
    /// manages it). Herald resends after "not found" once this lag has passed, so a lag that is
    /// too short turns a slow queue into a silent duplicate, while one that is too long only
    /// delays the resend of a send whose answer was lost — rare. Fifteen minutes by default:
    /// well past Mailjet's usual seconds, and past the minute-scale backlogs a busy account
    /// can see.
    pub visibility_lag: Duration,
    /// The whole exchange, connect to last body byte.
    pub timeout: Duration,
    /// The Basic credentials written into the Event API URL configured in Mailjet
    /// (`https://user:pass@herald.example.com/v1/callbacks/mailjet-main`). Both set, the route
    /// reads Mailjet's events ([`Adapter::callbacks`]); one without the other is refused.
    pub callback_username: Option<String>,
    pub callback_password: Option<SecretString>,
}

impl MailjetRoute {
    /// A route on Mailjet's public endpoint with the default lag and a 10 s timeout.
    pub fn new(
        api_key: impl Into<String>,
        api_secret: SecretString,
        from: impl Into<String>,
    ) -> Self {
        MailjetRoute {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: api_key.into(),
            api_secret,
            from: from.into(),
            from_name: None,
            visibility_lag: DEFAULT_VISIBILITY_LAG,
            timeout: Duration::from_secs(10),
            callback_username: None,
            callback_password: None,
        }
    }
}

/// Why a route cannot be built. Never carries a credential.
#[derive(Debug, thiserror::Error)]
pub enum MailjetError {
    #[error("the Mailjet base_url `{url}` cannot serve as an API root: {reason}")]
    BaseUrl { url: String, reason: String },
    #[error("a Mailjet route needs an api_key")]
    ApiKey,
    #[error("a Mailjet route needs a `from` address")]
    From,
    #[error("a Mailjet route needs a visibility_lag above zero")]
    VisibilityLag,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    /// Says which credential is wrong, never what the password is.
    #[error("a Mailjet route that reads events {0}")]
    Callback(#[source] CredentialsError),
}

#[derive(Debug, Clone)]
pub struct MailjetAdapter {
    /// How long one call may take: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    send_url: Url,
    message_url: Url,
    api_key: String,
    api_secret: SecretString,
    from: String,
    from_name: Option<String>,
    capabilities: Capabilities,
    /// Scrubs the credentials, in every form, from anything an answer might echo.
    redactor: Redactor,
    /// Set when the route has callback credentials.
    callbacks: Option<MailjetCallbacks>,
}

impl MailjetAdapter {
    /// Builds the adapter at start-up. reqwest needs a rustls crypto provider installed first
    /// (herald's main installs ring); without one, building the client panics inside reqwest.
    pub fn new(route: MailjetRoute) -> Result<Self, MailjetError> {
        if route.api_key.trim().is_empty() {
            return Err(MailjetError::ApiKey);
        }
        if route.from.trim().is_empty() {
            return Err(MailjetError::From);
        }
        if route.visibility_lag.is_zero() {
            return Err(MailjetError::VisibilityLag);
        }
        let callbacks = BasicCredentials::configured(
            route.callback_username.as_deref(),
            route.callback_password.as_ref(),
        )
        .map_err(MailjetError::Callback)?
        .map(MailjetCallbacks::new);
        let bad_url = |reason: String| MailjetError::BaseUrl {
            url: route.base_url.clone(),
            reason,
        };
        let base = Url::parse(&route.base_url).map_err(|err| bad_url(err.to_string()))?;
        let endpoint = |segments: &[&str]| {
            let mut url = base.clone();
            url.path_segments_mut()
                .map_err(|()| bad_url("it has no path".to_owned()))?
                .pop_if_empty()
                .extend(segments);
            Ok::<Url, MailjetError>(url)
        };
        let send_url = endpoint(&["v3.1", "send"])?;
        let message_url = endpoint(&["v3", "REST", "message"])?;
        let http = reqwest::Client::builder().timeout(route.timeout).build()?;
        let redactor = Redactor::credentials(&route.api_key, route.api_secret.expose_secret());
        Ok(MailjetAdapter {
            timeout: route.timeout,
            http,
            send_url,
            message_url,
            redactor,
            api_key: route.api_key,
            api_secret: route.api_secret,
            from: route.from,
            from_name: route.from_name,
            callbacks,
            capabilities: Capabilities {
                idempotency_window: None,
                query_visibility_lag: Some(route.visibility_lag),
                max_payload_bytes: Some(MAX_PAYLOAD_BYTES),
                tags: false,
                attachments: true,
            },
        })
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request.basic_auth(&self.api_key, Some(self.api_secret.expose_secret()))
    }

    /// The request body, or why this message cannot be sent (decided before any I/O).
    fn body(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let refused = |detail: String| Err(Evidence::new("request", detail));
        if message.channel != Channel::Email {
            return refused(format!(
                "a Mailjet route sends email, not {}",
                message.channel
            ));
        }
        let text = message.text.as_deref().filter(|t| !t.is_empty());
        let html = message.html.as_deref().filter(|h| !h.is_empty());
        if text.is_none() && html.is_none() {
            return refused("an email needs a text or an HTML part".to_owned());
        }
        if key.as_str().is_empty() {
            return refused("the provider key (CustomID) is empty".to_owned());
        }
        let email = &message.email;
        if !email.tags.is_empty() {
            // herald refuses tags at enqueue on this route (`Capabilities::tags`); a message
            // that skipped the API must not lose them silently.
            return refused("Mailjet keeps no per-message tags".to_owned());
        }
        let body = SendBody {
            messages: [OutMessage {
                from: match &email.from {
                    Some(from) => Address::of_mailbox(from),
                    None => Address {
                        email: &self.from,
                        name: self.from_name.as_deref(),
                    },
                },
                to: [Address {
                    email: &message.to,
                    name: None,
                }],
                cc: Address::list(&email.cc),
                bcc: Address::list(&email.bcc),
                reply_to: email.reply_to.as_deref().map(Address::of_mailbox),
                subject: message.subject.as_deref(),
                text_part: text,
                html_part: html,
                attachments: email
                    .attachments
                    .iter()
                    .map(|a| Attachment {
                        content_type: &a.content_type,
                        filename: &a.filename,
                        base64_content: a.placeholder(Encoding::Base64),
                    })
                    .collect(),
                custom_id: key.as_str(),
                headers: &email.headers,
            }],
        };
        Request::json(&body)
    }
}

#[async_trait::async_trait]
impl Adapter for MailjetAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        self.body(message, key)
    }

    fn callbacks(&self) -> Option<&dyn Callbacks> {
        self.callbacks.as_ref().map(|c| c as &dyn Callbacks)
    }

    async fn send_prepared(
        &self,
        request: &Request,
        _message: &Message,
        _key: &ProviderKey,
    ) -> SendResult {
        let result: SendResult = async {
            let request = self
                .authorized(self.http.post(self.send_url.clone()))
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(request.body.clone());
            match exchange(request, self.timeout).await {
                Ok(answer) => classify_answer(answer.status, &answer.headers, &answer.body),
                Err(result) => result,
            }
        }
        .await;
        self.redactor.send(result)
    }

    /// Every attempt carries the notification's provider key as `CustomID`, so the key finds
    /// every send of this notification and nothing else.
    async fn query_prepared(
        &self,
        _request: &Request,
        message: &Message,
        key: &ProviderKey,
    ) -> QueryResult {
        let result: QueryResult = async {
            let mut url = self.message_url.clone();
            {
                let mut pairs = url.query_pairs_mut();
                pairs.append_pair("CustomID", key.as_str());
                // Echoes the CustomID, so that an answer about other messages is caught.
                pairs.append_pair("ShowCustomID", "true");
                // The `CustomID` singles the notification out; the bound only keeps the look-up
                // from depending on whatever default time range Mailjet may apply (its docs
                // name none).
                if let Some(since) = herald_provider::lookback::earliest_send(
                    &message.notification_id,
                    OffsetDateTime::now_utc(),
                    CLOCK_SKEW,
                ) {
                    pairs.append_pair("FromTS", &since.unix_timestamp().to_string());
                }
            }
            let unsupported = |evidence| QueryResult::Unsupported { evidence };
            let Answer {
                status, body: text, ..
            } = match look_up(self.authorized(self.http.get(url))).await {
                Ok(answer) => answer,
                Err(evidence) => return unsupported(evidence),
            };
            if status != StatusCode::OK {
                let code = serde_json::from_str::<SendAnswer>(&text)
                    .ok()
                    .and_then(|answer| answer.error_code);
                let evidence = Evidence::new("query", &text).with_status(status.as_u16());
                return unsupported(match code {
                    Some(code) => evidence.with_vendor_code(code),
                    None => evidence,
                });
            }
            let list: MessageList = match serde_json::from_str(&text) {
                Ok(list) => list,
                Err(err) => {
                    return unsupported(
                        Evidence::new("query", format!("{err}: {text}")).with_status(200),
                    );
                }
            };
            if let Some(other) = list
                .data
                .iter()
                .filter_map(|m| m.custom_id.as_deref())
                .find(|id| *id != key.as_str())
            {
                return unsupported(
                    Evidence::new(
                        "query",
                        format!("the answer lists a message with another CustomID `{other}`"),
                    )
                    .with_status(200),
                );
            }
            let count = list.total.unwrap_or(0).max(list.data.len() as u64);
            let Some(first) = list.data.first() else {
                if count > 0 {
                    return unsupported(
                        Evidence::new("query", format!("Total {count} but no message listed"))
                            .with_status(200),
                    );
                }
                return QueryResult::NotFoundYet {
                    evidence: Evidence::new("query", "no message with this CustomID is listed")
                        .with_status(200),
                };
            };
            let id = first.id.as_ref().and_then(id_text);
            let shown = id.as_deref().unwrap_or("(no ID)");
            let state = first.status.as_deref().unwrap_or("(none)");
            let detail = if count == 1 {
                format!("found message {shown} (status {state}) with this CustomID")
            } else {
                let ids: Vec<String> = list
                    .data
                    .iter()
                    .filter_map(|m| m.id.as_ref().and_then(id_text))
                    .collect();
                format!(
                    "{count} messages carry this CustomID ({}): more than one send of this \
                 notification reached Mailjet",
                    ids.join(", ")
                )
            };
            QueryResult::Accepted {
                provider_ref: id,
                evidence: Evidence::new("query", detail).with_status(200),
            }
        }
        .await;
        self.redactor.query(result)
    }
}

/// A readable answer to a send: the HTTP status decides a failure; a 2xx is decided by the
/// message's own `Status` (and, for `error`, by the message's own `StatusCode`).
fn classify_answer(status: StatusCode, headers: &HeaderMap, text: &str) -> SendResult {
    let answer = serde_json::from_str::<SendAnswer>(text);
    if !status.is_success() {
        let code = answer.ok().and_then(|answer| error_codes(&answer));
        return with_vendor_code(classify_failure_status(status, headers, text, RULES), code);
    }
    let answer = match answer {
        Ok(answer) => answer,
        Err(err) => return unreadable_success(status, format!("{err}: {text}")),
    };
    let Some(result) = answer.messages.first() else {
        return unreadable_success(status, format!("the answer has no message: {text}"));
    };
    match result.status.as_str() {
        "success" => accepted(result, status, text),
        // A 2xx whose message was refused: the message's own status code decides.
        "error" => {
            let worst = result
                .errors
                .iter()
                .filter_map(|e| e.status_code)
                .max()
                .and_then(|code| StatusCode::from_u16(code).ok())
                .filter(|code| !code.is_success());
            match worst {
                Some(worst) => with_vendor_code(
                    classify_failure_status(worst, headers, text, RULES),
                    error_codes(&answer),
                ),
                None => unreadable_success(status, text),
            }
        }
        _ => unreadable_success(status, format!("unknown message status: {text}")),
    }
}

fn accepted(result: &MessageResult, status: StatusCode, text: &str) -> SendResult {
    let recipient = result.to.first();
    let id = recipient.and_then(|r| r.message_id.as_ref().and_then(id_text));
    let uuid = recipient.and_then(|r| r.message_uuid.clone());
    let detail = match (&id, &uuid) {
        (Some(id), Some(uuid)) => format!("accepted as message {id} ({uuid})"),
        (Some(id), None) => format!("accepted as message {id}"),
        _ => format!("accepted without a message ID: {text}"),
    };
    SendResult::Accepted {
        provider_ref: id.or(uuid),
        evidence: Evidence::new("response", detail).with_status(status.as_u16()),
    }
}

/// The global error code, or every per-message one (`mj-0004,mj-0005`).
fn error_codes(answer: &SendAnswer) -> Option<String> {
    if let Some(code) = &answer.error_code {
        return Some(code.clone());
    }
    let codes: Vec<&str> = answer
        .messages
        .iter()
        .flat_map(|m| &m.errors)
        .filter_map(|e| e.error_code.as_deref())
        .collect();
    (!codes.is_empty()).then(|| codes.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(status: u16, body: &str) -> SendResult {
        classify_answer(
            StatusCode::from_u16(status).unwrap(),
            &HeaderMap::new(),
            body,
        )
    }

    #[test]
    fn the_documented_success_is_accepted_with_its_message_id() {
        match classify(
            200,
            include_str!("../../../fixtures/mailjet/send_response.json"),
        ) {
            SendResult::Accepted {
                provider_ref,
                evidence,
            } => {
                assert_eq!(provider_ref.as_deref(), Some("456"));
                assert_eq!(evidence.detail, "accepted as message 456 (123)");
            }
            other => panic!("expected an acceptance, got {other:?}"),
        }
    }

    /// The documented bulk answer leads with a refused message: herald sends one message per
    /// request, so that first message is the whole answer, whatever the HTTP status.
    #[test]
    fn a_refused_message_inside_a_2xx_is_rejected_by_its_own_status() {
        let body = include_str!("../../../fixtures/mailjet/send_response_partial_error.json");
        match classify(200, body) {
            SendResult::Rejected {
                permanent: true,
                evidence,
                ..
            } => {
                assert_eq!(evidence.status, Some(400));
                assert_eq!(evidence.vendor_code.as_deref(), Some("send-0003"));
            }
            other => panic!("expected a permanent rejection, got {other:?}"),
        }
    }

    #[test]
    fn documented_validation_errors_are_permanent_with_every_code() {
        let body = include_str!("../../../fixtures/mailjet/error_validation_400.json");
        match classify(400, body) {
            SendResult::Rejected {
                permanent: true,
                evidence,
                ..
            } => assert_eq!(evidence.vendor_code.as_deref(), Some("mj-0004,mj-0005")),
            other => panic!("expected a permanent rejection, got {other:?}"),
        }
        let body = include_str!("../../../fixtures/mailjet/error_global_400.json");
        match classify(400, body) {
            SendResult::Rejected {
                permanent: true,
                evidence,
                ..
            } => assert_eq!(evidence.vendor_code.as_deref(), Some("mj-0002")),
            other => panic!("expected a permanent rejection, got {other:?}"),
        }
    }

    #[test]
    fn a_2xx_that_proves_nothing_is_ambiguous() {
        for body in [
            "not json",
            r#"{"Messages": []}"#,
            r#"{"Messages": [{"Status": "error", "Errors": [{"ErrorCode": "x"}]}]}"#,
            r#"{"Messages": [{"Status": "deferred"}]}"#,
        ] {
            assert!(
                matches!(classify(200, body), SendResult::Ambiguous { .. }),
                "{body}"
            );
        }
    }
}
