//! `herald bench`: herald measured as it is deployed — a `herald serve` child process sending to
//! the sandbox vendor (a `herald sandbox` process of its own) over loopback HTTP, on SQLite or
//! PostgreSQL — and driven over HTTP as upstreams drive it. Progress goes to stderr, a JSON
//! summary to stdout; herald's memory is reported apart from the vendor's.
//!
//! The phases, each on the same database:
//! 1. single enqueue: `notifications` requests with fresh keys at `concurrency`, dispatcher off;
//! 2. batch enqueue: as many again, `batch_size` per request;
//! 3. drain: new processes with the dispatcher on (`--processes`, one by default; more only on
//!    PostgreSQL) deliver the whole backlog, the sandbox route allowed `concurrency` sends in
//!    flight in each, on tables whose statistics are up to date (see [`store::analyze`]); their
//!    CPU time for each delivered notification is read from `/proc` (Linux) beside the rate: it
//!    shows a cost, such as traces', that the rate's spread between runs hides;
//! 4. latency: enqueue at a fixed share of the sustained rate (the slower of phases 1 and 3),
//!    spread over those processes, while they dispatch, then read each notification's accept →
//!    delivered time (its creation to the end of its accepted attempt).
//!
//! `--soak SECONDS` runs instead the quick start's process as a user would leave it running —
//! `serve` with the built-in sandbox vendor in the same process — offered a fixed rate, and
//! samples every 30 s its RSS, the enqueue p99 of the interval, the backlog and the database's
//! size; it ends when every notification is delivered.
//!
//! `--traces` measures herald with traces on: each child exports its spans over OTLP/HTTP to
//! `TraceSink`, a receiver in the bench that counts them and keeps nothing, so that what is
//! measured is herald's export and not a collector's work. `bench/traces.sh` compares runs
//! with and without it.

//!
//! The child processes are `server`'s; the load and what is read of it, `measure`'s.
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::cli::BenchArgs;
use crate::store;

mod measure;
mod server;

use measure::{
    DatabaseCpu, client, delivered, drive, enqueue_one, offered_load, per, percentile, statements,
    wait_delivered,
};
use server::{Server, TraceSink};

/// A token the bench gives its child processes (the dev token: tenant `dev`, all scopes).
const TOKEN: &str = "herald-bench-token-0123456789abcdef";

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.notifications == 0
        || args.concurrency == 0
        || args.batch_size == 0
        || args.processes == 0
    {
        bail!("--notifications, --concurrency, --batch-size and --processes must be at least 1");
    }
    let dir = std::env::temp_dir().join(format!("herald-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let traces = match args.traces {
        true => Some(TraceSink::start().await?),
        false => None,
    };
    let children = Children {
        dir: &dir,
        traces: traces.as_ref(),
        // The phases send as many at once as a peer given the same concurrency runs jobs; the
        // soak runs the route as the quick start leaves it.
        route_concurrency: args.soak.is_none().then_some(args.concurrency),
    };
    let result = match args.soak {
        Some(seconds) => soak(&args, &children, seconds).await,
        None => phases(&args, &children).await,
    };
    let _ = std::fs::remove_dir_all(&dir);
    let summary = result?;
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}

/// Where the bench's child processes keep their logs, where they export traces to, and the
/// sandbox route's concurrency where the bench sets it.
struct Children<'a> {
    dir: &'a Path,
    traces: Option<&'a TraceSink>,
    route_concurrency: Option<usize>,
}

impl Children<'_> {
    /// The spans the children exported, in all and per notification stored; `null` where
    /// traces were off.
    fn traces_summary(&self, stored: usize) -> Value {
        self.traces.map_or(Value::Null, |sink| {
            let spans = sink.spans.load(Ordering::Relaxed);
            json!({
                "spans": spans,
                "spans_per_notification": per(spans as f64, stored),
            })
        })
    }
}

