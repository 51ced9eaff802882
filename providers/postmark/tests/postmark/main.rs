//! Herald's Postmark adapter against the fake Postmark, end to end over loopback HTTP: no mocks,
//! the real fake on 127.0.0.1:0 and the real adapter, with the fake's ledger as the judge; and
//! against herald's conformance kit (`conformance`), which plays Postmark's documented answers,
//! of the send and of the look-up, and every transport fault from a scripted server.
//! `callbacks` reads webhooks posted with Basic credentials built by Python's own `base64`.

mod answers;
mod callbacks;
mod conformance;
mod faults;
mod secrets;
mod support;
