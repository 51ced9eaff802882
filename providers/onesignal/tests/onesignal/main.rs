//! Herald's OneSignal adapter against the fake OneSignal, end to end over loopback HTTP: no
//! mocks, the real fake on 127.0.0.1:0 and the real adapter, with the fake's ledger as the judge;
//! and against herald's conformance kit (`conformance`), which plays OneSignal's documented
//! answers and every transport fault from a scripted server.

mod answers;
mod conformance;
mod faults;
mod secrets;
mod support;