/// The throughput run: enqueue one by one, then in batches, through an API-only herald; drain
/// with the dispatch processes; then offer a steady load to time accept → delivered. Long
/// because the phases must run in this order and each one's figures are read between them.
async fn phases(args: &BenchArgs, children: &Children<'_>) -> anyhow::Result<Value> {
    let url = database_url(args, children.dir);
    if args.processes > 1 && !url.starts_with("postgres") {
        bail!("--processes above 1 needs a PostgreSQL --database-url: SQLite has one writer");
    }
    let bytes_before = store::database_bytes(&url).await.unwrap_or(0);
    let client = client(args.concurrency)?;
    let n = args.notifications;

    // The vendor runs in a process of its own: its ledger keeps every message it took, which
    // is the vendor's memory, not herald's.
    let mut vendor = Server::vendor(children.dir).await?;
    let mut api = Server::herald(&url, "api", false, Some(&vendor.base), children).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_rss = api.rss_kib("VmRSS");
    let api_only = std::slice::from_ref(&api);
    let started = statements(&client, api_only).await?;
    let single = drive(&client, &api, "single enqueue", n, args.concurrency, 1).await?;
    let after_single = statements(&client, api_only).await?;
    let batch = drive(
        &client,
        &api,
        "batch enqueue",
        n,
        args.concurrency.min(4),
        args.batch_size,
    )
    .await?;
    let after_batch = statements(&client, std::slice::from_ref(&api)).await?;
    let api_peak = api.rss_kib("VmHWM");
    api.stop().await;
    // Fresh tables' statistics say they are empty, and PostgreSQL plans the drain's statements
    // for that until autovacuum analyzes them (seen, with them refreshed every 2 s through a
    // whole run: 1,900-2,000 delivered/s against 1,400-1,550, p50 latency 8 ms against 15).
    store::analyze(&url).await?;

    let mut workers = Vec::with_capacity(args.processes);
    for i in 0..args.processes {
        let name = format!("dispatch-{i}");
        workers.push(Server::herald(&url, &name, true, Some(&vendor.base), children).await?);
    }
    // The first processes deliver while the others start: the rate counts from when all run.
    let database_cpu = DatabaseCpu::of(&url).await;
    let drain = wait_delivered(&client, &workers, database_cpu.as_ref(), "drain", 2 * n, 0).await?;
    let drained = statements(&client, &workers).await?;
    // A share of what herald sustains end to end: the slower of accepting and delivering.
    let rate = (single.per_second.min(drain.per_second) * args.latency_share).max(1.0);
    let latency = offered_load(&client, &workers, rate, args.latency_seconds).await?;
    let mut peak_rss = api_peak;
    let mut delivered_by_process = Vec::with_capacity(workers.len());
    for worker in &mut workers {
        delivered_by_process.push(delivered(&client, std::slice::from_ref(worker)).await?);
        peak_rss = peak_rss.max(worker.rss_kib("VmHWM"));
        worker.stop().await;
    }
    let vendor_peak = vendor.rss_kib("VmHWM");
    vendor.stop().await;

    let stored = 2 * n + latency.count;
    let bytes = store::database_bytes(&url)
        .await?
        .saturating_sub(bytes_before);
    Ok(json!({
        "database": store::redact_url(&url).split(':').next().unwrap_or_default(),
        "notifications": n,
        "concurrency": args.concurrency,
        "batch_size": args.batch_size,
        "processes": args.processes,
        "accepted_per_second": {
            "single": single.per_second.round(),
            "batch": batch.per_second.round(),
        },
        "request_ms": {
            "single": single.request_ms(),
            "batch": batch.request_ms(),
        },
        "delivered_per_second": drain.per_second.round(),
        // The drain's processes, all their threads, from the first read of the count to the last.
        "cpu_us_per_delivered": drain.cpu_us_each.map(|us| (us * 10.0).round() / 10.0),
        // The database server's, over the same window: the figure that bounds how far more
        // herald processes on more machines can go, the database being the one shared part.
        "database_cpu_us_per_delivered": drain.database_cpu_us_each.map(|us| (us * 10.0).round() / 10.0),
        "database_cpu_source": database_cpu.as_ref().map(DatabaseCpu::source),
        // Round trips to the database (BEGIN and COMMIT not counted), periodic reads included.
        "statements_per_notification": {
            "single": per(after_single - started, n),
            "batch": per(after_batch - after_single, n),
            "delivered": per(drained, 2 * n),
        },
        "delivered_by_process": delivered_by_process,
        "latency_accept_to_delivered_ms": {
            "offered_per_second": rate.round(),
            "notifications": latency.count,
            "p50": latency.percentile(0.50),
            "p90": latency.percentile(0.90),
            "p99": latency.percentile(0.99),
        },
        "rss_mib": {
            "idle": mib(idle_rss),
            "peak": mib(peak_rss),
            "vendor_peak": mib(vendor_peak),
        },
        "database_bytes_per_1000_notifications": bytes * 1000 / stored.max(1) as u64,
        "traces": children.traces_summary(stored),
    }))
}

