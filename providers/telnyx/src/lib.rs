//! Herald's adapter for [Telnyx](https://telnyx.com) Messaging (channel `sms`).
//!
//! One `POST https://api.telnyx.com/v2/messages` per send, with `Authorization: Bearer KEY…`,
//! herald's [`ProviderKey`](herald_provider::ProviderKey) as `Idempotency-Key`, and a JSON body of
//! `from` (or `messaging_profile_id`), `to`, `text` and, where the route reads webhooks,
//! `webhook_url`: herald's callback URL for the route with `herald_key=<key>` added. Telnyx
//! answers `{"data": {"id", …}}`, whose `id` becomes the `provider_ref`, and errors as
//! `{"errors": [{"code", "title", "detail"}]}`, whose first `code` becomes
//! `Evidence::vendor_code`.
//!
//! # Capabilities
//! | capability | value | source |
//! |---|---|---|
//! | idempotency window | none declared. `POST /v2/messages` takes `Idempotency-Key` (Telnyx's SDK, generated from its API description, sends it there), and Telnyx keeps a key 24 hours — but "only successful responses are replayed": after an error answer (a 500 when the message may already be out) a resend under the key may send again. herald sends the key with every attempt, so that a resend after a lost success is answered with the first message, and claims nothing of it | <https://developers.telnyx.com/docs/development/api-fundamentals/idempotency> |
//! | outcome query | none: Telnyx looks a message up by its own id, for 10 days, and nothing by herald's key | <https://developers.telnyx.com/api/messaging/get-message> |
//! | delivery callbacks | message webhooks, signed with Ed25519, when `webhook_url` and `webhook_public_key` are set (below): they settle a send whose answer was lost | <https://developers.telnyx.com/docs/messaging/messages/receiving-webhooks> |
//!
//! So an ambiguous send waits for its webhook, the delivery policy or a person.
//!
//! # Classification
//! Statuses and codes: <https://developers.telnyx.com/docs/development/api-fundamentals/api-errors>
//! and <https://developers.telnyx.com/docs/messaging/messages/error-codes>.
//!
//! | Telnyx's answer | herald's result |
//! |---|---|
//! | 2xx `{"data": {"id"}}` | `Accepted`, `provider_ref` = the id |
//! | 2xx without a message id | `Ambiguous`: Telnyx probably sent it |
//! | 400, 401, 403, 404, 422 (validation; the same key with another body) | `Rejected` permanent. herald replays a notification's stored request byte for byte, so a 422 for another body under its key cannot come from its own resends |
//! | code 40300 "Blocked due to STOP message" | `Rejected` permanent, and the recipient is suppressed |
//! | 429 | `Rejected` transient, with `Retry-After` if sent |
//! | 408, 425 | `Rejected` transient (shared table) |
//! | 500, 503, any other 5xx | `Ambiguous` |
//! | connection or TLS failure before the request was written | `Rejected` transient (stage `connect`) |
//! | timeout or reset after the request was written | `Ambiguous` (stage `awaiting_response`) |
//!
//! # Webhooks
//! With `webhook_url` (herald's callback URL for the route, as Telnyx will call it) and
//! `webhook_public_key` (the account's public key, base64), every message carries its own
//! `webhook_url` with herald's key in the query, and Telnyx echoes that URL in the signed
//! payload of each webhook about the message: the key comes back authenticated. A webhook is
//! `{"data": {"event_type", "id", "occurred_at", "payload": {…the message…}}}`, signed with
//! Ed25519 over `{telnyx-timestamp}|{body}` in `telnyx-signature-ed25519` (tests check it against
//! Telnyx's own Python library). A missing or wrong signature, or a timestamp more than five
//! minutes from herald's clock, is refused as unauthenticated; a signed body without `data`, or
//! a message event without a message id, as malformed.
//!
//! | `event_type` (`payload.to[0].status`) | receipt | suppresses the recipient |
//! |---|---|---|
//! | `message.sent` | `sent` | no |
//! | `message.finalized` (`delivered`) | `delivered` | no |
//! | `message.finalized` (`sending_failed`, `delivery_failed`) | `undeliverable` | when its errors include 40300 (the recipient texted STOP) |
//! | `message.finalized` (`delivery_unconfirmed`) | `sent` | no |
//! | `message.received` and any other | left out | |
//!
//! The event id is `data.id`; `vendor_status` is the event type (with `/{status}` when
//! finalized); `at` is `occurred_at`. The event names its notification by the key in the
//! message's `webhook_url`, or, for a message sent without it, by the message id.
//!
//! # Modules
//! - [`adapter`]: [`TelnyxAdapter`] and its [`TelnyxRoute`].
//! - `fake` (feature `fake`): a local stand-in for `POST /v2/messages`, with Telnyx's
//!   idempotency (successes only), faults and a ledger.
#![forbid(unsafe_code)]

pub mod adapter;
mod callback;
#[cfg(feature = "fake")]
pub mod fake;
mod settings;
mod wire;

pub use adapter::{DEFAULT_BASE_URL, Sender, TelnyxAdapter, TelnyxError, TelnyxRoute};
pub use callback::{PublicKeyError, WebhookKey};
pub use settings::Settings;
pub use wire::{SIGNATURE, TIMESTAMP};
