//! `chat.postMessage` and `conversations.history` as the fake speaks them, and everything it
//! remembers: the ledger with each post's time, the pending faults of posts and of look-ups, the
//! last post received, each post's content, and the arguments of each look-up.
//!
//! The ledger, the faults and the last post sit behind one `Mutex` so that counting a request,
//! drawing its fault and processing it is one atomic step; the posts' content and the `ts`
//! clock have locks of their own, taken only inside that step (and by tests reading them). No
//! lock is held across an `.await`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::{Map, Value, json};

use herald_provider::fake::{FaultAnswers, Kill, LookedUp, LookedUpState};

use super::{Delivery, FakeConfig, Fault};
use crate::wire::{
    EVENT_TYPE, HISTORY_PATH, KEY_FIELD, MAX_BLOCKS, MAX_TEXT_CHARS, POST_MESSAGE_PATH, errors,
    format_ts, parse_ts,
};

// Slack's answers to the faults, shared with the tests through `fixtures/slack/`.
const FAULT_ANSWERS: FaultAnswers = FaultAnswers {
    rate_limited: include_str!("../../../../fixtures/slack/errors/ratelimited.json"),
    server_error: include_str!("../../../../fixtures/slack/errors/fatal_error.json"),
};

/// The bot user and the app every message is posted as.
const BOT_ID: &str = "B0123456789";
const APP_ID: &str = "A0123456789";

/// `conversations.history`'s default `limit`.
const DEFAULT_LIMIT: usize = 100;
/// `conversations.history`'s largest `limit` ("Maximum of 999").
pub const MAX_HISTORY_LIMIT: usize = 999;

/// What one `chat.postMessage` carried, minus the token: tests check the request's shape here.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// Whether `Authorization: Bearer …` was there; the token itself is checked, never kept.
    pub bearer_sent: bool,
    pub content_type: Option<String>,
    /// The arguments as a JSON object (a form's `blocks` and `metadata` decoded), or
    /// `Value::Null` if the body was neither JSON nor a form.
    pub body: Value,
}

/// A message as it was posted, as the history lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Posted {
    pub channel: String,
    pub ts: String,
    /// After Slack's truncation to 40,000 characters.
    pub text: String,
    pub blocks: Option<Value>,
    pub metadata: Option<Value>,
}

/// The fake vendor: fixed settings, and the state behind its lock, whose accessors
/// (`ledger`, `set_faults`, `set_lookup_faults`, `last_request`) are the vendor's own.
pub struct Vendor {
    config: FakeConfig,
    state: LookedUpState<ReceivedRequest>,
    /// Per `channel/ts`, what was posted. Written under `state`'s lock as the post is recorded.
    posted: Mutex<BTreeMap<String, Posted>>,
    /// The arguments of each `conversations.history` request, in order, without any token.
    lookups: Mutex<Vec<BTreeMap<String, String>>>,
    /// When each `conversations.history` request of the last minute was served, for
    /// [`FakeConfig::history_requests_per_minute`].
    served: Mutex<Vec<Instant>>,
    /// The last `ts` handed out, in microseconds since the epoch: each post's is later, so a
    /// `ts` is unique and orders posts as they happened.
    clock: Mutex<u64>,
}

impl std::ops::Deref for Vendor {
    type Target = LookedUpState<ReceivedRequest>;

