//! A PostgreSQL outage while requests keep arriving.
//!
//! herald must answer every request promptly during the outage with a 503 problem that leaks
//! nothing of its internals, say on `/readyz` why it is not ready, store nothing for what it
//! refused, and come back by itself, without a restart, once the database is back; nothing it
//! acknowledged before or after may be lost.
//!
//! The test stops a PostgreSQL cluster of its own ([`support::pg_cluster`]): stopping the
//! machine's shared server would break every other test running beside it.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use support::binary::{HeraldProcess, free_port};
use support::pg_cluster::PgCluster;
use support::{ACME, TempDir, email, eventually, test_config_text};

/// How long the database stays down.
const OUTAGE: Duration = Duration::from_secs(10);
/// Every answer, 503s included, must come within this.
const PROMPT: Duration = Duration::from_secs(5);
/// herald must accept again within this after the database is back.
const RECOVERY_BOUND: Duration = Duration::from_secs(30);
const SENDERS: usize = 4;
/// Pause between one sender's requests, to keep the load (and the rows to check) modest.
const PACE: Duration = Duration::from_millis(100);
const FAR_FUTURE: &str = "2999-01-01T00:00:00Z";
/// Words that would reveal herald's internals in an answer.
const INTERNALS: [&str; 7] = [
    "sqlx",
    "postgres://",
    "error returned from database",
    "os error",
    "pool timed out",
    "Connection refused",
    "127.0.0.1:",
];

fn body(key: &str) -> Value {
    let mut body = email(&format!("{key}@example.com"));
    body["send_at"] = json!(FAR_FUTURE);
    body
}

/// One POST as the client saw it.
#[derive(Debug, Clone)]
struct Sent {
    key: String,
    started: Instant,
    latency: Duration,
    status: Option<StatusCode>,
    content_type: String,
    retry_after: Option<String>,
    replayed: bool,
    body: String,
    /// The transport error, when there was no answer at all.
    error: Option<String>,
}

impl Sent {
    fn is(&self, status: StatusCode) -> bool {
        self.status == Some(status)
    }

    fn id(&self) -> String {
        let body: Value = serde_json::from_str(&self.body).expect("a 202 is JSON");
        body["id"].as_str().expect("a 202 names its id").to_owned()
    }
}

async fn send(http: &reqwest::Client, base: &str, key: String) -> Sent {
    let started = Instant::now();
    let result = http
        .post(format!("{base}/v1/notifications"))
        .bearer_auth(ACME)
        .header("Idempotency-Key", &key)
        .json(&body(&key))
        .send()
        .await;
    let mut sent = Sent {
        key,
        started,
        latency: Duration::ZERO,
        status: None,
        content_type: String::new(),
        retry_after: None,
        replayed: false,
        body: String::new(),
        error: None,
    };
    match result {
        Ok(response) => {
            sent.status = Some(response.status());
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            sent.content_type = header("content-type").unwrap_or_default();
            sent.retry_after = header("retry-after");
            sent.replayed = header("idempotent-replayed").is_some();
            match response.text().await {
                Ok(text) => sent.body = text,
                Err(err) => sent.error = Some(format!("reading the body: {err:?}")),
            }
        }
        Err(err) => sent.error = Some(format!("{err:?}")),
    }
    sent.latency = started.elapsed();
    sent
}

