//! Herald's Twilio adapter against the fake Twilio, over real loopback HTTP; and against
//! herald's conformance kit (`conformance`), which plays Twilio's documented answers and every
//! transport fault from a scripted server. `callbacks` reads status callbacks signed by
//! Twilio's own helper library.

mod callbacks;
mod conformance;
mod faults;
mod query;
mod secrets;
mod send;
mod support;
