//! The NATS connection the relay's sink and the inbox each make.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

/// Connects to NATS in the background: returns at once, even while the server is down.
pub async fn connect(
    url: &str,
    credentials: Option<&Path>,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<async_nats::Client> {
    let mut options = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(timeout)
        .retry_on_initial_connect();
    if let Some(path) = credentials {
        options = options
            .credentials_file(path)
            .await
            .with_context(|| format!("cannot read NATS credentials {}", path.display()))?;
    }
    options
        .connect(url)
        .await
        .with_context(|| format!("cannot connect to NATS at {url}"))
}
