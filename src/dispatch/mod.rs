//! The dispatch cycle: **claim** due notifications in one transaction that commits
//! an `in_flight` attempt before any call; **send** through the route's adapter, concurrently,
//! within per-route limits; **record** each result in one transaction, fenced by the claim's
//! generation; **recover** notifications whose lease expired by reconciling their ambiguous
//! attempt. No transaction is held across a provider call.
//!
//! What is true after each step is decided by the pure [`policy`]; this module only moves data
//! between the store and the adapters, and keeps time.

mod budget;
mod circuit;
mod files;
pub mod pacing;
pub mod policy;
mod routes;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use herald_provider::{Evidence, Message, ProviderKey, QueryResult, Request, SendResult};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use budget::{Budget, Reserved};
pub use circuit::CircuitState;
pub use routes::{Route, Routes, build_routes, check_route};

use crate::config::DispatchConfig;
use crate::domain::{
    Decision, Next, Notification, SettledBy, Sibling, State, Suppression, SuppressionReason,
    suppression_recipient,
};
use crate::store::{
    Claim, ClaimMode, EventType, GroupCommit, NewSuppression, OutboxEvent, Recorded, Records,
    RouteSlot, Store, StoreError,
};
use policy::{Asked, Attribution, Hold, Plan, Situation, Step};
use routes::{PAUSE_READ_EVERY, Sent};
use tracing::field::Empty;

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
    /// Told after each record, which writes the notification's events.
    relay_wake: crate::relay::Wake,
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
        relay_wake: crate::relay::Wake,
    ) -> Self {
        Dispatcher {
            records: GroupCommit::start(store.clone()),
            store,
            routes,
            settings,
            wake,
            relay_wake,
            files: Arc::default(),
        }
    }

    /// Claims and dispatches until `shutdown`; then stops claiming and gives sends in flight
    /// until their routes' timeouts to finish and be recorded. A send cut off by the deadline
    /// (or by SIGKILL) stays `in_flight` until its lease ends, when recovery reconciles it.
    pub async fn run(self, shutdown: CancellationToken) {
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
        let circuits: Vec<_> = self
            .routes
            .all()
            .map(|route| {
                tokio::spawn(report_circuit(
                    self.store.clone(),
                    route.name().to_owned(),
                    route.circuit_changes(),
                ))
            })
            .collect();
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
                        let permit = permits
                            .clone()
                            .try_acquire_owned()
                            .expect("claimed no more than free permits");
                        let worker = self.worker();
                        tasks.spawn(async move {
                            worker.dispatch(claim).await;
                            drop(permit);
                        });
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
            // With a backlog, a claim waits for room for a quarter of what the routes that can
            // take work now may have in flight, rather than taking each send's place as it
            // frees: a few large claims cost the database fewer round trips per send than many
            // of one or two, and their sends finish together, so their records share commits
            // too. (Counted over those routes only: a paused one's share would never free.)
            let worth_claiming = (self
                .settings
                .concurrency
                .min(self.routes.concurrency(&slots))
                / 4)
            .clamp(1, self.settings.batch_size.max(1) as usize);
            if backlogged && room < worth_claiming && !tasks.is_empty() {
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
                let permit = permits
                    .clone()
                    .try_acquire_owned()
                    .expect("claimed no more than free permits");
                let pending = self.routes.pending(&claim.notification.route);
                let worker = self.worker();
                tasks.spawn(async move {
                    worker.dispatch(claim).await;
                    drop((permit, pending));
                });
            }
            if !full {
                self.idle(&shutdown, held_back, &mut tasks).await;
            }
        }
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
        listener.abort();
        gauges.abort();
        pauses.abort();
        circuits.iter().for_each(|reporter| reporter.abort());
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
            relay_wake: self.relay_wake.clone(),
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

/// One claimed notification's journey through a step; cheap to clone per task.
#[derive(Clone)]
struct Worker {
    store: Arc<dyn Store>,
    records: GroupCommit<Records>,
    routes: Arc<Routes>,
    settings: Settings,
    wake: Arc<Notify>,
    relay_wake: crate::relay::Wake,
    files: Arc<files::Files>,
}

