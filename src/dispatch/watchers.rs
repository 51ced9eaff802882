//! The background watchers beside the claim loop: route pauses, circuit changes, gauges.

use std::sync::Arc;

use time::OffsetDateTime;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::STATS_INTERVAL;
use super::routes::PAUSE_READ_EVERY;
use super::{CircuitState, Routes};
use crate::store::{EventType, OutboxEvent, Store};

/// Keeps this process's routes to the operators' pauses, read every [`PAUSE_READ_EVERY`], and
/// wakes the dispatcher for a resumed route's waiting work. A read that fails keeps the last
/// one: a pause is not lifted by a database away.
pub(super) async fn read_pauses(
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
pub(super) async fn report_circuit(
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
pub(super) async fn refresh_gauges(store: Arc<dyn Store>, shutdown: CancellationToken) {
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
