//! Herald's adapter for Twilio's Message resource: create a Message to send, list Messages to
//! look a send up. The crate docs state what is classified how, and why.

use std::time::Duration;

use herald_provider::callback::Callbacks;
use herald_provider::http::{
    Answer, StatusRules, classify_failure_status, exchange, look_up, retry_after,
    unreadable_success, with_vendor_code,
};
use herald_provider::settings::is_loopback_host;
use herald_provider::{
    Adapter, Capabilities, Channel, Evidence, Message, ProviderKey, QueryResult, Redactor, Request,
    SendResult,
};
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use time::OffsetDateTime;
use time::format_description::well_known::{Rfc2822, Rfc3339};

use crate::callback::{StatusCallback, TwilioCallbacks};
use crate::lookback;
use crate::wire::{ErrorBody, MessagePage, MessageResource, OPTED_OUT};

/// Twilio's public REST endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.twilio.com";

/// See [`TwilioRoute::visibility_lag`].
pub const DEFAULT_VISIBILITY_LAG: Duration = Duration::from_secs(10 * 60);

/// Twilio takes a `Body` of up to 1,600 characters.
pub const MAX_BODY_CHARS: usize = 1600;

/// See [`TwilioRoute::validity_period`]: as long as Twilio may queue a message by default, less
/// the list's allowance, so that it fits the default lag.
pub const DEFAULT_VALIDITY_PERIOD: Duration = Duration::from_secs(570);

/// The shortest [`TwilioRoute::validity_period`] a route may set. Twilio sends from a long code
/// at about one message a second and queues the rest, so a shorter period drops every message
/// that waits behind a burst of more than a minute's traffic — real messages lost to a setting.
pub const MIN_VALIDITY_PERIOD: Duration = Duration::from_secs(60);

/// The longest `ValidityPeriod` Twilio takes (and its default).
pub const MAX_VALIDITY_PERIOD: Duration = Duration::from_secs(36_000);

/// Beyond the validity period, the time kept for the Messages list to catch up with a message
/// Twilio has just sent: a route's visibility lag must cover both.
pub const LIST_ALLOWANCE: Duration = Duration::from_secs(30);

/// Twilio's largest page; one or two pages cover any sane traffic to one number in two days.
const PAGE_SIZE: u32 = 1000;

/// Past this many pages the look-up gives up rather than keep a reconcile waiting.
const MAX_PAGES: usize = 5;

/// Twilio error codes that prove the request was not processed and may succeed later:
/// 20429 too many concurrent requests ("aren't processed and are safe to retry"), 21611 the
/// sender's queue is full, 63017 the account's messages-per-second limit.
const TRANSIENT_CODES: [i64; 3] = [20429, 21611, 63017];

/// Twilio documents nothing special about 409 or 503, so both keep the cautious default.
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// A Twilio route, as herald's configuration resolves it.
#[derive(Debug, Clone)]
pub struct TwilioRoute {
    /// [`DEFAULT_BASE_URL`], or a fake's address in tests.
    pub base_url: String,
    /// `AC…`; names the account in every URL.
    pub account_sid: String,
    /// `SK…` when authenticating with an API key; `auth_token` then holds the key's secret.
    /// `None`: Basic auth is `account_sid:auth_token`.
    pub api_key_sid: Option<String>,
    pub auth_token: SecretString,
    /// The sender (E.164 number, short code or alphanumeric ID). Exactly one of `from` and
    /// `messaging_service_sid` is set.
    pub from: Option<String>,
    /// `MG…`: Twilio picks the sender from the service's pool.
    pub messaging_service_sid: Option<String>,
    /// herald's public URL for this route's status callbacks (e.g.
    /// `https://herald.example.com/v1/callbacks/twilio-main`). Sent as `StatusCallback`, with
    /// `herald_key=<provider key>` appended to its query; set, it turns on the route's callback
    /// reader ([`Adapter::callbacks`]).
    pub status_callback: Option<String>,
    /// The account's Auth Token, which Twilio signs status callbacks with. Needed with
    /// `api_key_sid` (then `auth_token` is the API key's secret, which signs nothing);
    /// otherwise `auth_token` is the Auth Token and this stays `None`.
    pub callback_auth_token: Option<SecretString>,
    /// How long after its acceptance a message may still be missing from the Messages list:
    /// the look-up calls a send absent only this long after it.
    ///
    /// The list's `DateSent` filter only finds a message once Twilio has *sent* it, and Twilio
    /// keeps a message queued for as long as its `ValidityPeriod` when a sender is over its
    /// rate. So against Twilio itself the lag must cover [`Self::validity_period`] and 30 s for
    /// the list ([`LIST_ALLOWANCE`]); a shorter one is refused rather than trusted. A
    /// `base_url` on loopback is a test double that queues nothing, and may take any lag.
    pub visibility_lag: Duration,
    /// The longest Twilio may keep a message queued before dropping it unsent (`ValidityPeriod`,
    /// 60 s to 10 h): each attempt sends this, or the notification's time left if that is
    /// shorter. Its own setting, so that a short lag in staging never shortens an SMS's life.
    pub validity_period: Duration,
    /// The whole exchange, connect to last body byte.
    pub timeout: Duration,
}

