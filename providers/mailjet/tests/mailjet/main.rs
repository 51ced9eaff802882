//! Herald's Mailjet adapter against the fake Mailjet, over real loopback HTTP.

mod faults;
mod query;
mod secrets;
mod send;
mod support;
