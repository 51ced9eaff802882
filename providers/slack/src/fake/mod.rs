//! A local stand-in for Slack's `chat.postMessage` and `conversations.history`, for herald's
//! tests (feature `fake`).
//!
//! It speaks both methods as Slack documents them and as Slack's own SDK calls them: the bot
//! token as `Authorization: Bearer` (`not_authed` without one, `invalid_auth` with another),
//! `chat.postMessage` as JSON, `conversations.history` as `GET` with a query or `POST` with a
//! form (the Python SDK's way), every answer HTTP 200 with `{"ok": …}`. A post is checked as far
//! as Slack's documented errors go: the conversation (`channel_not_found`, `not_in_channel`,
//! `is_archived`), the content (`no_text`, `invalid_blocks_format`, `invalid_blocks` for more
//! than 50 blocks or a block without a `type`), the metadata (`invalid_metadata_format`), and a
//! text over 40,000 characters is truncated with Slack's `message_truncated` warning.
//!
//! Every message that passes is posted: the [`Ledger`] counts it at once under the
//! `herald_key` of its metadata, and `conversations.history` lists it, newest first, once
//! [`FakeConfig::visibility_lag`] has passed — also when a fault then loses, delays or spoils
//! the answer. As Slack does, the history leaves out a message's `event_payload` unless asked
//! with `include_all_metadata`, and answers `missing_scope` to a bot without a history scope
//! ([`FakeConfig::history_scope`]). That is what lets a test settle an ambiguous send through the
//! adapter's look-up and compare it with the ground truth.
//!
//! A test can also make the history list fewer messages a page than asked
//! ([`FakeConfig::history_page_cap`]) and serve fewer requests a minute
//! ([`FakeConfig::history_requests_per_minute`]), as Slack does (15 and 1 for a non-Marketplace
//! app), so that a look-up must page; and have Slack refuse every post to a conversation with a
//! given code ([`FakeConfig::refusing`]).
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use herald_slack::fake::{self, FakeConfig, Fault, Faults};
//! let vendor = fake::spawn(FakeConfig::default()).await?;
//! vendor.set_faults(Faults::next([Fault::AcceptThenDrop]));
//! // … point a SlackRoute at vendor.base_url() with FakeConfig::default().bot_token, and send
//! // to C0123456789 under provider key "ntf-1" …
//! assert_eq!(vendor.ledger().deliveries_of("ntf-1"), 1);
//! # Ok(()) }
//! ```

mod api;

use std::io;
use std::time::Duration;

use herald_provider::fake as harness;

pub use api::{MAX_HISTORY_LIMIT, Posted, ReceivedRequest, Vendor};
pub use harness::{Delivery, Ledger};

/// The conversation the default fake knows, the bot a member of it.
pub const CHANNEL: &str = "C0123456789";

/// How the fake behaves. Only the faults can change while it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeConfig {
    /// The one bot token it accepts.
    pub bot_token: String,
    /// Conversations the bot is a member of: it may post to them and read their history.
    pub channels: Vec<String>,
    /// Conversations that exist without the bot: `not_in_channel`.
    pub outside: Vec<String>,
    /// Archived conversations: a post is `is_archived`; their history can still be read.
    pub archived: Vec<String>,
    /// Conversations whose every post Slack refuses with this `error` code, for what the fake
    /// does not model itself: an administrator's restriction (`restricted_action`), a
    /// conversation the app may not post to (`no_permission`), a workspace the token is not
    /// granted (`team_access_not_granted`), … Checked before anything else of the post.
    pub refusing: Vec<(String, String)>,
    /// Whether the token has the history scopes (`channels:history`, `groups:history`,
    /// `im:history`, `mpim:history`); without, the history answers `missing_scope`.
    pub history_scope: bool,
    /// The most messages one history page lists, whatever `limit` asks: Slack's largest
    /// ([`MAX_HISTORY_LIMIT`]) by default. Slack may list fewer than asked ("It's possible to
    /// receive fewer results than your specified limit, even when there are additional results
    /// to retrieve", <https://docs.slack.dev/apis/web-api/pagination>), and lists at most 15 to
    /// a commercially distributed app outside the Marketplace created since 2025-05-29: a
    /// small cap lets a test page through a few posts, the adapter still asking for 200.
    pub history_page_cap: usize,
    /// `conversations.history` requests served per minute (a sliding minute), or no limit
    /// (`None`, the default). Beyond it, HTTP 429 `ratelimited` with `Retry-After`, as Slack
    /// answers; `Some(1)` with a page cap of 15 is a non-Marketplace app's limit since
    /// 2025-05-29.
    pub history_requests_per_minute: Option<usize>,
    /// How long after it was posted a message starts to be listed by the history.
    pub visibility_lag: Duration,
    /// How long the `delay` fault holds its answer: longer than the client waits.
    pub delay: Duration,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            bot_token: "xoxb-0000000000-0000000000000-FakeSlackBotToken".to_owned(),
            channels: vec![CHANNEL.to_owned()],
            outside: Vec::new(),
            archived: Vec::new(),
            refusing: Vec::new(),
            history_scope: true,
            history_page_cap: MAX_HISTORY_LIMIT,
            history_requests_per_minute: None,
            visibility_lag: Duration::ZERO,
            delay: Duration::from_secs(30),
        }
    }
}

/// One injectable misbehaviour, of a post or of a history look-up. `ErrorAfterProcessing`
/// answers HTTP 500 `{"ok": false, "error": "fatal_error"}`, `RateLimited` HTTP 429 `ratelimited`
/// with `Retry-After: 1`, `UnavailableBeforeProcessing` HTTP 503.
pub type Fault = harness::Fault;

/// Which requests misbehave: the next take `next` in order, one fault each; after that every
/// request takes `then`. Requests refused for their token do not use up a fault.
pub type Faults = harness::Faults<Fault>;

/// The fake Slack, running in a background task on 127.0.0.1; [`Vendor`]'s methods are its
/// own. Dropping it stops the server and closes every connection, answered or not.
pub type FakeHandle = harness::FakeHandle<Vendor>;

/// Binds 127.0.0.1 on a free port and serves the fake there in a background task. The base URL
/// is `http://127.0.0.1:<port>`, the methods below it (`/chat.postMessage`), as below
/// `https://slack.com/api`.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    FakeHandle::spawn(Vendor::new(config), api::router).await
}