impl TwilioRoute {
    /// A route on Twilio's public endpoint with the default lag and a 10 s timeout; set `from`
    /// or `messaging_service_sid` before building the adapter.
    pub fn new(account_sid: impl Into<String>, auth_token: SecretString) -> Self {
        TwilioRoute {
            base_url: DEFAULT_BASE_URL.to_owned(),
            account_sid: account_sid.into(),
            api_key_sid: None,
            auth_token,
            from: None,
            messaging_service_sid: None,
            status_callback: None,
            callback_auth_token: None,
            visibility_lag: DEFAULT_VISIBILITY_LAG,
            validity_period: DEFAULT_VALIDITY_PERIOD,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Why a route cannot be built. Never carries a credential.
#[derive(Debug, thiserror::Error)]
pub enum TwilioError {
    #[error("the Twilio base_url `{url}` cannot serve as an API root: {reason}")]
    BaseUrl { url: String, reason: String },
    #[error("a Twilio route needs an account_sid")]
    AccountSid,
    #[error("a Twilio route needs exactly one of `from` and `messaging_service_sid`")]
    Sender,
    #[error("a Twilio route needs a visibility_lag above zero")]
    VisibilityLag,
    #[error(
        "the visibility lag ({lag_ms} ms) is shorter than the validity period ({validity_s} s) \
         plus 30 s for the Messages list: Twilio may still send a queued message after a look-up \
         called it absent. Raise visibility_lag_ms to at least {needed_ms}, or lower \
         validity_period_seconds (not under 60)"
    )]
    LagUnderValidity {
        lag_ms: u128,
        validity_s: u64,
        needed_ms: u128,
    },
    #[error(
        "the validity period must be 60 to 36000 s, not {0} s: Twilio takes at most 36000, and a \
         shorter period than a minute drops messages queued behind a burst at a sender's rate"
    )]
    ValidityPeriod(u64),
    #[error("the Twilio status_callback `{url}` cannot be used: {reason}")]
    StatusCallback { url: String, reason: String },
    /// The token itself is never part of the message.
    #[error(
        "a Twilio route that sends with an API key (api_key_sid) and reads status callbacks needs \
         callback_auth_token: Twilio signs callbacks with the account's Auth Token, not the key's \
         secret"
    )]
    CallbackAuthToken,
    #[error("callback_auth_token is set but status_callback is not: nothing would use it")]
    UnusedCallbackAuthToken,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Who sends: what goes into the create request, and what a listed message must show.
#[derive(Debug, Clone)]
enum Sender {
    From(String),
    Service(String),
}

#[derive(Debug, Clone)]
pub struct TwilioAdapter {
    /// How long one call may take: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    /// The API root, to resolve `next_page_uri` against and to check that it stays there.
    base: Url,
    messages_url: Url,
    user: String,
    auth_token: SecretString,
    sender: Sender,
    /// Set when the route has a `status_callback`: the URL each send names, and its reader.
    callbacks: Option<TwilioCallbacks>,
    validity_period_secs: u64,
    capabilities: Capabilities,
    /// Scrubs the credentials, in every form, from anything an answer might echo.
    redactor: Redactor,
}

