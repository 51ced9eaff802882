//! The dispatch cycle: **claim** due notifications in one transaction that commits
//! an `in_flight` attempt before any call; **send** through the route's adapter, concurrently,
//! within per-route limits; **record** each result in one transaction, fenced by the claim's
//! generation; **recover** notifications whose lease expired by reconciling their ambiguous
//! attempt. No transaction is held across a provider call.
//!
//! What a step does next is decided by the pure [`policy`], and the certainty it ends with by
//! [`crate::domain::certainty`]; dispatch only moves data between the store and the adapters,
//! and keeps time. This file is the claim loop; `worker` takes one claim through its step,
//! `requery` is a person's look-up on demand, and `watchers` keep the routes to their
//! pauses, circuits and gauges.

mod budget;
mod circuit;
mod files;
pub mod pacing;
pub mod policy;
mod requery;
mod routes;
mod watchers;
mod worker;

use std::sync::Arc;
use std::time::{Duration, Instant};

use time::OffsetDateTime;
use tokio::sync::{Notify, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

pub use budget::{Budget, Reserved};
pub use circuit::CircuitState;
pub use requery::{Requeried, RequeryRefused, requery};
use routes::PendingGuard;
pub use routes::{Route, Routes, build_routes, check_route};
use watchers::{read_pauses, refresh_gauges, report_circuit};
use worker::Worker;

use crate::config::DispatchConfig;
use crate::store::{Claim, GroupCommit, Records, RouteSlot, Store};

/// How the dispatcher paces itself; from `[dispatch]` in herald.toml. (The retry schedule is
/// each route's, in its [`policy::Limits`].)
#[derive(Debug, Clone)]
pub struct Settings {
    pub lease: Duration,
    pub batch_size: u32,
    pub concurrency: usize,
    pub poll_interval: Duration,
}

impl From<&DispatchConfig> for Settings {
    fn from(config: &DispatchConfig) -> Self {
        Settings {
            lease: Duration::from_secs(config.lease_seconds),
            batch_size: config.batch_size,
            concurrency: config.concurrency,
            poll_interval: Duration::from_millis(config.poll_interval_ms),
        }
    }
}

pub struct Dispatcher {
    store: Arc<dyn Store>,
    routes: Arc<Routes>,
    settings: Settings,
    /// Signalled by the API after it commits new work, by the PostgreSQL listener when another
    /// process does, and by this dispatcher when it schedules a retry: the claim loop then looks
    /// for due work at once instead of waiting for its next poll.
    wake: Arc<Notify>,
    /// Records that finish together share a transaction.
    records: GroupCommit<Records>,
    files: Arc<files::Files>,
}

/// How often the queue gauges are refreshed.
const STATS_INTERVAL: Duration = Duration::from_secs(5);
/// With routes held back, how soon the claim loop looks again for work they can take.
const HELD_BACK_LOOK_AGAIN: Duration = Duration::from_millis(25);
/// How long a record that the database refused waits before it is tried again.
const RECORD_PAUSE: Duration = Duration::from_secs(1);

impl Dispatcher {
    pub fn new(
        store: Arc<dyn Store>,
        routes: Arc<Routes>,
        settings: Settings,
        wake: Arc<Notify>,
    ) -> Self {
        Dispatcher {
            records: GroupCommit::start(store.clone()),
            store,
            routes,
            settings,
            wake,
            files: Arc::default(),
        }
    }

    /// Claims and dispatches until `shutdown`; then stops claiming and gives sends in flight
    /// until their routes' timeouts to finish and be recorded. A send cut off by the deadline
    /// (or by SIGKILL) stays `in_flight` until its lease ends, when recovery reconciles it.
    pub async fn run(self, shutdown: CancellationToken) {
        let watchers = self.watch(&shutdown);
        let permits = Arc::new(Semaphore::new(self.settings.concurrency));
        let mut tasks = JoinSet::new();
        // The last claim took all it had room for: more work is due than this process sends.
        let mut backlogged = false;
        // When held routes were last searched for work whose expiry passed.
        let mut expiries_read: Option<Instant> = None;
        while !shutdown.is_cancelled() {
            while tasks.try_join_next().is_some() {}
            let free = permits
                .available_permits()
                .min(self.settings.batch_size as usize);
            if free == 0 {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tasks.join_next() => continue,
                }
            }
            let now = OffsetDateTime::now_utc();
            let slots = self.routes.slots(self.settings.lease);
            let held_back = slots.len() < self.routes.count();
            // An expiry wins over every hold: a held route's expired work is ended now, read at
            // most once a poll interval (a route saturated by its own sends counts as held).
            if held_back
                && expiries_read.is_none_or(|at| at.elapsed() >= self.settings.poll_interval)
            {
                expiries_read = Some(Instant::now());
                let expired = self.claim_expired(now, free, &slots).await;
                if !expired.is_empty() {
                    for claim in expired {
                        self.start(&mut tasks, &permits, claim, None);
                    }
                    continue;
                }
            }
            // Every route saturated: a claim could take nothing, yet would still walk the due
            // rows of every tenant looking for a route it may take.
            if slots.is_empty() {
                self.idle(&shutdown, held_back, &mut tasks).await;
                continue;
            }
            // What a claim may take: the free permits, within what the routes allow.
            let room = free.min(slots.iter().map(|slot| slot.take as usize).sum());
            if backlogged && room < self.worth_claiming(&slots) && !tasks.is_empty() {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tasks.join_next() => continue,
                }
            }
            let claims = match self
                .store
                .claim(now, self.settings.lease, free as u32, &slots, &|n| {
                    self.routes.prepare(n)
                })
                .await
            {
                Ok(claims) => claims,
                Err(err) => {
                    tracing::warn!(%err, "cannot claim work; trying again shortly");
                    self.pause(&shutdown, Duration::from_secs(1)).await;
                    continue;
                }
            };
            let full = claims.len() >= room;
            backlogged = full;
            for claim in claims {
                let pending = self.routes.pending(&claim.notification.route);
                self.start(&mut tasks, &permits, claim, pending);
            }
            if !full {
                self.idle(&shutdown, held_back, &mut tasks).await;
            }
        }
        self.finish(tasks).await;
        watchers.iter().for_each(|watcher| watcher.abort());
    }

    /// The background tasks beside the claim loop: the listener for other processes' work,
    /// the queue gauges, the operators' pauses, and each route's circuit reporter.
    fn watch(&self, shutdown: &CancellationToken) -> Vec<JoinHandle<()>> {
        let listener = tokio::spawn({
            let (store, wake, shutdown) = (self.store.clone(), self.wake.clone(), shutdown.clone());
            async move { store.listen_for_work(wake, shutdown).await }
        });
        let gauges = tokio::spawn(refresh_gauges(self.store.clone(), shutdown.clone()));
        let pauses = tokio::spawn(read_pauses(
            self.store.clone(),
            self.routes.clone(),
            self.wake.clone(),
            shutdown.clone(),
        ));
        let circuits = self.routes.all().map(|route| {
            tokio::spawn(report_circuit(
                self.store.clone(),
                route.name().to_owned(),
                route.circuit_changes(),
            ))
        });
        [listener, gauges, pauses]
            .into_iter()
            .chain(circuits)
            .collect()
    }

    /// Sends one claim on its own task, holding one of the process's permits (and, where it
    /// counts against its route, the route's pending guard) until it is recorded.
    fn start(
        &self,
        tasks: &mut JoinSet<()>,
        permits: &Arc<Semaphore>,
        claim: Claim,
        pending: Option<PendingGuard>,
    ) {
        let permit = permits
            .clone()
            .try_acquire_owned()
            .expect("claimed no more than free permits");
        let worker = self.worker();
        tasks.spawn(async move {
            worker.dispatch(claim).await;
            drop((permit, pending));
        });
    }

    /// With a backlog, a claim waits for room for a quarter of what the routes that can take
    /// work now may have in flight, rather than taking each send's place as it frees: a few
    /// large claims cost the database fewer round trips per send than many of one or two, and
    /// their sends finish together, so their records share commits too. (Counted over those
    /// routes only: a paused one's share would never free.)
    fn worth_claiming(&self, slots: &[RouteSlot]) -> usize {
        (self
            .settings
            .concurrency
            .min(self.routes.concurrency(slots))
            / 4)
        .clamp(1, self.settings.batch_size.max(1) as usize)
    }

    /// Gives the sends in flight until the longest route timeout to finish and be recorded.
    async fn finish(&self, mut tasks: JoinSet<()>) {
        let grace = self.routes.longest_timeout() + Duration::from_secs(1);
        let drained =
            tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(
                unfinished = tasks.len(),
                "sends still unfinished at shutdown; their leases will recover them"
            );
            tasks.abort_all();
        }
    }

    /// Dispatches until nothing is left to do within `horizon`: every claim is processed, and
    /// work that falls due within the horizon (a retry, a lease, a visibility lag) is waited for.
    /// Tests step the dispatcher with this instead of sleeping.
    pub async fn drain(&self, horizon: Duration) -> anyhow::Result<()> {
        let worker = self.worker();
        loop {
            // The operators' pauses, as `run`'s reader keeps them, read at every step.
            self.routes.set_paused(&self.store.route_pauses().await?);
            let now = OffsetDateTime::now_utc();
            let slots = self.routes.slots(self.settings.lease);
            let mut claims = match slots.len() < self.routes.count() {
                true => {
                    self.claim_expired(now, self.settings.batch_size as usize, &slots)
                        .await
                }
                false => Vec::new(),
            };
            claims.extend(match slots.is_empty() || !claims.is_empty() {
                true => Vec::new(),
                false => {
                    self.store
                        .claim(
                            now,
                            self.settings.lease,
                            self.settings.batch_size,
                            &slots,
                            &|n| self.routes.prepare(n),
                        )
                        .await?
                }
            });
            if !claims.is_empty() {
                let mut tasks = JoinSet::new();
                for claim in claims {
                    let worker = worker.clone();
                    tasks.spawn(async move { worker.dispatch(claim).await });
                }
                while let Some(done) = tasks.join_next().await {
                    done?;
                }
                continue;
            }
            match self.store.next_due().await? {
                Some(due) if due <= now + horizon => {
                    let wait =
                        Duration::try_from(due - OffsetDateTime::now_utc()).unwrap_or_default();
                    // Work is due on a route that cannot take it yet: look again shortly.
                    let wait = match slots.len() < self.routes.count() {
                        true => wait.max(HELD_BACK_LOOK_AGAIN),
                        false => wait,
                    };
                    tokio::time::sleep(wait).await;
                }
                _ => return Ok(()),
            }
        }
    }

    /// Claims the routes held back now (out of `slots`) queued work whose expiry passed, up
    /// to `limit`; nothing where the store cannot be read (the next look tries again).
    async fn claim_expired(
        &self,
        now: OffsetDateTime,
        limit: usize,
        slots: &[RouteSlot],
    ) -> Vec<Claim> {
        let held = self.routes.held(slots);
        match self
            .store
            .claim_expired(now, self.settings.lease, limit as u32, &held, &|n| {
                self.routes.prepare(n)
            })
            .await
        {
            Ok(claims) => claims,
            Err(err) => {
                tracing::warn!(%err, "cannot claim expired work on held routes; trying again shortly");
                Vec::new()
            }
        }
    }

    fn worker(&self) -> Worker {
        Worker {
            store: self.store.clone(),
            records: self.records.clone(),
            routes: self.routes.clone(),
            settings: self.settings.clone(),
            wake: self.wake.clone(),
            files: self.files.clone(),
        }
    }

    /// Waits until the next notification falls due, a wake-up, the poll interval, or shutdown.
    /// With routes left out of claims (`held_back`), work that is due may be waiting for them:
    /// look again when a task finishes or shortly, never in a busy loop.
    async fn idle(&self, shutdown: &CancellationToken, held_back: bool, tasks: &mut JoinSet<()>) {
        let poll = self.settings.poll_interval;
        let mut wait = match self.store.next_due().await {
            Ok(Some(due)) => Duration::try_from(due - OffsetDateTime::now_utc())
                .unwrap_or_default()
                .min(poll),
            Ok(None) | Err(_) => poll,
        };
        if held_back {
            wait = wait.max(HELD_BACK_LOOK_AGAIN);
        }
        if wait.is_zero() {
            return;
        }
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = self.wake.notified() => {}
            _ = tokio::time::sleep(wait) => {}
            Some(_) = tasks.join_next(), if held_back => {}
        }
    }

    async fn pause(&self, shutdown: &CancellationToken, d: Duration) {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(d) => {}
        }
    }
}
