//! Routes at run time: each configured route's adapter, limits, pace and concurrency, and the
//! one way to call a route's vendor ([`Route::send`], [`Route::query`]). [`build_routes`] turns
//! each route's configuration into its vendor's adapter.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use herald_provider::callback::Callbacks;
use herald_provider::settings::RouteContext;
use herald_provider::{
    Adapter, Capabilities, Evidence, Message, ProviderKey, QueryResult, Request, SendResult,
};
use tokio::sync::Semaphore;

use super::circuit::{Circuit, CircuitState};
use super::pacing::Pace;
use super::policy::Limits;
use crate::config::{Config, RouteConfig};
use crate::domain::AttemptResult;

pub struct Route {
    name: String,
    /// The `provider = "…"` of its configuration.
    provider: &'static str,
    adapter: Arc<dyn Adapter>,
    /// Where its notifications go when it is known not to have taken them.
    fallback: Option<String>,
    circuit: Circuit,
    /// Bounds this route's calls in flight, so that one slow vendor cannot take every worker.
    permits: Semaphore,
    concurrency: usize,
    /// Notifications of this route claimed by this process and not yet recorded.
    pending: Arc<AtomicUsize>,
    pace: Pace,
    timeout: Duration,
    limits: Limits,
}

/// The longest a claimed send waits for its route's pace: far inside any lease (which outlasts
/// the route's timeout by at least 2 s), so a held send is never mistaken for a crashed one.
const PACE_PATIENCE: Duration = Duration::from_secs(1);

impl Route {
    /// Whether new claims should leave this route out: it has as much work as it can run, or
    /// it must not call its vendor yet (an open circuit only where there is no fallback to
    /// hand its notifications to).
    pub fn saturated(&self, now: Instant) -> bool {
        self.pending.load(Ordering::Relaxed) >= self.concurrency
            || !self.pace.wait(now).is_zero()
            || (self.fallback.is_none() && self.circuit.resting(now).is_some())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn provider(&self) -> &'static str {
        self.provider
    }

    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// Calls per second and burst of its own limit, and how much longer a vendor's "slow down"
    /// pauses it.
    pub fn pace(&self, now: Instant) -> (Option<(f64, u32)>, Duration) {
        (self.pace.limit(), self.pace.paused_for(now))
    }

    pub fn circuit(&self) -> (CircuitState, Option<u32>, Duration) {
        self.circuit.status()
    }

    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn capabilities(&self) -> &Capabilities {
        self.adapter.capabilities()
    }

    /// Its reader of vendor callbacks, if it takes them.
    pub fn callbacks(&self) -> Option<&dyn Callbacks> {
        self.adapter.callbacks()
    }

    /// Whether `result` refused the recipient because they asked the vendor to stop.
    pub fn unsubscribed(&self, result: &SendResult) -> bool {
        matches!(result, SendResult::Rejected { permanent: true, evidence, .. }
            if self.adapter.unsubscribed(evidence))
    }

