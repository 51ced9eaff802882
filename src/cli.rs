//! The command line of CONTRACT.md. Exit codes: 0 ok, 2 usage (clap), 1 anything else.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::telemetry::LogFormat;

#[derive(Debug, Parser)]
#[command(
    name = "herald",
    version,
    about = "A notification dispatcher that never claims more than it knows"
)]
pub struct Cli {
    /// herald.toml; without one, herald runs on SQLite with the built-in sandbox route.
    #[arg(long, global = true, env = "HERALD_CONFIG")]
    pub config: Option<PathBuf>,
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the API, the dispatcher and the relay in one process.
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Run the outbox relay alone: publish events to the configured sinks.
    Relay,
    /// Run a stand-in vendor for development and tests, with a ledger of what it delivered.
    Sandbox(SandboxArgs),
}

#[derive(Debug, clap::Args)]
pub struct SandboxArgs {
    #[arg(long, default_value = "127.0.0.1:4010")]
    pub listen: std::net::SocketAddr,
    /// `idempotent` (dedup by Idempotency-Key), `queryable` (look-up by reference) or `plain`.
    #[arg(long, default_value = "idempotent")]
    pub profile: String,
    /// How long the idempotent profile remembers a key.
    #[arg(long, default_value_t = 86_400)]
    pub window_seconds: u64,
    /// How long a delivery takes to show up in the queryable profile's look-up.
    #[arg(long, default_value_t = 0)]
    pub lag_ms: u64,
    /// Injected faults, e.g. `accept_then_drop:0.05,delay:nth=7,rate_limited:0.1`.
    #[arg(long, default_value = "")]
    pub faults: String,
    /// How long the `delay` fault holds its answer.
    #[arg(long, default_value_t = 30_000)]
    pub delay_ms: u64,
}
