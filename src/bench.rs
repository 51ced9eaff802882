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
//! [`TraceSink`], a receiver in the bench that counts them and keeps nothing, so that what is
//! measured is herald's export and not a collector's work. `bench/traces.sh` compares runs
//! with and without it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::process::{Child, Command};

use crate::cli::BenchArgs;
use crate::store;

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
    let drain = wait_delivered(&client, &workers, "drain", 2 * n, 0).await?;
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
    wait_delivered(&client, one, "soak deliveries", count, 0).await?;
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

/// An OTLP/HTTP trace receiver (`POST /v1/traces`, protobuf) that counts the spans it is sent
/// and keeps nothing.
struct TraceSink {
    endpoint: String,
    spans: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl TraceSink {
    async fn start() -> anyhow::Result<TraceSink> {
        use opentelemetry_proto::tonic::collector::trace::v1::{
            ExportTraceServiceRequest, ExportTraceServiceResponse,
        };
        use prost::Message as _;

        let spans = Arc::new(AtomicUsize::new(0));
        let counted = spans.clone();
        let receive = move |body: axum::body::Bytes| {
            let counted = counted.clone();
            async move {
                let Ok(export) = ExportTraceServiceRequest::decode(body) else {
                    return Err(axum::http::StatusCode::BAD_REQUEST);
                };
                let n: usize = export
                    .resource_spans
                    .iter()
                    .flat_map(|resource| &resource.scope_spans)
                    .map(|scope| scope.spans.len())
                    .sum();
                counted.fetch_add(n, Ordering::Relaxed);
                Ok((
                    [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")],
                    ExportTraceServiceResponse::default().encode_to_vec(),
                ))
            }
        };
        let router = axum::Router::new().route("/v1/traces", axum::routing::post(receive));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(TraceSink {
            endpoint,
            spans,
            task,
        })
    }
}

impl Drop for TraceSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A child process on a free loopback port; killed if dropped without [`Server::stop`].
struct Server {
    child: Child,
    base: String,
}

impl Server {
    /// `herald serve` with its one route on the sandbox vendor at `vendor`; without one, on
    /// the built-in sandbox vendor inside the process, as the quick start runs.
    async fn herald(
        url: &str,
        name: &str,
        dispatch: bool,
        vendor: Option<&str>,
        children: &Children<'_>,
    ) -> anyhow::Result<Server> {
        Self::start(children.dir, name, "/readyz", |command, listen| {
            command
                .arg("serve")
                .env_remove("HERALD_CONFIG")
                .env("HERALD_DATABASE__URL", url)
                .env("HERALD_SERVER__LISTEN", listen)
                .env("HERALD_DEV_TOKEN", TOKEN)
                .env("HERALD_DISPATCH__ENABLED", dispatch.to_string())
                .env("HERALD_ROUTES__SANDBOX__PROVIDER", "sandbox")
                .env("HERALD_CHANNELS__EMAIL", "sandbox")
                // Events are herald's own work, but not what the peers it is compared with do.
                .env("HERALD_RELAY__ENABLED", "false");
            if let Some(vendor) = vendor {
                command.env("HERALD_ROUTES__SANDBOX__BASE_URL", vendor);
            }
            if let Some(sends) = children.route_concurrency {
                command.env("HERALD_ROUTES__SANDBOX__CONCURRENCY", sends.to_string());
            }
            if let Some(sink) = children.traces {
                // The bench's own receiver, and nothing the environment would put in its place.
                command
                    .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                    .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
                    .env("OTEL_EXPORTER_OTLP_ENDPOINT", &sink.endpoint)
                    .env("OTEL_SERVICE_NAME", format!("herald-bench-{name}"));
            }
        })
        .await
    }

    /// `herald sandbox`, the stand-in vendor.
    async fn vendor(dir: &Path) -> anyhow::Result<Server> {
        Self::start(dir, "vendor", "/profile", |command, listen| {
            command.args(["sandbox", "--listen", listen]);
        })
        .await
    }

    /// A child of this binary, set up by `configure` to listen on the address it is given,
    /// once `ready` answers 2xx.
    async fn start(
        dir: &Path,
        name: &str,
        ready: &str,
        configure: impl FnOnce(&mut Command, &str),
    ) -> anyhow::Result<Server> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = std::fs::File::create(log_path(dir, name))?;
        let mut command = Command::new(std::env::current_exe()?);
        configure(&mut command, &format!("127.0.0.1:{port}"));
        let child = command
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start the {name} process"))?;
        let mut server = Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let started = Instant::now();
        while !reqwest::get(server.url(ready))
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            if let Some(status) = server.child.try_wait()? {
                bail!(
                    "the {name} process exited ({status}) before it was ready; its log: {}",
                    log_path(dir, name).display()
                );
            }
            if started.elapsed() > Duration::from_secs(60) {
                bail!("the {name} process was not ready within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(server)
    }

    /// A memory figure of the child from `/proc` (`VmRSS` now, `VmHWM` its peak), in KiB.
    fn rss_kib(&self, field: &str) -> u64 {
        let Some(pid) = self.child.id() else { return 0 };
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// The CPU time the child has used so far, user and system, all its threads.
    fn cpu_time(&self) -> Option<Duration> {
        let pid = self.child.id()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command name (in parentheses, and it may hold spaces): utime and stime are
        // the 12th and 13th fields, in USER_HZ ticks: 100 a second on every architecture but
        // Alpha.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
        Some(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
    }

    /// SIGTERM, and the child's own orderly exit.
    async fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = Command::new("kill").arg(pid.to_string()).status().await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

fn log_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.log"))
}

/// How many requests took how long, and at what rate the notifications were accepted.
struct Throughput {
    per_second: f64,
    request_ms: Vec<f64>,
}

impl Throughput {
    fn request_ms(&self) -> Value {
        let mut sorted = self.request_ms.clone();
        sorted.sort_by(f64::total_cmp);
        json!({ "p50": percentile(&sorted, 0.5), "p99": percentile(&sorted, 0.99) })
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    (sorted[i] * 10.0).round() / 10.0
}

/// One enqueue under `key` at `url` (`/v1/notifications`); any answer but 202 is an error.
/// The bench's HTTP client, keeping up to `idle` connections. herald closes a connection idle
/// for `server.header_timeout_seconds` (10 s by default), so one the pool kept longer may be
/// closing just as a request goes out on it: the pool lets them go after 5 s.
fn client(idle: usize) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(idle)
        .pool_idle_timeout(Duration::from_secs(5))
        .build()?)
}

/// One enqueue, as an upstream service makes it: a request whose connection failed before an
/// answer is sent again under the same key, which herald answers once.
async fn enqueue_one(client: &reqwest::Client, url: String, key: &str) -> anyhow::Result<()> {
    let send = || {
        client
            .post(&url)
            .bearer_auth(TOKEN)
            .header("Idempotency-Key", key)
            .json(&email(key))
            .send()
    };
    let answer = match send().await {
        Err(err) if err.is_connect() || err.is_request() => send().await?,
        answer => answer?,
    };
    if answer.status() != 202 {
        bail!(
            "enqueue answered {}: {}",
            answer.status(),
            answer.text().await?
        );
    }
    Ok(())
}

fn email(key: &str) -> Value {
    json!({
        "channel": "email",
        "to": format!("{key}@bench.example"),
        "subject": "Your export is ready",
        "text": "Download it within seven days.",
    })
}

/// Enqueues `n` notifications, `per_request` to a request (1: the single endpoint), from
/// `concurrency` connections; every answer must be 202 (single) or 200 with 202 items.
async fn drive(
    client: &reqwest::Client,
    server: &Server,
    phase: &'static str,
    n: usize,
    concurrency: usize,
    per_request: usize,
) -> anyhow::Result<Throughput> {
    let requests = n.div_ceil(per_request);
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let progress = Progress::start(phase, n, done.clone());
    let started = Instant::now();
    let run = OffsetDateTime::now_utc().unix_timestamp_nanos();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, next, done) = (client.clone(), next.clone(), done.clone());
        let (single, batch) = (
            server.url("/v1/notifications"),
            server.url("/v1/notifications/batch"),
        );
        workers.spawn(async move {
            let mut took = Vec::new();
            loop {
                let r = next.fetch_add(1, Ordering::Relaxed);
                if r >= requests {
                    return Ok::<_, anyhow::Error>(took);
                }
                let first = r * per_request;
                let count = per_request.min(n - first);
                let asked = Instant::now();
                if per_request == 1 {
                    let key = format!("{phase}-{run}-{first}").replace(' ', "-");
                    enqueue_one(&client, single.clone(), &key).await?;
                } else {
                    let items: Vec<Value> = (first..first + count)
                        .map(|i| {
                            let key = format!("{phase}-{run}-{i}").replace(' ', "-");
                            let mut item = email(&key);
                            item["idempotency_key"] = json!(key);
                            item
                        })
                        .collect();
                    let answer = client
                        .post(&batch)
                        .bearer_auth(TOKEN)
                        .json(&json!({ "items": items }))
                        .send()
                        .await?;
                    let status = answer.status();
                    let body: Value = answer.json().await?;
                    let accepted = body["results"]
                        .as_array()
                        .is_some_and(|r| r.iter().all(|item| item["status"] == 202));
                    if status != 200 || !accepted {
                        bail!("batch enqueue answered {status}: {body}");
                    }
                }
                took.push(asked.elapsed().as_secs_f64() * 1000.0);
                done.fetch_add(count, Ordering::Relaxed);
            }
        });
    }
    let mut request_ms = Vec::with_capacity(requests);
    while let Some(worker) = workers.join_next().await {
        request_ms.extend(worker??);
    }
    let seconds = started.elapsed().as_secs_f64();
    progress.finish();
    Ok(Throughput {
        per_second: n as f64 / seconds,
        request_ms,
    })
}

/// How fast the servers delivered, and what it cost them.
struct Delivery {
    per_second: f64,
    /// Their CPU time for each notification delivered, in µs; `None` where `/proc` cannot
    /// say, or where every notification had been delivered before the first read.
    cpu_us_each: Option<f64>,
}

/// Waits until the servers' dispatchers have delivered `total` notifications beyond `already`,
/// and answers the rate they delivered them at from the call on, and their CPU time for each
/// from the first count read on (what they delivered before the first read counts for neither).
async fn wait_delivered(
    client: &reqwest::Client,
    servers: &[Server],
    phase: &'static str,
    total: usize,
    already: usize,
) -> anyhow::Result<Delivery> {
    let done = Arc::new(AtomicUsize::new(0));
    let progress = Progress::start(phase, total, done.clone());
    let started = Instant::now();
    let mut last_change = (Instant::now(), 0);
    let mut first_read = None;
    loop {
        let delivered = delivered(client, servers).await?.saturating_sub(already);
        let (at_start, cpu_at_start) =
            *first_read.get_or_insert_with(|| (delivered, cpu_time(servers)));
        done.store(delivered, Ordering::Relaxed);
        if delivered >= total {
            progress.finish();
            let counted = total - at_start.min(total);
            let cpu_us_each = match (cpu_at_start, cpu_time(servers)) {
                (Some(from), Some(to)) if counted > 0 => {
                    Some(to.saturating_sub(from).as_secs_f64() * 1e6 / counted as f64)
                }
                _ => None,
            };
            return Ok(Delivery {
                per_second: counted as f64 / started.elapsed().as_secs_f64(),
                cpu_us_each,
            });
        }
        if delivered != last_change.1 {
            last_change = (Instant::now(), delivered);
        } else if last_change.0.elapsed() > Duration::from_secs(30) {
            bail!("no delivery for 30 s: {delivered} of {total} delivered");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The processes' CPU time together, where `/proc` has it for each.
fn cpu_time(servers: &[Server]) -> Option<Duration> {
    servers.iter().map(Server::cpu_time).sum()
}

/// The notifications these processes have finished as delivered, from their own metrics.
async fn delivered(client: &reqwest::Client, servers: &[Server]) -> anyhow::Result<usize> {
    let delivered = |line: &str| {
        line.starts_with("herald_notifications_finished_total{")
            && line.contains("state=\"delivered\"")
    };
    Ok(metric_sum(client, servers, delivered).await? as usize)
}

/// The statements the processes have sent to the database so far.
async fn statements(client: &reqwest::Client, servers: &[Server]) -> anyhow::Result<f64> {
    let statements = |line: &str| line.starts_with("herald_store_statements_total ");
    metric_sum(client, servers, statements).await
}

/// The sum, over the processes, of the `/metrics` samples whose lines `pick` takes.
async fn metric_sum(
    client: &reqwest::Client,
    servers: &[Server],
    pick: impl Fn(&str) -> bool,
) -> anyhow::Result<f64> {
    let mut total = 0.0;
    for server in servers {
        let text = client
            .get(server.url("/metrics"))
            .send()
            .await?
            .text()
            .await?;
        total += text
            .lines()
            .filter(|line| pick(line))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
    }
    Ok(total)
}

/// `count` over `notifications`, to one decimal.
fn per(count: f64, notifications: usize) -> f64 {
    (count / notifications.max(1) as f64 * 10.0).round() / 10.0
}

/// Accept → delivered times of the notifications enqueued in the latency phase.
struct Latencies {
    count: usize,
    sorted_ms: Vec<f64>,
}

impl Latencies {
    fn percentile(&self, q: f64) -> f64 {
        percentile(&self.sorted_ms, q)
    }
}

/// Enqueues at `rate` per second for `seconds` (an open loop: a slow answer does not slow the
/// next request), spread over `servers` as a load balancer would, waits for every delivery,
/// then reads each notification's timeline.
async fn offered_load(
    client: &reqwest::Client,
    servers: &[Server],
    rate: f64,
    seconds: u64,
) -> anyhow::Result<Latencies> {
    let server = &servers[0];
    let already = delivered(client, servers).await?;
    let since = OffsetDateTime::now_utc();
    let count = (rate * seconds as f64).round().max(1.0) as usize;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let done = Arc::new(AtomicUsize::new(0));
    let progress = Progress::start("offered load", count, done.clone());
    let started = tokio::time::Instant::now();
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..count {
        tokio::time::sleep_until(started + interval.mul_f64(i as f64)).await;
        let (client, url, done) = (
            client.clone(),
            servers[i % servers.len()].url("/v1/notifications"),
            done.clone(),
        );
        let key = format!("latency-{}-{i}", since.unix_timestamp_nanos());
        sends.spawn(async move {
            let enqueued = enqueue_one(&client, url, &key).await;
            done.fetch_add(1, Ordering::Relaxed);
            enqueued
        });
    }
    while let Some(sent) = sends.join_next().await {
        sent??;
    }
    progress.finish();
    wait_delivered(client, servers, "deliveries", count, already).await?;

    let mut sorted_ms = Vec::with_capacity(count);
    let mut cursor: Option<String> = None;
    let after = since
        .format(&time::format_description::well_known::Rfc3339)
        .expect("a time formats as RFC 3339");
    loop {
        let mut query = vec![
            ("created_after", after.clone()),
            ("state", "delivered".to_owned()),
            ("limit", "200".to_owned()),
        ];
        query.extend(cursor.take().map(|c| ("cursor", c)));
        let page: Value = client
            .get(server.url("/v1/notifications"))
            .bearer_auth(TOKEN)
            .query(&query)
            .send()
            .await?
            .json()
            .await?;
        for n in page["data"].as_array().context("a list page has data")? {
            sorted_ms.push(accept_to_delivered_ms(n).context("a delivered notification")?);
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    sorted_ms.sort_by(f64::total_cmp);
    Ok(Latencies { count, sorted_ms })
}

fn accept_to_delivered_ms(n: &Value) -> Option<f64> {
    let at = |v: &Value| {
        OffsetDateTime::parse(v.as_str()?, &time::format_description::well_known::Rfc3339).ok()
    };
    let created = at(&n["created_at"])?;
    let accepted = n["attempts"]
        .as_array()?
        .iter()
        .rfind(|a| a["result"] == "accepted")?;
    let finished = at(&accepted["finished_at"])?;
    Some((finished - created).as_seconds_f64() * 1000.0)
}

/// One line a second on stderr while a phase runs.
struct Progress {
    ticker: tokio::task::JoinHandle<()>,
    phase: &'static str,
    total: usize,
    started: Instant,
}

impl Progress {
    fn start(phase: &'static str, total: usize, done: Arc<AtomicUsize>) -> Progress {
        let started = Instant::now();
        let ticker = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            loop {
                tick.tick().await;
                let done = done.load(Ordering::Relaxed);
                let rate = done as f64 / started.elapsed().as_secs_f64();
                eprintln!("{phase}: {done}/{total} ({rate:.0}/s)");
            }
        });
        Progress {
            ticker,
            phase,
            total,
            started,
        }
    }

    fn finish(self) {
        self.ticker.abort();
        let seconds = self.started.elapsed().as_secs_f64();
        eprintln!(
            "{}: {} in {seconds:.1} s ({:.0}/s)",
            self.phase,
            self.total,
            self.total as f64 / seconds
        );
    }
}
