//! Herald's adapter for Mailjet (channel `email`, `provider = "mailjet"`).
//!
//! Sending uses Send API v3.1 (<https://dev.mailjet.com/email/guides/send-api-v31/>); looking a
//! send up uses the `/message` resource filtered by `CustomID`
//! (<https://dev.mailjet.com/reference/email/messages/>). The request and answer samples in
//! `fixtures/mailjet/` come from there (see its README).
//!
//! # Capabilities
//! | | |
//! |---|---|
//! | idempotency key | **none**: `CustomID` tags a message but does not deduplicate (a resend is a second email) |
//! | outcome query | yes: `GET /v3/REST/message?CustomID=<provider key>&ShowCustomID=true&FromTS=…` |
//! | query visibility lag | [`MailjetRoute::visibility_lag`] (default 15 min; Mailjet documents none) |
//! | payload limit | 15 MB (the documented attachment limit; no other is stated) |
//! | attachments | yes: `Attachments: [{ContentType, Filename, Base64Content}]`; all of a message's attachments, inline ones included, may not exceed 15 MB; an empty `Filename`, `ContentType` or `Base64Content` is `mj-0012`, too many attachments `mj-0008` (the docs give no number) |
//! | delivery callbacks | Event API, with HTTP Basic credentials, when `callback_username` and `callback_password` are set (below) |
//!
//! # Sending
//! `POST /v3.1/send` with one message: `From {Email, Name}`, `To [{Email}]`, `Subject`,
//! `TextPart`, `HTMLPart`, `Attachments` when the email has any (each `ContentType`,
//! `Filename`, `Base64Content`: the guide's "Send with attached files" and its table of message
//! properties, `guides/_send-api.md` of <https://github.com/mailjet/api-documentation>), and
//! `CustomID` = herald's provider key, which is stable per notification, so every attempt of
//! one notification carries the same `CustomID`. HTTP Basic auth: API key and secret.
//!
//! | Mailjet's answer | result |
//! |---|---|
//! | `200`, message `"Status": "success"` | `Accepted`, `provider_ref` = `To[0].MessageID` |
//! | `2xx`, message `"Status": "error"` | classified by the message's own `StatusCode` (4xx: `Rejected`, permanent) |
//! | `2xx` unreadable, or without a message | `Ambiguous` (probably accepted; nothing proves it) |
//! | `400` (global `mj-0002` malformed JSON, or per-message `mj-0003`, `mj-0013`, `send-0003`, …) | `Rejected`, permanent |
//! | `401` (`mj-0015` wrong credentials, `mj-0001` key suspended) | `Rejected`, permanent |
//! | `403` (`send-0008` unauthorised sender, …), other `4xx` | `Rejected`, permanent |
//! | `429` (calls per minute exceeded) | `Rejected`, transient, `retry_after` from `Retry-After` if sent (Mailjet documents no header) |
//! | `500`, `502`, `503`, `504` and other `5xx` | `Ambiguous`: Mailjet does not document any of them as "not processed" |
//! | no connection (refused, DNS, TLS) | `Rejected`, transient: nothing was sent |
//! | timeout or reset after the request was written | `Ambiguous` |
//! | message not an email, or with neither text nor HTML | `Rejected`, permanent, before any I/O |
//!
//! Mailjet's `ErrorCode` (global, or every per-message one joined by commas) goes into
//! `Evidence::vendor_code`.
//!
//! # Looking a send up
//! [`MailjetAdapter::query`](herald_provider::Adapter::query) asks `/message` for the provider
//! key as `CustomID`. `FromTS` is the notification's creation (its UUIDv7 id carries it) less
//! an hour of clock skew, so that no default time range of Mailjet's can hide an older send;
//! ids without a time send no `FromTS`.
//!
//! | look-up | result |
//! |---|---|
//! | `Total` ≥ 1 | `Accepted`, `provider_ref` = the first listed `ID`; with several, the evidence says so (herald counts that as a possible duplicate only where it made several unsettled sends) |
//! | `Total` 0 | `NotFoundYet` (herald weighs it against the visibility lag) |
//! | an entry with another `CustomID`, or unreadable | `Unsupported`: the filter did not hold |
//! | transport error, `401`, `429`, `5xx`, any non-`200` | `Unsupported`: proves nothing |
//!
//! # Event API callbacks
//! Mailjet posts events about sent messages to a URL configured in the account
//! (<https://documentation.mailjet.com/hc/en-us/articles/360043578154-Event-Tracking-API>, and
//! the Event API guide of <https://github.com/mailjet/api-documentation>,
//! `guides/_event-api.md`): one JSON event object per request, or,
//! with the Event API's version 2 ("grouping"), an array of them. Each has `event`, `time`
//! (unix seconds), `email`, `MessageID`, `CustomID` (herald's provider key, sent with every
//! message) and per-event fields (`hard_bounce`, `error`, …). Mailjet signs nothing; it
//! recommends HTTPS with Basic credentials in the URL
//! (`https://user:pass@herald.example.com/v1/callbacks/mailjet-main`). With
//! `callback_username` and `callback_password` set (both or neither), the route compares the
//! `Authorization: Basic` header with them in constant time (as HMAC-SHA256 digests, which also
//! hides the password's length), and refuses a missing, malformed or wrong one as
//! unauthenticated; a body that is not an event object or an array of them, or a mapped event
//! without `time` or `MessageID`, as malformed.
//!
//! | `event` | receipt | suppresses the recipient |
//! |---|---|---|
//! | `sent`: the receiving mail server accepted it (Mailjet's `sent` is others' "delivered") | `delivered` | no |
//! | `open`, `click` (the message arrived) | `delivered` | no |
//! | `bounce` | `bounced` | when `hard_bounce` is true |
//! | `spam` | `complained` | yes |
//! | `blocked` | `undeliverable` | no |
//! | `unsub` | none: it says nothing of the message | yes |
//! | any other | left out | |
//!
//! Mailjet's events carry no id: the event id is `{MessageID}:{event}:{time}`. `vendor_status`
//! is the `event`, with `/{error}` when there is one, and `at` is `time`. The event names its
//! notification by a non-empty `CustomID`, or else by its `MessageID` (`mj_message_id` where
//! only that is sent), as text.
//!
//! # Testing
//! Feature `fake` adds [`fake`]: a local Mailjet that speaks this API, keeps a ledger of real
//! deliveries by `CustomID` and injects faults.
#![forbid(unsafe_code)]

mod adapter;
mod callback;
mod settings;
mod wire;

#[cfg(feature = "fake")]
pub mod fake;

pub use adapter::{
    DEFAULT_BASE_URL, DEFAULT_VISIBILITY_LAG, MAX_PAYLOAD_BYTES, MailjetAdapter, MailjetError,
    MailjetRoute,
};
pub use settings::Settings;
