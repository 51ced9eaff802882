//! Herald's Telnyx adapter against the fake Telnyx, end to end over loopback HTTP: no mocks,
//! the real fake on 127.0.0.1:0 and the real adapter, with the fake's ledger as the judge; and
//! against herald's conformance kit (`conformance`). `callbacks` reads webhooks signed as Telnyx
//! signs them and checked by Telnyx's own Python library.

mod answers;
mod callbacks;
mod conformance;
mod secrets;
mod support;
