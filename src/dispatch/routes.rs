//! Routes at run time: each configured route's adapter, limits, pace and concurrency, and the
//! one way to call a route's vendor ([`Route::send`], [`Route::query`]). [`build_routes`] turns
//! each route's configuration into its vendor's adapter.
//!
//! A send is bounded by its attempt's send deadline: every wait before the request is written
//! (the route's permit, its pace, its circuit) ends by it, the last look at the clock comes
//! right before the call, and the call is cut at the route's timeout (and [`CALL_SLACK`]). A
//! send that cannot start in time is held, never sent late: the proof that another worker makes
//! of "not sent" rests on that deadline.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use time::OffsetDateTime;

use bytes::Bytes;
use herald_provider::callback::Callbacks;
use herald_provider::settings::RouteContext;
use herald_provider::timeout::within;
use herald_provider::{
    Adapter, Capabilities, Evidence, Message, ProviderKey, QueryResult, Request, SendResult,
};
use tokio::sync::Semaphore;
use tracing::Instrument;
use tracing::field::Empty;

use super::budget::Budget;
use super::circuit::{Circuit, CircuitState};
use super::pacing::{HostPauses, Pace, host_of};
use super::policy::{CALL_SLACK, Hold, Limits};
use crate::config::{Config, RouteConfig};
use crate::domain::{AttemptResult, HoldReason, RoutePause};
use crate::store::RouteSlot;

/// What a call to a route's vendor came to.
#[derive(Debug)]
pub struct Sent {
    pub result: SendResult,
    /// The call ended after the moment its send deadline promised every proof of absence (the
    /// deadline, the route's timeout and [`CALL_SLACK`]): its worker was held up (frozen, say)
    /// somewhere between its last look at the clock and the answer, and cannot tell whether its
    /// request left before that moment or after it.
    pub overran: bool,
    /// When the worker last read the clock before writing the request (then before the send
    /// deadline); `None` where herald refused it without a call. Kept in the attempt's evidence,
    /// so that a request a vendor saw late can be told from a guard that failed: only a worker
    /// stopped right after this moment can have written after its deadline.
    pub checked_at: Option<OffsetDateTime>,
}

/// How many report ids a route remembers in each process.
const RECENT_REPORTS: usize = 4096;

/// Event ids, and the order they came in, so that the oldest go first.
#[derive(Default)]
struct RecentReports {
    ids: std::collections::HashSet<String>,
    order: std::collections::VecDeque<String>,
}

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
    /// The process's budget for attachment bytes, shared by every route and the enqueues.
    budget: Arc<Budget>,
    concurrency: usize,
    /// Notifications of this route claimed by this process and not yet recorded.
    pending: Arc<AtomicUsize>,
    /// An operator paused it (as this process last read the stored pauses): no call starts, and
    /// its work is not claimed unless the pause sends it to the fallback (`to_fallback`).
    paused: AtomicBool,
    to_fallback: AtomicBool,
    pace: Pace,
    /// Where each send goes to its own receiver (webhooks): the pauses receivers asked for, by
    /// host. `None` where every send goes to the one vendor, whose pause holds the route.
    receivers: Option<HostPauses>,
    /// How fast this process takes the vendor's callbacks for this route.
    callback_pace: Pace,
    /// The vendor's reports this process stored lately, by event id: a replay of one is told it
    /// is a repeat without spending the callback budget that the vendor's next real report
    /// needs (Twilio, for one, does not send a refused report again).
    recent_reports: std::sync::Mutex<RecentReports>,
    timeout: Duration,
    limits: Limits,
}

impl Route {
    /// Whether new claims should leave this route out: it has as much work as it can run, or
    /// it must not call its vendor yet (an open circuit only where there is no fallback to
    /// hand its notifications to).
    pub fn saturated(&self, now: Instant) -> bool {
        (self.paused() && !self.sends_to_fallback())
            || self.pending.load(Ordering::Relaxed) >= self.concurrency
            || !self.pace.wait(now).is_zero()
            || (self.fallback.is_none() && self.circuit.resting(now).is_some())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether an operator has paused it, as this process last read.
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    pub fn provider(&self) -> &'static str {
        self.provider
    }

    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// How long after its attempt starts a send may still begin its call, under a `lease`: the
    /// call, cut at the timeout and [`CALL_SLACK`], then ends by the time the lease does.
    /// (Configuration keeps the lease at least 2 s above every route's timeout.)
    pub fn send_window(&self, lease: Duration) -> Duration {
        lease.saturating_sub(self.timeout + CALL_SLACK)
    }