impl TwilioAdapter {
    /// Builds the adapter at start-up. reqwest needs a rustls crypto provider installed first
    /// (herald's main installs ring); without one, building the client panics inside reqwest.
    pub fn new(route: TwilioRoute) -> Result<Self, TwilioError> {
        if route.account_sid.trim().is_empty() {
            return Err(TwilioError::AccountSid);
        }
        let sender = match (route.from, route.messaging_service_sid) {
            (Some(from), None) if !from.is_empty() => Sender::From(from),
            (None, Some(service)) if !service.is_empty() => Sender::Service(service),
            _ => return Err(TwilioError::Sender),
        };
        if route.visibility_lag.is_zero() {
            return Err(TwilioError::VisibilityLag);
        }
        if !(MIN_VALIDITY_PERIOD..=MAX_VALIDITY_PERIOD).contains(&route.validity_period) {
            return Err(TwilioError::ValidityPeriod(route.validity_period.as_secs()));
        }
        let bad_url = |reason: String| TwilioError::BaseUrl {
            url: route.base_url.clone(),
            reason,
        };
        let base = Url::parse(&route.base_url).map_err(|err| bad_url(err.to_string()))?;
        let mut messages_url = base.clone();
        messages_url
            .path_segments_mut()
            .map_err(|()| bad_url("it has no path".to_owned()))?
            .pop_if_empty()
            // Pushed as segments, so that an odd account SID cannot change the path.
            .extend([
                "2010-04-01",
                "Accounts",
                route.account_sid.as_str(),
                "Messages.json",
            ]);
        let needed = route.validity_period + LIST_ALLOWANCE;
        if route.visibility_lag < needed && !base.host_str().is_some_and(is_loopback_host) {
            return Err(TwilioError::LagUnderValidity {
                lag_ms: route.visibility_lag.as_millis(),
                validity_s: route.validity_period.as_secs(),
                needed_ms: needed.as_millis(),
            });
        }
        let http = reqwest::Client::builder().timeout(route.timeout).build()?;
        let callbacks = match (route.status_callback, route.callback_auth_token) {
            (None, None) => None,
            (None, Some(_)) => return Err(TwilioError::UnusedCallbackAuthToken),
            (Some(url), token) => {
                let parsed =
                    StatusCallback::parse(&url).map_err(|reason| TwilioError::StatusCallback {
                        url: url.clone(),
                        reason,
                    })?;
                let token = match (token, &route.api_key_sid) {
                    (Some(token), _) => token,
                    (None, None) => route.auth_token.clone(),
                    (None, Some(_)) => return Err(TwilioError::CallbackAuthToken),
                };
                Some(TwilioCallbacks::new(parsed, token))
            }
        };
        let user = route.api_key_sid.unwrap_or(route.account_sid);
        let redactor = Redactor::credentials(&user, route.auth_token.expose_secret());
        Ok(TwilioAdapter {
            timeout: route.timeout,
            http,
            base,
            messages_url,
            user,
            auth_token: route.auth_token,
            redactor,
            sender,
            callbacks,
            validity_period_secs: route.validity_period.as_secs(),
            capabilities: Capabilities {
                idempotency_window: None,
                query_visibility_lag: Some(route.visibility_lag),
                // 1,600 characters are at least 1,600 bytes: never a promise Twilio breaks.
                max_payload_bytes: Some(MAX_BODY_CHARS),
                tags: false,
                attachments: false,
            },
        })
    }

    /// The stored form as this attempt sends it: where the notification expires before the
    /// route's `ValidityPeriod` (which the look-up's proof of absence rests on) would, the
    /// period is cut to the seconds left now, so that Twilio drops what it cannot send in time.
    /// Counted per attempt, as the clock must be: the stored request itself never reads it.
    fn body_for_attempt(&self, stored: &str, message: &Message) -> String {
        let Some(expires_at) = message.expires_at else {
            return stored.to_owned();
        };
        let seconds = (expires_at - time::OffsetDateTime::now_utc()).whole_seconds();
        let left = u64::try_from(seconds).unwrap_or(0).max(1);
        if left >= self.validity_period_secs {
            return stored.to_owned();
        }
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in url::form_urlencoded::parse(stored.as_bytes()) {
            match name.as_ref() {
                "ValidityPeriod" => form.append_pair(&name, &left.to_string()),
                _ => form.append_pair(&name, &value),
            };
        }
        form.finish()
    }

