//! Herald's adapter for Amazon SES v2 (`provider = "ses"`): one `SendEmail` per send, signed
//! with AWS Signature Version 4, herald's key in a message tag, classified as the crate docs
//! say.
//!
//! SES takes no idempotency token and offers no look-up of a message by anything herald
//! chose, so an ambiguous send stays `unknown` until SES's own event about it, which names the
//! key in its tags, arrives through SNS or a person settles it.

use std::fmt;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use herald_provider::callback::Callbacks;
use herald_provider::http::{
    self, Answer, StatusRules, classify_failure_status, exchange, retry_after, unreadable_success,
    with_vendor_code,
};
use herald_provider::{
    Adapter, Capabilities, Encoding, Evidence, Message, ProviderKey, Redactor, Request, SendResult,
};
use reqwest::Url;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};

use crate::callback::{SnsCallbacks, SnsOrigin};
use crate::wire::{
    self, Attachment, BASE64, Body, Content, Destination, ERROR_TYPE, Header, KEY_TAG, SEND_PATH,
    SendEmail, Simple, THROTTLED, Tag, Text,
};

/// SES's API root in `region`.
pub fn default_base_url(region: &str) -> String {
    format!("https://email.{region}.amazonaws.com")
}

/// "The maximum message size is 40 MB", including attachments, after encoding
/// (<https://docs.aws.amazon.com/ses/latest/dg/quotas.html>); decimal megabytes, the smaller
/// reading.
pub const MAX_MESSAGE_BYTES: usize = 40_000_000;

/// The service name SES's requests are signed for.
const SERVICE: &str = "ses";

/// AWS documents no 5xx and no 409 of SES as "not processed": the shared table applies.
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// A route's settings, already resolved by herald.
#[derive(Debug, Clone)]
pub struct SesRoute {
    /// The AWS region of the SES account, e.g. `eu-west-1`; signs every request.
    pub region: String,
    /// [`default_base_url`] of the region, or a stand-in such as the fake's.
    pub base_url: String,
    /// The access key id of an IAM identity allowed `ses:SendEmail`.
    pub access_key_id: String,
    /// Its secret key: signs requests and is never sent.
    pub secret_access_key: SecretString,
    /// With temporary credentials, their session token.
    pub session_token: Option<SecretString>,
    /// The sender, a verified identity, e.g. `Acme <noreply@acme.example>`.
    pub from: String,
    /// The configuration set whose event destination publishes to SNS; without it, the
    /// sender identity's default set (if any) applies.
    pub configuration_set: Option<String>,
    /// The whole exchange, connect to last body byte.
    pub timeout: Duration,
    /// The SNS topic the configuration set publishes events to; with it, the route reads
    /// that topic's messages ([`Adapter::callbacks`]).
    pub sns_topic_arn: Option<String>,
    /// Where signing certificates and subscription URLs may come from; [`SnsOrigin::Aws`]
    /// but for a local stand-in.
    pub sns_origin: SnsOrigin,
}

#[derive(Debug, thiserror::Error)]
pub enum SesError {
    #[error("the SES base_url `{url}` is not an http(s) URL: {reason}")]
    BaseUrl { url: String, reason: String },
    #[error("an SES route needs a region of letters, digits and dashes, such as `eu-west-1`")]
    Region,
    /// Says what is wrong with the credentials, never what they are.
    #[error("the SES credentials cannot sign a request: {0}")]
    Credentials(String),
    #[error(
        "the SNS topic `{0}` is not an SNS topic ARN (`arn:aws:sns:<region>:<account>:<name>`)"
    )]
    SnsTopic(String),
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

pub struct SesAdapter {
    timeout: Duration,
    http: reqwest::Client,
    send_url: Url,
    region: String,
    /// AWS's own credentials type: the secret inside is zeroized and never shown by `Debug`.
    credentials: Credentials,
    /// Scrubs the secret key and session token from anything an answer might echo.
    redactor: Redactor,
    from: String,
    configuration_set: Option<String>,
    capabilities: Capabilities,
    /// Set when the route names its SNS topic.
    callbacks: Option<SnsCallbacks>,
}

impl fmt::Debug for SesAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SesAdapter")
            .field("send_url", &self.send_url.as_str())
            .field("region", &self.region)
            .field("from", &self.from)
            .field("configuration_set", &self.configuration_set)
            .field("credentials", &"[REDACTED]")
            .field("capabilities", &self.capabilities)
            .field("callbacks", &self.callbacks.is_some())
            .finish_non_exhaustive()
    }
}

