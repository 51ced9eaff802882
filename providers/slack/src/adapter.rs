//! Herald's adapter for Slack (`provider = "slack"`): one `chat.postMessage` per send with
//! herald's key in the message's metadata, and a look-up of the conversation's history for a
//! message that carries it, classified as the crate docs say.
//!
//! Slack takes no idempotency key, so a resend is a second message: an ambiguous send is
//! settled by the look-up, which reads `conversations.history` with `include_all_metadata`
//! from the notification's creation on and finds the message by `metadata.event_payload.
//! herald_key`, or, once the visibility lag has passed and the whole window was listed, proves
//! it absent.

use std::fmt;
use std::time::Duration;

use herald_provider::http::{
    self, Answer, StatusRules, classify_failure_status, exchange, look_up, retry_after,
    unreadable_success, with_vendor_code,
};
use herald_provider::{
    Adapter, Capabilities, Channel, Evidence, Message, ProviderKey, QueryResult, Redactor, Request,
    SendResult,
};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use time::OffsetDateTime;

use crate::wire::{
    self, EVENT_TYPE, HISTORY_PATH, History, MAX_BLOCKS, MAX_TEXT_CHARS, Metadata,
    POST_MESSAGE_PATH, Payload, PostMessage, Stamp, errors,
};

/// Slack's Web API root.
pub const DEFAULT_BASE_URL: &str = "https://slack.com/api";

/// How long after a send `conversations.history` is trusted to list it. Slack documents no
/// figure, so herald waits as long as it does for Twilio before it reads absence as "not
/// sent"; a route can set its own (`visibility_lag_ms`).
pub const DEFAULT_VISIBILITY_LAG: Duration = Duration::from_secs(10 * 60);

/// Posts per second a route keeps unless it sets `rate_limit_per_second`: `chat.postMessage`
/// "generally allows posting one message per second per channel"
/// (<https://docs.slack.dev/apis/web-api/rate-limits>). herald paces a route in each process,
/// not across processes: one process keeps one post a second to any number of conversations,
/// but N herald processes on one database post up to N a second (Slack's 429 and its
/// `Retry-After` then pause each process that meets it).
pub const DEFAULT_PACE: f64 = 1.0;

/// Allowed disagreement between herald's clock (which stamped the notification id) and
/// Slack's (which stamps `ts`): the look-up starts this long before the notification was
/// created.
pub const CLOCK_SKEW: Duration = Duration::from_secs(10 * 60);

/// Messages asked for per page: Slack recommends "no more than 200 results at a time"
/// (<https://docs.slack.dev/reference/methods/conversations.replies>, the same pagination).
const PAGE_LIMIT: &str = "200";

/// Pages one look-up reads at most. A window that holds more is not listed whole, and proves
/// nothing.
pub const MAX_PAGES: usize = 10;

/// Slack documents neither 409 nor 503 as "not processed": the shared table applies to its
/// rare non-200 answers.
const RULES: StatusRules = StatusRules {
    unavailable_means_not_processed: false,
    conflict_means_in_progress: false,
};

