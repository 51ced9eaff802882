//! The command line. Exit codes: 0 ok, 2 usage (clap), 1 anything else.

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
    #[command(subcommand)]
    pub command: Command,
}

/// For the commands that read the config: where it is, and how to log.
#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// herald.toml; without one, herald runs on SQLite with the built-in sandbox route.
    #[arg(long, env = "HERALD_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub logs: LogArgs,
}

/// For the commands that log as they run.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// `text` for a person, `json` (one object per line) for a log collector.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the API, the dispatcher and the relay in one process.
    Serve(ConfigArgs),
    /// Apply database migrations and exit.
    Migrate(ConfigArgs),
    /// Check the config without serving: every problem at once, each with its key and where
    /// its value came from. Exit 0 when there is none, 1 otherwise.
    CheckConfig {
        /// Also reach the database, each vendor's host, each NATS server and each webhook sink
        /// (a connection, nothing sent).
        #[arg(long)]
        connect: bool,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Run the outbox relay alone: publish events to the configured sinks.
    Relay(ConfigArgs),
    /// Ask a running herald whether it is ready (`GET /readyz`), for a container's health
    /// check: exit 0 when it answers 2xx, 1 otherwise.
    Health(HealthArgs),
    /// Run a stand-in vendor for development and tests, with a ledger of what it delivered.
    Sandbox(SandboxArgs),
    /// Enqueue one notification through the API (HERALD_URL, HERALD_TOKEN).
    // Boxed: its many flags would size every other command.
    Send(Box<SendArgs>),
    /// Cancel what is still queued: one notification (ID), or every one under a
    /// `--cancellation-key`, or the one enqueued under an `--idempotency-key`.
    Cancel(CancelArgs),
    /// One notification and its timeline: attempts, evidence, settlements, resolutions.
    Status {
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// The on-call review queue: list, show, resolve, requery.
    #[command(subcommand)]
    Review(ReviewCommand),
    /// The routes: how each stands, and an operator's pause and resume of one.
    #[command(subcommand)]
    Routes(RoutesCommand),
    /// Measure enqueue and delivery through `herald serve` child processes with the sandbox
    /// vendor; progress on stderr, a JSON summary on stdout.
    Bench(BenchArgs),
}

impl Command {
    /// How this command logs: the API client's commands print their answers and log nothing
    /// of their own.
    pub fn log_format(&self) -> LogFormat {
        match self {
            Command::Serve(args) | Command::Migrate(args) | Command::Relay(args) => {
                args.logs.log_format
            }
            Command::CheckConfig { config, .. } => config.logs.log_format,
            Command::Health(args) => args.config.logs.log_format,
            Command::Sandbox(args) => args.logs.log_format,
            Command::Bench(args) => args.logs.log_format,
            Command::Send(_)
            | Command::Cancel(_)
            | Command::Status { .. }
            | Command::Review(_)
            | Command::Routes(_) => LogFormat::Text,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// The herald to ask, e.g. `http://127.0.0.1:8080`; by default the `server.listen` address
    /// of the config and environment (`HERALD_SERVER__LISTEN`), a wildcard one (`0.0.0.0`,
    /// `[::]`) asked on loopback. A minimal image has no curl: this is its probe.
    #[arg(long)]
    pub url: Option<String>,
    /// How long to wait for the answer.
    #[arg(long, default_value_t = 5)]
    pub timeout_seconds: u64,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// An empty PostgreSQL database (or a SQLite URL); default: a new SQLite file, removed after.
    #[arg(long)]
    pub database_url: Option<String>,
    /// Notifications in the single phase, and again in the batch phase.
    #[arg(long, default_value_t = 20_000)]
    pub notifications: usize,
    /// Connections sending single enqueues at once, and sends the sandbox route may have in
    /// flight in each dispatching process (its `concurrency`; the soak leaves the route's
    /// default, 16).
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Notifications per batch request (batches go over at most 4 connections: more would only
    /// queue behind the database's writers).
    #[arg(long, default_value_t = 1000)]
    pub batch_size: usize,
    /// How long the latency phase offers load.
    #[arg(long, default_value_t = 10)]
    pub latency_seconds: u64,
    /// The latency phase's rate, as a share of the sustained one (the slower of single
    /// enqueue and delivery).
    #[arg(long, default_value_t = 0.2)]
    pub latency_share: f64,
    /// `herald serve` processes dispatching on the one database in the drain and latency
    /// phases, started before the drain (more than one: PostgreSQL only).
    #[arg(long, default_value_t = 1)]
    pub processes: usize,
    /// Instead of the phases, a soak: the quick start's process (`serve` with the built-in
    /// sandbox vendor inside it) offered `--soak-rate` enqueues a second for this many
    /// seconds, its memory, enqueue p99 and backlog sampled every 30 s.
    #[arg(long)]
    pub soak: Option<u64>,
    /// The soak's offered enqueues per second.
    #[arg(long, default_value_t = 200)]
    pub soak_rate: u32,
    /// herald with traces on: every child exports its spans over OTLP/HTTP to a receiver in
    /// the bench that counts them and keeps nothing, and the summary says how many came.
    #[arg(long)]
    pub traces: bool,
    #[command(flatten)]
    pub logs: LogArgs,
}

/// Where the API is and who is asking: for `send`, `status` and `review`.
#[derive(Debug, clap::Args)]
pub struct ApiArgs {
    /// The API's base URL.
    #[arg(long, env = "HERALD_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// A bearer token (the dev token `serve` prints, or a configured one).
    #[arg(long, env = "HERALD_TOKEN", hide_env_values = true)]
    pub token: String,
}

#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// Retries with the same key are safe: the first answer comes back.
    #[arg(long)]
    pub idempotency_key: String,
    /// The whole request as a JSON file (`-` for stdin); flags below override its fields.
    #[arg(long)]
    pub file: Option<PathBuf>,
    #[arg(long)]
    pub channel: Option<String>,
    #[arg(long)]
    pub to: Option<String>,
    #[arg(long)]
    pub route: Option<String>,
    #[arg(long)]
    pub subject: Option<String>,
    #[arg(long)]
    pub text: Option<String>,
    #[arg(long)]
    pub html: Option<String>,
    #[arg(long)]
    pub template: Option<String>,
    /// The template's data, as a JSON object.
    #[arg(long)]
    pub data: Option<String>,
    /// `at_most_once` or `at_least_once`.
    #[arg(long)]
    pub delivery: Option<String>,
    /// A key shared with other notifications, to cancel them together (`herald cancel
    /// --cancellation-key`).
    #[arg(long)]
    pub cancellation_key: Option<String>,
    /// A configured category (e.g. `digest`).
    #[arg(long)]
    pub category: Option<String>,
    /// The template's locale (e.g. `fr-CA`, falling back to `fr`, then its default).
    #[arg(long)]
    pub locale: Option<String>,
    /// No attempt starts after this time (RFC 3339).
    #[arg(long, conflicts_with = "ttl_seconds")]
    pub expires_at: Option<String>,
    /// No attempt starts after this many seconds from now.
    #[arg(long)]
    pub ttl_seconds: Option<u64>,
    /// An email attachment, read from `PATH` and named by its file name; repeat for more. The
    /// type follows `;type=`, or is taken from the extension (pdf, png, jpg, gif, webp, ics,
    /// csv, txt, json).
    #[arg(long = "attach", value_name = "PATH[;type=MIME]")]
    pub attachments: Vec<String>,
    #[command(flatten)]
    pub api: ApiArgs,
}

#[derive(Debug, Subcommand)]
pub enum RoutesCommand {
    /// Each route the token's tenant may use: provider, channels, circuit, and any pause.
    List {
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Stop new sends on a route in every process (scope `operate`, of the tenant that operates
    /// the route); its work waits, queued, or goes to the route's fallback with `--to-fallback`.
    Pause {
        name: String,
        /// Why, for the audit trail.
        #[arg(long)]
        note: String,
        /// Send the route's work to its fallback meanwhile.
        #[arg(long)]
        to_fallback: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Let a paused route send again (scope `operate`, of the tenant that operates the route).
    Resume {
        name: String,
        /// Why, for the audit trail.
        #[arg(long)]
        note: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Debug, clap::Args)]
#[group(id = "which", required = true, multiple = false)]
pub struct CancelArgs {
    /// One notification's id.
    #[arg(group = "which")]
    pub id: Option<String>,
    /// Every notification enqueued with this cancellation key.
    #[arg(long, group = "which")]
    pub cancellation_key: Option<String>,
    /// The notification enqueued under this idempotency key.
    #[arg(long, group = "which")]
    pub idempotency_key: Option<String>,
    #[command(flatten)]
    pub api: ApiArgs,
}

#[derive(Debug, Subcommand)]
pub enum ReviewCommand {
    /// What needs a person, oldest first: by default everything that waits for one.
    List {
        /// `unknown`, `duplicate_possible`, `exhausted`, `contradicted` or `rejected` (permanent
        /// refusals, not listed by default), comma-separated.
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        route: Option<String>,
        /// Print the API's JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// One item: why it is in review, its timeline and evidence.
    Show {
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Resolve one item (ID), or many: `--filter … --dry-run` shows what would change and
    /// prints a preview, `--preview TOKEN` resolves exactly that.
    Resolve(ResolveArgs),
    /// Ask the route's outcome query again, now.
    Requery {
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Debug, clap::Args)]
pub struct ResolveArgs {
    /// The notification; omit it to resolve many (`--filter … --dry-run`, then `--preview`).
    pub id: Option<String>,
    /// `delivered`, `not_delivered` or `acknowledged` (with `--preview`: the previewed one, if
    /// given).
    #[arg(long, required_unless_present_any = ["preview", "items"])]
    pub outcome: Option<String>,
    /// After `not_delivered`: `resend`, or `close` (the item leaves review).
    #[arg(long)]
    pub then: Option<String>,
    /// What you know and how (required to resolve; optional on a dry run).
    #[arg(long, required_unless_present = "dry_run")]
    pub note: Option<String>,
    /// Resend a notification that failed for a permanent cause.
    #[arg(long)]
    pub force: bool,
    /// Select many: `reason=exhausted`, `route=mail`, `since=…`, `until=…` (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub filter: Vec<String>,
    /// Select many, each with its own outcome: a file (`-` for stdin) of lines `ID OUTCOME
    /// [THEN] [force]`, e.g. `0190… not_delivered resend`; blank lines and `#` comments skipped.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["id", "filter", "outcome", "then", "force", "max"])]
    pub items: Option<std::path::PathBuf>,
    /// With `--filter` or `--items`: list what would change and print a preview to confirm;
    /// change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Resolve exactly what a dry run listed, with its outcome: the preview it printed.
    #[arg(long, conflicts_with_all = ["id", "dry_run"])]
    pub preview: Option<String>,
    /// With `--filter`: at most this many.
    #[arg(long)]
    pub max: Option<u32>,
    #[command(flatten)]
    pub api: ApiArgs,
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
    /// Injected faults, comma-separated `<fault>:<probability>` or `<fault>:nth=<n>`, e.g.
    /// `accept_then_drop:0.05,delay:nth=7,rate_limited:0.1`. Sends: `accept_then_drop`
    /// (deliver, then close the connection unanswered), `delay` (deliver, then hold the answer
    /// for --delay-ms), `error_after_processing` (deliver, then answer 500),
    /// `unavailable_before_processing` (503, nothing delivered), `rate_limited` (429 with
    /// Retry-After, nothing delivered). Look-ups: `lookup_error` (500), `lookup_delay` (hold
    /// the answer for --delay-ms).
    #[arg(long, default_value = "")]
    pub faults: String,
    /// How long the `delay` fault holds its answer.
    #[arg(long, default_value_t = 30_000)]
    pub delay_ms: u64,
    /// How many recent deliveries and idempotency keys it keeps; older ones are forgotten and
    /// counted in the ledger, so its memory stays flat.
    #[arg(long, default_value_t = 10_000)]
    pub history: usize,
    /// herald's callback URL for the route that sends here, e.g.
    /// `http://127.0.0.1:8080/v1/callbacks/sandbox`: each delivery is then reported there,
    /// signed with the secret in HERALD_SANDBOX_CALLBACK_SECRET (`whsec_…`).
    #[arg(long, requires = "callback_secret")]
    pub callback_url: Option<String>,
    #[arg(
        long,
        env = "HERALD_SANDBOX_CALLBACK_SECRET",
        hide_env_values = true,
        hide = true
    )]
    pub callback_secret: Option<String>,
    /// How long after a delivery its reports start.
    #[arg(long, default_value_t = 0)]
    pub callback_delay_ms: u64,
    /// How many extra times each report is posted.
    #[arg(long, default_value_t = 0)]
    pub callback_duplicates: u32,
    /// Post each delivery's reports last first.
    #[arg(long)]
    pub callback_reorder: bool,
    #[command(flatten)]
    pub logs: LogArgs,
}