/// The refusal of a send to a recipient the tenant has suppressed, made without calling the
/// vendor.
fn suppressed_refusal(n: &Notification) -> SendResult {
    SendResult::permanent(Evidence::new(
        herald_provider::SUPPRESSED_STAGE,
        format!(
            "{} is on the tenant's suppression list for {}; not sent",
            n.to, n.channel
        ),
    ))
}

/// What a route's adapter is handed for a notification.
pub(crate) fn message_of(n: &Notification) -> Message {
    Message {
        notification_id: n.id.to_string(),
        channel: n.channel,
        to: n.to.clone(),
        subject: n.content.subject.clone(),
        text: n.content.text.clone(),
        html: n.content.html.clone(),
        payload: n.content.payload.clone(),
        blocks: n.content.blocks.clone(),
        email: n.content.email.clone(),
        expires_at: n.expires_at,
        // The trace it was enqueued in, passed on; the vendor call puts its own in its place
        // where spans are exported.
        trace_parent: n.trace_parent.as_ref().map(|t| t.as_str().to_owned()),
    }
}

impl Worker {
    /// One step for a claimed notification: an attempt (a send) or a reconciliation. Its span
    /// starts a trace of its own and links to the one the notification was enqueued in, which
    /// ended long ago.
    #[tracing::instrument(parent = None, skip_all, fields(
        otel.name = claim.mode.name(),
        notification_id = %claim.notification.id,
        route = %claim.notification.route,
        provider = self.routes.get(&claim.notification.route).map_or("", |r| r.provider()),
        attempt.n = Empty,
        result = Empty,
        reason = Empty,
        stage = Empty,
        trace_id = Empty,
    ))]
    async fn dispatch(&self, mut claim: Claim) {
        // The claim's lease began a moment before: its record is tried until then.
        let leased_until = Instant::now() + self.settings.lease;
        let span = tracing::Span::current();
        if let Some(enqueued) = &claim.notification.trace_parent {
            crate::traces::link(&span, enqueued);
        }
        crate::traces::record_trace_id(&span);
        let route = self
            .routes
            .get(&claim.notification.route)
            .expect("claims take only the routes this process has configured");
        let message = message_of(&claim.notification);
        let key = ProviderKey::new(claim.notification.provider_key());
        // The request fixed at the first claim; prepared now only where that failed, so that
        // the send fails with the route's own reason.
        let request = match claim.request.clone() {
            Some(request) => Ok(request),
            None => route.prepare(&message, &key),
        };
        let call = Call {
            route,
            request: &request,
            message: &message,
            key: &key,
        };
        let decision = match claim.mode {
            ClaimMode::Send { n, suppressed } => {
                // The stored request names its attachments; the vendor gets their contents,
                // put into it once the send may go (see `Route::send`).
                let files = match expiry(&claim.notification, OffsetDateTime::now_utc()) {
                    Some(expired) => Err(expired),
                    None => self.files(&message).await,
                };
                let refusal = match &files {
                    Err(refused) => Some(refused.clone()),
                    Ok(_) => suppressed.then(|| suppressed_refusal(&claim.notification)),
                };
                span.record("attempt.n", n);
                let sent = match (refusal, files) {
                    (Some(refusal), _) => Ok(route.refused(refusal)),
                    (None, files) => {
                        let files = files.unwrap_or_default();
                        let sent = call.send(deadline_of(&claim, n), false, &files).await;
                        if let Ok(Sent { result, .. }) = &sent
                            && route.unsubscribed(result)
                        {
                            self.suppress_unsubscribed(&claim.notification, route.name(), result)
                                .await;
                        }
                        sent
                    }
                };
                traced(&span, &sent);
                let s = situation(route, &claim, &[]);
                policy::decide(&s, step(n, false, false, sent), rand::random())
            }
            ClaimMode::Reconcile => match self.reconcile(&call, &mut claim).await {
                Some(decision) => decision,
                None => return,
            },
        };
        self.commit(&claim, decision, leased_until).await;
    }

    /// The contents of the message's attachments, by SHA-256; else the refusal of its send,
    /// made without calling the vendor: one that may pass where the store cannot be read, a
    /// final one where a file is gone (which retention never does to a notification it keeps).
    async fn files(&self, message: &Message) -> Result<BTreeMap<String, Bytes>, SendResult> {
        let named: Vec<&str> = message
            .email
            .attachments
            .iter()
            .map(|a| a.sha256.as_str())
            .collect();
        if named.is_empty() {
            return Ok(BTreeMap::new());
        }
        let files = self.files.get(&*self.store, &named).await.map_err(|err| {
            SendResult::transient(
                Evidence::new("request", format!("cannot read the attachments: {err}")),
                None,
            )
        })?;
        match message
            .email
            .attachments
            .iter()
            .find(|a| !files.contains_key(&a.sha256))
        {
            None => Ok(files),
            Some(missing) => Err(SendResult::permanent(Evidence::new(
                "request",
                format!(
                    "the content of attachment `{}` (sha256 {}) is not stored; not sent",
                    missing.filename, missing.sha256
                ),
            ))),
        }
    }

    /// The refusal of a resend to a suppressed recipient, made without calling the vendor;
    /// `None` to send. A suppression list that cannot be read is a refusal that may pass:
    /// nothing went out, and the retry reads it again. (A send's was read with its claim.)
    async fn suppression(&self, n: &Notification) -> Option<SendResult> {
        let recipient = suppression_recipient(n.channel, &n.to);
        match self
            .store
            .suppressed(&n.tenant, n.channel, &recipient, n.category.as_deref())
            .await
        {
            Ok(false) => None,
            Ok(true) => Some(suppressed_refusal(n)),
            Err(err) => Some(SendResult::transient(
                Evidence::new(
                    "request",
                    format!("cannot read the suppression list: {err}"),
                ),
                None,
            )),
        }
    }

    /// A vendor refused the recipient because they asked it to stop (an SMS STOP): suppress
    /// them, as a hard bounce would. Best effort: if this fails, the vendor refuses the next
    /// send the same way and it is tried again.
    async fn suppress_unsubscribed(&self, n: &Notification, route: &str, result: &SendResult) {
        let now = OffsetDateTime::now_utc();
        let new = NewSuppression {
            tenant: n.tenant.clone(),
            suppression: Suppression {
                channel: n.channel,
                recipient: suppression_recipient(n.channel, &n.to),
                category: None,
                reason: SuppressionReason::Unsubscribed,
                source: format!("send:{route}"),
                evidence: serde_json::json!({"notification_id": n.id, "answer": result.evidence()}),
                note: None,
                created_at: now,
            },
            principal: format!("send:{route}"),
        };
        if let Err(err) = self.store.suppress(&new).await {
            tracing::warn!(%err, "cannot record the recipient's unsubscribe as a suppression");
        }
    }

    /// Settles the ambiguity: ask, else replay under the same key, else apply the policy.
    /// `None` when the claim was lost on the way.
    async fn reconcile(&self, call: &Call<'_>, claim: &mut Claim) -> Option<Decision> {
        let route = call.route;
        let mut asked = Asked::NotYet;
        let mut findings = None;
        let decision = loop {
            let s = situation(route, claim, &[]);
            match policy::plan(&s, asked) {
                Plan::Query => {
                    let asked_at = OffsetDateTime::now_utc();
                    let result = call.query().await;
                    match looked_up(&*self.store, route, claim, result, asked_at).await {
                        Ok(LookUp::Decided(decision)) => break decision,
                        Ok(LookUp::Failed(evidence)) => {
                            tracing::info!(detail = %evidence.detail, "the outcome query proved nothing");
                            findings = Some(serde_json::json!({"query_failed": evidence}));
                            asked = Asked::Failed;
                        }
                        Ok(LookUp::Inconclusive(look_alikes, record)) => {
                            tracing::info!(look_alikes, "the look-alikes cannot be attributed");
                            findings = Some(record);
                            asked = Asked::Inconclusive;
                        }
                        Err(err) => {
                            tracing::warn!(%err, "cannot read the look-alikes; the lease will bring it back");
                            return None;
                        }
                    }
                }
                plan @ (Plan::Replay | Plan::Resend) => {
                    let replay = plan == Plan::Replay;
                    // Without its attachments the request would be another one: a store that
                    // cannot be read leaves it to the lease; a file that is gone makes the send
                    // impossible, and what became of the first one is for a person to settle.
                    let files = match self.files(call.message).await {
                        Ok(files) => files,
                        Err(SendResult::Rejected {
                            permanent: true,
                            evidence,
                            ..
                        }) => {
                            break policy::still_unknown(
                                serde_json::json!({"cannot_send_again": evidence}),
                            );
                        }
                        Err(unreadable) => {
                            tracing::warn!(detail = %unreadable.evidence().detail, "cannot read the attachments to send again; the lease will bring it back");
                            return None;
                        }
                    };
                    let now = OffsetDateTime::now_utc();
                    let lease = self.settings.lease;
                    let deadline = by_expiry(&claim.notification, now + route.send_window(lease));
                    let attempt = match self.store.start_attempt(claim, now, lease, deadline).await
                    {
                        Ok(Some(attempt)) => attempt,
                        Ok(None) => return None,
                        Err(err) => {
                            tracing::warn!(%err, "cannot start an attempt; the lease will bring it back");
                            return None;
                        }
                    };
                    let n = attempt.n;
                    claim.attempts.push(attempt);
                    // A resend is a new message: not to a recipient suppressed meanwhile. (A
                    // replay asks about the message already sent.)
                    let suppressed = match replay {
                        true => None,
                        false => self.suppression(&claim.notification).await,
                    };
                    let sent = match suppressed {
                        Some(refusal) => Ok(route.refused(refusal)),
                        None => call.send(deadline, replay, &files).await,
                    };
                    let s = situation(route, claim, &[]);
                    break policy::decide(&s, step(n, replay, true, sent), rand::random());
                }
                Plan::Record(decision) => break *decision,
            }
        };
        Some(Decision {
            findings: decision.findings.or(findings),
            ..decision
        })
    }

    /// Records the decision, trying again while the database is away, until the claim's lease
    /// ends (`leased_until`): an answer the vendor gave is worth keeping as long as the claim is
    /// this worker's. If the database stays away past it, recovery treats the attempt as
    /// ambiguous: safe, never lost.
    #[tracing::instrument(name = "record", skip_all, fields(state = Empty))]
    async fn commit(&self, claim: &Claim, mut decision: Decision, leased_until: Instant) {
        for attempt in 1.. {
            match self.records.submit((claim.clone(), decision.clone())).await {
                Ok(Recorded::Applied(n)) => {
                    self.relay_wake.events_written();
                    tracing::Span::current().record("state", n.state.as_str());
                    // The route whose attempts it settled: after a failover, not `n`'s.
                    if let Some(settlement) = &decision.settle {
                        let route = &claim.notification.route;
                        crate::telemetry::settled(route, settlement.by, settlement.accepted);
                    }
                    // A vendor's report, taken while the attempt was in flight, proved what
                    // this step could not: the record finished it delivered.
                    if n.state == State::Delivered
                        && !matches!(
                            decision.next,
                            Next::Finish {
                                state: State::Delivered,
                                ..
                            }
                        )
                    {
                        crate::telemetry::settled(
                            &claim.notification.route,
                            SettledBy::Callback,
                            true,
                        );
                    }
                    self.observe(claim, &decision, &n);
                    return;
                }
                // A sibling's settlement took the vendor message first: keep what this step
                // saw, settle nothing, and look again at once with the sibling's in view.
                Err(StoreError::Conflict(cause)) if decision.settle.is_some() => {
                    tracing::info!(%cause, "a look-alike sibling attributed that message first; looking again");
                    decision = policy::look_again(decision, OffsetDateTime::now_utc());
                }
                Ok(Recorded::Fenced) => {
                    tracing::warn!(
                        "the lease was lost before the result was recorded; kept as evidence only"
                    );
                    return;
                }
                Err(StoreError::Unavailable(_, cause))
                    if Instant::now() + RECORD_PAUSE < leased_until =>
                {
                    tracing::warn!(%cause, attempt, "cannot record yet; retrying");
                    tokio::time::sleep(RECORD_PAUSE).await;
                }
                Err(err) => {
                    tracing::error!(%err, "cannot record the result; the lease will bring it back");
                    return;
                }
            }
        }
    }

    fn observe(&self, claim: &Claim, decision: &Decision, n: &Notification) {
        match &decision.next {
            Next::Finish { state, certainty } => {
                metrics::counter!("herald_notifications_finished_total", "route" => n.route.clone(), "channel" => n.channel.as_str(), "state" => state.as_str(), "certainty" => certainty.as_str()).increment(1);
                let age = OffsetDateTime::now_utc() - claim.notification.created_at;
                metrics::histogram!("herald_end_to_end_seconds")
                    .record(age.as_seconds_f64().max(0.0));
                let attempts = attempts_after(claim, decision);
                match crate::review::reason(n, &attempts) {
                    // Each outcome a person must look at is one WARN line saying why.
                    Some(reason) => tracing::warn!(
                        state = %state,
                        certainty = %certainty,
                        review = %reason,
                        why = %crate::review::why(reason, n, &attempts),
                        "finished; in review"
                    ),
                    None => tracing::info!(state = %state, certainty = %certainty, "finished"),
                }
            }
            Next::Retry { at } | Next::Reconcile { at } => {
                tracing::debug!(state = %n.state, due = %at, "scheduled");
                self.wake.notify_one();
            }
            Next::Failover { route, because } => {
                tracing::warn!(from = %claim.notification.route, to = %route, %because, "failing over");
                self.wake.notify_one();
            }
            Next::Hold { reason, at, .. } => {
                tracing::debug!(%reason, due = %at, "held back by herald; no attempt spent");
                self.wake.notify_one();
            }
        }
    }
}

