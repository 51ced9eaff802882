//! The outbox relay: every state change commits a
//! CloudEvent to the outbox in its own transaction; the relay publishes each one to every
//! configured sink and marks it published per sink.
//!
//! Per sink, in a loop: **claim** a batch of unpublished events (one transaction; `SKIP LOCKED`
//! on PostgreSQL, so relays in several processes share the work; only the earliest unpublished
//! event of each notification, so one notification's events reach a sink in order), **publish**
//! them with no transaction open, **mark** those the sink took. A crash between publish and mark
//! publishes the same events again when their lease ends, with the same ids: NATS JetStream
//! drops them inside its duplicate window, webhook receivers dedup on `webhook-id`.
//!
//! A failed publish holds the event back with a backoff ([`policy`]); when a whole batch fails
//! the sink is paused, and until one publish succeeds again the relay sends one event at a time,
//! so a sink that is down or refusing gets a probe per pause, never a storm. Events published
//! everywhere are deleted after `relay.retention_seconds`, a small batch per statement.
//! `herald_outbox_backlog{sink}` and `herald_outbox_oldest_seconds{sink}` show what waits.

mod log;
mod nats;
pub mod policy;
mod webhook;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use bytes::Bytes;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::field::Empty;
use uuid::Uuid;

use policy::{Backoff, Failure};

use crate::config::{Config, RelayConfig, SinkConfig};
use crate::domain::cloudevent::Data;
use crate::domain::{CloudEvent, TraceParent};
use crate::store::{ClaimedEvent, Outbox, OutboxEvent};
use herald_provider::excerpt;

/// The sink that takes every event when none is configured.
pub const DEFAULT_SINK: &str = "log";
/// How often the backlog gauges are refreshed.
const GAUGE_INTERVAL: Duration = Duration::from_secs(1);
/// How often the retention looks for events to delete, once it has caught up.
const PRUNE_INTERVAL: Duration = Duration::from_secs(30);
/// How long a relay waits after the database failed it.
const STORE_PAUSE: Duration = Duration::from_secs(1);
/// The least time between the starts of two claims that the store's word of written events
/// brings on: under load, that word comes with every commit, and a claim per signal would cost
/// the database a few round trips for an event or two; this way batches grow with the load.
const WOKEN_GAP: Duration = Duration::from_millis(10);

/// Where events go: publishes a batch and says, per event and in order, whether it landed.
#[async_trait]
pub trait Sink: Send + Sync {
    /// Makes the sink ready to take events (a JetStream stream that must exist), before the
    /// first event and again after a publish found it gone: a consumer may subscribe before
    /// herald has anything to say. Called before each claim, so it must be cheap once ready.
    async fn prepare(&self) -> Result<(), Failure> {
        Ok(())
    }

    /// `Ok` only once the sink holds the event (JetStream's ack, a receiver's 2xx, a written
    /// line): only then is it marked published.
    async fn publish(&self, events: &[Outgoing]) -> Vec<Result<(), Failure>>;
}

/// One event on its way to a sink.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub id: Uuid,
    /// The event type less `dev.herald.`, e.g. `notification.delivered` (a NATS subject's tail).
    pub kind: &'static str,
    /// The CloudEvent in structured mode, and its bytes.
    pub json: Value,
    pub body: Bytes,
    /// Its `traceparent` extension, for a sink whose transport carries one of its own.
    pub trace_parent: Option<TraceParent>,
}

impl Outgoing {
    pub fn of(event: &OutboxEvent) -> Outgoing {
        let json = cloudevent(event).to_json();
        let body = Bytes::from(json.to_string());
        let kind = event.event_type.as_str();
        Outgoing {
            id: event.id,
            kind: kind.strip_prefix("dev.herald.").unwrap_or(kind),
            json,
            body,
            trace_parent: event.trace_parent.clone(),
        }
    }
}

/// An outbox event as the CloudEvent herald publishes (docs/api.md, "Events"), with the trace
/// its notification was enqueued in as the distributed-tracing extension (`traceparent`) where
/// it has one. Structured mode: every sink carries it in the body.
pub fn cloudevent(event: &OutboxEvent) -> CloudEvent {
    let mut extensions = serde_json::Map::new();
    if let Some(trace_parent) = &event.trace_parent {
        extensions.insert("traceparent".into(), trace_parent.as_str().into());
    }
    CloudEvent {
        id: event.id.to_string(),
        // A route's event is herald's own, of no tenant.
        source: match event.tenant.as_str() {
            "" => "/herald".to_owned(),
            tenant => format!("/herald/{tenant}"),
        },
        event_type: event.event_type.as_str().to_owned(),
        subject: Some(event.subject()),
        time: event.created_at.format(&Rfc3339).ok(),
        datacontenttype: Some("application/json".into()),
        dataschema: None,
        extensions,
        data: Some(Data::Json(event.data.clone())),
    }
}

