//! Herald's adapter for [Slack](https://slack.com)'s Web API with a bot token (channel `chat`).
//!
//! One `POST https://slack.com/api/chat.postMessage` per send, with `Authorization: Bearer
//! xoxb-…` and a JSON body (`application/json; charset=utf-8`) of `channel` (the message's
//! `to`, a conversation id such as `C0123456789`), `text`, `blocks` (the message's Block Kit
//! blocks as given, `text` then being the fallback Slack shows in notifications) and `metadata`:
//! `{"event_type": "herald_notification", "event_payload": {"herald_key": <key>}}`, herald's
//! [`ProviderKey`](herald_provider::ProviderKey), by which the look-up finds the message. Slack
//! answers HTTP 200 with `{"ok": true, "channel", "ts", "message"}`, whose channel and `ts`
//! become the `provider_ref` (`C0123456789/1712345678.000100`: a `ts` is unique only within its
//! conversation, and Slack names a message by both, as `chat.update` and `chat.delete` take
//! them), or with `{"ok": false, "error": "<code>"}`, whose code becomes
//! `Evidence::vendor_code`.
//!
//! `prepare` refuses, before any I/O: another channel than `chat`; a `subject`, `html`,
//! `payload` or email option; a `to` that is not a conversation id (a channel name cannot be
//! looked up); a user id (`U…`, `W…`): Slack would post to the app's direct message with the
//! user, a conversation with an id of its own, and the look-up of the user id is
//! `channel_not_found`, so herald asks for the direct message's `D…` id (`conversations.open`
//! gives it); a missing or blank `text`; a `text` over 40,000 characters (counted in UTF-16
//! units, the larger count); `blocks` that are not a JSON array, or more than 50 of them.
//!
//! # Capabilities
//! | capability | value | source |
//! |---|---|---|
//! | idempotency window | none: `chat.postMessage` takes no idempotency key or client message id, so a resend is a second message | <https://docs.slack.dev/reference/methods/chat.postMessage> (no such argument); an open request for one: <https://github.com/slackapi/slack-api-specs/issues/10> |
//! | outcome query | `GET conversations.history?channel=<to>&include_all_metadata=true&limit=200&oldest=<notification's time − 10 min>`, paged by `cursor` (at most 10 pages): a listed message whose `metadata.event_payload.herald_key` is the key is `Accepted`. `include_all_metadata`: "Return all metadata associated with this message"; without it Slack leaves out the `event_payload` of an event type the app's manifest does not declare (reported in the SDK's tracker, with `include_all_metadata` as the remedy). Needs `channels:history` (public) / `groups:history` (private) / `im:history` / `mpim:history` on the bot token | <https://docs.slack.dev/reference/methods/conversations.history>, <https://docs.slack.dev/messaging/message-metadata>, <https://github.com/slackapi/python-slack-sdk/issues/1501> |
//! | visibility lag | not documented (Slack says nothing of read-after-write for history): `visibility_lag_ms`, default 10 minutes, after which "not listed" is read as "not sent" | none found; declared as a setting |
//! | payload limit | none declared: Slack states no request size. `text` is truncated (or split into several messages) beyond 40,000 characters, and a message takes up to 50 blocks: both refused in `prepare` | <https://api.slack.com/changelog/2018-04-truncating-really-long-messages>, <https://docs.slack.dev/reference/block-kit/blocks> |
//! | tags, attachments | no | |
//! | rate limit | `chat.postMessage` "generally allows posting one message per second per channel, while also maintaining a workspace-wide limit"; over it, HTTP 429 with `Retry-After` in seconds. `conversations.history` is Tier 3 (50+ per minute), and for commercially distributed apps outside the Marketplace created since 2025-05-29 1 per minute, 15 messages a page (see below) | <https://docs.slack.dev/apis/web-api/rate-limits>, <https://docs.slack.dev/changelog/2025/05/29/rate-limit-changes-for-non-marketplace-apps> |
//! | delivery callbacks | none: a channel message has no delivered or read state to report. Slack's Events API is signed (`X-Slack-Signature`, HMAC-SHA256 with the app's signing secret) and its `message_metadata_posted` event echoes a message's metadata, so herald's key: it could settle an ambiguous send before the lag has passed, but it says no more than "posted", and it is not implemented here | <https://api.slack.com/docs/verifying-requests-from-slack>, <https://docs.slack.dev/reference/events/message_metadata_posted/> |
//!
//! The route's pace: unless the route sets `rate_limit_per_second`, herald paces it at
//! [`DEFAULT_PACE`], one post per second (`RouteSettings::default_pace`): Slack's per-channel
//! rate. herald's pace is per process, not shared between processes: one process keeps it
//! whatever conversations the route posts to, but N herald processes on one database post up
//! to N a second, to one channel too. Slack then refuses some of them as rate-limited: a
//! transient refusal, retried after its `Retry-After`, that pauses the route only in the
//! process that got it. To stay under Slack's rate with N processes, set
//! `rate_limit_per_second` to 1/N.
//!
//! The look-up's reach: `conversations.history` is Tier 3 (50+ requests a minute) with pages
//! of up to 999 messages (herald asks 200), except for a commercially distributed app outside
//! the Slack Marketplace (not a workspace's own internal app): for one created, or newly
//! installed, since 2025-05-29 (Slack has announced, and postponed, the same for existing
//! installations) Slack allows "1 request per minute" and returns "a maximum of 15 objects per
//! request". For such an app, a look-up that needs more than the first page (more than 15
//! messages in the conversation since the notification was created) is usually answered
//! `ratelimited` on its second page, and is `Unsupported` unless the first page held the
//! message: safe, since it proves nothing and the ambiguity is then settled by the route's
//! delivery policy, but the look-up settles little there
//! (<https://docs.slack.dev/changelog/2025/05/29/rate-limit-changes-for-non-marketplace-apps>,
//! <https://docs.slack.dev/apis/web-api/rate-limits>).
//!
//! # Classification
//! Errors: each method page's "Errors" and the common errors it lists
//! (<https://docs.slack.dev/reference/methods/chat.postMessage>); rate limits:
//! <https://docs.slack.dev/apis/web-api/rate-limits>. Slack answers its refusals with HTTP 200:
//! `Evidence::status` then says what the refusal means to herald — 401 or 403 where the route
//! itself is refused (herald fails over and counts it against the route), 429 for a rate limit,
//! 503 for a workspace that is unavailable — and the HTTP status otherwise.
//!
//! | Slack's answer | herald's result |
//! |---|---|
//! | 200 `{"ok": true, "ts"}` | `Accepted`, `provider_ref` = `<channel>/<ts>` |
//! | 2xx whose body is unreadable, or `ok: true` without a `ts` | `Ambiguous`: Slack probably posted it |
//! | 200 `ok: false`, `not_authed`, `invalid_auth`, `account_inactive`, `token_revoked`, `token_expired` | `Rejected` permanent, status 401: the token is refused |
//! | 200 `ok: false`, `missing_scope` (no `chat:write`), `not_allowed_token_type`, `accesslimited`, `ekm_access_denied`, `two_factor_setup_required`, `enterprise_is_restricted`, `app_access_restricted`, `metadata_must_be_sent_from_app`, `deprecated_endpoint`, `method_deprecated` | `Rejected` permanent, status 403: the route may not post |
//! | 200 `ok: false`, `channel_not_found`, `not_in_channel`, `is_archived`, `no_permission` ("Make sure your app is a member of the conversation it's attempting to post a message to"), `access_denied` ("Access to a resource specified in the request is denied"), `team_access_not_granted` (no access to the conversation's workspace, in an Enterprise organization), `msg_too_long`, `no_text`, `invalid_blocks`, `invalid_blocks_format`, `msg_blocks_too_long`, `too_many_attachments`, `attachment_payload_limit_exceeded`, `invalid_metadata_format`, `invalid_metadata_schema`, `metadata_too_large`, `restricted_action` (and its `_read_only_channel`, `_thread_only_channel`, `_non_threadable_channel`, `_thread_locked`), `cannot_reply_to_message`, `markdown_text_conflict`, `team_not_found`, `messages_tab_disabled`, `too_many_contact_cards`, `slack_connect_*_sharing_blocked`, `invalid_arguments`, `invalid_arg_name`, `invalid_array_arg`, `invalid_charset`, `invalid_form_data`, `invalid_post_type`, `missing_post_type` | `Rejected` permanent, status 200: this message to this conversation is refused |
//! | 200 `ok: false`, `ratelimited`, `rate_limited`, `message_limit_exceeded` | `Rejected` transient, status 429, with `Retry-After` if sent |
//! | 200 `ok: false`, `org_login_required`, `team_added_to_org` (a migration: "will not be available until migration is complete") | `Rejected` transient, status 503 |
//! | 200 `ok: false`, `fatal_error`, `internal_error` ("It's possible some aspect of the operation succeeded"), `service_unavailable`, `request_timeout`, an `error` not listed here, or none | `Ambiguous`: the message may have been posted. `request_timeout` is documented as "the `POST` data was either missing or truncated", but nothing says the time ran out before processing; the look-up settles it |
//! | 429 | `Rejected` transient, with `Retry-After` (shared table) |
//! | 408, 425 | `Rejected` transient (shared table) |
//! | any other 4xx | `Rejected` permanent (shared table) |
//! | 5xx | `Ambiguous`: Slack documents no 5xx as "not processed" |
//! | connection or TLS failure before the request was written | `Rejected` transient (stage `connect`) |
//! | timeout or reset after the request was written | `Ambiguous` (stage `awaiting_response`) |
//!
//! # The look-up
//! | `conversations.history`'s answer | herald's result |
//! |---|---|
//! | every page of the window (from the notification's time less 10 minutes; for an id that is not a UUIDv7, back from the newest message, as far as 10 pages reach) | read as below |
//! | a listed message whose metadata carries the key (several distinct `ts`: the oldest, and the evidence says more than one send reached Slack; a message listed twice is one) | `Accepted`, `provider_ref` = `<channel>/<ts>`, also when a later page fails |
//! | every page read (`has_more: false`), none carries the key; messages of other keys or without metadata are the conversation's other messages | `NotFoundYet`: nothing inside the lag, absence after it |
//! | a listed `herald_notification` message without a readable `event_payload.herald_key` | `Unsupported`: the payload was left out, and it may be ours |
//! | `has_more` without a `next_cursor`, or still more after 10 pages | `Unsupported`: the window was not listed whole |
//! | 200 `ok: false` (`missing_scope` without a history scope, `not_in_channel`, `channel_not_found`, `invalid_auth`, `ratelimited`, …), a non-200, an unreadable answer, a transport failure | `Unsupported`, with the `error` as vendor code |
//!
//! Absence proves "not sent" only as far as the history is complete: a message deleted in
//! Slack, or gone under a retention policy, before the look-up is not listed, and herald then
//! sends again. The bot token is never logged and never part of evidence, errors or `Debug`
//! output; anything Slack echoes is scrubbed of it before it becomes evidence. Metadata is
//! visible to every app and user of the workspace; herald's key is a notification id, not a
//! secret.
//!
//! # Settings
//! ```toml
//! [routes.slack]                          # no key; look-up by metadata in the history
//! provider = "slack"
//! bot_token = { env = "SLACK_BOT_TOKEN" } # xoxb-…: chat:write; for the look-up channels:history,
//!                                         # groups:history, im:history, mpim:history (C…, G…, D…)
//! # base_url = "https://slack.com/api"    # the default
//! # history_lookup = true                 # false for a bot without a history scope
//! # visibility_lag_ms = 600000            # Slack documents none: how long before "not listed" counts
//! # rate_limit_per_second = 1             # herald's common key, per process; 1 (Slack's per-channel rate) by default
//! ```
//!
//! # Modules
//! - [`adapter`]: [`SlackAdapter`] and its [`SlackRoute`].
//! - `fake` (feature `fake`): a local stand-in for `chat.postMessage` and
//!   `conversations.history`, with faults, a visibility lag and a ledger.
//!
//! The JSON shapes and error codes both sides share live in one private module so that they
//! cannot drift apart.
#![forbid(unsafe_code)]

pub mod adapter;
#[cfg(feature = "fake")]
pub mod fake;
mod settings;
mod wire;

pub use adapter::{
    CLOCK_SKEW, DEFAULT_BASE_URL, DEFAULT_PACE, DEFAULT_VISIBILITY_LAG, MAX_PAGES, SlackAdapter,
    SlackError, SlackRoute, provider_ref,
};
pub use settings::Settings;
pub use wire::{EVENT_TYPE, KEY_FIELD, MAX_BLOCKS, MAX_TEXT_CHARS};