/// The claim's attempts as `decision` leaves them: its own attempt with its result.
fn attempts_after(claim: &Claim, decision: &Decision) -> Vec<crate::domain::Attempt> {
    let mut attempts = claim.attempts.clone();
    if let Some(outcome) = &decision.attempt
        && let Some(attempt) = attempts.iter_mut().find(|a| a.n == outcome.n)
    {
        attempt.result = outcome.result;
        attempt.permanent = outcome.permanent;
        attempt.evidence = outcome.evidence.clone();
    }
    attempts
}

/// What a route's look-up answer makes of a claimed notification.
enum LookUp {
    /// Record this.
    Decided(Decision),
    /// The look-up itself failed: it proves nothing.
    Failed(Evidence),
    /// This many look-alike messages, which the counts cannot attribute (the candidates, as
    /// evidence).
    Inconclusive(usize, serde_json::Value),
}

/// The step the worker's reconciliation and a person's requery share: the policy's reading
/// of look-up `result`, asked at `asked_at`, with the look-alike siblings it needs (the
/// attempts of look-alike notifications created within the route's age cap before the
/// look-up's window). Fails where the store cannot read them: attributing without them could
/// take a sibling's message.
async fn looked_up(
    store: &dyn Store,
    route: &Route,
    claim: &Claim,
    result: QueryResult,
    asked_at: OffsetDateTime,
) -> Result<LookUp, StoreError> {
    Ok(match result {
        QueryResult::Unsupported { evidence } => LookUp::Failed(evidence),
        QueryResult::LookAlikes {
            refs,
            since,
            evidence,
        } => {
            let siblings = store
                .look_alikes(claim, since - route.limits().max_age)
                .await?;
            let s = situation(route, claim, &siblings);
            match policy::attribute(&s, &refs, since, &evidence, asked_at, rand::random()) {
                Attribution::Decided(decision) => LookUp::Decided(decision),
                Attribution::Inconclusive(record) => LookUp::Inconclusive(refs.len(), record),
            }
        }
        result => {
            let s = situation(route, claim, &[]);
            LookUp::Decided(policy::decide(
                &s,
                Step::Queried { result, asked_at },
                rand::random(),
            ))
        }
    })
}

