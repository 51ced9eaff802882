//! herald: a notification dispatcher that never claims more than it knows.
//!
//! - [`domain`]: states, certainty, delivery policy, parsed values (no I/O).
//! - [`config`]: `herald.toml`, environment overrides, defaults, secrets.
//! - [`store`]: the only place with SQL; SQLite and PostgreSQL behind one interface.
//! - [`dispatch`]: claim → send → record, reconciliation, the pure retry and settlement policy.
//! - [`review`]: on-call review's rules: why an item waits for a person, what a resolution changes.
//! - [`api`]: the HTTP API (axum), problem+json errors, auth and tenants.
//! - [`relay`]: publishes the outbox to the configured sinks (NATS JetStream, webhooks, a log).
//! - [`inbox`]: turns upstream CloudEvents (HTTP or NATS) into notifications, once each.
//! - [`nats`]: the NATS connection that the relay and the inbox share.
//! - [`retention`]: deletes expired idempotency keys and, when asked, old finished notifications.
//! - [`app`]: builds the whole service from a config and runs it until shutdown.
//! - [`server`]: serves HTTP with header timeouts, a connection cap and a shutdown deadline.
//! - [`cli`]: the command line; [`client`]: its API client (`send`, `status`, `review`, `routes`);
//!   [`check`]: `check-config`'s checks, with `--connect`'s reach of each dependency.
//! - [`bench`]: `herald bench`, herald measured as deployed (a child `serve`, the sandbox vendor).
//! - [`telemetry`]: logs and metrics; [`traces`]: OpenTelemetry export and W3C trace context.
#![forbid(unsafe_code)]

pub mod api;
pub mod app;
pub mod bench;
pub mod check;
pub mod cli;
pub mod client;
pub mod config;
pub mod dispatch;
pub mod domain;
pub mod inbox;
pub mod nats;
pub mod relay;
pub mod retention;
pub mod review;
pub mod server;
pub mod store;
pub mod telemetry;
pub mod traces;
