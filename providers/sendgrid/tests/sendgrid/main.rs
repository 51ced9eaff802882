//! Herald's SendGrid adapter against the fake SendGrid, end to end over loopback HTTP: no mocks,
//! the real fake on 127.0.0.1:0 and the real adapter, with the fake's ledger as the judge; and
//! against herald's conformance kit (`conformance`), with and without Email Activity.
//! `callbacks` reads Event Webhook batches signed as SendGrid signs them and checked by
//! SendGrid's own Python library.

mod answers;
mod callbacks;
mod conformance;
mod faults;
mod secrets;
mod support;
