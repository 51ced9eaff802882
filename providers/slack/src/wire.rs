//! Slack's Web API as far as herald uses it: the paths, the JSON of `chat.postMessage` and of
//! `conversations.history`, the message metadata herald stamps, and Slack's `error` codes by
//! what they prove. Shared by the adapter and the fake so that the two cannot drift apart.
//!
//! Sources: <https://docs.slack.dev/reference/methods/chat.postMessage>,
//! <https://docs.slack.dev/reference/methods/conversations.history>,
//! <https://docs.slack.dev/messaging/message-metadata> and the common errors every method page
//! lists (see `fixtures/slack/README.md` for how each was read).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The send method, below the base URL (`https://slack.com/api`).
pub const POST_MESSAGE_PATH: &str = "/chat.postMessage";
/// The look-up method, below the base URL.
pub const HISTORY_PATH: &str = "/conversations.history";

/// `metadata.event_type` of every message herald posts: "a human readable alphanumeric string"
/// (<https://api.slack.com/reference/metadata>).
pub const EVENT_TYPE: &str = "herald_notification";
/// The field of `metadata.event_payload` that carries herald's provider key.
pub const KEY_FIELD: &str = "herald_key";

/// "You can include up to 50 blocks in each message"
/// (<https://docs.slack.dev/reference/block-kit/blocks>).
pub const MAX_BLOCKS: usize = 50;
/// Slack truncates a message's `text` beyond 40,000 characters, or breaks it into several
/// messages (<https://api.slack.com/changelog/2018-04-truncating-really-long-messages>).
pub const MAX_TEXT_CHARS: usize = 40_000;

/// A `ts` (`1712345678.000100`: Unix seconds, a dot, six digits of microseconds) in
/// microseconds since the epoch; `None` if it is not one. Slack names a message by it and
/// takes it as `oldest` and `latest`; the adapter orders what it finds by it, and the fake
/// reads its bounds and cursors with it.
pub fn parse_ts(ts: &str) -> Option<u64> {
    let (seconds, fraction) = ts.split_once('.').unwrap_or((ts, ""));
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits(seconds) || fraction.len() > 6 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seconds = seconds.parse::<u64>().ok()?;
    let fraction = format!("{fraction:0<6}").parse::<u64>().ok()?;
    seconds.checked_mul(1_000_000)?.checked_add(fraction)
}

/// The `ts` of `micros` microseconds since the epoch: [`parse_ts`]'s inverse.
pub fn format_ts(micros: u64) -> String {
    format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

/// `chat.postMessage` as the adapter writes it (`application/json`), borrowed from herald's
/// message.
#[derive(Debug, Serialize)]
pub struct PostMessage<'a> {
    /// A conversation id (`C…`, `G…`, `D…`).
    pub channel: &'a str,
    /// The message, or with `blocks` the fallback Slack shows in notifications.
    pub text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocks: Option<&'a Value>,
    pub metadata: Metadata<'a>,
}

/// `metadata`: `{"event_type", "event_payload"}`.
#[derive(Debug, Serialize)]
pub struct Metadata<'a> {
    pub event_type: &'a str,
    pub event_payload: Payload<'a>,
}

/// `metadata.event_payload` as herald stamps it.
#[derive(Debug, Serialize)]
pub struct Payload<'a> {
    pub herald_key: &'a str,
}

/// Every Web API answer's envelope, and `chat.postMessage`'s success:
/// `{"ok": true, "channel", "ts", "message"}` or `{"ok": false, "error"}`.
#[derive(Debug, Deserialize)]
pub struct Answer {
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub channel: Option<String>,
    #[serde(default)]
    pub ts: Option<String>,
}

/// A page of `conversations.history`: `{"ok": true, "messages": [...], "has_more",
/// "response_metadata": {"next_cursor"}}`.
#[derive(Debug, Deserialize)]
pub struct History {
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub messages: Option<Vec<Listed>>,
    #[serde(default)]
    pub has_more: bool,
    #[serde(default)]
    pub response_metadata: Option<ResponseMetadata>,
}

#[derive(Debug, Deserialize)]
pub struct ResponseMetadata {
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// A listed message, as far as the look-up reads it.
#[derive(Debug, Deserialize)]
pub struct Listed {
    pub ts: String,
    /// `{"event_type", "event_payload"}`, read loosely: a message of herald's whose payload is
    /// missing says the metadata did not come back whole.
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// What a listed message's metadata says about herald.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stamp<'a> {
    /// Not a message of herald's (no metadata, or another event type).
    Other,
    /// herald's, under this key.
    Key(&'a str),
    /// herald's event type without a readable key: the payload was left out.
    Unreadable,
}

impl Listed {
    pub fn stamp(&self) -> Stamp<'_> {
        let Some(metadata) = &self.metadata else {
            return Stamp::Other;
        };
        if metadata.get("event_type").and_then(Value::as_str) != Some(EVENT_TYPE) {
            return Stamp::Other;
        }
        match metadata
            .get("event_payload")
            .and_then(|payload| payload.get(KEY_FIELD))
            .and_then(Value::as_str)
        {
            Some(key) => Stamp::Key(key),
            None => Stamp::Unreadable,
        }
    }
}

/// Slack's `error` codes by what they prove. Each is listed, with its description, under the
/// method's "Errors" (method-specific) or as one of the common errors every method page lists.
pub mod errors {
    pub const NOT_AUTHED: &str = "not_authed";
    pub const INVALID_AUTH: &str = "invalid_auth";
    pub const MISSING_SCOPE: &str = "missing_scope";
    pub const CHANNEL_NOT_FOUND: &str = "channel_not_found";
    pub const NOT_IN_CHANNEL: &str = "not_in_channel";
    pub const IS_ARCHIVED: &str = "is_archived";
    pub const NO_PERMISSION: &str = "no_permission";
    pub const ACCESS_DENIED: &str = "access_denied";
    pub const TEAM_ACCESS_NOT_GRANTED: &str = "team_access_not_granted";
    pub const NO_TEXT: &str = "no_text";
    pub const INVALID_BLOCKS: &str = "invalid_blocks";
    pub const INVALID_BLOCKS_FORMAT: &str = "invalid_blocks_format";
    pub const INVALID_METADATA_FORMAT: &str = "invalid_metadata_format";
    pub const INVALID_ARGUMENTS: &str = "invalid_arguments";
    pub const RATELIMITED: &str = "ratelimited";
    pub const FATAL_ERROR: &str = "fatal_error";