    /// The slot new claims may fill on this route: the sends it can start before their
    /// deadline, within its concurrency and its pace; `None` while it is saturated.
    fn slot(&self, now: Instant, lease: Duration) -> Option<RouteSlot> {
        if self.saturated(now) {
            return None;
        }
        let pending = self.pending.load(Ordering::Relaxed);
        let window = self.send_window(lease);
        let free = self.concurrency.saturating_sub(pending);
        let paced = self
            .pace
            .capacity(now, window, pending)
            .map_or(free, |n| n as usize);
        let take = free.min(paced);
        (take > 0).then(|| RouteSlot {
            route: self.name.clone(),
            take: u32::try_from(take).unwrap_or(u32::MAX),
            send_window: window,
        })
    }

    /// Calls per second and burst of its own limit, and how much longer a vendor's "slow down"
    /// pauses it.
    pub fn pace(&self, now: Instant) -> (Option<(f64, u32)>, Duration) {
        (self.pace.limit(), self.pace.paused_for(now))
    }

    pub fn circuit(&self) -> (CircuitState, Option<u32>, Duration) {
        self.circuit.status()
    }

    /// The circuit's state, each time it changes in this process.
    pub fn circuit_changes(&self) -> tokio::sync::watch::Receiver<CircuitState> {
        self.circuit.changes()
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

    /// Admits one vendor callback under the route's callback rate; else how long until one
    /// would be.
    pub fn admit_callback(&self, now: Instant) -> Result<(), Duration> {
        self.callback_pace.try_take(now)
    }

    /// Whether this process stored every one of these reports lately (see `recent_reports`).
    pub fn reported_lately<'a>(&self, mut event_ids: impl Iterator<Item = &'a str>) -> bool {
        let recent = self
            .recent_reports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        event_ids.all(|id| recent.ids.contains(id))
    }