    /// The request this route would send for `message`; see [`Adapter::prepare`].
    pub fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        self.adapter.prepare(message, key)
    }
    /// One provider call, within the route's concurrency limit and timeout. A timeout here is
    /// ambiguous: the adapter's own should have fired first, so the request may be out.
    pub async fn send(
        &self,
        request: &Result<Request, Evidence>,
        message: &Message,
        key: &ProviderKey,
    ) -> SendResult {
        let route = self;
        let request = match request {
            Ok(request) => request,
            Err(evidence) => return SendResult::permanent(evidence.clone()),
        };
        // A resting route is refused before it waits for a permit or its pace: its work goes
        // to the fallback at once.
        if let Some(wait) = route.circuit.resting(Instant::now()) {
            return route.circuit_open(wait);
        }
        let _permit = route
            .permits
            .acquire()
            .await
            .expect("route semaphores are never closed");
        if let Err(wait) = route.pace.take(PACE_PATIENCE).await {
            return route.not_called(
                "paced",
                format!(
                    "not sent: the route is paused or at its rate limit for {} ms more",
                    wait.as_millis()
                ),
                wait,
            );
        }
        if let Err(wait) = route.circuit.admit(Instant::now()) {
            return route.circuit_open(wait);
        }
        let started = Instant::now();
        let result = match tokio::time::timeout(
            route.timeout + Duration::from_secs(1),
            route.adapter.send_prepared(request, message, key),
        )
        .await
        {
            Ok(result) => bounded_pause(result),
            Err(_) => SendResult::Ambiguous {
                evidence: Evidence::new(
                    "awaiting_response",
                    "the adapter did not return within the route's timeout",
                ),
            },
        };
        route.circuit.observe(&result, Instant::now());
        let label = match &result {
            SendResult::Accepted { .. } => AttemptResult::Accepted,
            SendResult::Rejected { .. } | SendResult::KeyReused { .. } => AttemptResult::Rejected,
            SendResult::Ambiguous { .. } => AttemptResult::Ambiguous,
        };
        let reason = result.reason();
        metrics::counter!("herald_attempts_total", "route" => route.name.clone(), "result" => label.as_str(), "reason" => reason).increment(1);
        if label != AttemptResult::Accepted {
            let evidence = result.evidence();
            tracing::warn!(
                result = label.as_str(),
                reason,
                stage = %evidence.stage,
                status = ?evidence.status,
                detail = %evidence.detail,
                "attempt not accepted"
            );
        }
        metrics::histogram!("herald_send_seconds", "route" => route.name.clone())
            .record(started.elapsed().as_secs_f64());
        if let SendResult::Rejected {
            permanent: false,
            retry_after: Some(wait),
            ..
        } = &result
        {
            // The vendor asked for a pause: it holds for the whole route, not this message only.
            route.pace.pause_until(std::time::Instant::now() + *wait);
        }
        result
    }

    /// Not sent: the route's recent sends failed, and it rests until its probe.
    fn circuit_open(&self, wait: Duration) -> SendResult {
        self.not_called(
            "circuit_open",
            format!(
                "not sent: the route's circuit is open after failures in a row, for {} ms more",
                wait.as_millis()
            ),
            wait,
        )
    }

    /// herald held the send back itself (its `stage` is also the attempt's metric reason): a
    /// rejection it can prove, due again after `wait`.
    fn not_called(&self, stage: &'static str, detail: String, wait: Duration) -> SendResult {
        metrics::counter!("herald_attempts_total", "route" => self.name.clone(), "result" => AttemptResult::Rejected.as_str(), "reason" => stage).increment(1);
        SendResult::Rejected {
            permanent: false,
            retry_after: Some(wait),
            evidence: Evidence::new(stage, detail),
        }
    }

    /// The route's outcome query about the stored request.
    pub async fn query(
        &self,
        request: &Result<Request, Evidence>,
        message: &Message,
        key: &ProviderKey,
    ) -> QueryResult {
        match request {
            Ok(request) => self.adapter.query_prepared(request, message, key).await,
            Err(evidence) => QueryResult::Unsupported {
                evidence: evidence.clone(),
            },
        }
    }
}

#[derive(Default)]
pub struct Routes(HashMap<String, Route>);

impl Routes {
    pub fn get(&self, name: &str) -> Option<&Route> {
        self.0.get(name)
    }

    /// Counts a claimed notification against its route until the guard is dropped.
    pub fn pending(&self, route: &str) -> Option<PendingGuard> {
        self.0.get(route).map(|r| {
            r.pending.fetch_add(1, Ordering::Relaxed);
            PendingGuard(r.pending.clone())
        })
    }

    /// The routes new claims may take work for: every configured route but the saturated ones
    /// (see [`Route::saturated`]).
    pub fn ready(&self) -> Vec<String> {
        let now = Instant::now();
        self.0
            .values()
            .filter(|r| !r.saturated(now))
            .map(|r| r.name.clone())
            .collect()
    }

    /// The provider request `n`'s route would send for it; `None` where the route is not
    /// configured here or cannot send the message (the send then says why).
    pub fn prepare(&self, n: &crate::domain::Notification) -> Option<Request> {
        let route = self.0.get(&n.route)?;
        let key = ProviderKey::new(n.provider_key());
        route.prepare(&super::message_of(n), &key).ok()
    }

    pub fn names(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }

    pub fn all(&self) -> impl Iterator<Item = &Route> {
        self.0.values()
    }

    pub fn count(&self) -> usize {
        self.0.len()
    }

    pub fn longest_timeout(&self) -> Duration {
        self.0.values().map(|r| r.timeout).max().unwrap_or_default()
    }
}

