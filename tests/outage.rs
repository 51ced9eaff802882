//! A PostgreSQL outage while requests keep arriving, and one while sends are in flight.
//!
//! herald must answer every request promptly during the outage with a 503 problem that leaks
//! nothing of its internals, say on `/readyz` why it is not ready, store nothing for what it
//! refused, and come back by itself, without a restart, once the database is back; nothing it
//! acknowledged before or after may be lost. Sends whose answers come while the database is
//! away keep I1–I3 against the vendor's ledger: each ends once, delivered exactly once.
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

use herald_sandbox::Profile;
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
    let body = body(&key);
    post(http, base, key, &body).await
}

async fn post(http: &reqwest::Client, base: &str, key: String, body: &Value) -> Sent {
    let started = Instant::now();
    let result = http
        .post(format!("{base}/v1/notifications"))
        .bearer_auth(ACME)
        .header("Idempotency-Key", &key)
        .json(body)
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

/// Notifications in the in-flight run, and how long the vendor holds each answer: with the
/// route's 16 sends at once, the outage lands while some are waiting for their answers and
/// others are still queued.
const IN_FLIGHT_RUN: usize = 48;
const VENDOR_HOLDS: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_mid_send_shorter_than_the_lease_is_ridden_out_by_the_records_retries() {
    // A record the database refuses is tried again until the claim's lease ends: an outage of
    // 15 s (three tries used to give up after about 12) inside a 60 s lease needs no lease to
    // recover a send, and loses none of the vendor's answers.
    let lease = Duration::from_secs(60);
    if let Some(lease_expired) =
        outage_mid_send(Duration::from_secs(15), lease, Profile::Idempotent).await
    {
        assert_eq!(
            lease_expired, 0,
            "a record gave up and waited for the lease"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_mid_send_past_the_lease_is_recovered_by_the_next_claim() {
    // Past the lease, which is as long as the records' retries go: they gave up, and the next
    // claim takes the sends back as ambiguous.
    let lease = Duration::from_secs(10);
    let Some(lease_expired) =
        outage_mid_send(Duration::from_secs(20), lease, Profile::Idempotent).await
    else {
        return;
    };
    assert!(
        lease_expired > 0,
        "no attempt was recovered after its lease: the outage did not outlast the records"
    );
}

/// The same outage past the lease, with a vendor that neither deduplicates a key nor answers a
/// look-up, under `at_most_once`: a send whose record was lost cannot be settled, so it must
/// end `unknown` — never sent again, never `known` — and the ledger shows nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_past_the_lease_with_a_vendor_without_keys_sends_nothing_twice() {
    let lease = Duration::from_secs(10);
    let Some(lease_expired) = outage_mid_send(Duration::from_secs(20), lease, Profile::Plain).await
    else {
        return;
    };
    assert!(
        lease_expired > 0,
        "no attempt was recovered after its lease"
    );
}

/// Stops the database for `outage` while sends wait for their answers, brings it back, and
/// checks that the same process ends every notification once, each record honest against the
/// vendor's ledger: with an `idempotent` vendor every one delivered exactly once (a send whose
/// record was lost is settled by replaying its key); with a `plain` one (no key, no look-up,
/// `at_most_once`) nothing delivered twice and nothing `known` that the ledger denies. How many
/// attempts were recovered after their lease ended.
async fn outage_mid_send(outage: Duration, lease: Duration, profile: Profile) -> Option<usize> {
    let cluster = PgCluster::start().await?;
    support::install_crypto();
    let vendor = herald_sandbox::spawn(herald_sandbox::SandboxConfig {
        profile,
        faults: herald_sandbox::parse_faults("delay:1").unwrap(),
        delay: VENDOR_HOLDS,
        ..herald_sandbox::SandboxConfig::default()
    })
    .await
    .unwrap();
    let ledger = vendor.client().unwrap();
    let dir = TempDir::new("herald-outage-in-flight");
    let listen = format!("127.0.0.1:{}", free_port());
    let config = format!(
        "[dispatch]\nlease_seconds = {}\nretry_base_ms = 50\nretry_max_seconds = 1\n\
         [routes.vendor]\nprovider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"{}\"\n\
         timeout_seconds = 5\nconcurrency = 16\ndelivery = \"at_most_once\"\n\
         [channels]\nemail = \"vendor\"\n",
        lease.as_secs(),
        vendor.base_url(),
        profile.as_str()
    );
    let herald = HeraldProcess::start(
        &test_config_text(&cluster.url(), &listen, &config),
        dir.path(),
        "herald",
    )
    .await;
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap();

    let mut ids = Vec::new();
    for i in 0..IN_FLIGHT_RUN {
        let key = format!("in-flight-{i}");
        let body = email(&format!("{key}@example.com"));
        let sent = post(&http, &herald.base, key, &body).await;
        assert!(sent.is(StatusCode::ACCEPTED), "{sent:?}");
        ids.push(sent.id());
    }
    // The vendor has taken some sends and holds their answers; the rest wait their turn.
    eventually("sends in flight", Duration::from_secs(30), || async {
        let taken = ledger.ledger().await.ok()?.total_deliveries();
        (taken > 0).then_some(())
    })
    .await;
    let stopping_at = time::OffsetDateTime::now_utc();
    cluster.stop_server().await;
    let down = Instant::now();
    let stopped_at = time::OffsetDateTime::now_utc();
    let taken_at_stop = ledger.ledger().await.unwrap().total_deliveries();
    let (_, detail) = readyz_while_down(&http, &herald.base).await;
    tokio::time::sleep(outage.saturating_sub(down.elapsed())).await;
    cluster.start_server().await;

    // The same process, never restarted, finishes every one.
    let base = herald.base.clone();
    let finished: Vec<Value> = eventually(
        "every notification final after the outage",
        Duration::from_secs(120),
        || {
            let (http, base, ids) = (http.clone(), base.clone(), ids.clone());
            async move {
                let mut shown = Vec::new();
                for id in &ids {
                    let n = show_if_up(&http, &base, id).await?;
                    if ["queued", "sending"].contains(&n["state"].as_str()?) {
                        return None;
                    }
                    shown.push(n);
                }
                Some(shown)
            }
        },
    )
    .await;
    let ledger = ledger.ledger().await.unwrap();
    let mut wrong = Vec::new();
    for n in &finished {
        let id = n["id"].as_str().unwrap();
        let delivered = ledger.deliveries_of(id);
        let (state, certainty) = (n["state"].as_str().unwrap(), n["certainty"].as_str());
        let honest = match profile {
            // The vendor deduplicates by key and answers a replay: nothing is left uncertain.
            Profile::Idempotent => (state, certainty, delivered) == ("delivered", Some("known"), 1),
            // Nothing settles a lost record: what herald says must not outrun the ledger, and
            // nothing may have gone out twice.
            _ => match (state, certainty) {
                ("delivered", Some("known")) => delivered == 1,
                ("failed", Some("known")) => delivered == 0,
                ("unknown", Some("unknown")) => delivered <= 1,
                _ => false,
            },
        };
        if !honest {
            wrong.push(format!(
                "{id}: {state}/{certainty:?}, ledger {delivered}: {n:#}"
            ));
        }
        if n["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["result"] == "in_flight")
        {
            wrong.push(format!("{id}: an attempt still in flight: {n:#}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{wrong:#?}\nherald log:\n{}",
        herald.log()
    );

    // Each record applied once: one `accepted` and one final event per notification.
    let db = sqlx::PgPool::connect(&cluster.url()).await.unwrap();
    let events: Vec<(String, i64)> =
        sqlx::query_as("SELECT type, count(*) FROM outbox GROUP BY type ORDER BY type")
            .fetch_all(&db)
            .await
            .unwrap();
    let count = |t: &str| events.iter().find(|(ty, _)| ty == t).map_or(0, |(_, n)| *n);
    let n = IN_FLIGHT_RUN as i64;
    assert_eq!(count("dev.herald.notification.accepted"), n, "{events:?}");
    assert_eq!(
        count("dev.herald.notification.delivered")
            + count("dev.herald.notification.unknown")
            + count("dev.herald.notification.failed"),
        n,
        "one final event each: {events:?}"
    );
    if profile == Profile::Idempotent {
        assert_eq!(count("dev.herald.notification.delivered"), n, "{events:?}");
    }
    db.close().await;

    // The premise held: sends started before the stop began were recorded after it ended.
    let attempts = || {
        finished
            .iter()
            .flat_map(|n| n["attempts"].as_array().unwrap().iter())
    };
    let at = |a: &Value, field: &str| {
        a[field].as_str().and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        })
    };
    let crossed = attempts()
        .filter(|a| {
            at(a, "started_at").is_some_and(|t| t < stopping_at)
                && at(a, "finished_at").is_some_and(|t| t > stopped_at)
        })
        .count();
    let lease_expired = attempts()
        .filter(|a| a["evidence"]["stage"] == "lease_expired")
        .count();
    println!(
        "in flight ({profile:?} vendor): {IN_FLIGHT_RUN} notifications, {taken_at_stop} taken \
         by the vendor when the database stopped, down {:?}; {crossed} attempts started before \
         the stop and recorded after it, {lease_expired} of them recovered after their lease; \
         ledger {} deliveries; /readyz said {detail:?}",
        outage,
        ledger.total_deliveries()
    );
    assert!(
        crossed > 0,
        "no send started before the stop was recorded after it: nothing was in flight"
    );
    drop(herald);
    Some(lease_expired)
}

/// The notification as herald shows it; `None` while herald cannot read it yet.
async fn show_if_up(http: &reqwest::Client, base: &str, id: &str) -> Option<Value> {
    let response = http
        .get(format!("{base}/v1/notifications/{id}"))
        .bearer_auth(ACME)
        .send()
        .await
        .ok()?;
    match response.status() {
        StatusCode::OK => response.json().await.ok(),
        StatusCode::SERVICE_UNAVAILABLE => None,
        other => panic!("reading {id} answered {other}"),
    }
}