impl SesAdapter {
    /// Builds the adapter at start-up, and signs a request once so that credentials that
    /// cannot sign stop the route there. reqwest needs a rustls crypto provider to be
    /// installed first (herald's main installs ring).
    pub fn new(route: SesRoute) -> Result<Self, SesError> {
        let region_ok = !route.region.is_empty()
            && route
                .region
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !region_ok {
            return Err(SesError::Region);
        }
        let send_url =
            http::endpoint(&route.base_url, SEND_PATH).map_err(|reason| SesError::BaseUrl {
                url: route.base_url.clone(),
                reason,
            })?;
        if let Some(topic) = &route.sns_topic_arn
            && !is_topic_arn(topic)
        {
            return Err(SesError::SnsTopic(topic.clone()));
        }
        let credentials = Credentials::new(
            route.access_key_id.clone(),
            route.secret_access_key.expose_secret().to_owned(),
            route
                .session_token
                .as_ref()
                .map(|token| token.expose_secret().to_owned()),
            None,
            "herald",
        );
        let mut redactor = Redactor::secret(route.secret_access_key.expose_secret());
        if let Some(token) = &route.session_token {
            redactor = redactor.with_secret(token.expose_secret());
        }
        let client = || {
            reqwest::Client::builder()
                .timeout(route.timeout)
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("herald-ses/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(SesError::Client)
        };
        // Nothing is followed: SES never redirects (and a redirect would carry a session token
        // elsewhere), and a certificate or a confirmation is taken only from the URL SNS named.
        let http = client()?;
        let callbacks = match route.sns_topic_arn {
            Some(topic) => Some(SnsCallbacks::new(topic, route.sns_origin, client()?)),
            None => None,
        };
        let adapter = SesAdapter {
            timeout: route.timeout,
            http,
            send_url,
            region: route.region,
            credentials,
            redactor,
            from: route.from,
            configuration_set: route.configuration_set,
            callbacks,
            capabilities: Capabilities {
                tags: true,
                attachments: true,
                // SES takes no idempotency token: a resend is a second email.
                idempotency_window: None,
                query_visibility_lag: None,
                max_payload_bytes: Some(MAX_MESSAGE_BYTES),
            },
        };
        adapter.signed("{}").map_err(SesError::Credentials)?;
        Ok(adapter)
    }

    /// The headers that sign a `SendEmail` of `body` now: `x-amz-date`, `Authorization` and,
    /// with temporary credentials, `x-amz-security-token`.
    fn signed(&self, body: &str) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
        let identity = self.credentials.clone().into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(SERVICE)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|err| err.to_string())?
            .into();
        let request = SignableRequest::new(
            "POST",
            self.send_url.as_str(),
            [("content-type", "application/json")].into_iter(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|err| err.to_string())?;
        let (instructions, _) = sign(request, &params)
            .map_err(|err| err.to_string())?
            .into_parts();
        let (headers, _) = instructions.into_parts();
        headers
            .into_iter()
            .map(|header| {
                let mut value =
                    HeaderValue::from_str(header.value()).map_err(|err| err.to_string())?;
                value.set_sensitive(header.sensitive() || header.name() == AUTHORIZATION);
                let name = HeaderName::from_bytes(header.name().as_bytes())
                    .map_err(|err| err.to_string())?;
                Ok((name, value))
            })
            .collect()
    }

    /// One signed `SendEmail` of a prepared request, classified. The signed credential
    /// (`Credential=…, SignedHeaders=…, Signature=…`) is scrubbed from anything SES echoes:
    /// within its few minutes it would replay this very send.
    async fn send_email(&self, request: &Request) -> SendResult {
        let signature = match self.signed(&request.body) {
            Ok(headers) => headers,
            Err(why) => {
                return SendResult::permanent(Evidence::new(
                    "request",
                    format!("cannot sign the request: {why}"),
                ));
            }
        };
        let authorization = signature
            .iter()
            .find(|(name, _)| name == AUTHORIZATION)
            .and_then(|(_, value)| value.to_str().ok())
            .map(|value| {
                value
                    .split_once(' ')
                    .map_or(value, |(_, credential)| credential)
            })
            .map(Redactor::secret);
        let result = self.exchange(request, signature).await;
        match authorization {
            Some(redactor) => redactor.send(result),
            None => result,
        }
    }

