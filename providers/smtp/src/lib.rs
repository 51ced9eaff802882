//! Herald's SMTP adapter (`provider = "smtp"`, channel `email`), built on lettre.
//!
//! - [`adapter`] owns the route settings and the send: lettre's `AsyncSmtpConnection` driven one
//!   command at a time under one deadline (the route `timeout`, from connect to the reply after
//!   the final dot; lettre's own timeout covers only the connect).
//! - `wire` watches the socket beneath lettre to tell whether the final `.` of DATA has left:
//!   lettre's errors do not say, and the answer decides `Rejected` against
//!   `Ambiguous`.
//! - `classify` turns the step and that answer into a [`SendResult`](herald_provider::SendResult).
//! - [`compose`] builds the message and its stable Message-ID.
//! - [`fake`] (feature `fake`) is a scripted SMTP peer for fault tests, with a ledger.
//!
//! # Capabilities
//! | idempotency key | outcome query | payload limit |
//! |---|---|---|
//! | none | none | the server's (EHLO `SIZE`); not declared |
//!
//! SMTP (RFC 5321) has neither an idempotency key nor a way to ask a server what became of a
//! message. What a resend carries instead is the Message-ID `<{notification_id}@herald.invalid>`
//! ([`message_id`]), identical on every attempt and written into each result's evidence, so
//! that receivers can drop a duplicate and a person can search the server's logs for it. The
//! size limit is per server and per session; an oversize message is refused with `552`
//! (`Rejected`, permanent).
//!
//! # Classification
//! | where the exchange ended | result | `Evidence::stage` |
//! |---|---|---|
//! | message cannot be built (bad recipient, no body, not email, id unusable as Message-ID) | `Rejected`, permanent | `compose` |
//! | DNS / TCP connect fails or is refused, or the deadline passes while connecting | `Rejected`, transient | `connect` |
//! | implicit-TLS handshake fails (including certificate verification) | `Rejected`, transient | `tls` |
//! | `4yz` reply to the greeting, EHLO, STARTTLS, AUTH, MAIL FROM, RCPT TO or DATA | `Rejected`, transient | `greeting` … `data` |
//! | `5yz` reply at any of those (AUTH `535 5.7.8` included) | `Rejected`, permanent | same |
//! | lettre refuses before sending (no common AUTH mechanism, STARTTLS not offered, SMTPUTF8 or 8BITMIME needed but not offered) | `Rejected`, permanent | that step |
//! | connection lost, TLS failure or unreadable reply before the final dot left; deadline passes there | `Rejected`, transient | that step, or `data_content` |
//! | `2yz` reply to the final dot | `Accepted`, `provider_ref` = the reply text (the queue id) | `after_data` |
//! | `4yz` / `5yz` reply to the final dot | `Rejected`, transient / permanent | `after_data` |
//! | connection lost, unreadable or `3yz` reply, or deadline passes after the final dot left | `Ambiguous` | `after_data` |
//!
//! Every reply's code is `Evidence::status` and its RFC 3463 enhanced status code (`5.7.8`)
//! `Evidence::vendor_code`. SMTP has no `Retry-After`: `retry_after` is always `None`.
//!
//! Decisions where the standards leave room (each errs towards "may have been processed"):
//! - "After the final dot left" means lettre flushed the whole content and the dot to the
//!   socket and started reading the reply. The kernel may still hold the bytes, or the server
//!   may have died before reading them: both are `Ambiguous`, as a client cannot tell them from
//!   a server that queued the message and lost the connection (RFC 1047, RFC 5321 §4.5.3.2.6).
//!   A failure while the content is still being written (the kernel refused bytes, or the
//!   deadline passed with bytes unflushed) is `Rejected`: the dot is the last thing written,
//!   so the server cannot have seen the end of the message.
//! - TLS failures, STARTTLS ones included, are transient: a retry sends nothing twice, and a
//!   certificate renewal or network fault may clear them. Missing server features are
//!   permanent, as every retry meets the same server.
//! - The greeting and EHLO are read by lettre in one call; the stage is `greeting` if the
//!   client had written nothing yet, else `ehlo`.
//! - lettre sends QUIT itself after a failed EHLO or STARTTLS and waits for its reply; a server
//!   that never answers that QUIT makes the send end on the deadline as a transient rejection
//!   at that step, even if its EHLO reply was a `5yz`.
//!
//! Credentials go only over TLS (or to a loopback host); certificate verification is never
//! switched off — a private CA is added with `extra_root_certificate_pem`. The password never
//! appears in evidence, errors or `Debug` output.
#![forbid(unsafe_code)]

pub mod adapter;
mod classify;
pub mod compose;
#[cfg(feature = "fake")]
pub mod fake;
mod settings;
mod wire;

pub use adapter::{SmtpAdapter, SmtpError, SmtpRoute, Tls};
pub use compose::{MESSAGE_ID_DOMAIN, message_id};
pub use settings::Settings;
