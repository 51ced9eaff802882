//! The start-up check, also run alone by `herald check-config`: everything that can be known
//! about a config before serving, reported all at once, each problem naming its key and where
//! its value came from.

use std::path::Path;
use std::time::Duration;

use crate::config::{Config, ConfigProblems, SinkConfig};

/// How long `--connect` waits for each host.
const REACH_TIMEOUT: Duration = Duration::from_secs(5);

/// Reads the config and checks it: every problem of both steps in one report, so that one run
/// lists everything (a broken `[channels]` entry and a missing secret alike).
pub async fn load(
    path: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
    connect: bool,
) -> Result<Config, ConfigProblems> {
    let (config, mut problems) = Config::read(path, env)?;
    if let Err(ConfigProblems(more)) = check(&config, connect).await {
        problems.extend(more);
    }
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigProblems(problems))
    }
}

/// Resolves every secret, checks the tokens, builds every route's adapter and every webhook
/// sink as `serve` would (sending nothing, starting nothing). With `connect`, also reaches the
/// database, each vendor's host, each NATS server and webhook sink (a connection, no request),
/// and asks each vendor that can to confirm what its route declares.
pub async fn check(config: &Config, connect: bool) -> Result<(), ConfigProblems> {
    let mut problems = Vec::new();
    // Parts whose secrets are missing are not built: their one problem is already named.
    let unresolved = resolve_secrets(config, &mut problems);
    let blocked = |prefix: &str| {
        unresolved.iter().any(|key| {
            key.strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(['.', '[']))
        })
    };
    if !blocked("tokens")
        && let Err(err) = crate::app::tokens(config)
    {
        problems.push(format!("{err:#}"));
    }
    if !blocked("unsubscribe")
        && let Err(err) = crate::app::categories(config)
    {
        problems.push(format!("{err:#}"));
    }
    for (name, route) in &config.routes {
        let key = format!("routes.{name}");
        if blocked(&key) {
            continue;
        }
        if let Err(err) = crate::dispatch::check_route(name, route, connect).await {
            // The error names the route, and the key inside it where one is at fault.
            problems.push(format!("{err:#} ({})", config.origins.of(&key)));
            continue;
        }
        if connect
            && let Some(endpoint) = route.provider.settings().endpoint()
            && let Err(err) = reach(&endpoint).await
        {
            problems.push(format!("{key}: cannot reach {endpoint}: {err}"));
        }
    }
    for (name, sink) in &config.sinks {
        let key = format!("sinks.{name}");
        if blocked(&key) {
            continue;
        }
        if let Err(err) = crate::relay::check_sink(name, sink).await {
            problems.push(format!("{key}: {err:#} ({})", config.origins.of(&key)));
        }
        let url = match sink {
            SinkConfig::Nats { url, .. } | SinkConfig::Webhook { url, .. } => Some(url),
            SinkConfig::Log { .. } => None,
        };
        if connect
            && let Some(url) = url
            && let Err(err) = reach_url(url, 4222).await
        {
            problems.push(format!("{key}.url: cannot reach {url}: {err}"));
        }
    }
    if connect {
        if let Some(nats) = &config.inbox.nats
            && let Err(err) = reach_url(&nats.url, 4222).await
        {
            problems.push(format!("inbox.nats.url: cannot reach {}: {err}", nats.url));
        }
        if let Err(err) = crate::store::reach(&config.database.url).await {
            problems.push(format!(
                "database.url: {err:#} ({})",
                config.origins.of("database.url")
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigProblems(problems))
    }
}

/// Resolves every secret the config names, adding a problem for each that does not resolve;
/// answers their keys.
fn resolve_secrets(config: &Config, problems: &mut Vec<String>) -> Vec<String> {
    let mut unresolved = Vec::new();
    for (key, source) in config.secrets() {
        // A literal cannot be missing; this check, run by `serve` too, is where it is warned of.
        if source.is_literal() {
            tracing::warn!(
                "{key} is written literally in the config; use {{ env = … }} or {{ file = … }} outside development"
            );
            continue;
        }
        if let Err(err) = source.resolve(&key) {
            problems.push(format!("{err:#} ({})", config.origins.of(&key)));
            unresolved.push(key);
        }
    }
    unresolved
}

/// Opens a TCP connection to `host:port` and closes it: the vendor sees a connection, no
/// request.
async fn reach(endpoint: &str) -> std::io::Result<()> {
    match tokio::time::timeout(REACH_TIMEOUT, tokio::net::TcpStream::connect(endpoint)).await {
        Ok(stream) => stream.map(drop),
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {} s", REACH_TIMEOUT.as_secs()),
        )),
    }
}

/// [`reach`] for a URL: `http(s)://` on its scheme's port, `nats://` on `default_port` unless
/// it names one (or a bare `host:port`).
async fn reach_url(url: &str, default_port: u16) -> std::io::Result<()> {
    let endpoint = match url::Url::parse(url) {
        Ok(parsed) if parsed.host_str().is_some() => format!(
            "{}:{}",
            parsed.host_str().unwrap_or_default(),
            parsed.port_or_known_default().unwrap_or(default_port)
        ),
        _ => url.to_owned(),
    };
    reach(&endpoint).await
}