    async fn exchange(
        &self,
        request: &Request,
        signature: Vec<(HeaderName, HeaderValue)>,
    ) -> SendResult {
        let mut builder = self
            .http
            .post(self.send_url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .body(request.body.clone());
        for (name, value) in signature {
            builder = builder.header(name, value);
        }
        let Answer {
            status,
            headers,
            body: text,
        } = match exchange(builder, self.timeout).await {
            Ok(answer) => answer,
            Err(result) => return result,
        };
        if !status.is_success() {
            let kind = error_type(&headers, &text);
            let throttled = kind
                .as_deref()
                .is_some_and(|kind| THROTTLED.contains(&kind));
            let result = if throttled && status.is_client_error() {
                let evidence = Evidence::new("response", &text).with_status(status.as_u16());
                SendResult::transient(evidence, retry_after(&headers))
            } else {
                classify_failure_status(status, &headers, &text, RULES)
            };
            return with_vendor_code(result, kind);
        }
        match serde_json::from_str::<wire::Sent>(&text) {
            Ok(wire::Sent {
                message_id: Some(id),
            }) if !id.is_empty() => SendResult::Accepted {
                provider_ref: Some(id),
                evidence: Evidence::new("response", &text).with_status(status.as_u16()),
            },
            _ => unreadable_success(status, format!("the answer has no MessageId: {text}")),
        }
    }
}

/// The error's type, `MessageRejected` and the like: from `x-amzn-ErrorType` (its part
/// before `:`), else from the body's `__type` or `code` (its part after `#`).
fn error_type(headers: &reqwest::header::HeaderMap, body: &str) -> Option<String> {
    let from_header = headers
        .get(ERROR_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.split(':').next().unwrap_or(value));
    let from_body = || {
        serde_json::from_str::<wire::Failure>(body)
            .ok()
            .and_then(|failure| failure.kind)
            .map(|kind| kind.rsplit('#').next().unwrap_or(&kind).to_owned())
    };
    from_header
        .map(str::to_owned)
        .or_else(from_body)
        .map(|kind| kind.trim().to_owned())
        .filter(|kind| !kind.is_empty())
}

/// `arn:<partition>:sns:<region>:<account>:<name>`.
fn is_topic_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.split(':').collect();
    parts.len() == 6
        && parts[0] == "arn"
        && parts[2] == "sns"
        && parts.iter().all(|part| !part.is_empty())
}

#[async_trait::async_trait]
impl Adapter for SesAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The `SendEmail` body, herald's key in its tags.
    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let email = &message.email;
        if email.tags.contains_key(KEY_TAG) {
            return Err(Evidence::new(
                "request",
                format!("the tag `{KEY_TAG}` is herald's own on an SES route"),
            ));
        }
        let text = |data| Text {
            data,
            charset: "UTF-8",
        };
        let body = SendEmail {
            from_email_address: email.from.as_deref().unwrap_or(&self.from),
            destination: Destination {
                to_addresses: vec![&message.to],
                cc_addresses: email.cc.iter().map(String::as_str).collect(),
                bcc_addresses: email.bcc.iter().map(String::as_str).collect(),
            },
            reply_to_addresses: email.reply_to.as_deref().into_iter().collect(),
            content: Content {
                simple: Simple {
                    subject: text(message.subject.as_deref().unwrap_or("")),
                    body: Body {
                        text: message.text.as_deref().map(text),
                        html: message.html.as_deref().map(text),
                    },
                    headers: email
                        .headers
                        .iter()
                        .map(|(name, value)| Header { name, value })
                        .collect(),
                    attachments: email
                        .attachments
                        .iter()
                        .map(|a| Attachment {
                            file_name: &a.filename,
                            raw_content: a.placeholder(Encoding::Base64),
                            content_type: &a.content_type,
                            content_transfer_encoding: BASE64,
                        })
                        .collect(),
                },
            },
            email_tags: email
                .tags
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str()))
                .chain([(KEY_TAG, key.as_str())])
                .map(|(name, value)| Tag { name, value })
                .collect(),
            configuration_set_name: self.configuration_set.as_deref(),
        };
        Request::json(&body)
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
        let result = self.send_email(request).await;
        self.redactor.send(result)
    }
}