/// The soak: see the module's docs.
async fn soak(args: &BenchArgs, children: &Children<'_>, seconds: u64) -> anyhow::Result<Value> {
    const SAMPLE: Duration = Duration::from_secs(30);
    let url = database_url(args, children.dir);
    let bytes_before = store::database_bytes(&url).await.unwrap_or(0);
    let client = client(args.concurrency)?;
    let mut herald = Server::herald(&url, "serve", true, None, children).await?;
    let rate = f64::from(args.soak_rate.max(1));
    let count = (rate * seconds as f64).round() as usize;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let request_ms = Arc::new(std::sync::Mutex::new(Vec::new()));
    let run = OffsetDateTime::now_utc().unix_timestamp_nanos();
    let started = tokio::time::Instant::now();
    let mut sends = tokio::task::JoinSet::new();
    let mut samples = Vec::new();
    let mut next_sample = started + SAMPLE;
    for i in 0..count {
        let at = started + interval.mul_f64(i as f64);
        if at >= next_sample {
            samples.push(soak_sample(&client, &herald, &url, &request_ms, started, i).await?);
            next_sample += SAMPLE;
        }
        tokio::time::sleep_until(at).await;
        let (client, url, took) = (
            client.clone(),
            herald.url("/v1/notifications"),
            request_ms.clone(),
        );
        let key = format!("soak-{run}-{i}");
        sends.spawn(async move {
            let asked = Instant::now();
            enqueue_one(&client, url, &key).await?;
            let ms = asked.elapsed().as_secs_f64() * 1000.0;
            took.lock().unwrap_or_else(|e| e.into_inner()).push(ms);
            Ok::<_, anyhow::Error>(())
        });
        while let Some(sent) = sends.try_join_next() {
            sent??;
        }
    }
    while let Some(sent) = sends.join_next().await {
        sent??;
    }
    let one = std::slice::from_ref(&herald);
    wait_delivered(&client, one, None, "soak deliveries", count, 0).await?;
    samples.push(soak_sample(&client, &herald, &url, &request_ms, started, count).await?);
    let delivered = delivered(&client, one).await?;
    herald.stop().await;
    let bytes = store::database_bytes(&url)
        .await?
        .saturating_sub(bytes_before);
    let rss: Vec<f64> = samples
        .iter()
        .filter_map(|s| s["rss_mib"].as_f64())
        .collect();
    let first = rss.first().copied().unwrap_or(0.0);
    Ok(json!({
        "database": store::redact_url(&url).split(':').next().unwrap_or_default(),
        "soak_seconds": seconds,
        "offered_per_second": args.soak_rate,
        "notifications": count,
        "delivered": delivered,
        "samples": samples,
        "rss_last_over_first": if first > 0.0 { rss.last().copied().unwrap_or(0.0) / first } else { 0.0 },
        "rss_peak_mib": rss.iter().copied().fold(0.0, f64::max),
        "database_bytes_per_notification": bytes / count.max(1) as u64,
        "traces": children.traces_summary(count),
    }))
}

/// One soak sample: elapsed time, herald's RSS, the enqueue p99 since the last sample, the
/// backlog (enqueued, not yet delivered) and the database's size.
async fn soak_sample(
    client: &reqwest::Client,
    herald: &Server,
    url: &str,
    request_ms: &std::sync::Mutex<Vec<f64>>,
    started: tokio::time::Instant,
    enqueued: usize,
) -> anyhow::Result<Value> {
    let mut took = std::mem::take(&mut *request_ms.lock().unwrap_or_else(|e| e.into_inner()));
    took.sort_by(f64::total_cmp);
    let delivered = delivered(client, std::slice::from_ref(herald)).await?;
    let sample = json!({
        "seconds": started.elapsed().as_secs(),
        "rss_mib": mib(herald.rss_kib("VmRSS")),
        "enqueue_p99_ms": percentile(&took, 0.99),
        "backlog": enqueued.saturating_sub(delivered),
        "database_mib": mib(store::database_bytes(url).await.unwrap_or(0) / 1024),
    });
    eprintln!("soak: {sample}");
    Ok(sample)
}

fn database_url(args: &BenchArgs, dir: &Path) -> String {
    match &args.database_url {
        Some(url) => url.clone(),
        None => format!("sqlite://{}", dir.join("bench.db").display()),
    }
}

fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}