/// One notification's calls to its route: its stored request (or why there is none), the
/// message it was prepared from, and the key.
#[derive(Clone, Copy)]
struct Call<'a> {
    route: &'a Route,
    request: &'a Result<Request, Evidence>,
    message: &'a Message,
    key: &'a ProviderKey,
}

impl Call<'_> {
    /// `replay`: the request again under its key, to learn what became of the first; it is
    /// never handed to a fallback. `files` are the contents its attachments name.
    async fn send(
        &self,
        deadline: OffsetDateTime,
        replay: bool,
        files: &BTreeMap<String, Bytes>,
    ) -> Result<Sent, Hold> {
        self.route
            .send(
                self.request,
                files,
                self.message,
                self.key,
                deadline,
                replay,
            )
            .await
    }

    async fn query(&self) -> QueryResult {
        self.route.query(self.request, self.message, self.key).await
    }
}

/// The send deadline of attempt `n`, which the claim started: a claim always carries the
/// attempts it started, so a missing one is a claim read wrongly, and sends nothing. The call
/// starts by the notification's expiry too, or it is held and the next claim ends it.
fn deadline_of(claim: &Claim, n: i32) -> OffsetDateTime {
    let started = claim
        .attempts
        .iter()
        .find(|a| a.n == n)
        .map_or(OffsetDateTime::UNIX_EPOCH, |a| a.send_deadline);
    by_expiry(&claim.notification, started)
}

