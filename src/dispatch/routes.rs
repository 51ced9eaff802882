//! Routes at run time: each configured route's adapter, limits and concurrency. This is the one
//! place that names vendors: adding one is a crate in `providers/` and an arm here.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use herald_provider::Adapter;
use herald_sandbox::{SandboxAdapter, SandboxConfig, SandboxHandle, SandboxRoute};
use tokio::sync::Semaphore;

use super::Settings;
use super::policy::Limits;
use crate::config::{Config, ProviderConfig, RouteConfig};

pub struct Route {
    pub name: String,
    pub adapter: Arc<dyn Adapter>,
    /// Bounds this route's calls in flight, so that one slow vendor cannot take every worker.
    pub permits: Semaphore,
    pub timeout: Duration,
    max_attempts: u32,
    max_age: Duration,
}

impl Route {
    pub fn limits(&self, settings: &Settings) -> Limits {
        Limits {
            max_attempts: self.max_attempts,
            max_age: self.max_age,
            retry_base: settings.retry_base,
            retry_max: settings.retry_max,
            timeout: self.timeout,
        }
    }
}

#[derive(Default)]
pub struct Routes(HashMap<String, Route>);

impl Routes {
    pub fn get(&self, name: &str) -> Option<&Route> {
        self.0.get(name)
    }

    pub fn longest_timeout(&self) -> Duration {
        self.0.values().map(|r| r.timeout).max().unwrap_or_default()
    }
}

/// Builds every configured route. Sandbox routes without a `base_url` get a sandbox vendor of
/// their own in this process; the handles keep them running and must outlive the dispatcher.
pub async fn build_routes(config: &Config) -> anyhow::Result<(Routes, Vec<SandboxHandle>)> {
    let mut routes = HashMap::new();
    let mut sandboxes = Vec::new();
    for (name, route) in &config.routes {
        let adapter = adapter(name, route, &mut sandboxes)
            .await
            .with_context(|| format!("route `{name}`"))?;
        routes.insert(
            name.clone(),
            Route {
                name: name.clone(),
                adapter,
                permits: Semaphore::new(route.concurrency),
                timeout: route.timeout,
                max_attempts: route.max_attempts,
                max_age: route.max_age,
            },
        );
    }
    Ok((Routes(routes), sandboxes))
}

async fn adapter(
    name: &str,
    route: &RouteConfig,
    sandboxes: &mut Vec<SandboxHandle>,
) -> anyhow::Result<Arc<dyn Adapter>> {
    match &route.provider {
        ProviderConfig::Sandbox {
            base_url,
            profile,
            idempotency_window_seconds,
            visibility_lag_ms,
        } => {
            let profile = herald_sandbox::Profile::from_str(profile)?;
            let idempotency_window = Duration::from_secs(*idempotency_window_seconds);
            let visibility_lag = Duration::from_millis(*visibility_lag_ms);
            let base_url = match base_url {
                Some(url) => url.clone(),
                None => {
                    let handle = herald_sandbox::spawn(SandboxConfig {
                        profile,
                        idempotency_window,
                        visibility_lag,
                        ..SandboxConfig::default()
                    })
                    .await
                    .context("cannot start the built-in sandbox vendor")?;
                    let url = handle.base_url();
                    tracing::info!(route = name, %url, profile = profile.as_str(), "built-in sandbox vendor started");
                    sandboxes.push(handle);
                    url
                }
            };
            let adapter = SandboxAdapter::try_new(SandboxRoute {
                base_url,
                profile,
                idempotency_window,
                visibility_lag,
                timeout: route.timeout,
            })?;
            Ok(Arc::new(adapter))
        }
    }
}