/// How the relay paces itself; from `[relay]`.
#[derive(Debug, Clone)]
pub struct Settings {
    pub batch_size: u32,
    pub lease: Duration,
    pub poll_interval: Duration,
    pub backoff: Backoff,
    pub retention: Duration,
    pub prune_batch: u32,
}

impl From<&RelayConfig> for Settings {
    fn from(config: &RelayConfig) -> Self {
        Settings {
            batch_size: config.batch_size,
            lease: Duration::from_secs(config.lease_seconds),
            poll_interval: Duration::from_millis(config.poll_interval_ms),
            backoff: Backoff {
                base: Duration::from_millis(config.retry_base_ms),
                max: Duration::from_secs(config.retry_max_seconds),
            },
            retention: Duration::from_secs(config.retention_seconds),
            prune_batch: config.prune_batch,
        }
    }
}

pub struct Relay {
    store: Arc<dyn Outbox>,
    sinks: Vec<(String, Arc<dyn Sink>)>,
    /// Every sink's name: an event is done once all of them published it.
    names: Arc<[String]>,
    settings: Settings,
}

/// What one step of a sink's loop did.
enum Stepped {
    /// Nothing was due.
    Idle,
    /// Every claimed event was published; `full` when the claim was as large as allowed.
    Published { full: bool },
    /// Nothing landed: the sink is failing.
    Failed(Failure),
    /// Some landed and some did not (those are held back on their own).
    Partly,
}

impl Relay {
    /// Builds every configured sink (the log sink on stdout if there are none). Checks what can
    /// be checked before any event: secrets, a webhook URL the SSRF guard refuses.
    pub async fn build(config: &Config, store: Arc<dyn Outbox>) -> anyhow::Result<Relay> {
        let mut sinks: Vec<(String, Arc<dyn Sink>)> = Vec::new();
        for (name, sink) in &config.sinks {
            let built = build_sink(name, sink)
                .await
                .with_context(|| format!("sinks.{name}"))?;
            sinks.push((name.clone(), built));
        }
        if sinks.is_empty() {
            sinks.push((DEFAULT_SINK.to_owned(), Arc::new(log::LogSink::stdout())));
        }
        // At zero from start: an alert on failures finds the series before the first one.
        for (name, _) in &sinks {
            metrics::counter!("herald_outbox_published_total", "sink" => name.clone()).increment(0);
            metrics::counter!("herald_outbox_failures_total", "sink" => name.clone()).increment(0);
        }
        let names = sinks.iter().map(|(name, _)| name.clone()).collect();
        Ok(Relay {
            store,
            sinks,
            names,
            settings: Settings::from(&config.relay),
        })
    }

    /// The sinks' names, in configuration order.
    pub fn sink_names(&self) -> &[String] {
        &self.names
    }

    /// Relays until `shutdown`: a loop per sink, the backlog gauges and the retention. A batch
    /// being published when `shutdown` fires is finished and marked first.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tasks = JoinSet::new();
        for (name, sink) in &self.sinks {
            let worker = self.worker(name, sink);
            tasks.spawn(worker.run(shutdown.clone()));
        }
        tasks.spawn(gauges(
            self.store.clone(),
            self.names.clone(),
            shutdown.clone(),
        ));
        tasks.spawn(prune(
            self.store.clone(),
            self.settings.clone(),
            shutdown.clone(),
        ));
        while tasks.join_next().await.is_some() {}
    }

    fn worker(&self, name: &str, sink: &Arc<dyn Sink>) -> SinkWorker {
        SinkWorker {
            store: self.store.clone(),
            name: name.to_owned(),
            sink: sink.clone(),
            names: self.names.clone(),
            settings: self.settings.clone(),
            written: self.store.events_written(),
        }
    }
}

/// Builds sink `name` as the relay would, where that connects to nothing (a webhook sink's
/// secrets and URL); NATS is reached by `check-config --connect` instead, without creating its
/// stream.
pub async fn check_sink(name: &str, config: &SinkConfig) -> anyhow::Result<()> {
    if let SinkConfig::Webhook { .. } = config {
        build_sink(name, config).await?;
    }
    Ok(())
}

