//! A route's circuit breaker, in this process: consecutive sends the vendor is known not to have
//! taken open it; while open the route is not called (its notifications go to its fallback, or
//! wait); once the open time has passed one send probes it, and the probe's answer closes it or
//! opens it again.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use herald_provider::SendResult;
use tokio::sync::watch;

use super::policy::refuses_the_route;

/// The state a `herald_route_circuit{route,state}` series names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitState {
    Closed,
    Open,
    HalfOpen,
}

impl CircuitState {
    pub const ALL: [CircuitState; 3] = [
        CircuitState::Closed,
        CircuitState::Open,
        CircuitState::HalfOpen,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CircuitState::Closed => "closed",
            CircuitState::Open => "open",
            CircuitState::HalfOpen => "half_open",
        }
    }
}

#[derive(Debug)]
enum Inner {
    /// Failures in a row so far.
    Closed(u32),
    Open(Instant),
    /// One probe is out; until its answer (or this deadline, should its task die without
    /// one) nothing else is sent.
    HalfOpen(Instant),
}

pub struct Circuit {
    route: String,
    /// `None`: the route never opens (set `circuit_failures = 0`, and every webhook route).
    failures_to_open: Option<u32>,
    open_for: Duration,
    /// How long a probe may take: the route's timeout, and a margin.
    probe_for: Duration,
    inner: Mutex<Inner>,
    /// Its state as it last changed, for whoever reports the changes (the route's events).
    changes: watch::Sender<CircuitState>,
}

/// What a send's answer says about the route's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    /// The vendor answered and processed (or knowingly refused the message itself).
    Working,
    /// The vendor is known not to have taken it, for a reason of its own or the route's.
    Failing,
    /// Nothing proven: a closed circuit keeps its count, a probe counts it as failing.
    Unclear,
}

fn health(result: &SendResult) -> Health {
    match result {
        SendResult::Accepted { .. } | SendResult::KeyReused { .. } => Health::Working,
        SendResult::Ambiguous { .. } => Health::Unclear,
        // A transient 409: the vendor is still processing an earlier request under this key.
        // It works; the wait is this notification's own.
        SendResult::Rejected {
            permanent: false,
            evidence,
            ..
        } if evidence.status == Some(409) => Health::Working,
        SendResult::Rejected {
            permanent: false, ..
        } => Health::Failing,
        _ if refuses_the_route(result) => Health::Failing,
        // A refusal of this message or its recipient: the vendor works.
        SendResult::Rejected { .. } => Health::Working,
    }
}

