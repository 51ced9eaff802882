//! The worker: one claimed notification's step, from its claim to its recorded result —
//! checks herald makes itself (expiry, suppression, files), the call or the look-up, the commit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use herald_provider::{Evidence, Message, ProviderKey, QueryResult, Request, SendResult};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::Notify;

use super::policy::{Asked, Attribution, Hold, Plan, Situation, Step};
use super::routes::Sent;
use super::{RECORD_PAUSE, Route, Routes, Settings, files, policy, routes};
use crate::domain::{
    Decision, Next, Notification, SettledBy, Sibling, Suppression, SuppressionReason,
    suppression_recipient,
};
use crate::store::{
    Claim, ClaimMode, GroupCommit, NewSuppression, Recorded, Records, Store, StoreError,
};
use tracing::field::Empty;

/// One claimed notification's journey through a step; cheap to clone per task.
#[derive(Clone)]
pub(super) struct Worker {
    pub(super) store: Arc<dyn Store>,
    pub(super) records: GroupCommit<Records>,
    pub(super) routes: Arc<Routes>,
    pub(super) settings: Settings,
    pub(super) wake: Arc<Notify>,
    pub(super) files: Arc<files::Files>,
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
    pub(super) async fn dispatch(&self, mut claim: Claim) {
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
        let message = Message::from(&claim.notification);
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
                Ok(Recorded::Applied {
                    notification: n,
                    settled_by_report,
                }) => {
                    tracing::Span::current().record("state", n.state.as_str());
                    // The route whose attempts it settled: after a failover, not `n`'s.
                    if let Some(settlement) = &decision.settle {
                        let route = &claim.notification.route;
                        crate::telemetry::settled(route, settlement.by, settlement.accepted);
                    }
                    if settled_by_report {
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
pub(super) enum LookUp {
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
pub(super) async fn looked_up(
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