pub struct PendingGuard(Arc<AtomicUsize>);

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The longest wait a vendor's answer can impose on a route: longer than a notification's
/// default life, and short enough that a `Retry-After` of years cannot overflow a clock.
const LONGEST_VENDOR_PAUSE: Duration = Duration::from_secs(24 * 3600);

/// `result` with its `retry_after`, if any, cut to [`LONGEST_VENDOR_PAUSE`]: the vendor, or
/// any webhook receiver, chooses that number.
fn bounded_pause(result: SendResult) -> SendResult {
    match result {
        SendResult::Rejected {
            permanent,
            retry_after: Some(wait),
            evidence,
        } => SendResult::Rejected {
            permanent,
            retry_after: Some(wait.min(LONGEST_VENDOR_PAUSE)),
            evidence,
        },
        other => other,
    }
}

/// Builds every configured route. A sandbox route without a `base_url` starts a sandbox vendor
/// of its own in this process, which runs as long as the route's adapter.
pub async fn build_routes(config: &Config) -> anyhow::Result<Routes> {
    let mut routes = HashMap::new();
    for (name, route) in &config.routes {
        let adapter = adapter(name, route).await?;
        // Reconciliation trusts what a route declares; a vendor that says otherwise is refused
        // here rather than settled against.
        adapter
            .verify()
            .await
            .map_err(|mismatch| anyhow::anyhow!("routes.{name}: {mismatch}"))?;
        routes.insert(
            name.clone(),
            Route {
                name: name.clone(),
                provider: route.provider.name(),
                adapter,
                fallback: route.fallback.clone(),
                circuit: Circuit::new(
                    name,
                    // 0 turns it off; a webhook route's sends go to many receivers, and one
                    // receiver's failures say nothing of the others'.
                    Some(route.circuit_failures)
                        .filter(|n| *n > 0 && route.provider.settings().one_destination()),
                    route.circuit_open,
                    route.timeout + Duration::from_secs(2),
                ),
                permits: Semaphore::new(route.concurrency),
                concurrency: route.concurrency,
                pending: Arc::default(),
                pace: Pace::new(route.rate_limit_per_second, route.burst),
                timeout: route.timeout,
                limits: Limits {
                    max_attempts: route.max_attempts,
                    max_age: route.max_age,
                    retry_base: Duration::from_millis(config.dispatch.retry_base_ms),
                    retry_max: Duration::from_secs(config.dispatch.retry_max_seconds),
                    timeout: route.timeout,
                },
            },
        );
    }
    Ok(Routes(routes))
}

/// Builds route `name`'s adapter as `serve` would, without sending anything; with `connect`,
/// also asks the vendor to confirm what the route declares. A vendor the route would start in
/// this process (the built-in sandbox) is not started: there is nothing to check until it is.
pub async fn check_route(name: &str, route: &RouteConfig, connect: bool) -> anyhow::Result<()> {
    if route.provider.settings().starts_a_vendor() {
        return Ok(());
    }
    let adapter = adapter(name, route).await?;
    if connect {
        adapter
            .verify()
            .await
            .map_err(|mismatch| anyhow::anyhow!("routes.{name}: {mismatch}"))?;
    }
    Ok(())
}

/// The route's adapter, built by its vendor's settings; an error names the route, and the key
/// at fault where there is one.
async fn adapter(name: &str, route: &RouteConfig) -> anyhow::Result<Arc<dyn Adapter>> {
    let context = RouteContext {
        name,
        timeout: route.timeout,
    };
    route
        .provider
        .settings()
        .adapter(&context)
        .await
        .map_err(|err| match err.key.as_str() {
            "" => anyhow::anyhow!("routes.{name}: {}", err.problem),
            key => anyhow::anyhow!("routes.{name}.{key}: {}", err.problem),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vendors_pause_of_years_is_cut_to_a_day() {
        let years = SendResult::transient(
            Evidence::new("response", "429").with_status(429),
            Some(Duration::from_secs(999_999_999_999)),
        );
        match bounded_pause(years) {
            SendResult::Rejected { retry_after, .. } => {
                assert_eq!(retry_after, Some(LONGEST_VENDOR_PAUSE))
            }
            other => panic!("the kind changed: {other:?}"),
        }
        let short = SendResult::transient(
            Evidence::new("response", "429"),
            Some(Duration::from_secs(7)),
        );
        assert_eq!(bounded_pause(short.clone()), short);
    }
}
