//! Herald's adapter for Twilio Programmable Messaging (channel `sms`, `provider = "twilio"`).
//!
//! Sending creates a Message resource; looking a send up lists Message resources. Both are
//! described at <https://www.twilio.com/docs/messaging/api/message-resource>; the request and
//! answer samples in `fixtures/twilio/` come from there (see its README).
//!
//! # Capabilities
//! | | |
//! |---|---|
//! | idempotency key | **none**: Twilio documents no idempotency for `Messages.json` (a resend is a second SMS) |
//! | outcome query | yes: `GET /2010-04-01/Accounts/{AccountSid}/Messages.json?To=&From=&DateSent>=&PageSize=`, matched on the text |
//! | query visibility lag | [`TwilioRoute::visibility_lag`] (default 10 min), at least `ValidityPeriod` + 30 s against Twilio (below) |
//! | payload limit | `Body` ≤ 1,600 characters (declared as 1,600 bytes, which never over-promises) |
//! | delivery callbacks | status callbacks, when `status_callback` is set (below) |
//!
//! # Sending
//! `POST /2010-04-01/Accounts/{AccountSid}/Messages.json`, form-encoded: `To`, `From` or
//! `MessagingServiceSid`, `Body`, `StatusCallback` if configured, `ValidityPeriod`, and
//! `SmartEncoded=false` (so that Twilio stores the text exactly as sent, which the look-up
//! relies on). HTTP Basic auth: `AccountSid:AuthToken`, or an API key's `SID:secret`.
//! `StatusCallback` is the route's `status_callback` with `herald_key=<provider key>` appended
//! to its query (see "Status callbacks").
//!
//! | Twilio's answer | result |
//! |---|---|
//! | `201` with a `sid` | `Accepted`, `provider_ref` = the `sid` |
//! | `2xx` without a readable `sid` | `Ambiguous` (probably created; nothing proves it) |
//! | `400` (e.g. 21211 invalid `To`, 21610 recipient replied STOP, 21602 no body) | `Rejected`, permanent |
//! | `401` (20003, wrong credentials) | `Rejected`, permanent |
//! | other `4xx` (403, 404, 422, …) | `Rejected`, permanent |
//! | `429`, or any 4xx with code 20429 (too many requests), 21611 (sender queue full) or 63017 (rate limit) | `Rejected`, transient, `retry_after` from `Retry-After` |
//! | `500`, `502`, `503`, `504` and other `5xx` | `Ambiguous`: Twilio does not document any of them as "not processed" |
//! | no connection (refused, DNS, TLS) | `Rejected`, transient: nothing was sent |
//! | timeout or reset after the request was written | `Ambiguous` |
//! | message not an SMS, without text or over 1,600 characters | `Rejected`, permanent, before any I/O |
//!
//! Twilio's error code (`{"code", "message", "more_info", "status"}`) goes into
//! `Evidence::vendor_code`.
//!
//! # Looking a send up
//! Twilio keeps no client reference, and herald appends nothing to an SMS (a reference in the
//! text would reach the recipient). So the look-up
//! ([`query_prepared`](herald_provider::Adapter::query_prepared)) finds a send by what it was:
//! an `outbound-api` message from the sender (or Messaging Service) of the notification's
//! stored request to its number, with exactly its text, created since the notification existed
//! (its UUIDv7 id carries its creation time; other ids fall back to the last 24 h). The
//! `DateSent>` filter counts whole UTC days, so it asks from the day the window starts, and the
//! exact bound is applied to `date_created`.
//!
//! **What the look-up can and cannot prove.** It proves that *some* message with this text
//! reached this number, never *whose* it was: a reminder, an "order shipped" or a repeated
//! alert sent twice to one number produce look-alike messages that nothing in Twilio's records
//! tells apart. The adapter therefore answers every match as `LookAlikes`, and herald
//! attributes them: a message already attributed to a notification (the `sid` of an accepted
//! send, or one settled earlier) never settles another, and where several unsettled look-alike
//! notifications could own the remaining matches, herald settles only what the counts prove
//! (as many messages as sends that may have produced them) and otherwise records `unknown`, or
//! resends under `at_least_once` and records `duplicate_possible`. The look-up also assumes
//! that only herald sends this text from this sender to this number; a message sent by another
//! system makes the counts disagree, which herald then refuses to settle.
//!
//! | look-up | result |
//! |---|---|
//! | one or more matches, list complete | `LookAlikes`: every matching `sid`, oldest first, listed in the evidence |
//! | no match, list complete | `NotFoundYet` (herald weighs it against the visibility lag) |
//! | matching messages whose text is redacted | `Unsupported`: any of them may be a send of this text |
//! | more than 5 pages of 1000 | `Unsupported`: the matches cannot be counted |
//! | transport error, `401`, `5xx`, any non-`200`, unreadable page | `Unsupported`: proves nothing |
//!
//! **Why the lag is enforced.** The `DateSent` filter finds a message only once Twilio has
//! *sent* it (`date_sent` is "when Twilio sent the message"), and Twilio queues a message for
//! as long as its `ValidityPeriod` when a sender is over its rate (36,000 s by default). The
//! adapter therefore sends its own `ValidityPeriod` ([`TwilioRoute::validity_period`], 570 s by
//! default, never under 60 s; the notification's time left when that is shorter), and against
//! Twilio itself refuses a visibility lag shorter than that period plus 30 s for the list: a
//! message Twilio has not sent by then is dropped, never sent, and its absence after the lag
//! is the truth herald takes it for. The lag never shortens the period: a short lag in staging
//! is refused, not turned into SMS that live a second. The docs do not say whether a still-queued message (no `date_sent` yet)
//! matches the filter; the design does not depend on it.
//!
//! # Status callbacks
//! With `status_callback` set (herald's public URL for the route, e.g.
//! `https://herald.example.com/v1/callbacks/twilio-main`), Twilio posts each status change of a
//! message there
//! (<https://www.twilio.com/docs/messaging/guides/track-outbound-message-status>): a form with
//! `MessageSid`, `MessageStatus`, `ErrorCode` (when it failed), `To` and more, which Twilio may
//! add to without notice. It signs every request in `X-Twilio-Signature`
//! (<https://www.twilio.com/docs/usage/webhooks/webhooks-security>): base64 of the HMAC-SHA1,
//! keyed with the account's Auth Token, of the URL it requested followed by every POST
//! parameter, sorted by name, as name then value. The reader rebuilds that URL from the
//! configured `status_callback` without its query, plus the query herald received, and compares
//! in constant time, with the default port both written and left out as Twilio's helper
//! libraries do. A missing, wrong or undecodable signature, or one made by a Webhooks Rule's
//! shared key (`X-Twilio-Webhooks-Signature-Settings`, which herald does not hold), is refused
//! as unauthenticated. The Auth Token is `auth_token`, or `callback_auth_token` on a route that
//! sends with an API key (whose secret signs nothing), which such a route must then set.
//!
//! | `MessageStatus` | receipt | suppresses the recipient |
//! |---|---|---|
//! | `sent` (handed to the carrier) | `sent` | no |
//! | `delivered`; `read` (a read receipt, WhatsApp and RCS) | `delivered` | no |
//! | `undelivered`, `failed` | `undeliverable` | with `ErrorCode` 21610 (the recipient replied STOP) |
//! | `queued`, `accepted`, `scheduled`, `sending`, and any other | left out | |
//! | no `MessageSid` or `MessageStatus` | refused as malformed | |
//!
//! The event id is `{MessageSid}:{MessageStatus}`: Twilio reports each status once per message.
//! `vendor_status` is the `MessageStatus`, with `/{ErrorCode}` when there is one. The event
//! names its notification by the `herald_key` in the URL, or, for a message sent before herald
//! stamped its key, by the `MessageSid`. Status callbacks carry no time of the event.
//!
//! A send refused with 21610 ([`Adapter::unsubscribed`](herald_provider::Adapter::unsubscribed))
//! says the same as the callback: the recipient opted out, and herald suppresses them.
//!
//! # Testing
//! Feature `fake` adds [`fake`]: a local Twilio that speaks this API, keeps a ledger of real
//! deliveries and injects faults.
#![forbid(unsafe_code)]

mod adapter;
mod callback;
mod lookback;
mod settings;
mod wire;

#[cfg(feature = "fake")]
pub mod fake;

pub use adapter::{
    DEFAULT_BASE_URL, DEFAULT_VALIDITY_PERIOD, DEFAULT_VISIBILITY_LAG, LIST_ALLOWANCE,
    MAX_BODY_CHARS, MIN_VALIDITY_PERIOD, TwilioAdapter, TwilioError, TwilioRoute,
};
pub use settings::Settings;
