//! Routes at run time: each configured route's adapter, limits, pace and concurrency, and the
//! one way to call a route's vendor ([`Route::send`], [`Route::query`]). [`build_routes`] turns
//! each route's configuration into its vendor's adapter.
//!
//! A send is bounded by its attempt's send deadline: every wait before the request is written
//! (the route's permit, its pace, its circuit) ends by it, the last look at the clock comes
//! right before the call, and the call is cut at the route's timeout (and `CALL_SLACK`). A
//! send that cannot start in time is held, never sent late: the proof that another worker makes
//! of "not sent" rests on that deadline.
//!
//! One route and its call are `route`'s; this file holds them all, by name, and builds them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use time::OffsetDateTime;

use herald_provider::settings::RouteContext;
use herald_provider::{Adapter, Message, ProviderKey, Request, SendResult};
use tokio::sync::Semaphore;

use super::budget::Budget;
use super::circuit::Circuit;
use super::pacing::{HostPauses, Pace};
use super::policy::Limits;
use crate::config::{Config, RouteConfig};
use crate::domain::{AttemptResult, RoutePause};
use crate::store::RouteSlot;

mod route;

pub use route::{Route, Sent};

#[derive(Default)]
pub struct Routes(HashMap<String, Route>);

/// What a send with attachments holds at its peak, in expanded requests: the request, the
/// adapter's copy of it and its HTTP client's (measured: `tests/memory.rs`).
const SEND_FACTOR: usize = 3;

/// How often each process reads the operators' pauses: a pause holds every new call, in every
/// process, within this and one read of the database.
pub const PAUSE_READ_EVERY: Duration = Duration::from_millis(500);

/// The attempt result a vendor's answer is counted and traced as: a key the vendor says was
/// used with another request counts as a refusal (its reason, `key_reused`, tells it apart).
pub fn attempt_result(result: &SendResult) -> AttemptResult {
    match result {
        SendResult::Accepted { .. } => AttemptResult::Accepted,
        SendResult::Rejected { .. } | SendResult::KeyReused { .. } => AttemptResult::Rejected,
        SendResult::Ambiguous { .. } => AttemptResult::Ambiguous,
    }
}

impl Routes {
    /// Takes the operators' standing pauses as read from the database: whether a route was
    /// resumed, whose waiting work is then due.
    pub fn set_paused(&self, pauses: &[RoutePause]) -> bool {
        let mut resumed = false;
        for route in self.0.values() {
            let pause = pauses.iter().find(|p| p.route == route.name);
            route
                .to_fallback
                .store(pause.is_some_and(|p| p.to_fallback), Ordering::Relaxed);
            let was = route.paused.swap(pause.is_some(), Ordering::Relaxed);
            match (was, pause) {
                (false, Some(p)) => {
                    tracing::warn!(route = %route.name, by = %p.principal, note = %p.note, to_fallback = p.to_fallback, "route paused by an operator: no new sends on it")
                }
                (true, None) => {
                    tracing::info!(route = %route.name, "route resumed");
                    resumed = true;
                }
                _ => {}
            }
            metrics::gauge!("herald_route_paused", "route" => route.name.clone())
                .set(if pause.is_some() { 1.0 } else { 0.0 });
            let paused_for = pause.map_or(0.0, |p| {
                (OffsetDateTime::now_utc() - p.at).as_seconds_f64().max(0.0)
            });
            metrics::gauge!("herald_route_paused_seconds", "route" => route.name.clone())
                .set(paused_for);
        }
        resumed
    }

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

    /// The routes new claims may take work for under `lease`, and how much of each: every
    /// configured route but the saturated ones (see [`Route::saturated`]).
    pub fn slots(&self, lease: Duration) -> Vec<RouteSlot> {
        let now = Instant::now();
        self.0.values().filter_map(|r| r.slot(now, lease)).collect()
    }

    /// The routes this process has that `slots` leaves out: held back for now.
    pub fn held(&self, slots: &[RouteSlot]) -> Vec<String> {
        self.0
            .keys()
            .filter(|name| !slots.iter().any(|slot| &slot.route == *name))
            .cloned()
            .collect()
    }

    /// The provider request `n`'s route would send for it; `None` where the route is not
    /// configured here or cannot send the message (the send then says why).
    pub fn prepare(&self, n: &crate::domain::Notification) -> Option<Request> {
        let route = self.0.get(&n.route)?;
        let key = ProviderKey::new(n.provider_key());
        route.prepare(&Message::from(n), &key).ok()
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

    /// The sends the routes of `slots` together may have in flight.
    pub fn concurrency(&self, slots: &[RouteSlot]) -> usize {
        slots
            .iter()
            .filter_map(|slot| self.0.get(&slot.route))
            .map(|r| r.concurrency)
            .sum()
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

/// Builds every configured route, their sends sharing `budget` for attachment bytes. A sandbox
/// route without a `base_url` starts a sandbox vendor of its own in this process, which runs as
/// long as the route's adapter.
pub async fn build_routes(config: &Config, budget: Arc<Budget>) -> anyhow::Result<Routes> {
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
                budget: budget.clone(),
                concurrency: route.concurrency,
                pending: Arc::default(),
                paused: AtomicBool::new(false),
                to_fallback: AtomicBool::new(false),
                pace: Pace::new(route.rate_limit_per_second, route.burst),
                receivers: (!route.provider.settings().one_destination()).then(HostPauses::default),
                callback_pace: Pace::new(
                    Some(f64::from(route.callback_rate_limit_per_second)),
                    route.callback_burst,
                ),
                recent_reports: std::sync::Mutex::default(),
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

/// The longest visibility lag a route may declare: the look-up waits that long past a send, and
/// every proof of absence with it.
const MAX_VISIBILITY_LAG: Duration = Duration::from_secs(24 * 3600);

/// The longest idempotency window a route may declare (a vendor's own is a day or a few).
const MAX_IDEMPOTENCY_WINDOW: Duration = Duration::from_secs(400 * 24 * 3600);

/// The route's adapter, built by its vendor's settings; an error names the route, and the key
/// at fault where there is one. What it declares about its vendor's look-up and keys is added
/// to times, so it must be a time herald can count to.
async fn adapter(name: &str, route: &RouteConfig) -> anyhow::Result<Arc<dyn Adapter>> {
    let context = RouteContext {
        name,
        timeout: route.timeout,
    };
    let adapter = route
        .provider
        .settings()
        .adapter(&context)
        .await
        .map_err(|err| match err.key.as_str() {
            "" => anyhow::anyhow!("routes.{name}: {}", err.problem),
            key => anyhow::anyhow!("routes.{name}.{key}: {}", err.problem),
        })?;
    let capabilities = adapter.capabilities();
    if capabilities
        .query_visibility_lag
        .is_some_and(|lag| lag > MAX_VISIBILITY_LAG)
    {
        anyhow::bail!("routes.{name}.visibility_lag_ms: must be at most a day (86400000)");
    }
    if capabilities
        .idempotency_window
        .is_some_and(|window| window > MAX_IDEMPOTENCY_WINDOW)
    {
        anyhow::bail!("routes.{name}.idempotency_window_seconds: must be at most 400 days");
    }
    Ok(adapter)
}

#[cfg(test)]
mod tests {
    use herald_provider::Evidence;

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
