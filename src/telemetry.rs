//! Logs (tracing, text or JSON), the trace exporter's place among them, and the Prometheus
//! recorder behind `/metrics`.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing::subscriber::Interest;
use tracing::{Level, Metadata};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::prelude::*;

use crate::config::Config;
use crate::domain::{Certainty, Channel, HoldReason, Routing, SettledBy, State};
use crate::traces::Export;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// What [`init`] installed that must be closed at exit: the trace exporter, if the environment
/// asked for one (see [`crate::traces`]). Dropping it exports the spans still batched.
pub struct Telemetry {
    traces: Option<Export>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(traces) = self.traces.take() {
            traces.shutdown();
        }
    }
}

/// Installs the log subscriber, and the trace exporter where `OTEL_EXPORTER_OTLP_ENDPOINT` asks
/// for one; `RUST_LOG` sets the logs' level, never what is traced (herald's own spans at INFO).
/// Call it inside the tokio runtime, and keep what it returns until the process ends.
pub fn init(format: LogFormat) -> Telemetry {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=info"));
    // Colours only for a person at a terminal: a file or a log collector gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    let traces = Export::from_env();
    // Spans only: a log line inside one (a refusal's evidence, a recipient) stays in the logs
    // rather than leave the host as a span event.
    let spans = traces
        .as_ref()
        .map(|export| export.layer().with_filter(HeraldSpans));
    // A second install (tests building several apps) keeps the first subscriber.
    let installed = tracing_subscriber::registry()
        .with(spans)
        .with(logs.with_filter(filter))
        .try_init()
        .is_ok();
    Telemetry {
        traces: traces.filter(|_| installed),
    }
}

/// What the trace exporter is given: herald's own spans at INFO and above, never a log line.
/// Decided once for each callsite: with a filter that left the choice to every call, most root
/// spans of a process on PostgreSQL never reached the exporter (85 of 100 requests' spans
/// lost, their enqueues sent as traces of their own; which state inside tracing-subscriber's
/// per-layer filtering went wrong is not pinned down).
struct HeraldSpans;

impl HeraldSpans {
    fn exports(meta: &Metadata<'_>) -> bool {
        meta.is_span() && *meta.level() <= Level::INFO && meta.target().starts_with("herald")
    }
}

impl<S> Filter<S> for HeraldSpans {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        Self::exports(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        match Self::exports(meta) {
            true => Interest::always(),
            false => Interest::never(),
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::INFO)
    }
}

/// The process-wide metrics recorder: `metrics` has one global recorder, so every app built in
/// this process renders the same registry.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&[
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                ])
                .expect("the bucket list is not empty")
                .build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder was installed first, which herald never does.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
}

