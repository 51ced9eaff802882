//! Herald's Twilio adapter against the fake Twilio, over real loopback HTTP.

mod faults;
mod query;
mod secrets;
mod send;
mod support;