    /// The SMS text, or why this message cannot be an SMS (decided before any I/O).
    fn body_of<'m>(&self, message: &'m Message) -> Result<&'m str, String> {
        if message.channel != Channel::Sms {
            return Err(format!("a Twilio route sends sms, not {}", message.channel));
        }
        let body = message.text.as_deref().unwrap_or_default();
        if body.is_empty() {
            return Err("an SMS needs a text".to_owned());
        }
        let chars = body.chars().count();
        if chars > MAX_BODY_CHARS {
            return Err(format!(
                "the text has {chars} characters; Twilio takes at most {MAX_BODY_CHARS}"
            ));
        }
        Ok(body)
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request.basic_auth(&self.user, Some(self.auth_token.expose_secret()))
    }

    /// Reads the Messages list for `sought` since `since`, page by page (at most
    /// [`MAX_PAGES`]): the messages with its text, and how many show no text.
    async fn list(&self, sought: &Sought, since: OffsetDateTime) -> Result<Listing, Evidence> {
        let mut url = self.messages_url.clone();
        {
            let mut pairs = url.query_pairs_mut();
            pairs.append_pair("To", &sought.to);
            // A Messaging Service's sender is picked from a pool: filter on the service instead,
            // below, since the list has no service filter.
            if let Sender::From(from) = &sought.sender {
                pairs.append_pair("From", from);
            }
            // `DateSent>` is "on or after this UTC day".
            pairs.append_pair("DateSent>", &lookback::utc_date(since));
            pairs.append_pair("PageSize", &PAGE_SIZE.to_string());
        }
        let mut listing = Listing::default();
        let mut next = Some(url);
        for _ in 0..MAX_PAGES {
            let Some(url) = next.take() else { break };
            let page = self.page(url).await?;
            for listed in page.messages {
                let Some(created) = sought.candidate(&listed, since)? else {
                    continue;
                };
                match listed.body.as_deref() {
                    Some(text) if text == sought.body => listing.found.push((created, listed)),
                    // Redacted by content retention: it may be this very send.
                    None | Some("") => listing.without_text += 1,
                    Some(_) => {}
                }
            }
            next = match page.next_page_uri.as_deref() {
                Some(uri) if !uri.is_empty() => Some(self.next_page(uri)?),
                _ => None,
            };
        }
        listing.complete = next.is_none();
        Ok(listing)
    }

    /// One page of the Messages list, or the evidence of why the look-up proves nothing.
    async fn page(&self, url: Url) -> Result<MessagePage, Evidence> {
        let Answer {
            status, body: text, ..
        } = look_up(self.authorized(self.http.get(url))).await?;
        if status != StatusCode::OK {
            let evidence = Evidence::new("query", &text).with_status(status.as_u16());
            return Err(match vendor_code(&text) {
                Some(code) => evidence.with_vendor_code(code.to_string()),
                None => evidence,
            });
        }
        serde_json::from_str(&text).map_err(|err| {
            Evidence::new("query", format!("{err}: {text}")).with_status(status.as_u16())
        })
    }

    /// `next_page_uri` is a path on the API host. Anything that would take the credentials
    /// elsewhere is refused.
    fn next_page(&self, uri: &str) -> Result<Url, Evidence> {
        let url = self.base.join(uri).map_err(|err| {
            Evidence::new("query", format!("unusable next_page_uri `{uri}`: {err}"))
        })?;
        if url.origin() != self.base.origin() {
            return Err(Evidence::new(
                "query",
                format!("next_page_uri `{uri}` leaves the API host"),
            ));
        }
        Ok(url)
    }
}

