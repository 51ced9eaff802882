//! A route's pace: how fast herald may call its vendor (a token bucket from the route's
//! `rate_limit_per_second` and `burst`), and a route-wide pause when the vendor says "slow
//! down" (a transient rejection with `Retry-After`, e.g. 429). Both are per process. Where each
//! send goes to its own receiver (a webhook route), a receiver's "slow down" pauses that
//! receiver's host only ([`HostPauses`]): one receiver never holds up the others.
//!
//! A route that is paused or out of tokens is left out of the next claims, and a claim takes no
//! more of its work than its tokens allow before the sends' deadline, so its notifications wait
//! in the queue rather than in workers, and other routes keep their pace. A send that would
//! still have to wait past its deadline is held ([`HoldReason::Paced`] or
//! [`HoldReason::Paused`]): no attempt, no budget spent.
//!
//! The same bucket counts a token's enqueues (`[[tokens]] rate_limit_per_second`), taken by the
//! API before it reads a request ([`Pace::try_take_n`]: a batch counts its items).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::domain::HoldReason;

#[derive(Debug)]
pub struct Pace {
    /// Tokens per second and bucket size; `None`: no limit of our own.
    rate: Option<(f64, f64)>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    tokens: f64,
    refilled: Instant,
    paused_until: Option<Instant>,
}

impl Pace {
    pub fn new(rate_per_second: Option<f64>, burst: u32) -> Self {
        let rate = rate_per_second.map(|r| (r, f64::from(burst.max(1))));
        Pace {
            rate,
            state: Mutex::new(State {
                tokens: rate.map_or(0.0, |(_, burst)| burst),
                refilled: Instant::now(),
                paused_until: None,
            }),
        }
    }

    /// Calls per second and burst, if the route has a limit of its own.
    pub fn limit(&self) -> Option<(f64, u32)> {
        self.rate
            .map(|(per_second, burst)| (per_second, burst as u32))
    }

    /// How much longer a vendor's "slow down" holds the route.
    pub fn paused_for(&self, now: Instant) -> Duration {
        let state = self.state.lock().expect("pace lock");
        state
            .paused_until
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now))
    }

    /// How long until a send could start: zero when one can start now.
    pub fn wait(&self, now: Instant) -> Duration {
        let mut state = self.state.lock().expect("pace lock");
        let paused = state
            .paused_until
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now));
        let Some((per_second, burst)) = self.rate else {
            return paused;
        };
        state.refill(now, per_second, burst);
        let starved = if state.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - state.tokens) / per_second)
        };
        paused.max(starved)
    }

    /// How many sends may start within `window` of `now`, beyond the `waiting` ones already
    /// claimed: the tokens there are and those that refill meanwhile (none while paused).
    /// `None`: no limit of its own.
    pub fn capacity(&self, now: Instant, window: Duration, waiting: usize) -> Option<u32> {
        let mut state = self.state.lock().expect("pace lock");
        if state.paused_until.is_some_and(|until| until > now) {
            return Some(0);
        }
        let (per_second, burst) = self.rate?;
        state.refill(now, per_second, burst);
        let tokens = (state.tokens + per_second * window.as_secs_f64()).floor() - waiting as f64;
        Some(tokens.clamp(0.0, f64::from(u32::MAX)) as u32)
    }

    /// Takes a token, waiting for a pause to end or a token to refill until `deadline`; where
    /// that would take longer, `Err` with why and for how much longer (the caller then does not
    /// send), and `Err` with [`HoldReason::Deadline`] where it wakes past the deadline.
    pub async fn take(&self, deadline: Instant) -> Result<(), (HoldReason, Duration)> {
        loop {
            let now = Instant::now();
            // Looked at after every wake, before a token is taken: a task that slept (or a
            // process frozen) past the deadline takes nothing and sends nothing.
            if now >= deadline {
                return Err((HoldReason::Deadline, Duration::ZERO));
            }
            let Err(wait) = self.try_take(now) else {
                return Ok(());
            };
            if now + wait > deadline {
                let reason = if self.paused_for(now).is_zero() {
                    HoldReason::Paced
                } else {
                    HoldReason::Paused
                };
                return Err((reason, wait));
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Takes a token if one is there now; else how long until one could be.
    pub fn try_take(&self, now: Instant) -> Result<(), Duration> {
        let wait = self.wait(now);
        let mut state = self.state.lock().expect("pace lock");
        if !wait.is_zero() {
            return Err(wait);
        }
        if self.rate.is_some() {
            // Another task may have taken the last one between the look and the lock.
            if state.tokens < 1.0 {
                return Err(Duration::from_millis(1));
            }
            state.tokens -= 1.0;
        }
        Ok(())
    }

    /// Takes `n` tokens at once where `n` are there, or a full bucket for more than it holds:
    /// what is taken beyond the bucket is a debt that later calls wait out, so a large batch
    /// costs as much as its items sent one by one. Else how long until they would be there.
    pub fn try_take_n(&self, now: Instant, n: u32) -> Result<(), Duration> {
        let Some((per_second, burst)) = self.rate else {
            return Ok(());
        };
        let mut state = self.state.lock().expect("pace lock");
        state.refill(now, per_second, burst);
        let needed = f64::from(n).min(burst);
        if state.tokens >= needed {
            state.tokens -= f64::from(n);
            return Ok(());
        }
        Err(Duration::from_secs_f64(
            (needed - state.tokens) / per_second,
        ))
    }

    /// The vendor asked for a pause: nobody on this route calls it before `until`.
    pub fn pause_until(&self, until: Instant) {
        let mut state = self.state.lock().expect("pace lock");
        state.paused_until = Some(
            state
                .paused_until
                .map_or(until, |current| current.max(until)),
        );
    }
}

impl State {
    fn refill(&mut self, now: Instant, per_second: f64, burst: f64) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_second).min(burst);
        self.refilled = now;
    }
}