/// A route's settings, already resolved by herald.
#[derive(Debug, Clone)]
pub struct SlackRoute {
    /// [`DEFAULT_BASE_URL`], or a stand-in such as the fake's.
    pub base_url: String,
    /// The bot token (`xoxb-…`); sent as `Authorization: Bearer` and nowhere else.
    pub bot_token: SecretString,
    /// How long after a send the history look-up is trusted to list it; `None`: the route
    /// declares no look-up (a bot without a history scope).
    pub visibility_lag: Option<Duration>,
    /// The whole exchange, connect to last body byte.
    pub timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum SlackError {
    #[error("the Slack base_url `{url}` is not an http(s) URL: {reason}")]
    BaseUrl { url: String, reason: String },
    /// The token itself is never part of the message.
    #[error("the Slack bot token has characters that an HTTP header cannot carry")]
    BotToken,
    #[error("a Slack route needs a visibility_lag above zero")]
    VisibilityLag,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

pub struct SlackAdapter {
    /// How long one call may take: the route's timeout.
    timeout: Duration,
    http: reqwest::Client,
    post_url: Url,
    history_url: Url,
    /// `Bearer <token>`, marked sensitive so that no header dump shows it.
    authorization: HeaderValue,
    /// Scrubs the token, in every form, from anything an answer might echo.
    redactor: Redactor,
    capabilities: Capabilities,
}

impl fmt::Debug for SlackAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlackAdapter")
            .field("post_url", &self.post_url.as_str())
            .field("history_url", &self.history_url.as_str())
            .field("bot_token", &"[REDACTED]")
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

impl SlackAdapter {
    /// Builds the adapter at start-up. reqwest needs a rustls crypto provider to be installed
    /// first (herald's main installs ring); without one, building the client panics inside
    /// reqwest.
    pub fn new(route: SlackRoute) -> Result<Self, SlackError> {
        if route.visibility_lag.is_some_and(|lag| lag.is_zero()) {
            return Err(SlackError::VisibilityLag);
        }
        let post_url = endpoint(&route.base_url, POST_MESSAGE_PATH)?;
        let history_url = endpoint(&route.base_url, HISTORY_PATH)?;
        let mut authorization =
            HeaderValue::from_str(&format!("Bearer {}", route.bot_token.expose_secret()))
                .map_err(|_| SlackError::BotToken)?;
        authorization.set_sensitive(true);
        let http = reqwest::Client::builder()
            .timeout(route.timeout)
            .user_agent(concat!("herald-slack/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(SlackError::Client)?;
        Ok(SlackAdapter {
            timeout: route.timeout,
            http,
            post_url,
            history_url,
            authorization,
            redactor: Redactor::secret(route.bot_token.expose_secret()),
            capabilities: Capabilities {
                // Slack deduplicates nothing: a resend is a second message.
                idempotency_window: None,
                query_visibility_lag: route.visibility_lag,
                // Slack states no request size; the text's limit is refused in `prepare`.
                max_payload_bytes: None,
                tags: false,
                attachments: false,
            },
        })
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request
            .header(AUTHORIZATION, self.authorization.clone())
            .header(ACCEPT, "application/json")
    }

    /// One `chat.postMessage` of a prepared request, classified; [`Adapter::send_prepared`]
    /// scrubs the token from the result.
    async fn post_message(&self, request: &Request) -> SendResult {
        let sent = self
            .authorized(self.http.post(self.post_url.clone()))
            .header(CONTENT_TYPE, "application/json; charset=utf-8")
            .body(request.body.clone());
        let Answer {
            status,
            headers,
            body: text,
        } = match exchange(sent, self.timeout).await {
            Ok(answer) => answer,
            Err(result) => return result,
        };
        let answer = serde_json::from_str::<wire::Answer>(&text).ok();
        if !status.is_success() {
            let result = classify_failure_status(status, &headers, &text, RULES);
            return with_vendor_code(result, answer.and_then(|answer| answer.error));
        }
        match answer {
            Some(wire::Answer {
                ok: true,
                channel,
                ts: Some(ts),
                ..
            }) if !ts.is_empty() => {
                let channel = channel
                    .or_else(|| sent_channel(request))
                    .unwrap_or_default();
                SendResult::Accepted {
                    provider_ref: Some(provider_ref(&channel, &ts)),
                    evidence: Evidence::new("response", &text).with_status(status.as_u16()),
                }
            }
            Some(wire::Answer {
                ok: false, error, ..
            }) => refusal(status, &headers, &text, error),
            _ => unreadable_success(
                status,
                format!("the answer is neither `ok: true` with a `ts` nor `ok: false`: {text}"),
            ),
        }
    }

    /// Pages through `conversations.history` of the conversation the stored request posted
    /// to, from the notification's creation (less [`CLOCK_SKEW`]) on, for messages that carry
    /// `key`.
    async fn find(&self, request: &Request, message: &Message, key: &ProviderKey) -> QueryResult {
        let Some(channel) = sent_channel(request) else {
            return QueryResult::Unsupported {
                evidence: Evidence::new("query", "the stored request names no channel"),
            };
        };
        let oldest = herald_provider::lookback::earliest_send(
            &message.notification_id,
            OffsetDateTime::now_utc(),
            CLOCK_SKEW,
        )
        .map(slack_ts);
        let mut search = Search::default();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut url = self.history_url.clone();
            {
                let mut pairs = url.query_pairs_mut();
                pairs
                    .append_pair("channel", &channel)
                    // Without it, Slack leaves out the payload of an event type the app's
                    // manifest does not declare, and with it herald's key.
                    .append_pair("include_all_metadata", "true")
                    .append_pair("limit", PAGE_LIMIT);
                if let Some(oldest) = &oldest {
                    pairs.append_pair("oldest", oldest);
                }
                if let Some(cursor) = &cursor {
                    pairs.append_pair("cursor", cursor);
                }
            }
            let page = match self.page(url).await {
                Ok(page) => page,
                Err(evidence) => return search.incomplete(&channel, evidence),
            };
            let Some(messages) = page.messages else {
                let evidence = Evidence::new("query", "the answer lists no `messages`");
                return search.incomplete(&channel, evidence.with_status(200));
            };
            for listed in &messages {
                match listed.stamp() {
                    Stamp::Key(found) if found == key.as_str() => {
                        search.ours.push(listed.ts.clone());
                    }
                    Stamp::Key(_) | Stamp::Other => {}
                    Stamp::Unreadable => {
                        search.unreadable.get_or_insert_with(|| listed.ts.clone());
                    }
                }
            }
            search.listed += messages.len();
            if !page.has_more {
                return search.complete(&channel);
            }
            match page
                .response_metadata
                .and_then(|meta| meta.next_cursor)
                .filter(|next| !next.is_empty())
            {
                Some(next) => cursor = Some(next),
                None => {
                    let evidence = Evidence::new(
                        "query",
                        "`has_more` without a `next_cursor`: the rest cannot be listed",
                    );
                    return search.incomplete(&channel, evidence.with_status(200));
                }
            }
        }
        let evidence = Evidence::new(
            "query",
            format!(
                "{} messages in {MAX_PAGES} pages and more to come: the window is not listed whole",
                search.listed
            ),
        );
        search.incomplete(&channel, evidence.with_status(200))
    }

    /// One page of the history, or the evidence of why there is none to read.
    async fn page(&self, url: Url) -> Result<History, Evidence> {
        let Answer {
            status, body: text, ..
        } = look_up(self.authorized(self.http.get(url))).await?;
        let code = || {
            serde_json::from_str::<wire::Answer>(&text)
                .ok()
                .and_then(|answer| answer.error)
        };
        if status != StatusCode::OK {
            let evidence = Evidence::new("query", &text).with_status(status.as_u16());
            return Err(match code() {
                Some(code) => evidence.with_vendor_code(code),
                None => evidence,
            });
        }
        let page: History = serde_json::from_str(&text)
            .map_err(|err| Evidence::new("query", format!("{err}: {text}")).with_status(200))?;
        if !page.ok {
            // `missing_scope` (no `channels:history` / `groups:history` / `im:history` /
            // `mpim:history` for this kind of conversation), `not_in_channel`,
            // `channel_not_found`, `ratelimited`, …: the look-up could not be made.
            let evidence = Evidence::new("query", &text).with_status(200);
            return Err(match page.error {
                Some(code) => evidence.with_vendor_code(code),
                None => evidence,
            });
        }
        Ok(page)
    }
}

/// What one look-up has found so far.
#[derive(Debug, Default)]
struct Search {
    /// The `ts` of each listed message that carries the key, as often as it was listed: a page
    /// listed again (the conformance kit answers every cursor with the same page) names the
    /// same messages twice.
    ours: Vec<String>,
    /// A message of herald's whose payload did not come back: it may be ours.
    unreadable: Option<String>,
    /// Messages listed, of any kind.
    listed: usize,
}

impl Search {
    /// Every page was read.
    fn complete(self, channel: &str) -> QueryResult {
        if !self.ours.is_empty() {
            return self.found(channel);
        }
        if let Some(ts) = self.unreadable {
            return QueryResult::Unsupported {
                evidence: Evidence::new(
                    "query",
                    format!(
                        "message {ts} is herald's ({EVENT_TYPE}) but its payload was not \
                         returned: it may be this notification's"
                    ),
                )
                .with_status(200),
            };
        }
        QueryResult::NotFoundYet {
            evidence: Evidence::new(
                "query",
                format!(
                    "none of the {} messages listed carries this key in its metadata",
                    self.listed
                ),
            )
            .with_status(200),
        }
    }

    /// The listing broke off (`evidence` says where): a message found so far is still ours,
    /// and nothing else is proven.
    fn incomplete(self, channel: &str, evidence: Evidence) -> QueryResult {
        if self.ours.is_empty() {
            QueryResult::Unsupported { evidence }
        } else {
            self.found(channel)
        }
    }

    /// The oldest message that carries the key: the first send that reached Slack. Messages
    /// are counted by their `ts`, once each however often they were listed: only distinct
    /// messages prove more than one send.
    fn found(mut self, channel: &str) -> QueryResult {
        self.ours.sort_by(|a, b| ts_order(a).cmp(&ts_order(b)));
        self.ours.dedup();
        let first = &self.ours[0];
        let detail = match self.ours.len() {
            1 => format!("found message {first} with this key in its metadata"),
            n => format!(
                "{n} messages carry this key ({}): more than one send of this notification \
                 reached Slack",
                self.ours.join(", ")
            ),
        };
        QueryResult::Accepted {
            provider_ref: Some(provider_ref(channel, first)),
            evidence: Evidence::new("query", detail).with_status(200),
        }
    }
}

#[async_trait::async_trait]
impl Adapter for SlackAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The `chat.postMessage` body: the conversation, the text, the blocks as given, and
    /// herald's key in the message's metadata.
    fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        let refuse = |detail: String| Err(Evidence::new("request", detail));
        if message.channel != Channel::Chat {
            return refuse(format!(
                "a Slack route carries chat messages, not {}",
                message.channel
            ));
        }
        for (field, present) in [
            ("subject", message.subject.is_some()),
            ("html", message.html.is_some()),
            ("payload", message.payload.is_some()),
        ] {
            if present {
                return refuse(format!("a Slack message has no `{field}`"));
            }
        }
        if !message.email.is_empty() {
            return refuse("a Slack message has no email options".to_owned());
        }
        conversation_id(&message.to)?;
        let Some(text) = message.text.as_deref().filter(|t| !t.trim().is_empty()) else {
            return refuse("a Slack message needs `text`, also as the blocks' fallback".to_owned());
        };
        // UTF-16 units, the larger count of "characters": the smaller reading of the limit.
        let length = text.encode_utf16().count();
        if length > MAX_TEXT_CHARS {
            return refuse(format!(
                "the text is {length} characters; Slack truncates beyond {MAX_TEXT_CHARS}"
            ));
        }
        if let Some(blocks) = &message.blocks {
            let Some(list) = blocks.as_array() else {
                return refuse("`blocks` must be a JSON array".to_owned());
            };
            if list.len() > MAX_BLOCKS {
                return refuse(format!(
                    "{} blocks; Slack takes up to {MAX_BLOCKS} in a message",
                    list.len()
                ));
            }
        }
        Request::json(&PostMessage {
            channel: &message.to,
            text,
            blocks: message.blocks.as_ref(),
            metadata: Metadata {
                event_type: EVENT_TYPE,
                event_payload: Payload {
                    herald_key: key.as_str(),
                },
            },
        })
    }

    async fn send_prepared(
        &self,
        request: &Request,
        _message: &Message,
        _key: &ProviderKey,
    ) -> SendResult {
        // Anything Slack echoes is scrubbed of the token before it becomes evidence.
        let result = self.post_message(request).await;
        self.redactor.send(result)
    }

    async fn query_prepared(
        &self,
        request: &Request,
        message: &Message,
        key: &ProviderKey,
    ) -> QueryResult {
        if self.capabilities.query_visibility_lag.is_none() {
            return QueryResult::Unsupported {
                evidence: Evidence::new(
                    "query",
                    "this route reads no history (`history_lookup = false`)",
                ),
            };
        }
        let result = self.find(request, message, key).await;
        self.redactor.query(result)
    }
}

/// A 2xx with `ok: false`: Slack did not post the message, unless its `error` is one of its
/// own failures or one this table does not know.
fn refusal(
    status: StatusCode,
    headers: &HeaderMap,
    text: &str,
    code: Option<String>,
) -> SendResult {
    let evidence = |status: u16| Evidence::new("response", text).with_status(status);
    let is = |group: &[&str]| code.as_deref().is_some_and(|code| group.contains(&code));
    let result = if is(errors::CREDENTIAL_REFUSED) {
        SendResult::permanent(evidence(401))
    } else if is(errors::ROUTE_REFUSED) {
        SendResult::permanent(evidence(403))
    } else if is(errors::MESSAGE_REFUSED) {
        SendResult::permanent(evidence(status.as_u16()))
    } else if is(errors::RATE_LIMITED) {
        SendResult::transient(evidence(429), retry_after(headers))
    } else if is(errors::WORKSPACE_MIGRATING) {
        SendResult::transient(evidence(503), retry_after(headers))
    } else if is(errors::MAYBE_POSTED) {
        // Slack's own failure: it may have posted the message first.
        SendResult::Ambiguous {
            evidence: evidence(status.as_u16()),
        }
    } else {
        // A code this table does not know, or none: nothing proves it was not posted.
        let detail = format!("an `error` herald does not know: {text}");
        SendResult::Ambiguous {
            evidence: Evidence::new("response", detail).with_status(status.as_u16()),
        }
    };
    with_vendor_code(result, code)
}

/// herald's name of a Slack message: its conversation and its `ts`, which is unique only
/// within the conversation (`chat.update` and `chat.delete` take both).
pub fn provider_ref(channel: &str, ts: &str) -> String {
    format!("{channel}/{ts}")
}

/// The conversation the stored request posts to.
fn sent_channel(request: &Request) -> Option<String> {
    let body: serde_json::Value = serde_json::from_str(&request.body).ok()?;
    let channel = body.get("channel")?.as_str()?;
    (!channel.is_empty()).then(|| channel.to_owned())
}

/// `to` must be a conversation id (`C0123456789`), not a channel name: `conversations.history`
/// takes only an id, and the look-up must read the conversation the message went to. For the
/// same reason not a user id (`U…`, `W…` in an Enterprise organization): Slack posts to the
/// app's direct message with that user, a conversation with an id of its own (`D…`), and the
/// history of the user id is `channel_not_found`, so the send could never be looked up.
fn conversation_id(to: &str) -> Result<(), Evidence> {
    let is_id = (2..=64).contains(&to.len())
        && to
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    if !is_id {
        return Err(Evidence::new(
            "request",
            format!("`{to}` is not a Slack conversation id such as C0123456789"),
        ));
    }
    if to.starts_with(['U', 'W']) {
        return Err(Evidence::new(
            "request",
            format!(
                "`{to}` is a Slack user id: Slack would post to the direct message with that \
                 user, which herald could not look up by this id; post to the direct \
                 message's own `D…` id (`conversations.open` gives it)"
            ),
        ));
    }
    Ok(())
}

/// Slack's timestamp form of `at`: Unix seconds and microseconds, `1712345678.000100`.
fn slack_ts(at: OffsetDateTime) -> String {
    let micros = at.unix_timestamp_nanos().max(0) / 1_000;
    wire::format_ts(u64::try_from(micros).unwrap_or(u64::MAX))
}

/// A `ts` as a number, to order messages: readable ones by their time (Slack's own reading,
/// [`wire::parse_ts`]), then unreadable ones in text order; equal times in text order.
fn ts_order(ts: &str) -> (u64, &str) {
    (wire::parse_ts(ts).unwrap_or(u64::MAX), ts)
}

fn endpoint(base_url: &str, path: &str) -> Result<Url, SlackError> {
    http::endpoint(base_url, path).map_err(|reason| SlackError::BaseUrl {
        url: base_url.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_timestamps_have_six_digits_of_microseconds_and_order_as_numbers() {
        let at = OffsetDateTime::from_unix_timestamp(1_712_345_678).unwrap()
            + time::Duration::microseconds(100);
        assert_eq!(slack_ts(at), "1712345678.000100");
        let mut listed = vec![
            "not-a-ts",
            "1712345678.000100",
            "1712345677.999999",
            "1712345678.1",
        ];
        listed.sort_by_key(|ts| ts_order(ts));
        assert_eq!(
            listed,
            [
                "1712345677.999999",
                "1712345678.000100",
                "1712345678.1",
                "not-a-ts"
            ]
        );
        // The one reading the fake shares.
        assert_eq!(
            wire::parse_ts("1712345678.000100"),
            Some(1_712_345_678_000_100)
        );
        assert_eq!(wire::parse_ts("1712345678"), Some(1_712_345_678_000_000));
        for junk in ["", ".5", "+1.5", "1.1234567", "1.x", "next_ts:1.5"] {
            assert_eq!(wire::parse_ts(junk), None, "{junk}");
        }
        assert_eq!(wire::format_ts(1_712_345_678_000_100), "1712345678.000100");
    }

    #[test]
    fn a_message_listed_twice_is_one_send() {
        // A page listed again names the same messages again: two messages, not three.
        let search = Search {
            ours: vec![
                "1712345678.000300".to_owned(),
                "1712345678.000100".to_owned(),
                "1712345678.000300".to_owned(),
            ],
            ..Search::default()
        };
        let QueryResult::Accepted {
            provider_ref,
            evidence,
        } = search.found("C0123456789")
        else {
            panic!("found");
        };
        assert_eq!(
            provider_ref.as_deref(),
            Some("C0123456789/1712345678.000100")
        );
        assert!(
            evidence.detail.starts_with("2 messages carry this key"),
            "{}",
            evidence.detail
        );

        let once = Search {
            ours: vec!["1712345678.000100".to_owned(); 10],
            ..Search::default()
        };
        let QueryResult::Accepted { evidence, .. } = once.found("C0123456789") else {
            panic!("found");
        };
        assert_eq!(
            evidence.detail,
            "found message 1712345678.000100 with this key in its metadata"
        );
    }

    #[test]
    fn a_refusal_inside_a_200_reads_as_what_it_means_to_herald() {
        let mut headers = HeaderMap::new();
        headers.insert(reqwest::header::RETRY_AFTER, HeaderValue::from_static("2"));
        let cases = [
            ("invalid_auth", "permanent", 401),
            ("token_revoked", "permanent", 401),
            ("missing_scope", "permanent", 403),
            ("ekm_access_denied", "permanent", 403),
            ("channel_not_found", "permanent", 200),
            // Refusals of this conversation, not of the route.
            ("no_permission", "permanent", 200),
            ("access_denied", "permanent", 200),
            ("team_access_not_granted", "permanent", 200),
            ("invalid_blocks", "permanent", 200),
            ("ratelimited", "transient", 429),
            ("message_limit_exceeded", "transient", 429),
            ("team_added_to_org", "transient", 503),
            ("fatal_error", "ambiguous", 200),
            ("request_timeout", "ambiguous", 200),
            ("never_heard_of_it", "ambiguous", 200),
        ];
        for (code, kind, status) in cases {
            let body = format!(r#"{{"ok": false, "error": "{code}"}}"#);
            let result = refusal(StatusCode::OK, &headers, &body, Some(code.to_owned()));
            let got = match &result {
                SendResult::Rejected {
                    permanent: true, ..
                } => "permanent",
                SendResult::Rejected {
                    permanent: false,
                    retry_after,
                    ..
                } => {
                    assert_eq!(*retry_after, Some(Duration::from_secs(2)), "{code}");
                    "transient"
                }
                SendResult::Ambiguous { .. } => "ambiguous",
                other => panic!("{code}: {other:?}"),
            };
            assert_eq!(got, kind, "{code}");
            assert_eq!(result.evidence().status, Some(status), "{code}");
            assert_eq!(result.evidence().vendor_code.as_deref(), Some(code));
        }
    }

    #[test]
    fn only_conversation_ids_are_recipients() {
        for id in ["C0123456789", "G012AB3CD", "D024BE91L"] {
            assert!(conversation_id(id).is_ok(), "{id}");
        }
        for name in ["#general", "general", "", "C012 345", "c0123456789"] {
            assert!(conversation_id(name).is_err(), "{name}");
        }
        // A user id posts to a direct message with another id, which the look-up needs.
        for user in ["U0123456789", "W0123456789"] {
            let refused = conversation_id(user).expect_err(user);
            assert!(refused.detail.contains("`D…` id"), "{}", refused.detail);
        }
    }
}