impl Circuit {
    pub fn new(
        route: &str,
        failures_to_open: Option<u32>,
        open_for: Duration,
        probe_for: Duration,
    ) -> Self {
        let circuit = Circuit {
            route: route.to_owned(),
            failures_to_open,
            open_for,
            probe_for,
            inner: Mutex::new(Inner::Closed(0)),
            changes: watch::Sender::new(CircuitState::Closed),
        };
        circuit.publish(CircuitState::Closed);
        circuit
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Its state now, and what opens it: failures in a row (`None`: never) and for how long.
    pub fn status(&self) -> (CircuitState, Option<u32>, Duration) {
        (state_of(&self.lock()), self.failures_to_open, self.open_for)
    }

    /// How much longer the route rests at `now` (open, or its probe out), without taking the
    /// probe; `None` when it may be called.
    pub fn resting(&self, now: Instant) -> Option<Duration> {
        match *self.lock() {
            Inner::Closed(_) => None,
            Inner::Open(until) | Inner::HalfOpen(until) => (now < until).then(|| until - now),
        }
    }

    /// May the route be called now? An open circuit whose time has passed (or whose probe's
    /// did, without an answer) lets this call through as its probe. Taken right before the
    /// call, so that the probe's deadline covers the call alone. `Err` is how long until it may
    /// be asked again.
    pub fn admit(&self, now: Instant) -> Result<(), Duration> {
        let mut inner = self.lock();
        match *inner {
            Inner::Closed(_) => Ok(()),
            Inner::Open(until) | Inner::HalfOpen(until) if now < until => Err(until - now),
            Inner::Open(_) | Inner::HalfOpen(_) => {
                *inner = Inner::HalfOpen(now + self.probe_for);
                self.publish(CircuitState::HalfOpen);
                Ok(())
            }
        }
    }

    /// Counts an answer from the vendor (never herald's own refusals to call it).
    pub fn observe(&self, result: &SendResult, now: Instant) {
        let mut inner = self.lock();
        let Some(failures_to_open) = self.failures_to_open else {
            return;
        };
        let next = match (&*inner, health(result)) {
            (_, Health::Working) => Inner::Closed(0),
            (Inner::Closed(n), Health::Failing) if n + 1 >= failures_to_open => {
                Inner::Open(now + self.open_for)
            }
            (Inner::Closed(n), Health::Failing) => Inner::Closed(n + 1),
            (Inner::Closed(n), Health::Unclear) => Inner::Closed(*n),
            // A probe that did not prove the route works, or an answer that arrives while open
            // from a call admitted before it opened.
            (Inner::HalfOpen(_), _) => Inner::Open(now + self.open_for),
            (Inner::Open(until), _) => Inner::Open(*until),
        };
        let (before, after) = (state_of(&inner), state_of(&next));
        *inner = next;
        if before != after {
            tracing::warn!(route = %self.route, from = before.as_str(), to = after.as_str(), "circuit changed");
            self.publish(after);
        }
    }

    /// Its state, each time it changes.
    pub fn changes(&self) -> watch::Receiver<CircuitState> {
        self.changes.subscribe()
    }

    fn publish(&self, current: CircuitState) {
        self.changes.send_replace(current);
        for state in CircuitState::ALL {
            metrics::gauge!("herald_route_circuit", "route" => self.route.clone(), "state" => state.as_str())
                .set(if state == current { 1.0 } else { 0.0 });
        }
    }
}

fn state_of(inner: &Inner) -> CircuitState {
    match inner {
        Inner::Closed(_) => CircuitState::Closed,
        Inner::Open(_) => CircuitState::Open,
        Inner::HalfOpen(_) => CircuitState::HalfOpen,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_provider::Evidence;

    const PROBE: Duration = Duration::from_secs(12);

    fn unavailable() -> SendResult {
        SendResult::Rejected {
            permanent: false,
            retry_after: None,
            evidence: Evidence::new("response", "503"),
        }
    }

    fn accepted() -> SendResult {
        SendResult::Accepted {
            provider_ref: None,
            evidence: Evidence::new("response", "202"),
        }
    }

    fn bad_address() -> SendResult {
        SendResult::Rejected {
            permanent: true,
            retry_after: None,
            evidence: Evidence {
                status: Some(422),
                ..Evidence::new("response", "invalid recipient")
            },
        }
    }

    #[test]
    fn failures_in_a_row_open_it_and_a_working_probe_closes_it() {
        let t0 = Instant::now();
        let circuit = Circuit::new("primary", Some(3), Duration::from_secs(30), PROBE);
        circuit.observe(&unavailable(), t0);
        circuit.observe(&unavailable(), t0);
        assert_eq!(circuit.admit(t0), Ok(()), "two of three failures");
        circuit.observe(&unavailable(), t0);
        assert_eq!(circuit.admit(t0), Err(Duration::from_secs(30)), "open");
        assert_eq!(
            circuit.resting(t0 + Duration::from_secs(29)),
            Some(Duration::from_secs(1))
        );
        let later = t0 + Duration::from_secs(30);
        assert_eq!(circuit.resting(later), None, "its time has passed");
        assert_eq!(circuit.admit(later), Ok(()), "the probe goes");
        assert_eq!(circuit.admit(later), Err(PROBE), "only one probe at a time");
        assert_eq!(
            circuit.admit(later + PROBE),
            Ok(()),
            "a probe that never answered hands its turn on"
        );
        circuit.observe(&accepted(), later + PROBE);
        assert_eq!(circuit.resting(later + PROBE), None, "closed by the probe");
        assert_eq!(circuit.status().0, CircuitState::Closed);
    }

    #[test]
    fn a_failed_probe_opens_it_again_and_a_working_answer_resets_the_count() {
        let t0 = Instant::now();
        let circuit = Circuit::new("primary", Some(2), Duration::from_secs(10), PROBE);
        circuit.observe(&unavailable(), t0);
        circuit.observe(&bad_address(), t0);
        circuit.observe(&unavailable(), t0);
        assert_eq!(
            circuit.admit(t0),
            Ok(()),
            "a refused address proves the vendor works"
        );
        circuit.observe(&unavailable(), t0);
        let probe_at = t0 + Duration::from_secs(10);
        assert_eq!(circuit.admit(probe_at), Ok(()));
        circuit.observe(
            &SendResult::Ambiguous {
                evidence: Evidence::new("awaiting_response", "timed out"),
            },
            probe_at,
        );
        assert_eq!(
            circuit.admit(probe_at),
            Err(Duration::from_secs(10)),
            "a probe that proves nothing opens it again"
        );
    }

    #[test]
    fn a_key_still_in_progress_is_no_failure_of_the_vendor() {
        let t0 = Instant::now();
        let circuit = Circuit::new("primary", Some(2), Duration::from_secs(10), PROBE);
        let in_progress = SendResult::transient(
            Evidence::new("response", "concurrent_idempotent_requests").with_status(409),
            None,
        );
        for _ in 0..5 {
            circuit.observe(&in_progress, t0);
        }
        assert_eq!(circuit.admit(t0), Ok(()));
    }

    #[test]
    fn a_circuit_without_a_threshold_never_opens() {
        let t0 = Instant::now();
        let circuit = Circuit::new("hooks", None, Duration::from_secs(10), PROBE);
        for _ in 0..100 {
            circuit.observe(&unavailable(), t0);
        }
        assert_eq!(circuit.admit(t0), Ok(()));
    }
}
