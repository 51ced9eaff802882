//! Herald's Slack adapter against the fake Slack, end to end over loopback HTTP: no mocks, the
//! real fake on 127.0.0.1:0 and the real adapter, with the fake's ledger as the judge; against
//! herald's conformance kit (`conformance`), which plays Slack's documented answers, of the post
//! and of the history look-up, and every transport fault from a scripted server; and against
//! Slack's own Python SDK (`interop`), which proves that the fake speaks Slack's Web API as
//! Slack's client does.

mod answers;
mod conformance;
mod faults;
mod interop;
mod lookup;
mod paging;
mod secrets;
mod settings;
mod support;
