//! What a bench measures and how: the load it offers, deliveries waited for, CPU and statement
//! counts read from the processes and `/metrics`, latencies and their percentiles.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::TOKEN;
use super::server::Server;

/// How many requests took how long, and at what rate the notifications were accepted.
pub(super) struct Throughput {
    pub(super) per_second: f64,
    pub(super) request_ms: Vec<f64>,
}

impl Throughput {
    pub(super) fn request_ms(&self) -> Value {
        let mut sorted = self.request_ms.clone();
        sorted.sort_by(f64::total_cmp);
        json!({ "p50": percentile(&sorted, 0.5), "p99": percentile(&sorted, 0.99) })
    }
}

pub(super) fn percentile(sorted: &[f64], q: f64) -> f64 {
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
pub(super) fn client(idle: usize) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(idle)
        .pool_idle_timeout(Duration::from_secs(5))
        .build()?)
}

/// One enqueue, as an upstream service makes it: a request whose connection failed before an
/// answer is sent again under the same key, which herald answers once.
pub(super) async fn enqueue_one(
    client: &reqwest::Client,
    url: String,
    key: &str,
) -> anyhow::Result<()> {
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

pub(super) fn email(key: &str) -> Value {
    json!({
        "channel": "email",
        "to": format!("{key}@bench.example"),
        "subject": "Your export is ready",
        "text": "Download it within seven days.",
    })
}

/// Enqueues `n` notifications, `per_request` to a request (1: the single endpoint), from
/// `concurrency` connections; every answer must be 202 (single) or 200 with 202 items.
pub(super) async fn drive(
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
pub(super) struct Delivery {
    pub(super) per_second: f64,
    /// Their CPU time for each notification delivered, in µs; `None` where `/proc` cannot
    /// say, or where every notification had been delivered before the first read.
    pub(super) cpu_us_each: Option<f64>,
    /// The database server's CPU time for each, over the same window, where it can be read.
    pub(super) database_cpu_us_each: Option<f64>,
}

/// Waits until the servers' dispatchers have delivered `total` notifications beyond `already`,
/// and answers the rate they delivered them at from the call on, and their CPU time for each
/// from the first count read on (what they delivered before the first read counts for neither).
pub(super) async fn wait_delivered(
    client: &reqwest::Client,
    servers: &[Server],
    database: Option<&DatabaseCpu>,
    phase: &'static str,
    total: usize,
    already: usize,
) -> anyhow::Result<Delivery> {
    let done = Arc::new(AtomicUsize::new(0));
    let progress = Progress::start(phase, total, done.clone());
    let started = Instant::now();
    let mut last_change = (Instant::now(), 0);
    let mut first_read = None;
    let database_time = async || match database {
        Some(database) => database.read().await,
        None => None,
    };
    loop {
        let delivered = delivered(client, servers).await?.saturating_sub(already);
        if first_read.is_none() {
            first_read = Some((delivered, cpu_time(servers), database_time().await));
        }
        let (at_start, cpu_at_start, database_at_start) = first_read.expect("read just now");
        done.store(delivered, Ordering::Relaxed);
        if delivered >= total {
            progress.finish();
            let counted = total - at_start.min(total);
            let each = |from: Option<Duration>, to: Option<Duration>| match (from, to) {
                (Some(from), Some(to)) if counted > 0 => {
                    Some(to.saturating_sub(from).as_secs_f64() * 1e6 / counted as f64)
                }
                _ => None,
            };
            return Ok(Delivery {
                per_second: counted as f64 / started.elapsed().as_secs_f64(),
                cpu_us_each: each(cpu_at_start, cpu_time(servers)),
                database_cpu_us_each: each(database_at_start, database_time().await),
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

/// Where the database server's CPU time is read from.
pub(super) enum DatabaseCpu {
    /// Every `postgres` process on this machine, from `/proc`: the server is local.
    Processes,
    /// `pg_stat_statements`' execution time over every statement: a stand-in where the
    /// server is elsewhere (time spent executing, not CPU, and without its own processes'
    /// work such as WAL writing and autovacuum).
    Statements(String),
}

impl DatabaseCpu {
    /// How `url`'s server can be measured from here, if it can: SQLite runs inside herald's
    /// own process, and its CPU is herald's.
    pub(super) async fn of(url: &str) -> Option<DatabaseCpu> {
        if !url.starts_with("postgres") {
            return None;
        }
        let local = url::Url::parse(url).ok().is_some_and(|url| {
            // No host, or an empty one with the socket's folder in `?host=`: a Unix socket.
            matches!(
                url.host_str(),
                None | Some("" | "127.0.0.1" | "localhost" | "[::1]")
            )
        });
        if local && postgres_processes_cpu().is_some() {
            return Some(DatabaseCpu::Processes);
        }
        match crate::store::statement_time(url).await {
            Ok(Some(_)) => Some(DatabaseCpu::Statements(url.to_owned())),
            _ => None,
        }
    }

    pub(super) async fn read(&self) -> Option<Duration> {
        match self {
            DatabaseCpu::Processes => postgres_processes_cpu(),
            DatabaseCpu::Statements(url) => crate::store::statement_time(url).await.ok()?,
        }
    }

    /// What the figure is, for the report.
    pub(super) fn source(&self) -> &'static str {
        match self {
            DatabaseCpu::Processes => "every postgres process's user and system CPU, from /proc",
            DatabaseCpu::Statements(_) => {
                "pg_stat_statements total_exec_time: a stand-in, the server not being local"
            }
        }
    }
}

/// The CPU time of every `postgres` process on this machine so far, with what the server has
/// reaped of its ended backends; `None` where there is none.
fn postgres_processes_cpu() -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Some((command, used)) = process_cpu(pid, true)
            && command == "postgres"
        {
            total += used;
            found = true;
        }
    }
    found.then_some(total)
}

/// A process's command name and the CPU time it has used so far, user and system, all its
/// threads, and with `reaped` its waited-for children's too.
pub(super) fn process_cpu(pid: u32, reaped: bool) -> Option<(String, Duration)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let command = head.split_once('(')?.1;
    // After the command name (in parentheses, and it may hold spaces): utime, stime, cutime
    // and cstime are the 12th to 15th fields, in USER_HZ ticks: 100 a second on every
    // architecture but Alpha.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    let mut used = ticks(11)? + ticks(12)?;
    if reaped {
        used += ticks(13)? + ticks(14)?;
    }
    Some((command.to_owned(), Duration::from_millis(used * 10)))
}

/// The processes' CPU time together, where `/proc` has it for each.
pub(super) fn cpu_time(servers: &[Server]) -> Option<Duration> {
    servers.iter().map(Server::cpu_time).sum()
}

/// The notifications these processes have finished as delivered, from their own metrics.
pub(super) async fn delivered(
    client: &reqwest::Client,
    servers: &[Server],
) -> anyhow::Result<usize> {
    let delivered = |line: &str| {
        line.starts_with("herald_notifications_finished_total{")
            && line.contains("state=\"delivered\"")
    };
    Ok(metric_sum(client, servers, delivered).await? as usize)
}

/// The statements the processes have sent to the database so far.
pub(super) async fn statements(
    client: &reqwest::Client,
    servers: &[Server],
) -> anyhow::Result<f64> {
    let statements = |line: &str| line.starts_with("herald_store_statements_total ");
    metric_sum(client, servers, statements).await
}

/// The sum, over the processes, of the `/metrics` samples whose lines `pick` takes.
pub(super) async fn metric_sum(
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
pub(super) fn per(count: f64, notifications: usize) -> f64 {
    (count / notifications.max(1) as f64 * 10.0).round() / 10.0
}

/// Accept → delivered times of the notifications enqueued in the latency phase.
pub(super) struct Latencies {
    pub(super) count: usize,
    pub(super) sorted_ms: Vec<f64>,
}

impl Latencies {
    pub(super) fn percentile(&self, q: f64) -> f64 {
        percentile(&self.sorted_ms, q)
    }
}

/// Enqueues at `rate` per second for `seconds` (an open loop: a slow answer does not slow the
/// next request), spread over `servers` as a load balancer would, waits for every delivery,
/// then reads each notification's timeline.
pub(super) async fn offered_load(
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
    wait_delivered(client, servers, None, "deliveries", count, already).await?;

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

pub(super) fn accept_to_delivered_ms(n: &Value) -> Option<f64> {
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
pub(super) struct Progress {
    pub(super) ticker: tokio::task::JoinHandle<()>,
    pub(super) phase: &'static str,
    pub(super) total: usize,
    pub(super) started: Instant,
}

impl Progress {
    pub(super) fn start(phase: &'static str, total: usize, done: Arc<AtomicUsize>) -> Progress {
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

    pub(super) fn finish(self) {
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