#[async_trait::async_trait]
impl Adapter for TwilioAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The create request's form. herald stores it at the first attempt, so every later send
    /// and look-up uses the sender and text of the first, whatever the route says by then.
    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let body = self
            .body_of(message)
            .map_err(|detail| Evidence::new("request", detail))?;
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("To", &message.to)
            .append_pair("Body", body);
        match &self.sender {
            Sender::From(from) => form.append_pair("From", from),
            Sender::Service(service) => form.append_pair("MessagingServiceSid", service),
        };
        if let Some(callbacks) = &self.callbacks {
            // Twilio echoes the URL in every status callback of the message: the key in it
            // names the notification's attempts, which a message SID only does once herald
            // has learnt it from Twilio's answer.
            form.append_pair("StatusCallback", &callbacks.url.for_key(key));
        }
        form.append_pair("ValidityPeriod", &self.validity_period_secs.to_string());
        // The look-up matches the stored text exactly, so Twilio must not rewrite it (a
        // Messaging Service may have smart encoding on by default).
        form.append_pair("SmartEncoded", "false");
        Ok(Request::new(form.finish()))
    }

    fn callbacks(&self) -> Option<&dyn Callbacks> {
        self.callbacks.as_ref().map(|c| c as &dyn Callbacks)
    }

    /// 21610: the recipient replied STOP, and Twilio refuses every message to them until they
    /// reply START.
    fn unsubscribed(&self, evidence: &Evidence) -> bool {
        evidence.vendor_code.as_deref() == Some(OPTED_OUT)
    }

    async fn send_prepared(
        &self,
        request: &Request,
        message: &Message,
        _key: &ProviderKey,
    ) -> SendResult {
        let result: SendResult = async {
            let request = self
                .authorized(self.http.post(self.messages_url.clone()))
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(self.body_for_attempt(&request.body, message));
            let Answer {
                status,
                headers,
                body: text,
            } = match exchange(request, self.timeout).await {
                Ok(answer) => answer,
                Err(result) => return result,
            };
            if !status.is_success() {
                return classify_failure(status, &headers, &text);
            }
            match serde_json::from_str::<MessageResource>(&text) {
                Ok(created) if !created.sid.is_empty() => SendResult::Accepted {
                    evidence: Evidence::new(
                        "response",
                        format!(
                            "created {} with status {}",
                            created.sid,
                            created.status.as_deref().unwrap_or("(none)")
                        ),
                    )
                    .with_status(status.as_u16()),
                    provider_ref: Some(created.sid),
                },
                Ok(_) => unreadable_success(status, format!("the answer names no sid: {text}")),
                Err(err) => unreadable_success(status, format!("{err}: {text}")),
            }
        }
        .await;
        self.redactor.send(result)
    }

    /// Twilio keeps no client reference, and herald adds nothing to the text, so a send is
    /// found by what it was: an `outbound-api` message from the request's sender to its number
    /// with exactly its text, created since the notification existed. Such a message may be
    /// this send or a look-alike sibling's (the same text to the same number), so the answer
    /// is every match, as [`QueryResult::LookAlikes`]: herald attributes them, each to at most
    /// one notification, and settles only what the counts prove. A look-up that cannot count
    /// every match (more pages than it reads, texts redacted) proves nothing.
    async fn query_prepared(
        &self,
        request: &Request,
        message: &Message,
        _key: &ProviderKey,
    ) -> QueryResult {
        let result: QueryResult = async {
            let sought = match Sought::from_request(request) {
                Ok(sought) => sought,
                Err(detail) => {
                    return QueryResult::Unsupported {
                        evidence: Evidence::new("query", detail),
                    };
                }
            };
            let (since, from_id) = lookback::window_start(&message.notification_id, now());
            let since_text = since.format(&Rfc3339).unwrap_or_else(|_| since.to_string());
            let window = format!(
                "since {since_text} ({})",
                if from_id {
                    "the notification's creation less clock skew"
                } else {
                    "a fixed look-back: the notification id carries no time"
                }
            );
            match self.list(&sought, since).await {
                Ok(listing) => listing.judge(since, &window),
                Err(evidence) => QueryResult::Unsupported { evidence },
            }
        }
        .await;
        self.redactor.query(result)
    }
}

/// What the Messages list showed of a look-up.
#[derive(Default)]
struct Listing {
    /// Messages with the sought text, with when Twilio created each.
    found: Vec<(OffsetDateTime, MessageResource)>,
    /// Messages to the number whose text is gone (redacted): any may be the sought send.
    without_text: usize,
    /// Every page was read.
    complete: bool,
}

