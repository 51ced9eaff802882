use std::process::ExitCode;

use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use herald_provider::signature::SigningSecret;
use secrecy::{ExposeSecret, SecretString};
use tokio_util::sync::CancellationToken;

use herald::app::App;
use herald::cli::{Cli, Command, SandboxArgs};
use herald::config::Config;
use herald::{client, store, telemetry};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Held to the end of `main`: dropping it exports the spans still batched.
    let _telemetry = telemetry::init(cli.command.log_format());
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("herald: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    // One TLS provider for every client in the process (reqwest, sqlx, lettre, async-nats).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (command, args) = match cli.command {
        Command::Sandbox(args) => return sandbox(args).await,
        Command::Send(args) => return client::send(*args).await,
        Command::Cancel(args) => return client::cancel(args).await,
        Command::Status { id, api } => return client::status(&api, &id).await,
        Command::Review(command) => return client::review(command).await,
        Command::Routes(command) => return client::routes(command).await,
        Command::Bench(args) => return herald::bench::run(args).await,
        Command::Health(args) => return client::health(args).await,
        Command::Serve(args) => (Run::Serve, args),
        Command::Migrate(args) => (Run::Migrate, args),
        Command::Relay(args) => (Run::Relay, args),
        Command::CheckConfig { connect, config } => (Run::CheckConfig { connect }, config),
    };
    // What `check-config` checks, `serve` and `relay` check first: a config with five problems
    // names all five before anything starts. `migrate` needs only the database's URL.
    let path = args.config.as_deref();
    let config = match command {
        Run::Migrate => Config::load(path, std::env::vars())?,
        Run::CheckConfig { connect } => {
            herald::check::load(path, std::env::vars(), connect).await?
        }
        Run::Serve | Run::Relay => herald::check::load(path, std::env::vars(), false).await?,
    };
    match command {
        Run::CheckConfig { connect } => {
            let reached = if connect { "; every host answered" } else { "" };
            println!("config is valid{reached}");
            for (name, route) in &config.routes {
                for note in route.provider.settings().notes() {
                    println!("routes.{name}: {note}");
                }
            }
            Ok(())
        }
        Run::Serve => {
            let app = App::build(config).await?;
            if let Some(token) = &app.generated_dev_token {
                println!(
                    "development token (tenant `dev`, all scopes): {}",
                    token.expose_secret()
                );
            }
            let shutdown = CancellationToken::new();
            tokio::spawn(signal_shutdown(shutdown.clone()));
            app.run(shutdown).await
        }
        Run::Relay => {
            let shutdown = CancellationToken::new();
            tokio::spawn(signal_shutdown(shutdown.clone()));
            herald::app::relay(config, shutdown).await
        }
        Run::Migrate => {
            store::connect(&config.database.url, 1).await?;
            println!(
                "migrations applied to {}",
                store::redact_url(&config.database.url)
            );
            Ok(())
        }
    }
}

/// The commands that read the config.
#[derive(Clone, Copy)]
enum Run {
    Serve,
    Migrate,
    Relay,
    CheckConfig { connect: bool },
}

/// `herald sandbox`: the stand-in vendor on its own, until SIGINT or SIGTERM.
async fn sandbox(args: SandboxArgs) -> anyhow::Result<()> {
    let config = herald_sandbox::SandboxConfig {
        profile: args.profile.parse()?,
        idempotency_window: Duration::from_secs(args.window_seconds),
        visibility_lag: Duration::from_millis(args.lag_ms),
        faults: herald_sandbox::parse_faults(&args.faults)?,
        delay: Duration::from_millis(args.delay_ms),
        callback_secret: args
            .callback_secret
            .map(|secret| SigningSecret::parse(&SecretString::from(secret)))
            .transpose()
            .context("HERALD_SANDBOX_CALLBACK_SECRET")?,
        callbacks: args.callback_url.map(|url| herald_sandbox::CallbackTarget {
            url,
            delay_ms: args.callback_delay_ms,
            duplicates: args.callback_duplicates,
            reorder: args.callback_reorder,
        }),
        history: args.history,
        ..herald_sandbox::SandboxConfig::default()
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    println!(
        "sandbox vendor ({}) on http://{}; ledger at /ledger",
        args.profile,
        listener.local_addr()?
    );
    let shutdown = CancellationToken::new();
    tokio::spawn(signal_shutdown(shutdown.clone()));
    herald_sandbox::serve(listener, config, shutdown.cancelled_owned()).await?;
    Ok(())
}

/// Cancels `token` on SIGINT or SIGTERM.
async fn signal_shutdown(token: CancellationToken) {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler at start-up");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    token.cancel();
}
