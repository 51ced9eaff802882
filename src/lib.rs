//! herald: a notification dispatcher that never claims more than it knows.
//!
//! - [`domain`]: states, certainty, delivery policy, parsed values (no I/O).
//! - [`config`]: `herald.toml`, environment overrides, defaults, secrets.
//! - [`store`]: the only place with SQL; SQLite and PostgreSQL behind one interface.
//! - [`dispatch`]: claim → send → record, reconciliation, the pure retry and settlement policy.
//! - [`api`]: the HTTP API (axum), problem+json errors, auth and tenants.
//! - [`relay`]: publishes the outbox to the configured sinks (NATS JetStream, webhooks, a log).
//! - [`inbox`]: turns upstream CloudEvents (HTTP or NATS) into notifications, once each.
//! - [`app`]: builds the whole service from a config and runs it until shutdown.
//! - [`cli`]: the command line.
//! - [`telemetry`]: logs and metrics.
#![forbid(unsafe_code)]

pub mod api;
pub mod app;
pub mod cli;
pub mod config;
pub mod dispatch;
pub mod domain;
pub mod inbox;
pub mod relay;
pub mod store;
pub mod telemetry;
