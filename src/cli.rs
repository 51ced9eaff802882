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
}
