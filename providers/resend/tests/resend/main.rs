//! Herald's Resend adapter against the fake Resend, end to end over loopback HTTP: no mocks,
//! the real fake on 127.0.0.1:0 and the real adapter, with the fake's ledger as the judge; and
//! against herald's conformance kit (`conformance`), which plays Resend's documented answers
//! and every transport fault from a scripted server. `callbacks` reads webhooks signed by Svix's
//! own library, which delivers Resend's webhooks.

mod answers;
mod callbacks;
mod conformance;
mod faults;
mod secrets;
mod support;
