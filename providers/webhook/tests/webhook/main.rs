//! `herald-webhook` against its fake receiver over real loopback HTTP: the request on the wire,
//! the classification of every answer, the SSRF guard, and the route's own checks; and against
//! herald's conformance kit (`conformance`), which plays every answer Standard Webhooks gives a
//! meaning to and every transport fault from a scripted server.

mod answers;
mod conformance;
mod faults;
mod route;
mod signing;
mod ssrf;
mod support;