    /// Remembers reports the store holds now, the oldest forgotten past [`RECENT_REPORTS`].
    pub fn remember_reports(&self, event_ids: impl Iterator<Item = String>) {
        let mut recent = self
            .recent_reports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for id in event_ids {
            if recent.ids.insert(id.clone()) {
                recent.order.push_back(id);
            }
            if recent.order.len() > RECENT_REPORTS
                && let Some(oldest) = recent.order.pop_front()
            {
                recent.ids.remove(&oldest);
            }
        }
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
    /// One provider call, within the route's concurrency limit, its pace, the process's budget
    /// for attachment bytes and its timeout, started by `deadline` or not at all: `Err` where
    /// herald held it back itself (nothing was sent). `files` are the contents the request's
    /// attachments name, put into it only once it may go, so that a send waiting for its turn
    /// holds no copy of them. A timeout here is ambiguous: the adapter's own should have fired
    /// first, so the request may be out.
    pub async fn send(
        &self,
        request: &Result<Request, Evidence>,
        files: &BTreeMap<String, Bytes>,
        message: &Message,
        key: &ProviderKey,
        deadline: OffsetDateTime,
        replay: bool,
    ) -> Result<Sent, Hold> {
        let (result, checked_at) = self
            .call(request, files, message, key, deadline, replay)
            .await?;
        // Read once the answer is in: as late as the request could have left.
        let overran = OffsetDateTime::now_utc() > deadline + self.timeout + CALL_SLACK;
        Ok(Sent {
            result,
            overran,
            checked_at,
        })
    }

    async fn call(
        &self,
        request: &Result<Request, Evidence>,
        files: &BTreeMap<String, Bytes>,
        message: &Message,
        key: &ProviderKey,
        deadline: OffsetDateTime,
        replay: bool,
    ) -> Result<(SendResult, Option<OffsetDateTime>), Hold> {
        let route = self;
        // A replay asks the route about the send it already has: a pause to the fallback holds
        // it, as any pause does, rather than spend an attempt the fallback cannot use.
        let to_fallback = || (!replay).then(|| route.to_fallback()).flatten();
        let request = match request {
            Ok(request) => request,
            Err(evidence) => return Ok((SendResult::permanent(evidence.clone()), None)),
        };
        let until = Instant::now()
            + Duration::try_from(deadline - OffsetDateTime::now_utc()).unwrap_or_default();
        let late = || Instant::now() >= until || OffsetDateTime::now_utc() >= deadline;
        // A resting route is refused before it waits for a permit or its pace: its work goes
        // to the fallback at once, or waits. So is one an operator sends to its fallback.
        if let Some(refused) = to_fallback() {
            return Ok((refused, None));
        }
        if let Some(wait) = route.circuit.resting(Instant::now()) {
            return route.circuit_open(wait).map(|refused| (refused, None));
        }
        let host = route.receivers.as_ref().map(|pauses| {
            let host = host_of(&message.to);
            (pauses.paused_for(&host, Instant::now()), host)
        });
        if let Some((wait, _)) = host.as_ref().filter(|(wait, _)| !wait.is_zero()) {
            return Err(route.hold(HoldReason::Paused, *wait));
        }
        let Ok(permit) = tokio::time::timeout_at(until.into(), route.permits.acquire()).await
        else {
            return Err(route.hold(HoldReason::Deadline, Duration::ZERO));
        };
        let _permit = permit.expect("route semaphores are never closed");
        // Every wait ends with a look at the clock, so that no single check stands alone: a
        // permit that was free when a frozen process woke is taken past the deadline (the
        // permit is polled before the timer), and this refuses it.
        if late() {
            return Err(route.hold(HoldReason::Deadline, Duration::ZERO));
        }
        // Room for the expanded request, the adapter's copy of it and its HTTP client's, in
        // the process's budget for attachment bytes: a send that cannot have it by its deadline
        // is held.
        let _room = match files.is_empty() {
            true => None,
            false => match route
                .budget
                .reserve(SEND_FACTOR * request.expanded_len(files), until)
                .await
            {
                Some(room) => Some(room),
                None => return Err(route.hold(HoldReason::Memory, Duration::ZERO)),
            },
        };
        if let Err((reason, wait)) = route.pace.take(until).await {
            return Err(route.hold(reason, wait));
        }
        // The contents go into the request now, within the room reserved for them, and before
        // the last look at the clock: nothing slow stands between that look and the write.
        let expanded;
        let request = match files.is_empty() {
            true => request,
            false => {
                expanded = request.expand(files);
                &expanded
            }
        };
        // The last look at the clock before the request is written (a frozen process wakes
        // here past its deadline, and writes nothing); and at the operator's pause, so that a
        // send claimed before it does not start after it.
        if late() {
            return Err(route.hold(HoldReason::Deadline, Duration::ZERO));
        }
        let checked_at = OffsetDateTime::now_utc();
        if let Some(refused) = to_fallback() {
            return Ok((refused, None));
        }
        if route.paused() {
            return Err(route.hold(HoldReason::Paused, PAUSE_READ_EVERY));
        }
        if let Err(wait) = route.circuit.admit(Instant::now()) {
            return route.circuit_open(wait).map(|refused| (refused, None));
        }
        let started = Instant::now();
        // The vendor call's span, after OpenTelemetry's HTTP client conventions: the adapter
        // alone knows where the request goes, so it records the destination fields itself
        // (`herald_provider::http::record_destination`, which leaves credentials out); the
        // status is the one the adapter read.
        let span = tracing::info_span!(
            "vendor call",
            otel.kind = "client",
            route = %route.name,
            provider = route.provider,
            http.request.method = Empty,
            server.address = Empty,
            server.port = Empty,
            url.full = Empty,
            http.response.status_code = Empty,
            result = Empty,
            stage = Empty,
        );
        // A vendor that reads a `traceparent` is given this call's, where spans are exported.
        let traced = crate::traces::context_of(&span).map(|own| Message {
            trace_parent: Some(own.to_string()),
            ..message.clone()
        });
        let message = traced.as_ref().unwrap_or(message);
        // A process that wakes from a freeze reads the answer that waits for it, which is
        // evidence even when its claim was lost meanwhile.
        let call = route
            .adapter
            .send_prepared(request, message, key)
            .instrument(span.clone());
        let result = match within(route.timeout + CALL_SLACK, call).await {
            Some(result) => bounded_pause(result),
            None => SendResult::Ambiguous {
                evidence: Evidence::new(
                    "awaiting_response",
                    "the adapter did not return within the route's timeout",
                ),
            },
        };
        route.circuit.observe(&result, Instant::now());
        let label = attempt_result(&result);
        let reason = result.reason();
        span.record("result", label.as_str());
        span.record("stage", result.evidence().stage.as_str());
        if let Some(status) = result.evidence().status {
            span.record("http.response.status_code", status);
        }
        // The call's span ends with the call, not with the bookkeeping below.
        drop(span);
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
            // The vendor asked for a pause: it holds for the whole route, not this message only;
            // a webhook receiver's, for its own host.
            let until = Instant::now() + *wait;
            match (&route.receivers, &host) {
                (Some(pauses), Some((_, host))) => pauses.pause_until(host, until),
                _ => route.pace.pause_until(until),
            }
        }
        Ok((result, Some(checked_at)))
    }

