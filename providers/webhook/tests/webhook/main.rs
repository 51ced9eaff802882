//! `herald-webhook` against its fake receiver over real loopback HTTP: the request on the wire,
//! the classification of every answer and fault, the SSRF guard, and the route's own checks.

mod answers;
mod faults;
mod route;
mod signing;
mod ssrf;
mod support;