    /// The token itself is refused: the route cannot send anything (read as HTTP 401).
    pub const CREDENTIAL_REFUSED: &[&str] = &[
        NOT_AUTHED,
        INVALID_AUTH,
        "account_inactive",
        "token_revoked",
        "token_expired",
    ];

    /// The token is valid but may not do this anywhere: a missing scope, a token of the wrong
    /// type, an administrator's or the workspace's restriction, a method gone (read as HTTP
    /// 403). Every one is about the route, not the message. Refusals that name the
    /// conversation or a resource of the request (`no_permission`, `access_denied`,
    /// `team_access_not_granted`) are the message's: [`MESSAGE_REFUSED`].
    pub const ROUTE_REFUSED: &[&str] = &[
        MISSING_SCOPE,
        "not_allowed_token_type",
        "accesslimited",
        "ekm_access_denied",
        "two_factor_setup_required",
        "enterprise_is_restricted",
        "app_access_restricted",
        "metadata_must_be_sent_from_app",
        "deprecated_endpoint",
        "method_deprecated",
    ];

    /// This message, to this conversation, is refused: the channel, the bot's membership, the
    /// message's content, or the request's form. A resend of the same request fails the same
    /// way, but another conversation may take it: the route itself is not refused.
    ///
    /// `no_permission` ("Make sure your app is a member of the conversation it's attempting to
    /// post a message to"), `access_denied` ("Access to a resource specified in the request is
    /// denied") and `team_access_not_granted` (the token lacks "the specific workspace access
    /// required to complete this request": in an Enterprise organization, the conversation's
    /// workspace) refuse this conversation, not every one.
    pub const MESSAGE_REFUSED: &[&str] = &[
        CHANNEL_NOT_FOUND,
        NOT_IN_CHANNEL,
        IS_ARCHIVED,
        NO_PERMISSION,
        ACCESS_DENIED,
        TEAM_ACCESS_NOT_GRANTED,
        "msg_too_long",
        NO_TEXT,
        INVALID_BLOCKS,
        INVALID_BLOCKS_FORMAT,
        "msg_blocks_too_long",
        "too_many_attachments",
        "attachment_payload_limit_exceeded",
        INVALID_METADATA_FORMAT,
        "invalid_metadata_schema",
        "metadata_too_large",
        "restricted_action",
        "restricted_action_read_only_channel",
        "restricted_action_thread_only_channel",
        "restricted_action_non_threadable_channel",
        "restricted_action_thread_locked",
        "cannot_reply_to_message",
        "markdown_text_conflict",
        "team_not_found",
        "messages_tab_disabled",
        "too_many_contact_cards",
        "slack_connect_file_link_sharing_blocked",
        "slack_connect_canvas_sharing_blocked",
        "slack_connect_lists_sharing_blocked",
        INVALID_ARGUMENTS,
        "invalid_arg_name",
        "invalid_array_arg",
        "invalid_charset",
        "invalid_form_data",
        "invalid_post_type",
        "missing_post_type",
    ];

    /// Too many messages: not posted this time (read as HTTP 429). `ratelimited` is the common
    /// error ("Refer to the `Retry-After` header"), `rate_limited` chat.postMessage's own, and
    /// `message_limit_exceeded` a free workspace's usage limit.
    pub const RATE_LIMITED: &[&str] = &[RATELIMITED, "rate_limited", "message_limit_exceeded"];

    /// The workspace is being migrated into an Enterprise organization and "will not be
    /// available until migration is complete": not posted this time (read as HTTP 503).
    pub const WORKSPACE_MIGRATING: &[&str] = &["org_login_required", "team_added_to_org"];

    /// Slack's own failures, after which the message may have been posted. `fatal_error` and
    /// `internal_error`: "It's possible some aspect of the operation succeeded before the error
    /// was raised." `service_unavailable` ("temporarily unavailable") does not say when.
    /// `request_timeout` is documented as "the `POST` data was either missing or truncated",
    /// but its name is a timeout's and nothing says the time ran out before processing.
    pub const MAYBE_POSTED: &[&str] = &[
        FATAL_ERROR,
        "internal_error",
        "service_unavailable",
        "request_timeout",
    ];
}
