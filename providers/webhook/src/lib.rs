//! Herald's adapter for webhook receivers that speak Standard Webhooks 1.0.0.
//!
//! Source: the Standard Webhooks specification, `spec/standard-webhooks.md` in
//! <https://github.com/standard-webhooks/standard-webhooks> (version 1.0.0).
//!
//! # The request
//! A notification's `to` is the receiver's URL and its `payload` (a JSON object) is the body,
//! sent as compact JSON with `Content-Type: application/json` and three headers:
//! - `webhook-id`: herald's provider idempotency key, stable per notification, so every resend
//!   carries the same id and a receiver can deduplicate on it;
//! - `webhook-timestamp`: this attempt's time in integer unix seconds (it changes on resend, as
//!   the spec says it must);
//! - `webhook-signature`: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, one per
//!   configured `whsec_` secret, space-separated, so a receiver can rotate ([`signature`]).
//!
//! and, where the message carries one, W3C Trace Context's `traceparent`: the context of
//! herald's vendor call where herald exports traces, else the one the notification was enqueued
//! in, so the receiver's own trace joins the sender's.
//!
//! Redirects are not followed, and no proxy is used. Unless the route allows private networks,
//! loopback, private, link-local (including 169.254.169.254), CGNAT, multicast, broadcast and
//! unspecified addresses are refused before any connection, checked on the very addresses
//! that are then connected to (see `destination`).
//!
//! # Capabilities
//! | idempotency window | outcome query | payload limit |
//! |---|---|---|
//! | none | none | the route's `max_payload_bytes` (the spec sets none; it suggests < 20 kB) |
//!
//! The spec says receivers "should" deduplicate on `webhook-id`, but whether one does, and for
//! how long ("e.g. … for 5 minutes"), is that receiver's promise, not the spec's: herald cannot
//! settle an ambiguity by resending, and declares no window. No receiver has an outcome query.
//!
//! # Classification
//! The spec counts only 2xx as success and asks senders to treat 3xx as failure, disable the
//! endpoint on 410, and throttle on 429, 502 and 504. Herald's rule on top: what may
//! have been processed is `Ambiguous`.
//!
//! | answer | result |
//! |---|---|
//! | 2xx | `Accepted`, no `provider_ref` (receivers return no id); the body excerpt is evidence, and a body that breaks off after a 2xx status does not make it doubtful |
//! | 3xx | `Rejected { permanent: true }`, `Location` in the evidence; never followed |
//! | 410 Gone | `Rejected { permanent: true }`, evidence "endpoint gone" |
//! | 408, 425, 429 | `Rejected { permanent: false }` with `Retry-After` (seconds) |
//! | other 4xx (400, 401, 403, 404, 409, 413, 415, 422, …) | `Rejected { permanent: true }` |
//! | 502, 504 | `Ambiguous`: a gateway answered, and the receiver behind it may have processed the request; `Retry-After` is kept in the evidence |
//! | 500, 503 and every other 5xx | `Ambiguous` (no receiver documents 503 as "not processed") |
//! | refused destination, bad URL, non-object payload, oversize payload | `Rejected { permanent: true }` before any connection |
//! | DNS failure, connect failure or timeout, TLS failure | `Rejected { permanent: false }` (nothing was written) |
//! | timeout or reset after the request was written | `Ambiguous` |
//!
//! Receivers have no error codes of their own, so `Evidence::vendor_code` stays empty.
//!
//! # The fake
//! With the `fake` feature, `fake` is a local Standard Webhooks receiver with fault switches
//! and a ledger, for herald's tests.
#![forbid(unsafe_code)]

mod adapter;
mod destination;
#[cfg(feature = "fake")]
pub mod fake;
mod settings;
pub use herald_provider::signature;

pub use adapter::{
    DEFAULT_TIMEOUT, DEFAULT_USER_AGENT, WEBHOOK_ID, WEBHOOK_SIGNATURE, WEBHOOK_TIMESTAMP,
    WebhookAdapter, WebhookError, WebhookRoute,
};
pub use settings::Settings;
