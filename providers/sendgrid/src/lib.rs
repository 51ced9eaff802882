//! Herald's adapter for [SendGrid](https://sendgrid.com) (Twilio SendGrid; channel `email`).
//!
//! One `POST https://api.sendgrid.com/v3/mail/send` per send, with `Authorization: Bearer SG.…`,
//! a JSON body of one personalization (`to` the recipient, `cc`, `bcc`, and `custom_args`: the
//! message's tags and `herald_key`, herald's [`ProviderKey`](herald_provider::ProviderKey)),
//! `from`, `reply_to`, `subject`, `content` (`text/plain` then `text/html`), `attachments` when
//! the email has any (base64 `content`, `type`, `filename` each) and `headers`. A
//! message's own tag named `herald_key` is refused before any I/O. SendGrid answers 202 with an
//! empty body and the message's id in `X-Message-Id`, which becomes the `provider_ref`, and
//! errors as `{"errors": [{"message", "field", "help"}]}`.
//!
//! # Capabilities
//! | capability | value | source |
//! |---|---|---|
//! | idempotency window | none: SendGrid documents no idempotency key, so a resend is a second email | <https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send> |
//! | outcome query | only with `activity_lookup = true`: `GET /v3/messages?query=unique_args['herald_key']="<key>"` of Email Activity, a paid add-on ("Email Activity History"); off by default, and then none is declared | <https://www.twilio.com/docs/sendgrid/api-reference/email-activity/filter-all-messages> |
//! | visibility lag | not documented: `visibility_lag_ms`, default 15 minutes, with the look-up only | (unconfirmed; declared as a setting) |
//! | payload limit | "less than 30MB" per email including attachments | <https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send> |
//! | attachments | yes: `attachments: [{content, type, filename}]`, the content in base64 (`disposition` left at its default, `attachment`); within the 30 MB above; no count limit or forbidden types are stated there | <https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send> (the `attachments` of `spec/yaml/tsg_mail_v3.yaml` in github.com/twilio/sendgrid-oai) |
//! | rate limit | 429 with `X-RateLimit-Reset` (a unix time) | <https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/rate-limits> |
//! | delivery callbacks | the Event Webhook, signed with ECDSA, when `webhook_public_key` is set (below) | <https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features> |
//!
//! # Classification
//! Statuses: <https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send> and
//! <https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/errors>.
//!
//! | SendGrid's answer | herald's result |
//! |---|---|
//! | 202 "valid, and queued to be delivered" | `Accepted`, `provider_ref` = `X-Message-Id` |
//! | 202 without `X-Message-Id` | `Ambiguous`: not an answer the adapter can read |
//! | 200 "valid, but it is not queued to be delivered" (sandbox mode) | `Rejected` permanent: nothing goes out |
//! | 400, 401, 403, 404, 405, 413, 415 | `Rejected` permanent |
//! | 429 | `Rejected` transient; `retry_after` from `retry-after`, else until `X-RateLimit-Reset` |
//! | 408, 425 | `Rejected` transient (shared table) |
//! | 500, 502, 503, 504, any other 5xx | `Ambiguous`: SendGrid does not document a 5xx as "not processed", so it may have sent the email |
//! | connection or TLS failure before the request was written | `Rejected` transient (stage `connect`) |
//! | timeout or reset after the request was written | `Ambiguous` (stage `awaiting_response`) |
//!
//! With `activity_lookup`, an ambiguity settles by the look-up: a listed message is `Accepted`
//! (two or more: more than one send reached SendGrid, said in the evidence); none listed proves
//! nothing inside the visibility lag and absence after it; a non-200 (403 where the account has
//! no Email Activity) or an unreadable page proves nothing. The filter's answer does not echo
//! the custom arguments, so the adapter cannot check that the filter held, as it does for
//! Mailjet and Postmark: it trusts the query language. Without the look-up, an ambiguity waits
//! for the delivery policy, the Event Webhook or a person. The API key is never logged and never
//! part of evidence, errors or `Debug` output.
//!
//! # Event Webhook
//! With `webhook_public_key` set (the verification key SendGrid shows once the webhook's
//! signature is enabled), the route reads SendGrid's event batches: a JSON array of events with
//! `event`, `timestamp`, `sg_message_id`, the custom arguments (`herald_key`) and, per type,
//! `type` or `reason`. Each request is signed with ECDSA P-256/SHA-256 over the
//! `X-Twilio-Email-Event-Webhook-Timestamp` header followed by the body, the signature in
//! `X-Twilio-Email-Event-Webhook-Signature` (base64 DER); tests check it against SendGrid's own
//! Python library. A missing or wrong signature, or a timestamp more than five minutes from
//! herald's clock, is refused as unauthenticated; a body that is not an array of events, or a
//! mapped event without a `timestamp` or an `sg_message_id`, as malformed.
//!
//! | `event` | receipt | suppresses the recipient |
//! |---|---|---|
//! | `processed` | `sent` | no |
//! | `delivered`, `open`, `click` | `delivered` | no |
//! | `bounce` | `bounced` | yes, unless `type` is `blocked` (refused for now) |
//! | `dropped` | `undeliverable` | when `reason` is `Bounced Address`, `Unsubscribed Address` or `Spam Reporting Address` |
//! | `spamreport` | `complained` | yes |
//! | `unsubscribe`, `group_unsubscribe` | none | yes |
//! | `deferred`, `group_resubscribe`, any other | left out | |
//!
//! `sg_event_id` changes when SendGrid retries a batch (sendgrid/sendgrid-nodejs issue 1435), so
//! the event id is `{message}:{event}:{timestamp}`, the message being `sg_message_id` up to its
//! first `.` (the `X-Message-Id` the send answered). `vendor_status` is the `event`, with
//! `/{type}` or `/{reason}` where the event has one; `at` is `timestamp`. The event names its
//! notification by `herald_key`, or, for an email sent without it, by the message id.
//!
//! # Modules
//! - [`adapter`]: [`SendGridAdapter`] and its [`SendGridRoute`].
//! - `fake` (feature `fake`): a local stand-in for Mail Send and Email Activity, with faults, a
//!   visibility lag and a ledger.
#![forbid(unsafe_code)]

pub mod adapter;
mod callback;
#[cfg(feature = "fake")]
pub mod fake;
mod settings;
mod wire;

pub use adapter::{
    DEFAULT_BASE_URL, DEFAULT_VISIBILITY_LAG, MAX_EMAIL_BYTES, SendGridAdapter, SendGridError,
    SendGridRoute,
};
pub use callback::{PublicKeyError, SIGNATURE, TIMESTAMP, WebhookKey};
pub use settings::Settings;
