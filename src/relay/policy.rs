//! When a sink is tried again after a failure (pure, like dispatch's policy: the random draw is
//! passed in).
//!
//! Two kinds of failure: a *transient* one (the sink is down, a timeout, a 5xx) is tried again
//! after an exponential backoff with full jitter — `retry_base`, doubling per failure, capped
//! at `retry_max`; a *refusal* (a receiver's 4xx: it will answer the same until a person acts)
//! waits the whole `retry_max` at once, so that a refusing receiver never meets a storm.

use std::time::Duration;

/// Why a publish did not land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The sink may take it later: down, overloaded, or its answer was lost.
    Transient(String),
    /// The sink refused it and will again until someone changes something.
    Refused(String),
}

impl Failure {
    pub fn reason(&self) -> &str {
        match self {
            Failure::Transient(reason) | Failure::Refused(reason) => reason,
        }
    }
}

/// The backoff schedule of the relay's retries.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    /// How long to wait after the `failures`-th failure in a row (1 for the first), with
    /// `jitter` in `[0, 1)`: a transient failure waits a random share, at least half, of
    /// `min(base × 2^(failures − 1), max)`; a refusal waits `max`.
    pub fn delay(&self, failure: &Failure, failures: u32, jitter: f64) -> Duration {
        if matches!(failure, Failure::Refused(_)) {
            return self.max;
        }
        let exponent = failures.saturating_sub(1).min(30);
        let ceiling = self.base.saturating_mul(1u32 << exponent).min(self.max);
        // Half fixed, half jittered: never a retry at once, never all relays in step.
        ceiling.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEDULE: Backoff = Backoff {
        base: Duration::from_millis(500),
        max: Duration::from_secs(60),
    };

    #[test]
    fn transient_failures_back_off_exponentially_up_to_the_cap() {
        let transient = Failure::Transient("down".into());
        let cases = [
            (1, 0.0, 250),
            (1, 1.0, 500),
            (2, 1.0, 1000),
            (4, 1.0, 4000),
            (8, 1.0, 60_000),
            (100, 0.0, 30_000),
        ];
        for (failures, jitter, millis) in cases {
            assert_eq!(
                SCHEDULE.delay(&transient, failures, jitter),
                Duration::from_millis(millis),
                "failure {failures}, jitter {jitter}"
            );
        }
    }

    #[test]
    fn a_refusal_waits_the_longest_pause_at_once() {
        let refused = Failure::Refused("400".into());
        assert_eq!(SCHEDULE.delay(&refused, 1, 0.0), Duration::from_secs(60));
    }
}