/// The pauses receivers asked for, each for its own host (`host:port`).
#[derive(Debug, Default)]
pub struct HostPauses(Mutex<HashMap<String, Instant>>);

impl HostPauses {
    /// How much longer `host` asked to be left alone.
    pub fn paused_for(&self, host: &str, now: Instant) -> Duration {
        let pauses = self.0.lock().unwrap_or_else(|e| e.into_inner());
        pauses
            .get(host)
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now))
    }

    /// `host` asked for a pause until `until`; a shorter one never ends a longer one. Pauses
    /// that ended are forgotten, so the map holds only the hosts paused now.
    pub fn pause_until(&self, host: &str, until: Instant) {
        let mut pauses = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        pauses.retain(|_, ends| *ends > now);
        let ends = pauses.entry(host.to_owned()).or_insert(until);
        *ends = (*ends).max(until);
    }
}

/// The host (with its port) a receiver's URL names, as [`HostPauses`] keys it; the text itself
/// where it is not a URL.
pub fn host_of(to: &str) -> String {
    url::Url::parse(to)
        .ok()
        .and_then(|url| {
            let host = url.host_str()?.to_owned();
            Some(match url.port_or_known_default() {
                Some(port) => format!("{host}:{port}"),
                None => host,
            })
        })
        .unwrap_or_else(|| to.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unlimited_route_is_never_held_back() {
        let pace = Pace::new(None, 1);
        assert_eq!(pace.wait(Instant::now()), Duration::ZERO);
    }

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let pace = Pace::new(Some(10.0), 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(pace.wait(t0), Duration::ZERO);
            pace.state.lock().unwrap().tokens -= 1.0;
        }
        let wait = pace.wait(t0);
        assert!(
            wait > Duration::from_millis(90) && wait <= Duration::from_millis(100),
            "{wait:?}"
        );
        assert_eq!(pace.wait(t0 + Duration::from_millis(100)), Duration::ZERO);
    }

    #[test]
    fn a_pause_holds_the_route_until_it_ends_and_never_shortens() {
        let pace = Pace::new(None, 1);
        let t0 = Instant::now();
        pace.pause_until(t0 + Duration::from_secs(2));
        pace.pause_until(t0 + Duration::from_secs(1));
        assert_eq!(pace.wait(t0), Duration::from_secs(2));
        assert_eq!(pace.wait(t0 + Duration::from_secs(2)), Duration::ZERO);
    }

    #[test]
    fn a_receivers_pause_holds_its_host_only_and_never_shortens() {
        let pauses = HostPauses::default();
        let t0 = Instant::now();
        let (slow, other) = (
            host_of("https://slow.example/hook?x=1"),
            host_of("https://slow.example:8443/hook"),
        );
        assert_eq!(
            (slow.as_str(), other.as_str()),
            ("slow.example:443", "slow.example:8443")
        );
        pauses.pause_until(&slow, t0 + Duration::from_secs(30));
        pauses.pause_until(&slow, t0 + Duration::from_secs(1));
        assert_eq!(pauses.paused_for(&slow, t0), Duration::from_secs(30));
        assert_eq!(
            pauses.paused_for(&other, t0),
            Duration::ZERO,
            "another port, another host"
        );
        assert_eq!(
            pauses.paused_for(&slow, t0 + Duration::from_secs(30)),
            Duration::ZERO
        );
    }

    #[test]
    fn taking_many_at_once_spends_the_bucket_and_leaves_a_debt_beyond_it() {
        let start = Instant::now();
        let pace = Pace::new(Some(10.0), 5);
        assert_eq!(pace.try_take_n(start, 3), Ok(()));
        // Two left: three more are 0.1 s away.
        let wait = pace.try_take_n(start, 3).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        // A full bucket lets twenty through at once, and the next one waits for all of them.
        let full = start + Duration::from_secs(10);
        assert_eq!(pace.try_take_n(full, 20), Ok(()));
        let wait = pace.try_take_n(full, 1).unwrap_err();
        assert!((wait.as_secs_f64() - 1.6).abs() < 1e-9, "{wait:?}");
        assert_eq!(
            pace.try_take_n(full + Duration::from_millis(1600), 1),
            Ok(())
        );
        assert_eq!(Pace::new(None, 1).try_take_n(start, 1_000), Ok(()));
    }

    #[tokio::test]
    async fn take_waits_for_a_token_until_its_deadline() {
        let pace = Pace::new(Some(20.0), 1);
        let started = Instant::now();
        pace.take(started + Duration::from_millis(1)).await.unwrap();
        pace.take(Instant::now() + Duration::from_secs(1))
            .await
            .unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(45),
            "the second token needs ~50 ms"
        );
        let (reason, wait) = pace
            .take(Instant::now() + Duration::from_millis(1))
            .await
            .unwrap_err();
        assert_eq!(reason, HoldReason::Paced);
        assert!(wait > Duration::from_millis(1));
        pace.pause_until(Instant::now() + Duration::from_secs(60));
        let (reason, wait) = pace
            .take(Instant::now() + Duration::from_millis(1))
            .await
            .unwrap_err();
        assert_eq!(reason, HoldReason::Paused);
        assert!(wait > Duration::from_secs(59), "{wait:?}");
    }

    /// What a process frozen in its wait finds when it wakes: a token refilled, and the
    /// deadline gone. It takes nothing, whatever the bucket holds.
    #[tokio::test]
    async fn a_take_past_its_deadline_takes_no_token_however_many_there_are() {
        let pace = Pace::new(Some(20.0), 5);
        let (reason, wait) = pace
            .take(Instant::now() - Duration::from_millis(1))
            .await
            .unwrap_err();
        assert_eq!((reason, wait), (HoldReason::Deadline, Duration::ZERO));
        assert_eq!(pace.capacity(Instant::now(), Duration::ZERO, 0), Some(5));
    }

    #[test]
    fn capacity_is_the_tokens_there_and_those_refilled_before_the_deadline() {
        let t0 = Instant::now();
        assert_eq!(
            Pace::new(None, 1).capacity(t0, Duration::from_secs(9), 3),
            None
        );
        let pace = Pace::new(Some(2.0), 3);
        assert_eq!(pace.capacity(t0, Duration::from_secs(10), 0), Some(23));
        assert_eq!(
            pace.capacity(t0, Duration::from_secs(10), 5),
            Some(18),
            "the sends claimed before take their tokens first"
        );
        assert_eq!(pace.capacity(t0, Duration::from_secs(10), 40), Some(0));
        pace.pause_until(t0 + Duration::from_secs(1));
        assert_eq!(
            pace.capacity(t0, Duration::from_secs(10), 0),
            Some(0),
            "paused"
        );
    }
}