async fn build_sink(name: &str, config: &SinkConfig) -> anyhow::Result<Arc<dyn Sink>> {
    Ok(match config {
        SinkConfig::Nats {
            url,
            stream,
            subject_prefix,
            credentials,
            timeout_seconds,
        } => Arc::new(
            nats::NatsSink::new(
                url,
                stream,
                subject_prefix,
                credentials.as_deref(),
                Duration::from_secs(*timeout_seconds),
            )
            .await?,
        ),
        SinkConfig::Webhook {
            url,
            secret,
            secrets,
            allow_private_networks,
            timeout_seconds,
        } => {
            let resolved = secret
                .iter()
                .chain(secrets)
                .enumerate()
                .map(|(i, s)| s.resolve(&format!("sinks.{name} secret #{}", i + 1)))
                .collect::<Result<Vec<_>, _>>()?;
            Arc::new(webhook::WebhookSink::new(
                url,
                resolved,
                *allow_private_networks,
                Duration::from_secs(*timeout_seconds),
            )?)
        }
        SinkConfig::Log { path: None } => Arc::new(log::LogSink::stdout()),
        SinkConfig::Log { path: Some(path) } => Arc::new(log::LogSink::file(path)?),
    })
}

/// One sink's loop.
struct SinkWorker {
    store: Arc<dyn Outbox>,
    name: String,
    sink: Arc<dyn Sink>,
    names: Arc<[String]>,
    settings: Settings,
    /// The store's word that this process committed events: a signal sent while the loop is
    /// busy is kept for it, so none is lost between a claim that found nothing and the wait
    /// after it. Events another process commits wait for the poll.
    written: watch::Receiver<()>,
}

