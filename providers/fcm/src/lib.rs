//! Herald's adapter for [Firebase Cloud Messaging](https://firebase.google.com/docs/cloud-messaging)
//! HTTP v1 (channel `push`).
//!
//! One send request per notification: `POST https://fcm.googleapis.com/v1/projects/{project_id}/messages:send`
//! with `Authorization: Bearer <access token>` and the body
//! `{"message": {"token": to, "notification": {"title": subject, "body": text}, "data": {"herald_key": key}}}`
//! (herald's `to` is an FCM registration token). FCM answers 200 with the message resource,
//! whose `name` (`projects/*/messages/{message_id}`) is the `provider_ref`, or an error
//! `{"error": {"code", "message", "status", "details": [{"@type": "…FcmError", "errorCode"}]}}`,
//! whose `errorCode` (else its `status`) becomes `Evidence::vendor_code`.
//!
//! **Access tokens.** The route holds a service account key file. The adapter signs an RS256
//! assertion with its private key (`kid` = `private_key_id`; `iss` = `client_email`, `scope` =
//! `https://www.googleapis.com/auth/firebase.messaging`, `aud` = the key's `token_uri`, `iat`,
//! `exp` = `iat` + 1 h), exchanges it at the key's `token_uri`
//! (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`) for a bearer token, and keeps
//! that token until 5 minutes before it expires (halfway, for a token that lives less than
//! 10 minutes). One exchange serves every send that waits for it. A 401 from the send for the
//! token itself (expired, revoked) mints a new one and sends once more, within the same
//! timeout; a second 401 is permanent. Sources: <https://developers.google.com/identity/protocols/oauth2/service-account>,
//! <https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages/send>
//! ("Authorization Scopes"). The docs say `aud` is "always `https://oauth2.googleapis.com/token`",
//! which is the `token_uri` of Google's key files: herald addresses the assertion to the
//! endpoint it is posted to, as golang.org/x/oauth2 does (Python's google-auth sends the
//! constant instead; for Google's keys the two are one).
//!
//! **No idempotency key.** FCM takes none, and a resend is a second message. herald's
//! [`ProviderKey`](herald_provider::ProviderKey) rides in the message's `data` as `herald_key`:
//! FCM does nothing with it, but the receiving app can, and should, drop a message whose
//! `herald_key` it has already shown. A duplicate is possible wherever herald resends after
//! an ambiguous send (`delivery = "at_least_once"`); under `at_most_once` an ambiguous send
//! becomes `unknown`, as SMTP's does.
//!
//! # Capabilities
//! | capability | value | source |
//! |---|---|---|
//! | idempotency window | none: no idempotency key is documented; a resend delivers again | <https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages/send> (the request has `validate_only` and `message`, nothing else) |
//! | outcome query | none: the API has one method, `send`; delivery data is aggregate (per app and day, the FCM Data API and the BigQuery export), never per message | <https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages>, <https://firebase.google.com/docs/cloud-messaging/understand-delivery> |
//! | payload limit | 4096 bytes: "the total size of the payload data … 4096 bytes for most messages, or 2048 bytes in the case of messages to topics. This includes both the keys and the values." herald counts the `notification` and `data` objects as JSON (the stricter reading) and refuses a larger message in `prepare` | <https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode> (INVALID_ARGUMENT, "Message too big") |
//! | tags, attachments | none: a push has neither; `prepare` refuses both | <https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages> |
//! | expiry | `expires_at` → `apns.headers.apns-expiration` (the Unix time, in the stored request), and at each attempt `android.ttl` and `webpush.headers.TTL` (the seconds left, at least 1; left out beyond FCM's own 28-day maximum), added at the end of the stored `message` object: every other byte is sent as stored | <https://firebase.google.com/docs/cloud-messaging/customize-messages/setting-message-lifespan> |
//! | rate limit | 600,000 messages a minute per project by default; "HTTP status code 429 RESOURCE_EXHAUSTED ("QUOTA_EXCEEDED") until the quota is refilled in the following minute" | <https://firebase.google.com/docs/cloud-messaging/throttling-and-quotas> |
//! | delivery callbacks | none: FCM sends no per-message reports to a server | <https://firebase.google.com/docs/cloud-messaging/understand-delivery> |
//!
//! # Classification
//! Sources: FCM's error codes <https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode>
//! and error envelope <https://firebase.google.com/docs/cloud-messaging/error-codes>; the token
//! exchange <https://developers.google.com/identity/protocols/oauth2/service-account>. The
//! answers' wording is in `fixtures/fcm/README.md`.
//!
//! | FCM's answer | herald's result |
//! |---|---|
//! | 200 with a `name` | `Accepted`, `provider_ref` = the name |
//! | 2xx without a `name`, or unreadable | `Ambiguous` (shared table) |
//! | 400 `INVALID_ARGUMENT` ("Request parameters were invalid": a malformed token, a message too big, a reserved data key) | `Rejected` permanent |
//! | 401 `THIRD_PARTY_AUTH_ERROR` ("A message targeted to an iOS device or a web push registration could not be sent": the project's APNs certificate or web push key) | `Rejected` permanent, status 401: the route is refused, herald moves its work to the fallback |
//! | 401 without it (`UNAUTHENTICATED`: the access token expired or was revoked) | a new token, and the send once more within what is left of the timeout: a 401 proves the message was not processed. A second 401: `Rejected` permanent. Where no new token comes, the token exchange's result below (its evidence says the message was not sent again) |
//! | 403 `PERMISSION_DENIED` (the service account may not send for the project) | `Rejected` permanent: herald reads a 403 as a refusal of the route |
//! | 403 `SENDER_ID_MISMATCH` ("The authenticated sender ID is different from the sender ID for the registration token … If you switch to a different sender, the existing registration tokens won't work") | `Rejected` permanent, `vendor_code` `SENDER_ID_MISMATCH`. It refuses one token (another project's), not the route, though herald reads its 403 as the route's: the message moves to the fallback, which may be that project's, and many such tokens in a row count against the route's circuit. Not a suppression: the token is valid for its own project |
//! | 404 `UNREGISTERED` ("App instance was unregistered from FCM … the token used is no longer valid") | `Rejected` permanent, `vendor_code` `UNREGISTERED`; [`Adapter::unsubscribed`](herald_provider::Adapter::unsubscribed) is true for it, so herald suppresses the token |
//! | 429 `QUOTA_EXCEEDED` ("use exponential backoff with a minimum initial delay of 1 minute"), and any other 429 (FCM answers 429 "until the quota is refilled in the following minute", and asks that a 429 met in overload be handled "in accordance with the published recommendations": <https://firebase.google.com/docs/cloud-messaging/throttling-and-quotas>) | `Rejected` transient, `retry_after` = `Retry-After` but at least 60 s |
//! | 408, 425 | `Rejected` transient, `retry_after` from `Retry-After` (shared table) |
//! | 500 `INTERNAL` ("The server encountered an error while trying to process the request") | `Ambiguous`: the docs say to retry, not that nothing was delivered; an error *while processing* may come after the message went out |
//! | 503 `UNAVAILABLE` ("The server couldn't process the request in time … Honor the Retry-After header") | `Ambiguous`: "couldn't process in time" is a timeout, which does not say the message was not handed on; FCM documents no 5xx as "not processed", and keeps no key that would make a retry safe |
//! | 502, 504, any other 5xx | `Ambiguous` (shared table) |
//! | any other 4xx | `Rejected` permanent (shared table) |
//! | connection or TLS failure before the send was written | `Rejected` transient (stage `connect`) |
//! | timeout or reset after the send was written | `Ambiguous` (stage `awaiting_response`) |
//! | the token exchange: no connection, a timeout, a reset, a 5xx, 408, 425, 429 (with its `Retry-After`) | `Rejected` transient, stage `auth`: no send was written with its token |
//! | the token exchange: a 1xx, or a 3xx reqwest did not follow | `Rejected` transient, stage `auth`, the status it answered |
//! | the token exchange: a 2xx without a usable bearer token (not a JSON object, no `access_token`, a `token_type` other than `Bearer`, no `expires_in` in whole seconds, a token that cannot be a header value) | `Rejected` transient, stage `auth`; the evidence names what was wrong and leaves the body out, as it may hold a token |
//! | no time left before the send, or before the send once more after a 401 (the token exchange or the first send took the timeout) | `Rejected` transient, stage `auth`, no status: nothing was written, or not again |
//! | the token exchange: any other 4xx (`invalid_grant`: a deleted or disabled key, a wrong `kid`, a clock far off) | `Rejected` permanent, stage `auth`, `vendor_code` = the OAuth `error`, status **401** whatever the token endpoint answered (Google answers `invalid_grant` with 400): the route's own credential is refused, so herald moves its work to the fallback instead of failing each message |
//!
//! **What the docs contradicted.** The issue asked for `UNAVAILABLE` and `INTERNAL` as
//! transient, honouring `Retry-After`. FCM's docs tell a sender to retry them, but never say
//! the message was not processed: `INTERNAL` is an error "while trying to process", and
//! `UNAVAILABLE` a failure to "process the request in time". Under herald's rule (after the
//! request was written, nothing is `Rejected` unless the answer proves it was not processed)
//! both are `Ambiguous`, and their `Retry-After` is not carried (an ambiguity has none).
//!
//! The private key, the assertion and every access token are never logged and never part of
//! evidence, errors or `Debug` output; anything an answer echoes is scrubbed of them. A token
//! endpoint's 2xx is never quoted, and an `access_token` in any of its other answers is
//! scrubbed.
//!
//! # Modules
//! - [`adapter`]: [`FcmAdapter`] and its [`FcmRoute`].
//! - `key`: the service account key, read, and the assertion it signs.
//! - `token`: the access token's exchange and cache.
//! - `fake` (feature `fake`): a local stand-in for FCM's token endpoint and `messages:send`,
//!   with faults and a ledger.
//!
//! The JSON shapes both sides share live in one private module (`wire`) so that they cannot
//! drift apart.
#![forbid(unsafe_code)]

pub mod adapter;
#[cfg(feature = "fake")]
pub mod fake;
mod key;
mod settings;
mod token;
mod wire;

pub use adapter::{
    DEFAULT_BASE_URL, FcmAdapter, FcmError, FcmRoute, MAX_PAYLOAD_BYTES, QUOTA_BACKOFF,
};
pub use key::KeyError;
pub use settings::Settings;
pub use token::AUTH_STAGE;
pub use wire::{KEY_DATA, MESSAGING_SCOPE};
