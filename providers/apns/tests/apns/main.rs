//! Herald's APNs adapter against the fake APNs, end to end over HTTP/2 and TLS on loopback: no
//! mocks, the real fake on 127.0.0.1:0 with its test CA and the real adapter, with the fake's
//! ledger as the judge (`answers`, `faults`, `secrets`); against herald's conformance kit
//! (`conformance`), which plays APNs' documented answers and every transport fault from a
//! scripted HTTP/1.1 server; and the provider token checked by PyJWT, a client nobody here
//! wrote (`interop`).

mod answers;
mod conformance;
mod faults;
mod interop;
mod secrets;
mod support;