impl SinkWorker {
    async fn run(mut self, shutdown: CancellationToken) {
        // Failed batches in a row: while any, the relay probes with one event at a time.
        let mut failing: u32 = 0;
        while !shutdown.is_cancelled() {
            let stepped_at = tokio::time::Instant::now();
            let limit = if failing > 0 {
                1
            } else {
                self.settings.batch_size
            };
            // A sink that failed waits out its pause whatever is written meanwhile.
            let (wait, woken) = match self.step(limit, failing).await {
                Ok(Stepped::Published { full: true }) => {
                    failing = 0;
                    continue;
                }
                // One commit may write several events of one notification (a report's receipt
                // and its delivery), and each claim takes only the earliest: what it left waits
                // for no further word, so the loop looks again shortly, and only an idle step
                // waits for the next word or the poll.
                Ok(Stepped::Published { full: false } | Stepped::Partly) => {
                    failing = 0;
                    (WOKEN_GAP, false)
                }
                Ok(Stepped::Idle) => (self.settings.poll_interval, true),
                Ok(Stepped::Failed(failure)) => {
                    failing += 1;
                    let pause = self
                        .settings
                        .backoff
                        .delay(&failure, failing, rand::random());
                    tracing::warn!(sink = %self.name, reason = failure.reason(), failing,
                        pause_ms = pause.as_millis() as u64, "the sink failed; pausing it");
                    (pause, false)
                }
                Err(err) => {
                    tracing::warn!(sink = %self.name, err = format!("{err:#}"), "the relay cannot reach the database");
                    (STORE_PAUSE, false)
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = tokio::time::sleep(wait) => {}
                Ok(()) = self.written.changed(), if woken => {
                    tokio::time::sleep_until(stepped_at + WOKEN_GAP).await;
                }
            }
        }
    }

    /// Claims up to `limit` events, publishes them and records the outcome. `failing` counts
    /// the failed batches before this one (it sets how long a failing batch is held back).
    #[tracing::instrument(skip_all, fields(sink = %self.name, idle = Empty))]
    async fn step(&self, limit: u32, failing: u32) -> anyhow::Result<Stepped> {
        if let Err(failure) = self.sink.prepare().await {
            return Ok(Stepped::Failed(failure));
        }
        let now = OffsetDateTime::now_utc();
        let claimed = self
            .store
            .claim_events(&self.name, now, self.settings.lease, limit)
            .await?;
        if claimed.is_empty() {
            // A poll that found nothing is not traced (crate::traces::IDLE).
            tracing::Span::current().record("idle", true);
            return Ok(Stepped::Idle);
        }
        let outgoing: Vec<Outgoing> = claimed.iter().map(|c| Outgoing::of(&c.event)).collect();
        let spans: Vec<tracing::Span> = claimed.iter().map(|c| self.publish_span(c)).collect();
        let outcomes = self.sink.publish(&outgoing).await;
        let mut published = Vec::new();
        let mut failed: Vec<(&ClaimedEvent, Failure)> = Vec::new();
        for ((claim, outcome), span) in claimed.iter().zip(outcomes).zip(spans) {
            span.record(
                "result",
                match &outcome {
                    Ok(()) => "published",
                    Err(_) => "failed",
                },
            );
            match outcome {
                Ok(()) => published.push(claim.event.id),
                Err(failure) => failed.push((claim, failure)),
            }
        }
        let now = OffsetDateTime::now_utc();
        self.store
            .mark_published(&self.name, &published, &self.names, now)
            .await?;
        metrics::counter!("herald_outbox_published_total", "sink" => self.name.clone())
            .increment(published.len() as u64);
        if failed.is_empty() {
            return Ok(Stepped::Published {
                full: claimed.len() == limit as usize,
            });
        }
        metrics::counter!("herald_outbox_failures_total", "sink" => self.name.clone())
            .increment(failed.len() as u64);
        let everything_failed = published.is_empty();
        if everything_failed {
            // The sink's doing: every event is held as long as the sink pauses.
            let (_, failure) = &failed[0];
            let hold = self
                .settings
                .backoff
                .delay(failure, failing + 1, rand::random());
            let ids: Vec<Uuid> = failed.iter().map(|(c, _)| c.event.id).collect();
            self.store
                .hold_back(&self.name, &ids, now + hold, &excerpt(failure.reason()))
                .await?;
        } else {
            // One event failing among others that landed is its own: held by its own count.
            for (claim, failure) in &failed {
                let failures = claim.failures.max(0) as u32 + 1;
                let hold = self
                    .settings
                    .backoff
                    .delay(failure, failures, rand::random());
                tracing::info!(sink = %self.name, event_id = %claim.event.id, reason = failure.reason(),
                    hold_ms = hold.as_millis() as u64, "an event was not published; holding it back");
                self.store
                    .hold_back(
                        &self.name,
                        &[claim.event.id],
                        now + hold,
                        &excerpt(failure.reason()),
                    )
                    .await?;
            }
        }
        Ok(if everything_failed {
            let (_, first) = failed.swap_remove(0);
            Stepped::Failed(first)
        } else {
            Stepped::Partly
        })
    }

    /// The span of one event's publish to this sink, from before the sink is handed its batch
    /// to when its outcome is known; linked to the trace its notification was enqueued in.
    fn publish_span(&self, claimed: &ClaimedEvent) -> tracing::Span {
        let event = &claimed.event;
        let span = tracing::info_span!(
            "relay publish",
            otel.kind = "producer",
            sink = %self.name,
            cloudevents.event_type = event.event_type.as_str(),
            cloudevents.event_id = %event.id,
            notification_id = %event.notification_id,
            result = Empty,
        );
        if let Some(enqueued) = &event.trace_parent {
            crate::traces::link(&span, enqueued);
        }
        span
    }
}

/// Keeps `herald_outbox_backlog{sink}` and `herald_outbox_oldest_seconds{sink}` current.
async fn gauges(store: Arc<dyn Outbox>, names: Arc<[String]>, shutdown: CancellationToken) {
    loop {
        for name in names.iter() {
            match store.outbox_backlog(name).await {
                Ok(backlog) => {
                    let oldest = backlog.oldest.map_or(0.0, |at| {
                        (OffsetDateTime::now_utc() - at).as_seconds_f64().max(0.0)
                    });
                    metrics::gauge!("herald_outbox_backlog", "sink" => name.clone())
                        .set(backlog.events as f64);
                    metrics::gauge!("herald_outbox_oldest_seconds", "sink" => name.clone())
                        .set(oldest);
                }
                Err(err) => {
                    tracing::debug!(%err, sink = %name, "cannot refresh the backlog gauges")
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(GAUGE_INTERVAL) => {}
        }
    }
}

/// Deletes events that every sink published more than the retention ago, a batch at a time.
async fn prune(store: Arc<dyn Outbox>, settings: Settings, shutdown: CancellationToken) {
    loop {
        let before = OffsetDateTime::now_utc() - settings.retention;
        let wait = match store.prune_outbox(before, settings.prune_batch).await {
            // A full batch: more may be waiting; let other work in between.
            Ok(deleted) if deleted >= u64::from(settings.prune_batch) => Duration::from_millis(10),
            Ok(deleted) => {
                if deleted > 0 {
                    tracing::debug!(deleted, "deleted published events past their retention");
                }
                PRUNE_INTERVAL
            }
            Err(err) => {
                tracing::warn!(%err, "cannot delete published events");
                PRUNE_INTERVAL
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}