/// `deadline`, or the notification's expiry where that comes first.
fn by_expiry(n: &Notification, deadline: OffsetDateTime) -> OffsetDateTime {
    n.expires_at.map_or(deadline, |at| deadline.min(at))
}

/// The refusal of a send past the notification's expiry, made without calling the vendor;
/// `None` while it may still be sent.
fn expiry(n: &Notification, now: OffsetDateTime) -> Option<SendResult> {
    let at = n.expires_at.filter(|at| *at <= now)?;
    Some(SendResult::permanent(Evidence::new(
        herald_provider::EXPIRED_STAGE,
        format!(
            "expired at {}; not sent",
            at.format(&Rfc3339).unwrap_or_default()
        ),
    )))
}

/// Puts what a send came to on the attempt's span: the vendor's answer (its result, the
/// reason herald counts it by, the stage the exchange reached), or herald's own hold.
fn traced(span: &tracing::Span, sent: &Result<Sent, Hold>) {
    match sent {
        Ok(Sent { result, .. }) => {
            span.record("result", routes::attempt_result(result).as_str());
            span.record("reason", result.reason());
            span.record("stage", result.evidence().stage.as_str());
        }
        Err(hold) => {
            span.record("result", "held");
            span.record("reason", hold.reason.as_str());
        }
    }
}

