//! Herald's adapter for [SparkPost](https://www.sparkpost.com) (channel `email`).
//!
//! One `POST {base_url}/transmissions` per send (`base_url` is `https://api.sparkpost.com/api/v1`,
//! or `https://api.eu.sparkpost.com/api/v1` for an EU account), with `Authorization: <API key>`
//! as SparkPost documents it, a JSON body of `recipients` (the notification's recipient, then
//! each CC and BCC with `header_to` naming it), inline `content` (`from`, `subject`, `html`
//! and/or `text`, `reply_to`, `headers`, with a CC list as the `CC` header, and `attachments`
//! when the email has any: `name`, `type` and base64 `data` each) and `metadata`
//! (`herald_key` — the provider key, which every event echoes in `rcpt_meta` —,
//! `herald_notification_id`, and the message's tags), and herald's
//! [`ProviderKey`](herald_provider::ProviderKey), stable per notification, as the
//! `Idempotency-Key` header. A message's own tag named `herald_key` or `herald_notification_id`
//! is refused before any I/O. SparkPost answers `{"results": {"id", "total_accepted_recipients",
//! "total_rejected_recipients"}}`, whose `id` (the transmission id) becomes the `provider_ref`,
//! and errors as `{"errors": [{"message", "description", "code"}]}`, whose first `code` becomes
//! `Evidence::vendor_code`.
//!
//! # Capabilities
//! | capability | value | source |
//! |---|---|---|
//! | idempotency window | 24 h: a repeat with the same key and payload answers the original response again (`X-Idempotent-Replayed: true`), delivered once | SparkPost's documentation of `Idempotency-Key` for the Transmissions API (github.com/SparkPost/developers.sparkpost.com pull request 590, merged 2026-08; built from SparkPost's own middleware) |
//! | outcome query | none: message events are searched by transmission, recipient or time, never by our key, and a replay inside the window is the reconciliation | <https://developers.sparkpost.com/api/events/> |
//! | payload limit | 20 MB of content (text, html, attachments, inline images; read as 20 000 000 bytes) | <https://developers.sparkpost.com/api/transmissions/> |
//! | attachments | yes: `content.attachments: [{name, type, data}]`, `name` at most 255 bytes, `data` base64 without line breaks; within the 20 MB above; no count limit is documented; "malicious content is strictly prohibited", including (not only) files with `bat` and `exe` extensions | <https://developers.sparkpost.com/api/transmissions/> ("Attachment Object"; `content/api/transmissions.apib` of github.com/SparkPost/developers.sparkpost.com) |
//! | rate limit | transmission POSTs are not rate-limited by request; daily, monthly and sandbox sending limits answer 420 | <https://developers.sparkpost.com/api/#header-rate-limiting> |
//! | delivery callbacks | webhooks with HTTP Basic credentials, when `callback_username` and `callback_password` are set (below) | <https://developers.sparkpost.com/api/webhooks/> |
//!
//! # Classification
//! Statuses: <https://developers.sparkpost.com/api/#header-errors>; the idempotency answers:
//! pull request 590 above; 420: <https://developers.sparkpost.com/api/transmissions/#header-sending-limits>.
//!
//! | SparkPost's answer | herald's result |
//! |---|---|
//! | 200 `{"results": {"id", …}}` with at least one accepted recipient (first answer or replay) | `Accepted`, `provider_ref` = the transmission id |
//! | 200 with `total_accepted_recipients` 0 | `Rejected` permanent: the transmission exists, but no message goes out |
//! | 2xx with a body that is unreadable or has no id | `Ambiguous`: SparkPost probably sent it |
//! | 400 (code 1602: an invalid key; 7001: an unverified sending domain; 1100: a DKIM key), 401, 403, 404, 405, 413, 415, 422 (1400: a required field) | `Rejected` permanent |
//! | 409 code 1600 (same key, another payload) | `KeyReused`: SparkPost processed an earlier request under this key, and not this one. herald stores a notification's request at its first attempt and replays it byte for byte, so this answer means the earlier request differed; it proves the earlier attempt was processed, never that the notification was refused |
//! | 409 code 1601 (the first request with the key is in progress) | `Rejected` transient, with `Retry-After` if sent: this request was not processed |
//! | any other 409 | `Rejected` permanent (herald-provider's shared table) |
//! | 420 (a sending limit: "no messages are sent") | `Rejected` transient |
//! | 429 | `Rejected` transient, with `Retry-After` if sent (SparkPost suggests waiting 1 to 5 s) |
//! | 408, 425 | `Rejected` transient (shared table) |
//! | 500, 502, 503 ("higher than normal levels of traffic"), 504, any other 5xx | `Ambiguous`: SparkPost does not document any 5xx as "not processed", so it may have sent the email |
//! | connection or TLS failure before the request was written | `Rejected` transient (stage `connect`) |
//! | timeout or reset after the request was written | `Ambiguous` (stage `awaiting_response`) |
//!
//! Every ambiguity settles by resending within 24 hours: SparkPost then answers the original
//! response again, or sends for the first time if the first request never got through. The
//! body of a 401 is not documented; the adapter reads statuses and codes, never messages. The
//! API key is never logged and never part of evidence, errors or `Debug` output; anything
//! SparkPost echoes is scrubbed of it before it becomes evidence.
//!
//! # Webhooks
//! With `callback_username` and `callback_password` set (the Basic credentials of a SparkPost
//! webhook with `auth_type = "basic"` that posts to herald's callback URL for the route),
//! the route reads SparkPost's event batches (<https://developers.sparkpost.com/api/webhooks/>,
//! <https://developers.sparkpost.com/api/events/>): a JSON array of
//! `{"msys": {"message_event" | "track_event" | "unsubscribe_event" | …: {"type", "event_id",
//! "transmission_id", "rcpt_meta", "rcpt_type", "bounce_class", "timestamp", …}}}`. SparkPost
//! signs nothing, so wrong or missing credentials are refused as unauthenticated; a body that
//! is not such a batch, or a mapped event without an `event_id` or without anything naming its
//! message, as malformed. The webhook's test batch, `[{"msys": {}}]`, holds no event.
//!
//! | `type` | receipt | suppresses the recipient |
//! |---|---|---|
//! | `injection` | `sent` | no |
//! | `delivery` | `delivered` | no |
//! | `open`, `initial_open`, `amp_open`, `click`, `amp_click` (the email arrived) | `delivered` | no |
//! | `bounce`, `out_of_band` | `bounced` | only for a hard bounce class: 10 (invalid recipient), 30 (no RCPT), 90 (unsubscribe) |
//! | `spam_complaint` | `complained` | yes |
//! | `policy_rejection`, `generation_failure`, `generation_rejection` | `undeliverable` | no |
//! | `list_unsubscribe`, `link_unsubscribe` | none | yes |
//! | `delay`, relay and any other | left out | |
//!
//! An event about a CC or BCC copy (`rcpt_type` `cc` or `bcc`) is left out: its recipient is
//! not the notification's. The event id is `event_id`, the same on every retry of a batch.
//! `vendor_status` is the `type` (with `/{bounce_class}` for a bounce), and `at` is `timestamp`
//! (unix seconds, or RFC 3339). The event names its notification by `rcpt_meta.herald_key`, or,
//! for an email sent before herald stamped its key, by `transmission_id`. Which bounce classes
//! are hard comes from SparkPost's bounce classification page
//! (<https://www.sparkpost.com/docs/deliverability/bounce-classification-codes/>), which the
//! API reference links but does not reproduce: an unknown class suppresses no one.
//!
//! # Modules
//! - [`adapter`]: [`SparkPostAdapter`] and its [`SparkPostRoute`].
//! - `fake` (feature `fake`): a local stand-in for SparkPost's Transmissions API with faults
//!   and a ledger.
//!
//! The JSON shapes both sides share live in one private module so that they cannot drift apart.
#![forbid(unsafe_code)]

pub mod adapter;
mod callback;
#[cfg(feature = "fake")]
pub mod fake;
mod settings;
mod wire;

pub use adapter::{
    DEFAULT_BASE_URL, IDEMPOTENCY_WINDOW, MAX_CONTENT_BYTES, SparkPostAdapter, SparkPostError,
    SparkPostRoute,
};
pub use settings::Settings;