impl Listing {
    /// What the listing proves of a send, `window` saying since when it was searched.
    fn judge(mut self, since: OffsetDateTime, window: &str) -> QueryResult {
        let unsupported = |detail: String| QueryResult::Unsupported {
            evidence: Evidence::new("query", detail).with_status(200),
        };
        if !self.complete {
            return unsupported(format!(
                "more than {MAX_PAGES} pages of messages to this number {window}; the rest was \
                 not read, so the matches cannot be counted"
            ));
        }
        if self.without_text > 0 {
            return unsupported(format!(
                "{} messages to this number {window} show no text (redacted?); any of them may \
                 be a send of this text",
                self.without_text
            ));
        }
        if self.found.is_empty() {
            return QueryResult::NotFoundYet {
                evidence: Evidence::new(
                    "query",
                    format!("no message with this text to this number {window}"),
                )
                .with_status(200),
            };
        }
        // Oldest first. Twilio lists newest first and stamps whole seconds, so the list is
        // reversed before a stable sort keeps same-second messages in the order Twilio
        // created them.
        self.found.reverse();
        self.found.sort_by_key(|(created, _)| *created);
        let listed: Vec<String> = self
            .found
            .iter()
            .map(|(_, m)| format!("{} ({})", m.sid, m.status.as_deref().unwrap_or("no status")))
            .collect();
        QueryResult::LookAlikes {
            refs: self.found.into_iter().map(|(_, m)| m.sid).collect(),
            since,
            evidence: Evidence::new(
                "query",
                format!(
                    "{} message(s) with this text to this number {window}: {}",
                    listed.len(),
                    listed.join(", ")
                ),
            )
            .with_status(200),
        }
    }
}

/// What a look-up searches for: the recipient, sender and text of the stored request.
struct Sought {
    to: String,
    sender: Sender,
    body: String,
}

impl Sought {
    fn from_request(request: &Request) -> Result<Sought, String> {
        let (mut to, mut from, mut service, mut body) = (None, None, None, None);
        for (name, value) in url::form_urlencoded::parse(request.body.as_bytes()) {
            let slot = match name.as_ref() {
                "To" => &mut to,
                "From" => &mut from,
                "MessagingServiceSid" => &mut service,
                "Body" => &mut body,
                _ => continue,
            };
            *slot = Some(value.into_owned());
        }
        let sender = match (from, service) {
            (Some(from), None) => Sender::From(from),
            (None, Some(service)) => Sender::Service(service),
            _ => return Err("the stored request names no single sender".to_owned()),
        };
        match (to, body) {
            (Some(to), Some(body)) => Ok(Sought { to, sender, body }),
            _ => Err("the stored request has no To or no Body".to_owned()),
        }
    }

    /// When a listed message was created, if it was sent by this sender to this number inside
    /// the window. `Err` when its creation date cannot be read: the look-up then proves nothing.
    fn candidate(
        &self,
        listed: &MessageResource,
        since: OffsetDateTime,
    ) -> Result<Option<OffsetDateTime>, Evidence> {
        let sender_matches = match &self.sender {
            Sender::From(from) => listed.from.as_deref() == Some(from.as_str()),
            Sender::Service(service) => {
                listed.messaging_service_sid.as_deref() == Some(service.as_str())
            }
        };
        if listed.direction.as_deref() != Some("outbound-api")
            || listed.to.as_deref() != Some(self.to.as_str())
            || !sender_matches
        {
            return Ok(None);
        }
        let created = listed
            .date_created
            .as_deref()
            .and_then(|date| OffsetDateTime::parse(date, &Rfc2822).ok())
            .ok_or_else(|| {
                Evidence::new(
                    "query",
                    format!(
                        "message {} has an unreadable date_created {:?}",
                        listed.sid, listed.date_created
                    ),
                )
            })?;
        Ok((created >= since).then_some(created))
    }
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

fn vendor_code(body: &str) -> Option<i64> {
    serde_json::from_str::<ErrorBody>(body).ok()?.code
}

/// A non-2xx answer: the status decides, except that Twilio's rate-limit and full-queue codes
/// turn a 4xx into a transient rejection; the code goes into the evidence either way.
fn classify_failure(status: StatusCode, headers: &HeaderMap, body: &str) -> SendResult {
    let code = vendor_code(body);
    let result = match classify_failure_status(status, headers, body, RULES) {
        SendResult::Rejected {
            permanent: true,
            evidence,
            ..
        } if code.is_some_and(|code| TRANSIENT_CODES.contains(&code)) => {
            SendResult::transient(evidence, retry_after(headers))
        }
        other => other,
    };
    with_vendor_code(result, code.map(|code| code.to_string()))
}