    fn deref(&self) -> &Self::Target {
        &self.state
    }
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code panics while holding these locks, so a poisoned one is still consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Vendor {
    pub(super) fn new(config: FakeConfig) -> Vendor {
        Vendor {
            config,
            state: LookedUpState::default(),
            posted: Mutex::default(),
            lookups: Mutex::default(),
            served: Mutex::default(),
            clock: Mutex::new(0),
        }
    }

    /// The message posted to `channel` at `ts`, as Slack keeps it.
    pub fn posted(&self, channel: &str, ts: &str) -> Option<Posted> {
        locked(&self.posted)
            .get(&format!("{channel}/{ts}"))
            .cloned()
    }

    /// The arguments of every `conversations.history` request so far, in order.
    pub fn lookups(&self) -> Vec<BTreeMap<String, String>> {
        locked(&self.lookups).clone()
    }

    /// `Ok` for the configured token, sent as `Authorization: Bearer` or, as Slack also
    /// takes it, as a `token` argument; else the error Slack answers.
    fn authenticated(
        &self,
        headers: &HeaderMap,
        token_argument: Option<&str>,
    ) -> Result<(), &'static str> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        match bearer.or(token_argument) {
            None => Err(errors::NOT_AUTHED),
            Some(token) if token == self.config.bot_token => Ok(()),
            Some(_) => Err(errors::INVALID_AUTH),
        }
    }

    /// Where a conversation stands for the bot: `Ok` if it may post there.
    fn conversation(&self, channel: Option<&str>) -> Result<(), &'static str> {
        let known = |list: &[String], id: &str| list.iter().any(|c| c == id);
        match channel {
            Some(id) if known(&self.config.archived, id) => Err(errors::IS_ARCHIVED),
            Some(id) if known(&self.config.channels, id) => Ok(()),
            Some(id) if known(&self.config.outside, id) => Err(errors::NOT_IN_CHANNEL),
            _ => Err(errors::CHANNEL_NOT_FOUND),
        }
    }

    /// `Err` with how long to wait if one more history request this minute would exceed
    /// [`FakeConfig::history_requests_per_minute`]; else it is counted.
    fn history_allowed(&self, now: Instant) -> Result<(), Duration> {
        const MINUTE: Duration = Duration::from_secs(60);
        let Some(limit) = self.config.history_requests_per_minute else {
            return Ok(());
        };
        let mut served = locked(&self.served);
        served.retain(|at| now.duration_since(*at) < MINUTE);
        match served.first() {
            Some(oldest) if served.len() >= limit => Err(MINUTE - now.duration_since(*oldest)),
            _ => {
                served.push(now);
                Ok(())
            }
        }
    }

    /// A `ts` later than every one before: Unix seconds and microseconds.
    fn next_ts(&self) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
            });
        let mut last = locked(&self.clock);
        *last = now.max(*last + 1);
        format_ts(*last)
    }

    /// A post proper, under the lock.
    fn post(&self, state: &mut LookedUp<ReceivedRequest>, args: Option<Value>) -> Response {
        let Some(args) = args.filter(Value::is_object) else {
            return slack_error(errors::INVALID_ARGUMENTS);
        };
        let channel = args.get("channel").and_then(Value::as_str);
        let refused = self
            .config
            .refusing
            .iter()
            .find(|(id, _)| Some(id.as_str()) == channel);
        if let Some((_, code)) = refused {
            return slack_error(code);
        }
        if let Err(code) = self.conversation(channel) {
            return slack_error(code);
        }
        let channel = channel.unwrap_or_default().to_owned();
        let blocks = args.get("blocks").cloned();
        if let Some(blocks) = &blocks {
            let Some(list) = blocks.as_array() else {
                return slack_error(errors::INVALID_BLOCKS_FORMAT);
            };
            let typed = |block: &Value| block.get("type").and_then(Value::as_str).is_some();
            if list.len() > MAX_BLOCKS || !list.iter().all(typed) {
                return slack_error(errors::INVALID_BLOCKS);
            }
        }
        let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
        if text.is_empty()
            && blocks
                .as_ref()
                .is_none_or(|b| b.as_array().is_some_and(Vec::is_empty))
        {
            return slack_error(errors::NO_TEXT);
        }
        let metadata = args.get("metadata").cloned();
        if let Some(metadata) = &metadata {
            let well_formed = metadata.get("event_type").and_then(Value::as_str).is_some()
                && metadata.get("event_payload").is_some_and(Value::is_object);
            if !well_formed {
                return slack_error(errors::INVALID_METADATA_FORMAT);
            }
        }
        let truncated = text.chars().count() > MAX_TEXT_CHARS;
        let text: String = text.chars().take(MAX_TEXT_CHARS).collect();
        let key = metadata
            .as_ref()
            .filter(|m| m.get("event_type").and_then(Value::as_str) == Some(EVENT_TYPE))
            .and_then(|m| m.get("event_payload")?.get(KEY_FIELD)?.as_str())
            .unwrap_or_default()
            .to_owned();
        let ts = self.next_ts();
        tracing::debug!(%channel, %ts, %key, "posted");
        state
            .ledger
            .deliveries
            .push(Delivery::now(ts.clone(), key, channel.clone()));
        let posted = Posted {
            channel: channel.clone(),
            ts: ts.clone(),
            text,
            blocks,
            metadata,
        };
        let message = listed(&posted, false);
        locked(&self.posted).insert(format!("{channel}/{ts}"), posted);
        let mut answer = json!({"ok": true, "channel": channel, "ts": ts, "message": message});
        if truncated {
            answer["response_metadata"] = json!({
                "messages": ["[WARN] Your message was truncated but still posted. The `text` field accepts up to 40,000 characters."],
                "warnings": ["message_truncated"],
            });
        }
        Json(answer).into_response()
    }

    /// A history page proper, under the lock: the conversation's listed posts, newest first.
    fn history(
        &self,
        state: &LookedUp<ReceivedRequest>,
        args: &BTreeMap<String, String>,
    ) -> Response {
        if !self.config.history_scope {
            return Json(json!({
                "ok": false,
                "error": errors::MISSING_SCOPE,
                "needed": "channels:history,groups:history,mpim:history,im:history",
                "provided": "chat:write",
            }))
            .into_response();
        }
        let channel = args.get("channel").map(String::as_str);
        match self.conversation(channel) {
            Ok(()) | Err(errors::IS_ARCHIVED) => {}
            Err(code) => return slack_error(code),
        }
        let channel = channel.unwrap_or_default();
        let flag = |name: &str| args.get(name).is_some_and(|v| v == "true" || v == "1");
        let (all_metadata, inclusive) = (flag("include_all_metadata"), flag("inclusive"));
        let limit = match args.get("limit").map(|l| l.parse::<usize>()) {
            None => DEFAULT_LIMIT,
            Some(Ok(limit)) => limit.clamp(1, MAX_HISTORY_LIMIT),
            Some(Err(_)) => return slack_error(errors::INVALID_ARGUMENTS),
        }
        // Slack may list fewer than asked, and lists at most 15 to some apps.
        .min(self.config.history_page_cap.max(1));
        let bound = |name: &str, code: &'static str| match args.get(name) {
            None => Ok(None),
            Some(ts) => parse_ts(ts).map(Some).ok_or(code),
        };
        let (oldest, latest) = match (
            bound("oldest", "invalid_ts_oldest"),
            bound("latest", "invalid_ts_latest"),
        ) {
            (Ok(oldest), Ok(latest)) => (oldest, latest),
            (Err(code), _) | (_, Err(code)) => return slack_error(code),
        };
        let before = match args.get("cursor").filter(|c| !c.is_empty()) {
            None => None,
            Some(cursor) => match cursor.strip_prefix("next_ts:").and_then(parse_ts) {
                Some(before) => Some(before),
                None => return slack_error("invalid_cursor"),
            },
        };
        let posted = locked(&self.posted);
        let in_window = |at: u64| {
            oldest.is_none_or(|o| at > o || (inclusive && at == o))
                && latest.is_none_or(|l| at < l || (inclusive && at == l))
                && before.is_none_or(|b| at < b)
        };
        let mut window = state
            .ledger
            .listed(None, self.config.visibility_lag, Instant::now())
            .filter(|delivery| delivery.to == channel)
            .filter(|delivery| parse_ts(&delivery.message_id).is_some_and(in_window))
            .filter_map(|delivery| posted.get(&format!("{channel}/{}", delivery.message_id)));
        let page: Vec<&Posted> = window.by_ref().take(limit).collect();
        let has_more = window.next().is_some();
        let next_cursor = match (has_more, page.last()) {
            (true, Some(last)) => format!("next_ts:{}", last.ts),
            _ => String::new(),
        };
        let messages: Vec<Value> = page.iter().map(|p| listed(p, all_metadata)).collect();
        Json(json!({
            "ok": true,
            "messages": messages,
            "has_more": has_more,
            "pin_count": 0,
            "response_metadata": {"next_cursor": next_cursor},
        }))
        .into_response()
    }
}