/// The policy's step for attempt `n`'s call: the vendor's answer, or herald's own hold.
fn step(n: i32, replay: bool, reconciling: bool, sent: Result<Sent, Hold>) -> Step {
    match sent {
        Ok(Sent {
            result,
            overran,
            checked_at,
        }) => Step::Sent {
            n,
            replay,
            result,
            overran,
            checked_at,
        },
        Err(hold) => Step::Held {
            n,
            hold,
            reconciling,
        },
    }
}

/// What the policy knows of a claimed notification on `route`, now.
fn situation<'a>(route: &'a Route, claim: &'a Claim, siblings: &'a [Sibling]) -> Situation<'a> {
    Situation {
        id: claim.notification.id,
        route: route.name(),
        fallback: route.fallback(),
        delivery: claim.notification.delivery,
        capabilities: route.capabilities(),
        attempts: &claim.attempts,
        created_at: claim.notification.created_at,
        budget_from: claim.budget_from,
        since: claim.budget_since.unwrap_or(claim.notification.created_at),
        expires_at: claim.notification.expires_at,
        now: OffsetDateTime::now_utc(),
        limits: route.limits(),
        siblings,
    }
}

/// What a person's requery asked and what it changed.
#[derive(Debug)]
pub struct Requeried {
    /// What the vendor's look-up answered, as evidence.
    pub answer: Evidence,
    /// Whether the answer settled the ambiguity (either way).
    pub settled: bool,
}

