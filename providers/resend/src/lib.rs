//! Herald's adapter for [Resend](https://resend.com) (channel `email`).
//!
//! One `POST https://api.resend.com/emails` per send, with `Authorization: Bearer re_…`, a JSON
//! body of `from` (the route's sender), `to` (the one recipient), `subject`, `html` and/or
//! `text`, `tags` entries `herald_notification_id` and `herald_key` (the provider key, which
//! webhooks echo; each when it fits Resend's tag alphabet of ASCII letters, digits, `_` and
//! `-`), `attachments` when the email has any (`filename`, `content` in base64, `content_type`),
//! and herald's [`ProviderKey`](herald_provider::ProviderKey) — stable per notification — as the
//! `Idempotency-Key` header. A message's own tag named `herald_key` is refused before any
//! I/O. Resend answers `{"id": "…"}`, which becomes the `provider_ref`, and
//! errors as `{"statusCode", "name", "message"}`, whose `name` becomes `Evidence::vendor_code`.
//!
//! # Capabilities
//! | capability | value | source |
//! |---|---|---|
//! | idempotency window | 24 h: a repeat with the same key and payload answers the first answer (same id) without sending again | <https://resend.com/docs/dashboard/emails/idempotency-keys> |
//! | outcome query | none: Resend looks emails up by its own id, not by our key (its docs name no look-up by key); a replay inside the window is the reconciliation | <https://resend.com/docs/api-reference/emails/send-email> |
//! | payload limit | 40 MB per email including Base64 attachments (read as 40 000 000 bytes) | <https://resend.com/docs/api-reference/emails/send-email> |
//! | attachments | yes: `attachments: [{filename, content, content_type}]`, the content in base64 (Resend also takes a `path` to fetch, which herald does not use); no count limit is documented, only the 40 MB above; an attachment without `content` or `path` is 422 `invalid_attachment` | <https://resend.com/docs/api-reference/emails/send-email>, the `Attachment` schema of github.com/resend/resend-openapi (`resend.yaml`), <https://resend.com/docs/api-reference/errors> |
//! | rate limit | 2 requests/s by default, per team; 429 with `retry-after` and `ratelimit-*` headers | <https://resend.com/docs/api-reference/rate-limit> |
//! | delivery callbacks | webhooks, signed by Svix, when `webhook_secret` is set (below) | <https://resend.com/docs/webhooks/event-types> |
//!
//! # Classification
//! Error names and statuses: <https://resend.com/docs/api-reference/errors>; the idempotency
//! answers: <https://resend.com/docs/dashboard/emails/idempotency-keys>.
//!
//! | Resend's answer | herald's result |
//! |---|---|
//! | 2xx `{"id"}` (first answer or replay) | `Accepted`, `provider_ref` = the id |
//! | 2xx with a body that is unreadable or has no id | `Ambiguous`: Resend probably sent it |
//! | 400 `invalid_idempotency_key` (key not 1–256 chars) | `Rejected` permanent: nothing was processed, and the key is herald's own |
//! | 400 `validation_error`, 422 `missing_required_field` / `invalid_attachment` / …, 404, 405 | `Rejected` permanent |
//! | 401 `missing_api_key` / `restricted_api_key`; 403 `invalid_api_key`, 403 `validation_error` (unverified domain, testing address), 403 "error code: 1010" (no `User-Agent`) | `Rejected` permanent |
//! | 409 `invalid_idempotent_request` (same key, another payload) | `KeyReused`: Resend processed an earlier request under this key, and not this one. herald stores a notification's request at its first attempt and replays it byte for byte, so this answer means the earlier request differed (sent by an older herald, or by another sender using the key); it proves the earlier attempt was processed, never that the notification was refused |
//! | 409 `concurrent_idempotent_requests` | `Rejected` transient, with `Retry-After` if sent: the first request with the key is still in progress and this one was not processed ("safe to retry this request later") |
//! | any other 409 | `Rejected` permanent (herald-provider's shared table) |
//! | 429 `rate_limit_exceeded` / `daily_quota_exceeded` / `monthly_quota_exceeded` | `Rejected` transient; `retry_after` from `retry-after`, else `ratelimit-reset` (seconds until the window resets) |
//! | 408, 425 | `Rejected` transient (shared table) |
//! | 500 `application_error` / `internal_server_error`, 502, 503, 504, any other 5xx | `Ambiguous`: Resend does not document any 5xx as "not processed", so it may have sent the email |
//! | connection or TLS failure before the request was written | `Rejected` transient (stage `connect`) |
//! | timeout or reset after the request was written | `Ambiguous` (stage `awaiting_response`) |
//!
//! Every ambiguity settles by resending within 24 hours: Resend then answers the first answer
//! again, or sends for the first time if the first request never got through. The API key is
//! never logged and never part of evidence, errors or `Debug` output; anything Resend echoes is
//! scrubbed of it before it becomes evidence.
//!
//! # Webhooks
//! With `webhook_secret` set (the `whsec_…` signing secret of a Resend webhook endpoint that
//! posts to herald's callback URL for the route), the route reads Resend's webhooks
//! (<https://resend.com/docs/webhooks/event-types>,
//! <https://resend.com/docs/dashboard/webhooks/body-parameters>,
//! <https://resend.com/docs/webhooks/emails/bounced>): JSON
//! `{"type", "created_at", "data": {"email_id", "to", "tags", "bounce", …}}`, delivered by Svix
//! and signed as Standard Webhooks are, under `svix-id`, `svix-timestamp` and `svix-signature`
//! (<https://resend.com/docs/webhooks/verify-webhooks-requests>). A missing or wrong
//! signature, or a timestamp more than five minutes from herald's clock, is refused as
//! unauthenticated; a signed body that is not JSON with a `type` and a `data` object, or an
//! email event that names no email, as malformed. A malformed `webhook_secret` is a settings
//! error that says what is wrong with its form, never what it contains.
//!
//! | `type` | receipt | suppresses the recipient |
//! |---|---|---|
//! | `email.sent` | `sent` | no |
//! | `email.delivered` | `delivered` | no |
//! | `email.opened`, `email.clicked` (the email arrived) | `delivered` | no |
//! | `email.bounced` | `bounced` | yes, unless `data.bounce.type` is `Transient` (a soft bounce) or `Undetermined` (proves nothing) |
//! | `email.complained` | `complained` | yes |
//! | `email.failed` | `undeliverable` | no |
//! | `email.delivery_delayed`, `email.scheduled`, and any other | left out | |
//!
//! The event id is `svix-id`, the same on every retry of one event. `vendor_status` is the
//! `type` (with `/{bounce.type}` for a bounce), and `at` is `created_at`. The event names its
//! notification by the `herald_key` tag (tags read both as an array of `{name, value}` and as an
//! object, since Resend's docs show both), or, for an email sent before herald stamped its key,
//! by `data.email_id`.
//!
//! # Modules
//! - [`adapter`]: [`ResendAdapter`] and its [`ResendRoute`].
//! - `fake` (feature `fake`): a local stand-in for Resend's API with faults and a ledger.
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
    DEFAULT_BASE_URL, IDEMPOTENCY_WINDOW, MAX_EMAIL_BYTES, ResendAdapter, ResendError, ResendRoute,
};
pub use settings::Settings;