/// A posted message as Slack lists it. Without `all_metadata`, its metadata keeps only the
/// `event_type`: Slack leaves out the payload of an event type the app does not declare.
fn listed(posted: &Posted, all_metadata: bool) -> Value {
    let mut message = json!({
        "type": "message",
        "subtype": "bot_message",
        "text": posted.text,
        "ts": posted.ts,
        "bot_id": BOT_ID,
        "app_id": APP_ID,
    });
    if let Some(blocks) = &posted.blocks {
        message["blocks"] = blocks.clone();
    }
    if let Some(metadata) = &posted.metadata {
        message["metadata"] = if all_metadata {
            metadata.clone()
        } else {
            json!({"event_type": metadata["event_type"]})
        };
    }
    message
}

/// A request's arguments: its query, and a form or JSON body (strings as they are, other JSON
/// values as JSON text).
fn arguments(query: Option<&str>, headers: &HeaderMap, body: &[u8]) -> BTreeMap<String, String> {
    let mut args: BTreeMap<String, String> = query
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    if is_json(headers) {
        if let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(body) {
            for (name, value) in object {
                let text = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                args.insert(name, text);
            }
        }
    } else {
        args.extend(url::form_urlencoded::parse(body).into_owned());
    }
    args
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"))
}

/// `chat.postMessage`'s arguments as JSON: a JSON body as it is; a form with `blocks` and
/// `metadata` decoded from their JSON text. `None` for a body that is neither.
fn post_arguments(headers: &HeaderMap, body: &[u8]) -> Option<Value> {
    if is_json(headers) {
        return serde_json::from_slice(body).ok();
    }
    let mut object = Map::new();
    for (name, value) in url::form_urlencoded::parse(body).into_owned() {
        let value = match name.as_str() {
            "blocks" | "metadata" => serde_json::from_str(&value).unwrap_or(Value::String(value)),
            _ => Value::String(value),
        };
        object.insert(name, value);
    }
    (!object.is_empty()).then_some(Value::Object(object))
}

