//! Herald's adapter for [OneSignal](https://onesignal.com) push (channel `push`).
//!
//! One create-message request per send: `POST https://api.onesignal.com/notifications` with
//! `Authorization: Key <App API key>` and a JSON body of `app_id`, `idempotency_key`,
//! `include_subscription_ids: [to]` (herald's `to` is a OneSignal subscription id),
//! `contents: {"en": text}` and, when there is a subject, `headings: {"en": subject}`. OneSignal
//! answers 200 `{"id": "…"}` (the `provider_ref`) or errors as `{"errors": [...]}`, whose first
//! message becomes `Evidence::vendor_code` (OneSignal has no error codes; its messages are the
//! sentinels its own SDKs match on).
//!
//! The `idempotency_key` is herald's [`ProviderKey`](herald_provider::ProviderKey) — stable per
//! notification — when it is a UUID, as herald's are; OneSignal takes only UUIDs, so any other
//! key is sent as the UUIDv5 of its text in a fixed namespace ([`idempotency_key_for`]).
//!
//! # Capabilities
//! | capability | value | source |
//! |---|---|---|
//! | idempotency window | 30 days: a repeat of the key "returns the result of the previous operation" and delivers nothing; afterwards it "will be sent again" | <https://documentation.onesignal.com/reference/idempotent-notification-requests> |
//! | outcome query | none: notifications are viewed by OneSignal's own id, not by our key (its docs name no look-up by key); a replay inside the window is the reconciliation | <https://documentation.onesignal.com/reference/push-notification> |
//! | payload limit | none stated: OneSignal gives display guidance (title ~50, content ~150 characters), not a byte limit | <https://documentation.onesignal.com/docs/mobile-push-notifications-guide> |
//! | rate limit | create message: 150 requests/s/app (free), 6 000 (paid); 429 with `Retry-After` in seconds | <https://documentation.onesignal.com/reference/rate-limits> |
//! | delivery callbacks | none read: OneSignal signs none of its reports. Its web push webhooks (display, click, dismiss) are set up in the web SDK and sent from the subscriber's browser; its Event Streams post a body and headers the account writes itself, authenticated only by a static header it chooses, so a reader would first have to prescribe both | <https://documentation.onesignal.com/docs/webhooks>, <https://documentation.onesignal.com/docs/event-streams> |
//!
//! # Classification
//! Sources: the 200 description of create message in OneSignal's API description (the
//! document behind <https://documentation.onesignal.com/reference/push-notification>), the error
//! catalog of OneSignal's SDKs (`src/errors.rs` of OneSignal/onesignal-rust-api), and
//! <https://documentation.onesignal.com/reference/rate-limits>.
//!
//! | OneSignal's answer | herald's result |
//! |---|---|
//! | 200 with a non-empty `id` (first answer or replay, `Idempotent-Replayed: true`) | `Accepted`, `provider_ref` = the id |
//! | 200 with an `id` whose `errors` name our one recipient (`invalid_aliases`, `invalid_player_ids`, …: "devices that … are no longer subscribed") | `Rejected` permanent, `vendor_code` = that kind: the notification exists but reaches nobody |
//! | 200 with an empty `id` and `errors`, e.g. "All included players are not subscribed" | `Rejected` permanent, `vendor_code` = the message: "no notification was created", and a repeat of the key answers the same for 30 days |
//! | 2xx with a body that is unreadable or has neither `id` nor `errors` | `Ambiguous`: OneSignal probably took it |
//! | 400 (no target, no English `contents`, missing `Authorization`, …) | `Rejected` permanent |
//! | 401, 403 "Access denied.  Please include an 'Authorization: ...' header with a valid API key …" | `Rejected` permanent |
//! | 404, 409, 422, any other 4xx | `Rejected` permanent (herald-provider's shared table). OneSignal documents no 409 for a repeated key: a repeat is answered with the earlier result |
//! | 429 "API rate limit exceeded." | `Rejected` transient, `retry_after` from `Retry-After` |
//! | 408, 425 | `Rejected` transient (shared table) |
//! | 500, 502, 503 "Service temporarily unavailable", 504, any other 5xx | `Ambiguous`. OneSignal groups 5xx with timeouts as answers to retry *with the same `idempotency_key`*, and calls 503 a transient database failure, but documents none as "not processed" |
//! | connection or TLS failure before the request was written | `Rejected` transient (stage `connect`) |
//! | timeout or reset after the request was written | `Ambiguous` (stage `awaiting_response`) |
//!
//! Every ambiguity settles by resending within 30 days: OneSignal then answers the earlier
//! result without delivering again, or creates the notification if the first request never got
//! through. The API key is never logged and never part of evidence, errors or `Debug` output;
//! anything OneSignal echoes is scrubbed of it before it becomes evidence.
//!
//! # Modules
//! - [`adapter`]: [`OneSignalAdapter`] and its [`OneSignalRoute`].
//! - `fake` (feature `fake`): a local stand-in for OneSignal's create-message API with faults
//!   and a ledger.
//!
//! The JSON shapes both sides share live in one private module so that they cannot drift apart.
#![forbid(unsafe_code)]

pub mod adapter;
#[cfg(feature = "fake")]
pub mod fake;
mod settings;
mod wire;

pub use adapter::{
    DEFAULT_BASE_URL, IDEMPOTENCY_WINDOW, OneSignalAdapter, OneSignalError, OneSignalRoute,
    idempotency_key_for,
};
pub use settings::Settings;
