//! Herald's FCM adapter against the fake FCM, end to end over loopback HTTP: no mocks, the real
//! fake on 127.0.0.1:0 (its token endpoint and `messages:send`) and the real adapter, with the
//! fake's ledger as the judge; and against herald's conformance kit (`conformance`), which
//! plays FCM's documented answers and every transport fault from a scripted server. `interop`
//! holds the assertion herald signs to Google's own google-auth, and the fake to it.

mod answers;
mod conformance;
mod faults;
mod interop;
mod scripted;
mod secrets;
mod support;
mod tokens;