/// Every metric family herald exposes, with its `# HELP`: what it counts and in which words.
/// Label values are the API's own (`state`, `certainty`, `settled_by`, review `reason`).
pub const FAMILIES: [(&str, Kind, &str); 32] = [
    (
        "herald_http_requests_total",
        Kind::Counter,
        "HTTP requests answered, by method, route (the path template, e.g. /v1/notifications/{id}; unmatched for a path herald does not serve) and status.",
    ),
    (
        "herald_http_request_seconds",
        Kind::Histogram,
        "Time to answer an HTTP request, by method and route (the path template).",
    ),
    (
        "herald_ready",
        Kind::Gauge,
        "1 while this process is ready (its database answers, its migrations are current, a write commits; what /readyz checks), 0 while it is not; checked every 10 s.",
    ),
    (
        "herald_notifications_accepted_total",
        Kind::Counter,
        "Notifications accepted for delivery (API and inbox); replays are not counted.",
    ),
    (
        "herald_idempotency_replays_total",
        Kind::Counter,
        "Requests answered from a stored idempotent answer.",
    ),
    (
        "herald_attempts_total",
        Kind::Counter,
        "Provider attempts by route, result (accepted, rejected, ambiguous) and reason (rate_limited, vendor_unavailable, connection_refused, not_sent_locally, circuit_open, route_paused, suppressed, permanent, transient, key_reused, accepted, ambiguous).",
    ),
    (
        "herald_holds_total",
        Kind::Counter,
        "Sends herald held back itself, by route and reason (paced, paused, circuit_open, deadline): no attempt, no budget spent; the notification waits until the route can take it.",
    ),
    (
        "herald_reopened_total",
        Kind::Counter,
        "Notifications reopened because later evidence contradicted what was recorded, by route and cause (late_result: an answer read after the lease was lost; callback: a vendor's report).",
    ),
    (
        "herald_duplicates_total",
        Kind::Counter,
        "Reopenings that showed a duplicate: the recipient may have a message more than once where the record said once, by route and cause.",
    ),
    (
        "herald_unreadable_notifications_total",
        Kind::Counter,
        "Due notifications a claim could not read (a stored value this build cannot decode); each is set aside for an hour, logged at ERROR with its id, and delivery goes on for the rest.",
    ),
    (
        "herald_store_statements_total",
        Kind::Counter,
        "Statements this process sent to its database, BEGIN and COMMIT not counted: what enqueues and deliveries cost in round trips (herald bench reports them per notification).",
    ),
    (
        "herald_send_seconds",
        Kind::Histogram,
        "Duration of one provider call, by route.",
    ),
    (
        "herald_notifications_finished_total",
        Kind::Counter,
        "Notifications that reached a final state, by route, channel, state and certainty.",
    ),
    (
        "herald_end_to_end_seconds",
        Kind::Histogram,
        "From acceptance to a final state.",
    ),
    (
        "herald_settlements_total",
        Kind::Counter,
        "Ambiguous attempts settled, once per notification and settlement, by route, what settled them (settled_by: outcome_query, idempotent_replay, review, callback) and whether the vendor had the message (accepted: true, false).",
    ),
    (
        "herald_callbacks_total",
        Kind::Counter,
        "Vendor callback requests, by route and result (taken, repeat, ignored: nothing herald reads, unauthenticated, malformed, vendor_unreachable: what the check needs could not be fetched, unknown_message, rate_limited).",
    ),
    (
        "herald_route_paused",
        Kind::Gauge,
        "1 while an operator has paused the route (POST /v1/routes/{name}/pause), as this process last read: no new sends on it.",
    ),
    (
        "herald_rate_limited_total",
        Kind::Counter,
        "Enqueue requests refused 429 because their token was over its rate_limit_per_second in this process, by token (its name, never its secret).",
    ),
    (
        "herald_route_paused_seconds",
        Kind::Gauge,
        "How long an operator's pause of the route has stood, as this process last read (0 when it is not paused): for an alert on a pause someone forgot.",
    ),
    (
        "herald_queue_depth",
        Kind::Gauge,
        "Notifications waiting (state queued) or in a provider call (state sending).",
    ),
    (
        "herald_queue_oldest_due_seconds",
        Kind::Gauge,
        "How long the most overdue queued notification has waited past its due time, leaving out routes an operator paused (their work waits on purpose; herald_route_paused_seconds shows for how long). Database-wide, like the queue, review, dead-letter and outbox gauges: every process reports the same value, so aggregate them with max, never sum.",
    ),
    (
        "herald_review_open",
        Kind::Gauge,
        "Notifications in review, by reason (unknown, duplicate_possible, exhausted; rejected: permanent refusals, which wait for a person only where [review] permanent_refusals = \"review\"). Closed ones are not counted.",
    ),
    (
        "herald_review_oldest_seconds",
        Kind::Gauge,
        "Age of the oldest notification waiting for a person: unknown, unacknowledged duplicate_possible, or an exhausted dead letter nobody closed.",
    ),
    (
        "herald_dead_letters",
        Kind::Gauge,
        "Failed notifications nobody resolved or closed, by route and cause (exhausted, rejected).",
    ),
    (
        "herald_route_circuit",
        Kind::Gauge,
        "Each route's circuit breaker in this process: 1 on its current state (closed, open, half_open), 0 on the others.",
    ),
    (
        "herald_outbox_backlog",
        Kind::Gauge,
        "Outbox events not yet published to a sink.",
    ),
    (
        "herald_outbox_oldest_seconds",
        Kind::Gauge,
        "Age of the oldest outbox event not yet published to a sink.",
    ),
    (
        "herald_outbox_published_total",
        Kind::Counter,
        "Outbox events a sink acknowledged.",
    ),
    (
        "herald_outbox_failures_total",
        Kind::Counter,
        "Failed publishes to a sink (each is retried).",
    ),
    (
        "herald_retention_deleted_total",
        Kind::Counter,
        "Rows deleted past their retention, by kind (idempotency_records: keys and upstream event ids; notifications: finished notifications with their attempts and events).",
    ),
    (
        "herald_inbox_duplicates_total",
        Kind::Counter,
        "Upstream events received again: answered with the first notifications, nothing created.",
    ),
    (
        "herald_inbox_rejected_total",
        Kind::Counter,
        "Upstream events from NATS that were refused, by reason.",
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Gives every family its `# HELP` line.
fn describe() {
    for (name, kind, help) in FAMILIES {
        match kind {
            Kind::Counter => metrics::describe_counter!(name, help),
            Kind::Gauge => metrics::describe_gauge!(name, help),
            Kind::Histogram => metrics::describe_histogram!(name, help),
        }
    }
}

/// Counts one settlement of a notification's ambiguous attempts.
pub fn settled(route: &str, by: SettledBy, accepted: bool) {
    let accepted = if accepted { "true" } else { "false" };
    metrics::counter!("herald_settlements_total", "route" => route.to_owned(), "settled_by" => by.as_str(), "accepted" => accepted).increment(1);
}

/// Puts the counters' series at zero, so that a dashboard or an alert finds them before the
/// first event they count (a missing series is not a zero to Prometheus): the process-wide
/// ones, and each configured route's, for the channels it is configured to carry (see
/// [`carried`]) and, where it takes vendor callbacks (`takes_callbacks`), for each callback
/// result.
pub fn preregister(config: &Config, routing: &Routing, takes_callbacks: impl Fn(&str) -> bool) {
    for name in [
        "herald_notifications_accepted_total",
        "herald_idempotency_replays_total",
        "herald_inbox_duplicates_total",
        "herald_unreadable_notifications_total",
        "herald_store_statements_total",
    ] {
        metrics::counter!(name).increment(0);
    }
    for reason in crate::inbox::Rejected::REASONS {
        metrics::counter!("herald_inbox_rejected_total", "reason" => reason).increment(0);
    }
    for kind in ["idempotency_records", "notifications", "attachments"] {
        metrics::counter!("herald_retention_deleted_total", "kind" => kind).increment(0);
    }
    for token in config.tokens.iter().filter(|t| t.rate_limit().is_some()) {
        metrics::counter!("herald_rate_limited_total", "token" => token.name.clone()).increment(0);
    }
    for route in config.routes.keys() {
        for (result, reason) in herald_provider::SendResult::REASONS {
            metrics::counter!("herald_attempts_total", "route" => route.clone(), "result" => result, "reason" => reason).increment(0);
        }
        if takes_callbacks(route) {
            for result in CALLBACK_RESULTS {
                metrics::counter!("herald_callbacks_total", "route" => route.clone(), "result" => result).increment(0);
            }
        }
        for channel in carried(config, routing, route) {
            for (state, certainty) in [
                (State::Delivered, Certainty::Known),
                (State::Delivered, Certainty::DuplicatePossible),
                (State::Failed, Certainty::Known),
                (State::Unknown, Certainty::Unknown),
            ] {
                metrics::counter!("herald_notifications_finished_total", "route" => route.clone(), "channel" => channel.as_str(), "state" => state.as_str(), "certainty" => certainty.as_str()).increment(0);
            }
        }
        for reason in HoldReason::ALL {
            metrics::counter!("herald_holds_total", "route" => route.clone(), "reason" => reason.as_str()).increment(0);
        }
        for cause in ["late_result", "callback"] {
            metrics::counter!("herald_reopened_total", "route" => route.clone(), "cause" => cause)
                .increment(0);
            metrics::counter!("herald_duplicates_total", "route" => route.clone(), "cause" => cause).increment(0);
        }
        for by in [
            SettledBy::OutcomeQuery,
            SettledBy::IdempotentReplay,
            SettledBy::Review,
            SettledBy::Callback,
        ] {
            for accepted in ["true", "false"] {
                metrics::counter!("herald_settlements_total", "route" => route.clone(), "settled_by" => by.as_str(), "accepted" => accepted).increment(0);
            }
        }
    }
}

/// The results of `herald_callbacks_total`.
pub const CALLBACK_RESULTS: [&str; 8] = [
    "taken",
    "repeat",
    "ignored",
    "unauthenticated",
    "malformed",
    "vendor_unreachable",
    "unknown_message",
    "rate_limited",
];

/// The channels `route` is configured to carry: those it is the default route of, and those
/// the routes that fall back to it carry. A route neither names is used by name only, for any
/// channel its provider carries. (The config refuses a chain of fallbacks that loops.)
fn carried(config: &Config, routing: &Routing, route: &str) -> Vec<Channel> {
    let mut channels = routing.default_for(route);
    for (name, other) in &config.routes {
        if other.fallback.as_deref() == Some(route) {
            channels.extend(carried(config, routing, name));
        }
    }
    if channels.is_empty()
        && let Some(info) = routing.info(route)
    {
        channels.extend(&info.channels);
    }
    channels.sort_by_key(|c| Channel::ALL.iter().position(|known| known == c));
    channels.dedup();
    channels
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use super::*;

    /// Every `herald_…` name in `text`, a histogram's `_bucket`, `_sum` and `_count` series
    /// taken as its family.
    fn names_in(text: &str) -> BTreeSet<String> {
        let histograms: Vec<&str> = FAMILIES
            .iter()
            .filter(|(_, kind, _)| *kind == Kind::Histogram)
            .map(|(name, ..)| *name)
            .collect();
        text.match_indices("herald_")
            .filter(|(at, _)| !text[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
            .map(|(at, _)| {
                let name: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                histograms
                    .iter()
                    .find(|h| {
                        ["_bucket", "_sum", "_count"]
                            .iter()
                            .any(|suffix| name == format!("{h}{suffix}"))
                    })
                    .map_or(name.clone(), |h| h.to_string())
            })
            .collect()
    }

    fn rust_sources(dir: &Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }

    #[test]
    fn the_families_are_exactly_the_metrics_the_code_records() {
        let mut code = String::new();
        rust_sources(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut code,
        );
        let recorded: BTreeSet<String> = code
            .split("metrics::")
            .skip(1)
            .filter(|call| {
                ["counter!(", "gauge!(", "histogram!("]
                    .iter()
                    .any(|m| call.starts_with(m))
            })
            .flat_map(|call| names_in(&call[..call.find(')').unwrap_or(call.len())]))
            .collect();
        let families: BTreeSet<String> = FAMILIES.iter().map(|(n, ..)| n.to_string()).collect();
        assert_eq!(recorded, families);
    }

    /// Gauges that count the database rather than the process: every replica reports the same
    /// value, so a query must take their `max`, never their sum.
    const DATABASE_WIDE: [&str; 7] = [
        "herald_queue_depth",
        "herald_queue_oldest_due_seconds",
        "herald_review_open",
        "herald_review_oldest_seconds",
        "herald_dead_letters",
        "herald_outbox_backlog",
        "herald_outbox_oldest_seconds",
    ];

    #[test]
    fn every_dashboard_and_alert_query_names_a_metric_herald_exposes() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
        let dashboard =
            std::fs::read_to_string(root.join("grafana/herald-dashboard.json")).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&dashboard).unwrap();
        let panels = parsed["panels"].as_array().unwrap();
        assert!(panels.len() >= 10);
        for panel in panels {
            let targets = panel["targets"].as_array().unwrap();
            assert!(!targets.is_empty(), "panel {} has no query", panel["title"]);
            for target in targets {
                let expr = target["expr"].as_str().unwrap();
                assert!(!names_in(expr).is_empty(), "{expr} names no herald metric");
            }
        }
        // One axis a panel: seconds are plotted apart from counts and rates.
        for panel in panels {
            let seconds = panel["fieldConfig"]["defaults"]["unit"] == "s";
            for target in panel["targets"].as_array().unwrap() {
                let expr = target["expr"].as_str().unwrap();
                assert_eq!(
                    names_in(expr).iter().all(|n| n.ends_with("_seconds")),
                    seconds,
                    "panel {} plots {expr} on an axis of {}",
                    panel["title"],
                    panel["fieldConfig"]["defaults"]["unit"]
                );
            }
        }
        let alerts = std::fs::read_to_string(root.join("prometheus/herald-alerts.yml")).unwrap();
        let tested =
            std::fs::read_to_string(root.join("prometheus/herald-alerts.test.yml")).unwrap();
        // Every rule, and every panel over a gauge each replica reports alike, is proven by
        // `promtool test rules` against two replicas' series (run by CI): a new one is too.
        for rule in alerts
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- alert: "))
        {
            assert!(
                tested.contains(&format!("alertname: {rule}\n")),
                "{rule} has no promtool test"
            );
        }
        for panel in panels {
            for target in panel["targets"].as_array().unwrap() {
                let expr = target["expr"].as_str().unwrap();
                if names_in(expr)
                    .iter()
                    .any(|n| DATABASE_WIDE.contains(&n.as_str()))
                {
                    let as_tested = expr.replace("$route", "mail");
                    assert!(
                        tested.contains(&format!("- expr: {as_tested}\n")),
                        "panel {} ({expr}) has no promtool test with two replicas",
                        panel["title"]
                    );
                }
            }
        }
        let families: BTreeSet<String> = FAMILIES.iter().map(|(n, ..)| n.to_string()).collect();
        for (file, text) in [("dashboard", &dashboard), ("alerts", &alerts)] {
            let unknown: Vec<String> = names_in(text).difference(&families).cloned().collect();
            assert!(
                unknown.is_empty(),
                "the {file} names metrics herald does not expose: {unknown:?}"
            );
        }
    }
}