pub(super) fn router(vendor: Arc<Vendor>) -> Router {
    Router::new()
        .route(POST_MESSAGE_PATH, post(post_message))
        .route(HISTORY_PATH, get(history).post(history))
        .with_state(vendor)
}

async fn post_message(
    State(vendor): State<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let args = post_arguments(&headers, &body);
    let (fault, processed) = {
        let mut state = vendor.lock();
        state.ledger.requests += 1;
        state.last_request = Some(ReceivedRequest {
            bearer_sent: headers
                .get(header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .is_some_and(|value| value.starts_with("Bearer ")),
            content_type: headers
                .get(header::CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned),
            body: args.clone().unwrap_or(Value::Null),
        });
        let token = args
            .as_ref()
            .and_then(|args| args.get("token"))
            .and_then(Value::as_str);
        if let Err(code) = vendor.authenticated(&headers, token) {
            return slack_error(code);
        }
        let fault = state.faults.draw();
        let processed = (!fault.is_some_and(Fault::is_before_processing))
            .then(|| vendor.post(&mut state, args));
        (fault, processed)
    };
    FAULT_ANSWERS
        .answer(fault, processed, kill, vendor.config.delay)
        .await
}

async fn history(
    State(vendor): State<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    let mut args = arguments(query.as_deref(), &headers, &body);
    let token = args.remove("token");
    let (fault, processed) = {
        let mut state = vendor.lock();
        if let Err(code) = vendor.authenticated(&headers, token.as_deref()) {
            return slack_error(code);
        }
        locked(&vendor.lookups).push(args.clone());
        if let Err(wait) = vendor.history_allowed(Instant::now()) {
            return rate_limited(wait);
        }
        let fault = state.lookup_faults.draw();
        let processed = (!fault.is_some_and(Fault::is_before_processing))
            .then(|| vendor.history(&state, &args));
        (fault, processed)
    };
    FAULT_ANSWERS
        .answer(fault, processed, kill, vendor.config.delay)
        .await
}

/// Slack's answer over a method's rate limit: HTTP 429 `ratelimited`, with `Retry-After` in
/// whole seconds (at least 1).
fn rate_limited(wait: Duration) -> Response {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let mut response = (
        StatusCode::TOO_MANY_REQUESTS,
        Json(json!({"ok": false, "error": errors::RATELIMITED})),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
    response
}

/// Slack's refusal: HTTP 200, `{"ok": false, "error": code}`.
fn slack_error(code: &str) -> Response {
    Json(json!({"ok": false, "error": code})).into_response()
}
