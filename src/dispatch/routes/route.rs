//! One configured route as dispatch uses it: its adapter, limits, pace, circuit and pauses, and
//! the call to its vendor (admit, invoke, observe).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use time::OffsetDateTime;

use bytes::Bytes;
use herald_provider::callback::Callbacks;
use herald_provider::timeout::within;
use herald_provider::{
    Adapter, Capabilities, Evidence, Message, ProviderKey, QueryResult, Request, SendResult,
};
use tokio::sync::Semaphore;
use tracing::Instrument;
use tracing::field::Empty;

use super::{PAUSE_READ_EVERY, SEND_FACTOR, attempt_result, bounded_pause};
use crate::dispatch::budget::{Budget, Reserved};
use crate::dispatch::circuit::{Circuit, CircuitState};
use crate::dispatch::pacing::{HostPauses, Pace, host_of};
use crate::dispatch::policy::{CALL_SLACK, Hold, Limits};
use crate::domain::{AttemptResult, HoldReason};
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
pub(super) const RECENT_REPORTS: usize = 4096;

/// Event ids, and the order they came in, so that the oldest go first.
#[derive(Default)]
pub(super) struct RecentReports {
    ids: std::collections::HashSet<String>,
    order: std::collections::VecDeque<String>,
}

pub struct Route {
    pub(super) name: String,
    /// The `provider = "…"` of its configuration.
    pub(super) provider: &'static str,
    pub(super) adapter: Arc<dyn Adapter>,
    /// Where its notifications go when it is known not to have taken them.
    pub(super) fallback: Option<String>,
    pub(super) circuit: Circuit,
    /// Bounds this route's calls in flight, so that one slow vendor cannot take every worker.
    pub(super) permits: Semaphore,
    /// The process's budget for attachment bytes, shared by every route and the enqueues.
    pub(super) budget: Arc<Budget>,
    pub(super) concurrency: usize,
    /// Notifications of this route claimed by this process and not yet recorded.
    pub(super) pending: Arc<AtomicUsize>,
    /// An operator paused it (as this process last read the stored pauses): no call starts, and
    /// its work is not claimed unless the pause sends it to the fallback (`to_fallback`).
    pub(super) paused: AtomicBool,
    pub(super) to_fallback: AtomicBool,
    pub(super) pace: Pace,
    /// Where each send goes to its own receiver (webhooks): the pauses receivers asked for, by
    /// host. `None` where every send goes to the one vendor, whose pause holds the route.
    pub(super) receivers: Option<HostPauses>,
    /// How fast this process takes the vendor's callbacks for this route.
    pub(super) callback_pace: Pace,
    /// The vendor's reports this process stored lately, by event id: a replay of one is told it
    /// is a repeat without spending the callback budget that the vendor's next real report
    /// needs (Twilio, for one, does not send a refused report again).
    pub(super) recent_reports: std::sync::Mutex<RecentReports>,
    pub(super) timeout: Duration,
    pub(super) limits: Limits,
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
    pub(super) fn slot(&self, now: Instant, lease: Duration) -> Option<RouteSlot> {
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

    /// One call to the vendor, in three steps: [`Route::admit`] (herald's own holds and
    /// refusals, each wait ending with a look at the clock), [`Route::invoke`] (the adapter,
    /// cut at the route's timeout) and [`Route::observe`] (what the answer teaches the route).
    async fn call(
        &self,
        request: &Result<Request, Evidence>,
        files: &BTreeMap<String, Bytes>,
        message: &Message,
        key: &ProviderKey,
        deadline: OffsetDateTime,
        replay: bool,
    ) -> Result<(SendResult, Option<OffsetDateTime>), Hold> {
        let request = match request {
            Ok(request) => request,
            Err(evidence) => return Ok((SendResult::permanent(evidence.clone()), None)),
        };
        let admitted = match self
            .admit(request, files, message, deadline, replay)
            .await?
        {
            Admission::Go(admitted) => admitted,
            Admission::Refused(refused) => return Ok((refused, None)),
        };
        let request = admitted.expanded.as_ref().unwrap_or(request);
        let started = Instant::now();
        let result = self.invoke(request, message, key).await;
        self.observe(&result, started, admitted.host.as_deref());
        Ok((result, Some(admitted.checked_at)))
    }

    /// Everything before the request is written: a route resting or sent to its fallback, a
    /// receiver's pause, a permit, room for the files' contents, the route's pace, and the last
    /// looks at the clock, the operator's pause and the circuit. Each wait ends by the send
    /// deadline or holds the send.
    async fn admit(
        &self,
        request: &Request,
        files: &BTreeMap<String, Bytes>,
        message: &Message,
        deadline: OffsetDateTime,
        replay: bool,
    ) -> Result<Admission<'_>, Hold> {
        let route = self;
        // A replay asks the route about the send it already has: a pause to the fallback holds
        // it, as any pause does, rather than spend an attempt the fallback cannot use.
        let to_fallback = || (!replay).then(|| route.to_fallback()).flatten();
        let until = Instant::now()
            + Duration::try_from(deadline - OffsetDateTime::now_utc()).unwrap_or_default();
        let late = || Instant::now() >= until || OffsetDateTime::now_utc() >= deadline;
        // A resting route is refused before it waits for a permit or its pace: its work goes
        // to the fallback at once, or waits. So is one an operator sends to its fallback.
        if let Some(refused) = to_fallback() {
            return Ok(Admission::Refused(refused));
        }
        if let Some(wait) = route.circuit.resting(Instant::now()) {
            return route.circuit_open(wait).map(Admission::Refused);
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
        let permit = permit.expect("route semaphores are never closed");
        // Every wait ends with a look at the clock, so that no single check stands alone: a
        // permit that was free when a frozen process woke is taken past the deadline (the
        // permit is polled before the timer), and this refuses it.
        if late() {
            return Err(route.hold(HoldReason::Deadline, Duration::ZERO));
        }
        // Room for the expanded request, the adapter's copy of it and its HTTP client's, in
        // the process's budget for attachment bytes: a send that cannot have it by its deadline
        // is held.
        let room = match files.is_empty() {
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
        let expanded = (!files.is_empty()).then(|| request.expand(files));
        // The last look at the clock before the request is written (a frozen process wakes
        // here past its deadline, and writes nothing); and at the operator's pause, so that a
        // send claimed before it does not start after it.
        if late() {
            return Err(route.hold(HoldReason::Deadline, Duration::ZERO));
        }
        let checked_at = OffsetDateTime::now_utc();
        if let Some(refused) = to_fallback() {
            return Ok(Admission::Refused(refused));
        }
        if route.paused() {
            return Err(route.hold(HoldReason::Paused, PAUSE_READ_EVERY));
        }
        if let Err(wait) = route.circuit.admit(Instant::now()) {
            return route.circuit_open(wait).map(Admission::Refused);
        }
        Ok(Admission::Go(Admitted {
            _permit: permit,
            _room: room,
            expanded,
            checked_at,
            host: host.map(|(_, host)| host),
        }))
    }

    /// The adapter's call, in its span, cut at the route's timeout (and [`CALL_SLACK`]): an
    /// adapter that has not answered by then is ambiguous.
    async fn invoke(&self, request: &Request, message: &Message, key: &ProviderKey) -> SendResult {
        // The vendor call's span, after OpenTelemetry's HTTP client conventions: the adapter
        // alone knows where the request goes, so it records the destination fields itself
        // (`herald_provider::http::record_destination`, which leaves credentials out); the
        // status is the one the adapter read.
        let span = tracing::info_span!(
            "vendor call",
            otel.kind = "client",
            route = %self.name,
            provider = self.provider,
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
        let call = self
            .adapter
            .send_prepared(request, message, key)
            .instrument(span.clone());
        let result = match within(self.timeout + CALL_SLACK, call).await {
            Some(result) => bounded_pause(result),
            None => SendResult::Ambiguous {
                evidence: Evidence::new(
                    "awaiting_response",
                    "the adapter did not return within the route's timeout",
                ),
            },
        };
        span.record("result", attempt_result(&result).as_str());
        span.record("stage", result.evidence().stage.as_str());
        if let Some(status) = result.evidence().status {
            span.record("http.response.status_code", status);
        }
        result
    }

    /// What an answer teaches the route: its circuit, its counters and log, and a vendor's
    /// request to pause (the whole route's, or a webhook receiver's host's).
    fn observe(&self, result: &SendResult, started: Instant, host: Option<&str>) {
        self.circuit.observe(result, Instant::now());
        let label = attempt_result(result);
        let reason = result.reason();
        metrics::counter!("herald_attempts_total", "route" => self.name.clone(), "result" => label.as_str(), "reason" => reason).increment(1);
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
        metrics::histogram!("herald_send_seconds", "route" => self.name.clone())
            .record(started.elapsed().as_secs_f64());
        if let SendResult::Rejected {
            permanent: false,
            retry_after: Some(wait),
            ..
        } = result
        {
            let until = Instant::now() + *wait;
            match (&self.receivers, host) {
                (Some(pauses), Some(host)) => pauses.pause_until(host, until),
                _ => self.pace.pause_until(until),
            }
        }
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

/// What [`Route::admit`] decided: the call goes ahead, holding what it was given, or herald
/// refuses it itself (the route rests or an operator sends its work to the fallback).
enum Admission<'a> {
    Go(Admitted<'a>),
    Refused(SendResult),
}

/// What an admitted call holds until it ends: a permit of the route's concurrency, room for its
/// files' contents, the request with those contents put in, and when the clock was last read.
struct Admitted<'a> {
    _permit: tokio::sync::SemaphorePermit<'a>,
    _room: Option<Reserved>,
    expanded: Option<Request>,
    checked_at: OffsetDateTime,
    /// A webhook receiver's host, whose own pause a vendor's request to wait sets.
    host: Option<String>,
}