/// Why a requery was not made.
#[derive(Debug, thiserror::Error)]
pub enum RequeryRefused {
    #[error("only an `unknown` notification is requeried; this one is {0}")]
    NotUnknown(String),
    #[error("route `{0}` has no outcome query")]
    NoQuery(String),
    #[error(
        "nothing sent on route `{0}` is unsettled for its look-up to settle; an unsettled send on a route it failed over from is for a person to settle"
    )]
    NotHere(String),
    #[error("route `{0}` is not configured in this process")]
    NoRoute(String),
    #[error("the notification changed while it was requeried; read it again")]
    Changed,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A person's requery of a notification in review: the route's outcome query, asked now about
/// the notification's stored request and decided by the same policy as reconciliation (a
/// look-alike still settles only what the counts prove), recorded fenced by the generation the
/// person read. An answer that proves nothing is kept as evidence and changes nothing else;
/// one that needs the visibility lag to pass hands the notification back to the dispatcher.
pub async fn requery(
    store: &dyn Store,
    routes: &Routes,
    detail: crate::store::NotificationDetail,
) -> Result<Requeried, RequeryRefused> {
    let n = &detail.notification;
    if n.state != crate::domain::State::Unknown {
        return Err(RequeryRefused::NotUnknown(n.state.to_string()));
    }
    let route = routes
        .get(&n.route)
        .ok_or_else(|| RequeryRefused::NoRoute(n.route.clone()))?;
    if route.capabilities().query_visibility_lag.is_none() {
        return Err(RequeryRefused::NoQuery(n.route.clone()));
    }
    // The look-up speaks only of this route's sends; an ambiguity left on a route it failed
    // over from is for a person to settle.
    let unsettled_here = detail.attempts.iter().any(|a| {
        a.route == n.route
            && a.result == crate::domain::AttemptResult::Ambiguous
            && a.settled_by.is_none()
    });
    if !unsettled_here {
        return Err(RequeryRefused::NotHere(n.route.clone()));
    }
    let message = message_of(n);
    let key = ProviderKey::new(n.provider_key());
    let request = match detail.request.clone() {
        Some(request) => Ok(request),
        None => route.prepare(&message, &key),
    };
    let claim = Claim::in_review(detail);
    let asked_at = OffsetDateTime::now_utc();
    let result = route.query(&request, &message, &key).await;
    let answer = result.evidence().clone();
    let decision = match looked_up(store, route, &claim, result, asked_at).await? {
        LookUp::Decided(decision) => decision,
        LookUp::Failed(evidence) => {
            policy::still_unknown(serde_json::to_value(&evidence).unwrap_or_default())
        }
        LookUp::Inconclusive(_, record) => policy::still_unknown(record),
    };
    let settled = decision.settle.is_some();
    match store
        .record_in_review(&claim, &decision, OffsetDateTime::now_utc())
        .await?
    {
        Recorded::Applied(_) => Ok(Requeried { answer, settled }),
        Recorded::Fenced => Err(RequeryRefused::Changed),
    }
}

