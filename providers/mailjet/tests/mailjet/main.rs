//! Herald's Mailjet adapter against the fake Mailjet, over real loopback HTTP; and against
//! herald's conformance kit (`conformance`), which plays Mailjet's documented answers and every
//! transport fault from a scripted server. `callbacks` reads Event API callbacks.

mod callbacks;
mod conformance;
mod faults;
mod query;
mod secrets;
mod send;
mod support;