/// Checks one `/readyz` answer during the outage; returns its latency and detail.
async fn readyz_while_down(http: &reqwest::Client, base: &str) -> (Duration, String) {
    let started = Instant::now();
    let response = http
        .get(format!("{base}/readyz"))
        .send()
        .await
        .expect("/readyz answers during the outage");
    let latency = started.elapsed();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let problem: Value = response.json().await.unwrap();
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(
        detail.to_lowercase().contains("database"),
        "/readyz should say the database is why: {problem}"
    );
    assert!(!problem.to_string().contains("postgres://"), "{problem}");
    (latency, detail.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_gets_prompt_503s_and_herald_recovers_by_itself() {
    let Some(cluster) = PgCluster::start().await else {
        return;
    };
    let dir = TempDir::new("herald-outage");
    let listen = format!("127.0.0.1:{}", free_port());
    let herald = HeraldProcess::start(
        &test_config_text(&cluster.url(), &listen, ""),
        dir.path(),
        "herald",
    )
    .await;
    support::install_crypto();
    // No request may hang: past this, reqwest gives up and the test fails on the error.
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap();

    let log = Arc::new(Mutex::new(Vec::<Sent>::new()));
    let stop = CancellationToken::new();
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            let (http, base, log, stop) =
                (http.clone(), herald.base.clone(), log.clone(), stop.clone());
            tokio::spawn(async move {
                for i in 0.. {
                    if stop.is_cancelled() {
                        break;
                    }
                    let sent = send(&http, &base, format!("outage-{s}-{i}")).await;
                    log.lock().unwrap().push(sent);
                    tokio::time::sleep(PACE).await;
                }
            })
        })
        .collect();
    let accepted_since = |since: Instant| {
        let log = log.clone();
        move || {
            let n = log
                .lock()
                .unwrap()
                .iter()
                .filter(|s| s.started >= since && s.is(StatusCode::ACCEPTED))
                .count();
            async move { (n >= 20).then_some(()) }
        }
    };
    let start = Instant::now();
    eventually(
        "20 notifications accepted before the outage",
        Duration::from_secs(30),
        accepted_since(start),
    )
    .await;

    let stopping = Instant::now();
    cluster.stop_server().await;
    let down = Instant::now();
    let mut readyz_checks = 0;
    let mut readyz_max = Duration::ZERO;
    let mut readyz_detail = String::new();
    while down.elapsed() < OUTAGE {
        let (latency, detail) = readyz_while_down(&http, &herald.base).await;
        readyz_max = readyz_max.max(latency);
        readyz_detail = detail;
        readyz_checks += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let starting = Instant::now();
    cluster.start_server().await;
    let up = Instant::now();

    let recovered = eventually("herald to accept again", RECOVERY_BOUND, || {
        let log = log.clone();
        async move {
            log.lock()
                .unwrap()
                .iter()
                .filter(|s| s.started >= starting && s.is(StatusCode::ACCEPTED))
                .map(|s| s.started + s.latency)
                .min()
        }
    })
    .await;
    eventually("/readyz to be 200 again", RECOVERY_BOUND, || {
        let (http, url) = (http.clone(), format!("{}/readyz", herald.base));
        async move {
            // herald answers every request, recovering or not: no answer at all is a failure,
            // and so is any answer but "ready" or "not ready".
            let response = http
                .get(url)
                .send()
                .await
                .expect("/readyz answers while herald recovers");
            match response.status() {
                StatusCode::OK => Some(()),
                StatusCode::SERVICE_UNAVAILABLE => None,
                other => panic!(
                    "/readyz answered {other} while herald recovered: {}",
                    response.text().await.unwrap_or_default()
                ),
            }
        }
    })
    .await;
    eventually(
        "20 notifications accepted after the outage",
        Duration::from_secs(30),
        accepted_since(recovered),
    )
    .await;
    stop.cancel();
    for sender in senders {
        sender.await.unwrap();
    }
    let log = log.lock().unwrap().clone();

    // Every request got an answer, and only these two.
    for sent in &log {
        assert!(
            sent.error.is_none()
                && (sent.is(StatusCode::ACCEPTED) || sent.is(StatusCode::SERVICE_UNAVAILABLE)),
            "{} after {:?}: {:?} {:?} {}\nherald log:\n{}",
            sent.key,
            sent.latency,
            sent.status,
            sent.error,
            sent.body,
            herald.log()
        );
    }
    // Answered before the stop began (one still in flight as the server stops may rightly get
    // a 503: it was the outage that answered it).
    for sent in log.iter().filter(|s| s.started + s.latency < stopping) {
        assert!(sent.is(StatusCode::ACCEPTED), "before the outage: {sent:?}");
    }
    // Started and answered while the database was down from start to end.
    let during: Vec<&Sent> = log
        .iter()
        .filter(|s| s.started >= down && s.started + s.latency < starting)
        .collect();
    for sent in &during {
        assert!(
            sent.is(StatusCode::SERVICE_UNAVAILABLE),
            "during the outage: {sent:?}"
        );
    }
    assert!(
        during.len() >= SENDERS,
        "only {} requests started and ended during the outage",
        during.len()
    );
    for sent in log.iter().filter(|s| s.started >= recovered) {
        assert!(sent.is(StatusCode::ACCEPTED), "after recovery: {sent:?}");
    }

    let refused: Vec<&Sent> = log
        .iter()
        .filter(|s| s.is(StatusCode::SERVICE_UNAVAILABLE))
        .collect();
    for sent in &refused {
        assert_eq!(sent.content_type, "application/problem+json", "{sent:?}");
        let problem: Value = serde_json::from_str(&sent.body).expect("a JSON problem");
        assert_eq!(problem["status"], 503, "{sent:?}");
        for word in INTERNALS {
            assert!(!sent.body.contains(word), "a 503 leaks `{word}`: {sent:?}");
        }
        assert!(
            sent.retry_after.is_some(),
            "a 503 says when to retry: {sent:?}"
        );
        assert!(
            sent.latency <= PROMPT,
            "a 503 took {:?}: {sent:?}",
            sent.latency
        );
    }
    let max_503 = refused.iter().map(|s| s.latency).max().unwrap_or_default();
    let acknowledged: Vec<&Sent> = log.iter().filter(|s| s.is(StatusCode::ACCEPTED)).collect();
    println!(
        "outage {OUTAGE:?}: {} requests, {} acknowledged, {} refused with 503 ({} while fully down); \
         max 503 latency {max_503:?}; /readyz checked {readyz_checks} times, max latency {readyz_max:?} ({readyz_detail:?}); \
         stop took {:?}, start took {:?}; recovery: first 202 {:?} after the database was up",
        log.len(),
        acknowledged.len(),
        refused.len(),
        during.len(),
        down - stopping,
        up - starting,
        recovered.saturating_duration_since(up),
    );

    // Nothing acknowledged is lost, before or after the outage. The database is back (herald
    // accepted again and /readyz said so), so every read-back must answer: a read that fails
    // proves nothing was kept, and counts against herald like a 404.
    let base = herald.base.clone();
    let lost: Vec<String> = futures::stream::iter(acknowledged.iter().map(|sent| {
        let (http, url, id) = (
            http.clone(),
            format!("{base}/v1/notifications/{}", sent.id()),
            sent.id(),
        );
        async move {
            let response = match http.get(url).bearer_auth(ACME).send().await {
                Ok(response) => response,
                Err(err) => return Some(format!("{id}: no answer: {err:?}")),
            };
            let status = response.status();
            let text = match response.text().await {
                Ok(text) => text,
                Err(err) => return Some(format!("{id}: {status}, unreadable body: {err:?}")),
            };
            if status != StatusCode::OK {
                return Some(format!("{id}: {status} {text}"));
            }
            match serde_json::from_str::<Value>(&text) {
                Ok(shown) if shown["id"] == id.as_str() && shown["state"] == "queued" => None,
                _ => Some(format!("{id}: {text}")),
            }
        }
    }))
    .buffer_unordered(8)
    .filter_map(|lost| async move { lost })
    .collect()
    .await;
    assert!(lost.is_empty(), "acknowledged but not read back: {lost:?}");

    // What was refused was not stored: each key is still free and now gets a fresh 202.
    for sent in &refused {
        let retry = send(&http, &herald.base, sent.key.clone()).await;
        assert!(
            retry.is(StatusCode::ACCEPTED) && !retry.replayed,
            "retrying {sent:?}: {retry:?}"
        );
    }

    // Ground truth: one notification and one accepted event per key that got a 202.
    let expected = (acknowledged.len() + refused.len()) as i64;
    let db = sqlx::PgPool::connect(&cluster.url()).await.unwrap();
    let count = |sql: &'static str| {
        let db = db.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&db)
                .await
                .unwrap()
        }
    };
    assert_eq!(count("SELECT count(*) FROM notifications").await, expected);
    assert_eq!(
        count("SELECT count(*) FROM idempotency_keys").await,
        expected
    );
    assert_eq!(
        count("SELECT count(*) FROM outbox WHERE type = 'dev.herald.notification.accepted'").await,
        expected
    );
    db.close().await;
    drop(herald);
}
