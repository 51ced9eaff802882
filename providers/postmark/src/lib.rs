//! Herald's adapter for [Postmark](https://postmarkapp.com) (channel `email`).
//!
//! One `POST https://api.postmarkapp.com/email` per send, with `X-Postmark-Server-Token`, a JSON
//! body of `From` (the route's sender), `To` (the one recipient), `Cc` and `Bcc` (comma-separated),
//! `Subject`, `HtmlBody` and/or `TextBody`, `ReplyTo`, `Headers`, `Attachments` when the email
//! has any (`Name`, base64 `Content`, `ContentType` each), `MessageStream` (default
//! `outbound`) and `Metadata` — the message's tags and `herald_key`, herald's
//! [`ProviderKey`](herald_provider::ProviderKey), by which the outbound search finds the message
//! and every webhook names it. A message's own tag named `herald_key` (in any case: Postmark
//! refuses keys that differ only in case) is refused before any I/O. Postmark answers
//! `{"To", "SubmittedAt", "MessageID", "ErrorCode": 0, "Message": "OK"}`, whose `MessageID`
//! becomes the `provider_ref`, and errors as `{"ErrorCode", "Message"}`, whose `ErrorCode`
//! becomes `Evidence::vendor_code`.
//!
//! # Capabilities
//! | capability | value | source |
//! |---|---|---|
//! | idempotency window | none: Postmark documents no idempotency key, so a resend is a second email | <https://postmarkapp.com/developer/api/email-api> (no such field or header) |
//! | outcome query | `GET /messages/outbound?count=50&offset=0&metadata_herald_key=<key>`: "search for messages using metadata", one metadata field at a time; messages are kept for the server's retention (45 days by default) | <https://postmarkapp.com/support/article/1125-custom-metadata-faq>, <https://postmarkapp.com/developer/api/messages-api> |
//! | visibility lag | not documented: `visibility_lag_ms`, default 15 minutes, after which "not listed" is read as "not sent" | (unconfirmed; declared as a setting) |
//! | payload limit | 10 MB per message including attachments (read as 10 000 000 bytes) | <https://postmarkapp.com/developer/api/email-api> |
//! | attachments | yes: `Attachments: [{Name, Content, ContentType}]`, the content in base64, within the 10 MB above (herald's default `[attachments] max_total_bytes`, 10 MiB decoded, is more than that once encoded: Postmark refuses such a message, permanently). Postmark takes only some file types; its list was not confirmed here | <https://postmarkapp.com/developer/api/email-api>; the field's shape as Postmark announced it (<https://postmarkapp.com/blog/attachments-finally-here>) and as its own client `postmark.js` types it (`Attachment`) |
//! | rate limit | 429 "Rate Limit Exceeded" | <https://postmarkapp.com/developer/api/overview> |
//! | delivery callbacks | webhooks, with HTTP Basic credentials in the webhook URL, when `callback_username` and `callback_password` are set (below) | <https://postmarkapp.com/developer/webhooks/webhooks-overview> |
//!
//! # Classification
//! Statuses and error codes: <https://postmarkapp.com/developer/api/overview>.
//!
//! | Postmark's answer | herald's result |
//! |---|---|
//! | 200 `{"ErrorCode": 0, "MessageID"}` | `Accepted`, `provider_ref` = the `MessageID` |
//! | 2xx with a body that is unreadable, has no `MessageID` or another `ErrorCode` | `Ambiguous`: Postmark probably sent it |
//! | 401 (ErrorCode 10, a bad or missing token), 413 (too large), 422 (ErrorCode 300 invalid request, 400/401 sender signature, 405 not allowed to send, 406 inactive recipient, 412 account pending, …) | `Rejected` permanent; 406 also suppresses the recipient, whom Postmark deactivated after a hard bounce, a complaint or an unsubscribe |
//! | 429 | `Rejected` transient, with `Retry-After` if sent |
//! | 408, 425 | `Rejected` transient (shared table) |
//! | 500, 503 (maintenance), any other 5xx | `Ambiguous`: Postmark does not document a 5xx as "not processed", so it may have sent the email |
//! | connection or TLS failure before the request was written | `Rejected` transient (stage `connect`) |
//! | timeout or reset after the request was written | `Ambiguous` (stage `awaiting_response`) |
//!
//! Every ambiguity settles by the look-up: a listed message with the key is `Accepted` (two or
//! more: more than one send reached Postmark, said in the evidence); none listed proves nothing
//! inside the visibility lag and absence after it; a page that lists a message without the key
//! (the filter did not hold), a non-200 or an unreadable page proves nothing. The token is
//! never logged and never part of evidence, errors or `Debug` output; anything Postmark echoes
//! is scrubbed of it before it becomes evidence.
//!
//! # Webhooks
//! With `callback_username` and `callback_password` set (the Basic credentials written into the
//! webhook URL configured in Postmark, `https://user:pass@herald.example.com/v1/callbacks/<route>`),
//! the route reads Postmark's webhooks, one JSON event per request
//! (<https://postmarkapp.com/developer/webhooks/delivery-webhook>, `…/bounce-webhook`,
//! `…/spam-complaint-webhook`, `…/open-tracking-webhook`, `…/click-webhook`,
//! `…/subscription-change-webhook`). Postmark signs nothing, so wrong or missing credentials are
//! refused as unauthenticated; a body that is not a JSON object with a `RecordType`, or a mapped
//! event without a `MessageID`, as malformed.
//!
//! | `RecordType` | receipt | suppresses the recipient |
//! |---|---|---|
//! | `Delivery` | `delivered` | no |
//! | `Open`, `Click` (the email arrived) | `delivered` | no |
//! | `Bounce` | `bounced` | when `Inactive` is true: Postmark deactivated the address because of it |
//! | `Bounce` of `Type` `AutoResponder`, `AddressChange`, `ChallengeVerification`, `Subscribe`, `Unsubscribe`, `OpenRelayTest` | left out: not about delivery | |
//! | `SpamComplaint` | `complained` | yes |
//! | `SubscriptionChange` with `SuppressSending: true` | none | yes |
//! | any other | left out | |
//!
//! Postmark gives only a bounce (and a complaint) an `ID`; the event id is `{RecordType}:{ID}`
//! there, and `{MessageID}:{RecordType}:{time}` otherwise (a retry repeats all three).
//! `vendor_status` is the `RecordType` (with `/{Type}` for a bounce), and `at` is the event's
//! own time (`DeliveredAt`, `BouncedAt`, `ReceivedAt`, `ChangedAt`). The event names its
//! notification by `Metadata.herald_key`, or, for an email sent without it, by `MessageID`.
//!
//! # Modules
//! - [`adapter`]: [`PostmarkAdapter`] and its [`PostmarkRoute`].
//! - `fake` (feature `fake`): a local stand-in for Postmark's send and outbound search, with
//!   faults, a visibility lag and a ledger.
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
    DEFAULT_BASE_URL, DEFAULT_MESSAGE_STREAM, DEFAULT_VISIBILITY_LAG, MAX_MESSAGE_BYTES,
    PostmarkAdapter, PostmarkError, PostmarkRoute,
};
pub use settings::Settings;