/// Keeps this process's routes to the operators' pauses, read every [`PAUSE_READ_EVERY`], and
/// wakes the dispatcher for a resumed route's waiting work. A read that fails keeps the last
/// one: a pause is not lifted by a database away.
async fn read_pauses(
    store: Arc<dyn Store>,
    routes: Arc<Routes>,
    wake: Arc<Notify>,
    shutdown: CancellationToken,
) {
    loop {
        match store.route_pauses().await {
            Ok(pauses) => {
                if routes.set_paused(&pauses) {
                    wake.notify_one();
                }
            }
            Err(err) => {
                tracing::warn!(%err, "cannot read the routes' pauses; keeping the last read")
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(PAUSE_READ_EVERY) => {}
        }
    }
}

/// Writes a route's circuit changes in this process as its events: `circuit_opened` when it
/// leaves `closed`, `circuit_closed` when it is back. A change that cannot be written is logged
/// and not retried: the metric `herald_route_circuit` still shows it. Runs until the dispatcher
/// has finished its sends, so that a change during the shutdown's drain is written too.
async fn report_circuit(
    store: Arc<dyn Store>,
    route: String,
    mut changes: tokio::sync::watch::Receiver<CircuitState>,
) {
    let process = process_name();
    let mut was = *changes.borrow_and_update();
    while changes.changed().await.is_ok() {
        let now_state = *changes.borrow_and_update();
        let event_type = match (was, now_state) {
            (CircuitState::Closed, CircuitState::Open | CircuitState::HalfOpen) => {
                EventType::CircuitOpened
            }
            (CircuitState::Open | CircuitState::HalfOpen, CircuitState::Closed) => {
                EventType::CircuitClosed
            }
            _ => {
                was = now_state;
                continue;
            }
        };
        was = now_state;
        let event = OutboxEvent::for_route(
            &route,
            event_type,
            serde_json::json!({"process": process}),
            OffsetDateTime::now_utc(),
        );
        if let Err(err) = store.add_event(&event).await {
            tracing::warn!(%err, route, "cannot record the circuit's change as an event");
        }
    }
}

/// This process among others: its host's name and its pid.
fn process_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

/// Keeps the queue and review gauges of `/metrics` current.
async fn refresh_gauges(store: Arc<dyn Store>, shutdown: CancellationToken) {
    // Dead-letter series seen before: set to zero once their count is gone, not left stale.
    let mut dead_seen = std::collections::HashSet::new();
    loop {
        let now = OffsetDateTime::now_utc();
        match store.queue_stats(now).await {
            Ok(stats) => {
                metrics::gauge!("herald_queue_depth", "state" => "queued").set(stats.queued as f64);
                metrics::gauge!("herald_queue_depth", "state" => "sending")
                    .set(stats.sending as f64);
                let age = |at: Option<OffsetDateTime>| {
                    at.map_or(0.0, |at| (now - at).as_seconds_f64().max(0.0))
                };
                metrics::gauge!("herald_queue_oldest_due_seconds").set(age(stats.oldest_due));
                for (reason, count) in &stats.review {
                    metrics::gauge!("herald_review_open", "reason" => reason.as_str())
                        .set(*count as f64);
                }
                metrics::gauge!("herald_review_oldest_seconds").set(age(stats.review_oldest));
                let current: std::collections::HashSet<(String, &str)> = stats
                    .dead_letters
                    .iter()
                    .map(|(route, cause, _)| (route.clone(), cause.as_str()))
                    .collect();
                for (route, cause) in dead_seen.difference(&current) {
                    metrics::gauge!("herald_dead_letters", "route" => route.clone(), "cause" => *cause)
                        .set(0.0);
                }
                for (route, cause, count) in &stats.dead_letters {
                    metrics::gauge!("herald_dead_letters", "route" => route.clone(), "cause" => cause.as_str())
                        .set(*count as f64);
                }
                dead_seen = current;
            }
            Err(err) => tracing::debug!(%err, "cannot refresh queue gauges"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(STATS_INTERVAL) => {}
        }
    }
}