    /// A refusal herald made itself, without calling the vendor (the recipient is suppressed,
    /// the notification expired): counted with the route's attempts, by its reason.
    pub fn refused(&self, result: SendResult) -> Sent {
        metrics::counter!("herald_attempts_total", "route" => self.name.clone(), "result" => AttemptResult::Rejected.as_str(), "reason" => result.reason()).increment(1);
        Sent {
            result,
            overran: false,
            checked_at: None,
        }
    }

    /// An operator's pause sends the route's work to its fallback (one it has).
    fn sends_to_fallback(&self) -> bool {
        self.to_fallback.load(Ordering::Relaxed) && self.fallback.is_some()
    }

    /// Not sent: an operator paused the route and sends its work to its fallback meanwhile;
    /// `None` where no such pause stands (or there is no fallback to send to).
    fn to_fallback(&self) -> Option<SendResult> {
        if !(self.paused() && self.sends_to_fallback()) {
            return None;
        }
        let stage = herald_provider::ROUTE_PAUSED_STAGE;
        metrics::counter!("herald_attempts_total", "route" => self.name.clone(), "result" => AttemptResult::Rejected.as_str(), "reason" => stage).increment(1);
        Some(SendResult::Rejected {
            permanent: false,
            retry_after: None,
            evidence: Evidence::new(
                stage,
                "not sent: an operator paused the route and sends its work to the fallback",
            ),
        })
    }

    /// Not sent: the route's recent sends failed, and it rests until its probe. With a fallback
    /// that is a refusal it can prove, which hands the work on; without one, a hold.
    fn circuit_open(&self, wait: Duration) -> Result<SendResult, Hold> {
        if self.fallback.is_none() {
            return Err(self.hold(HoldReason::CircuitOpen, wait));
        }
        let stage = HoldReason::CircuitOpen.as_str();
        metrics::counter!("herald_attempts_total", "route" => self.name.clone(), "result" => AttemptResult::Rejected.as_str(), "reason" => stage).increment(1);
        Ok(SendResult::Rejected {
            permanent: false,
            retry_after: Some(wait),
            evidence: Evidence::new(
                stage,
                format!(
                    "not sent: the route's circuit is open after failures in a row, for {} ms more",
                    wait.as_millis()
                ),
            ),
        })
    }

    /// herald holds the send back itself, for `wait` at least.
    fn hold(&self, reason: HoldReason, wait: Duration) -> Hold {
        metrics::counter!("herald_holds_total", "route" => self.name.clone(), "reason" => reason.as_str()).increment(1);
        tracing::debug!(route = %self.name, reason = reason.as_str(), wait_ms = wait.as_millis(), "send held");
        Hold { reason, wait }
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
