//! herald as processes: graceful shutdown, wake-ups across processes, one process per SQLite
//! file, and the metrics a running dispatcher exposes.

mod support;

use std::process::Command;
use std::time::Duration;

use herald_sandbox::{Profile, SandboxConfig, SandboxHandle};
use reqwest::StatusCode;
use serde_json::Value;

use support::binary::{HeraldProcess, free_port, show};
use support::{
    ACME, ACME_ADMIN, Backend, TempDir, TestDb, email, eventually, http_client, test_config_text,
};

/// A route to `vendor`, with polling so slow (one minute) that only a wake-up can explain a
/// prompt delivery.
fn route(vendor: &SandboxHandle, timeout_seconds: u64, dispatch: bool) -> String {
    format!(
        r#"
[dispatch]
enabled = {dispatch}
poll_interval_ms = 60000
lease_seconds = 10

[routes.vendor]
provider = "sandbox"
base_url = "{}"
profile = "idempotent"
timeout_seconds = {timeout_seconds}
operated_by = "acme"

[channels]
email = "vendor"
"#,
        vendor.base_url()
    )
}

async fn vendor(faults: &str) -> SandboxHandle {
    support::install_crypto();
    herald_sandbox::spawn(SandboxConfig {
        profile: Profile::Idempotent,
        faults: herald_sandbox::parse_faults(faults).expect("fault syntax"),
        delay: Duration::from_millis(1500),
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox starts")
}

async fn start(db: &TestDb, dir: &TempDir, name: &str, route: &str) -> HeraldProcess {
    let config = test_config_text(&db.url, &format!("127.0.0.1:{}", free_port()), route);
    HeraldProcess::start(&config, dir.path(), name).await
}

/// As [`start`], with every SQL statement herald runs in its log (sqlx's statement log, without
/// colour codes), so that the test can read what the dispatcher did: [`dispatcher_is_idle`].
async fn start_watched(db: &TestDb, dir: &TempDir, name: &str, route: &str) -> HeraldProcess {
    let config = test_config_text(&db.url, &format!("127.0.0.1:{}", free_port()), route);
    let env = [
        ("RUST_LOG", "info,sqlx=warn,sqlx::query=debug"),
        ("NO_COLOR", "1"),
    ];
    HeraldProcess::start_with_env(&config, dir.path(), name, &env).await
}

/// A step of the dispatcher's, as its statement log shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// The PostgreSQL listener is registered. Right after, it wakes the dispatcher once, for a
    /// commit it may have missed while it connected.
    Listen,
    /// A look at the queue for due work (the first statement of a claim).
    Claim,
    /// When the next work falls due: the last thing the dispatcher asks before it waits.
    NextDue,
}

/// The dispatcher's steps in `log`, matched on the store's own statements (src/store): if
/// their text changes, [`dispatcher_is_idle`] times out, so the test fails rather than passes.
fn seen(log: &str) -> Vec<Seen> {
    log.lines()
        .filter(|line| line.contains(" sqlx::query: "))
        .filter_map(|line| {
            if line.contains("summary=\"LISTEN ") {
                Some(Seen::Listen)
            } else if line.contains("SELECT id, state, generation, attempt_count") {
                Some(Seen::Claim)
            } else if line.contains("SELECT min(at) FROM (") {
                Some(Seen::NextDue)
            } else {
                None
            }
        })
        .collect()
}

/// Waits until the dispatcher of `worker` (started with [`start_watched`], nothing enqueued
/// yet) is idle: it has looked at the queue, found nothing, learnt that nothing falls due, and
/// waits on its one-minute poll with no wake-up pending. Only from then on does a prompt
/// delivery prove a wake-up: work committed earlier may be found by a look that was coming
/// anyway.
///
/// With nothing enqueued, the one wake-up before the test's own is the listener's, just after
/// its `LISTEN` (PostgreSQL, `listens`); a wake-up given while the dispatcher is not waiting
/// is kept for its next wait. So if the dispatcher looked before the `LISTEN`, that wake-up
/// makes exactly one more look; if not, it looks twice after the `LISTEN` (its first look,
/// then the kept wake-up's). On SQLite nothing wakes it before the test does: one look.
/// Each look is followed by the question "when is the next work due?", then the wait.
async fn dispatcher_is_idle(worker: &HeraldProcess, listens: bool) {
    eventually(
        "the dispatcher to find the queue empty and wait",
        Duration::from_secs(10),
        || async {
            let seen = seen(&worker.log());
            let listens_at: Vec<usize> = (0..seen.len())
                .filter(|&i| seen[i] == Seen::Listen)
                .collect();
            let (from, looks) = match (listens, listens_at.as_slice()) {
                (false, []) => (0, 1),
                (true, []) => return None,
                (true, [at]) => {
                    let looked_before = seen[..*at].contains(&Seen::Claim);
                    (at + 1, if looked_before { 1 } else { 2 })
                }
                _ => panic!(
                    "unexpected LISTENs (listens: {listens}), so the wake-ups cannot be counted:\n{}",
                    worker.log()
                ),
            };
            let after = &seen[from..];
            let last_look = (0..after.len())
                .filter(|&i| after[i] == Seen::Claim)
                .nth(looks - 1)?;
            after[last_look..].contains(&Seen::NextDue).then_some(())
        },
    )
    .await;
}

async fn enqueue(base: &str, key: &str) -> String {
    let response = http_client()
        .post(format!("{base}/v1/notifications"))
        .bearer_auth(ACME)
        .header("Idempotency-Key", key)
        .json(&email("ada@example.com"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let body: Value = response.json().await.unwrap();
    body["id"].as_str().unwrap().to_owned()
}

async fn state_becomes(base: &str, id: &str, state: &str, within: Duration) -> Value {
    eventually(&format!("{id} to be {state}"), within, || async {
        let n = show(&http_client(), base, id).await;
        (n["state"] == state).then_some(n)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_send_in_flight_finish_and_exits_zero() {
    let Some(db) = TestDb::new(Backend::Sqlite).await else {
        return;
    };
    let dir = TempDir::new("herald-sigterm");
    // The vendor holds its answer for 1.5 s, well inside the route's 5 s timeout.
    let vendor = vendor("delay:nth=1").await;
    let mut herald = start(&db, &dir, "herald", &route(&vendor, 5, true)).await;
    let id = enqueue(&herald.base, "in-flight").await;
    let n = state_becomes(&herald.base, &id, "sending", Duration::from_secs(5)).await;
    assert_eq!(n["attempts"][0]["result"], "in_flight");

    let status = tokio::task::spawn_blocking(move || {
        let status = herald.terminate();
        (status, herald)
    });
    let (status, herald) = status.await.unwrap();
    assert!(
        status.success(),
        "herald exits 0 on SIGTERM: {status}\n{}",
        herald.log()
    );
    let recorded = db
        .scalar("SELECT count(*) FROM attempts WHERE result = 'accepted'")
        .await;
    let delivered = db
        .scalar("SELECT count(*) FROM notifications WHERE state = 'delivered'")
        .await;
    assert_eq!(
        (recorded, delivered),
        (1, 1),
        "the send in flight was recorded before exit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_on_one_sqlite_file_refuses_to_start() {
    let Some(db) = TestDb::new(Backend::Sqlite).await else {
        return;
    };
    let dir = TempDir::new("herald-sqlite-lock");
    let vendor = vendor("").await;
    let _first = start(&db, &dir, "first", &route(&vendor, 5, true)).await;
    let config = dir.path().join("second.toml");
    let text = test_config_text(
        &db.url,
        &format!("127.0.0.1:{}", free_port()),
        &route(&vendor, 5, true),
    );
    std::fs::write(&config, text).unwrap();
    let second = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .expect("run herald");
    assert_eq!(second.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&second.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("herald: ") && last.contains("another herald process is using"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_in_one_process_wakes_the_dispatcher_of_another() {
    let Some(db) = TestDb::new(Backend::Postgres).await else {
        return;
    };
    let dir = TempDir::new("herald-listen");
    let vendor = vendor("").await;
    let api_only = start(&db, &dir, "api", &route(&vendor, 5, false)).await;
    let dispatching = start_watched(&db, &dir, "worker", &route(&vendor, 5, true)).await;
    dispatcher_is_idle(&dispatching, true).await;
    let id = enqueue(&api_only.base, "wake-up").await;
    let n = state_becomes(&dispatching.base, &id, "delivered", Duration::from_secs(10)).await;
    assert_eq!(n["certainty"], "known");
}

/// An operator pauses a route through one process; another process, the one that sends, starts
/// no call on it within a second, and its work waits queued until a resume through that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_given_to_one_process_stops_sends_in_another_within_a_second() {
    let Some(db) = TestDb::new(Backend::Postgres).await else {
        return;
    };
    let dir = TempDir::new("herald-pause");
    let vendor = vendor("").await;
    let ledger = vendor.client().unwrap();
    // A second route on the same vendor, never paused: the control that shows the worker
    // claiming while the paused route's work waits.
    let control = format!(
        "\n[routes.control]\nprovider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"idempotent\"\ntimeout_seconds = 5\n",
        vendor.base_url()
    );
    let api_only = start(&db, &dir, "api", &(route(&vendor, 5, false) + &control)).await;
    let worker = start_watched(&db, &dir, "worker", &(route(&vendor, 5, true) + &control)).await;
    dispatcher_is_idle(&worker, true).await;
    let before = enqueue(&api_only.base, "before").await;
    state_becomes(&worker.base, &before, "delivered", Duration::from_secs(10)).await;

    let http = http_client();
    let operate = |base: &str, action: &str, token: &str, body: Value| {
        http.post(format!("{base}/v1/routes/vendor/{action}"))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    let note = serde_json::json!({"note": "the vendor double-sends; their incident INC-42"});
    for (token, body, status) in [
        (ACME, note.clone(), StatusCode::FORBIDDEN),
        (
            ACME_ADMIN,
            serde_json::json!({"note": " "}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let refused = operate(&api_only.base, "pause", token, body).await.unwrap();
        assert_eq!(refused.status(), status);
    }
    let paused = operate(&api_only.base, "pause", ACME_ADMIN, note.clone())
        .await
        .unwrap();
    assert_eq!(paused.status(), StatusCode::OK);
    let paused: Value = paused.json().await.unwrap();
    assert_eq!(paused["paused_by_operator"]["principal"], "acme-admin");
    let twice: Value = operate(
        &worker.base,
        "pause",
        ACME_ADMIN,
        serde_json::json!({"note": "again"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        twice["paused_by_operator"], paused["paused_by_operator"],
        "a second pause answers the standing one"
    );
    // The promise: every process holds new calls within a second of the answer.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let waiting: Vec<String> = [
        enqueue(&api_only.base, "during-1").await,
        enqueue(&worker.base, "during-2").await,
    ]
    .into();
    // Work on the route nobody paused, enqueued after it, goes out: the worker claims, so the
    // paused work waits for the pause, not for a worker too slow to claim it.
    let mut body = email("ada@example.com");
    body["route"] = "control".into();
    let control = http
        .post(format!("{}/v1/notifications", api_only.base))
        .bearer_auth(ACME)
        .header("Idempotency-Key", "control")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(control.status(), StatusCode::ACCEPTED);
    let control: Value = control.json().await.unwrap();
    let control = control["id"].as_str().unwrap().to_owned();
    state_becomes(&worker.base, &control, "delivered", Duration::from_secs(10)).await;
    let seen = ledger.ledger().await.unwrap();
    for id in &waiting {
        assert_eq!(show(&http, &worker.base, id).await["state"], "queued");
        assert_eq!(seen.deliveries_of(id), 0, "no call on the paused route");
    }
    assert_eq!(
        seen.requests, 2,
        "the one before the pause, and the control"
    );
    let metrics = http
        .get(format!("{}/metrics", worker.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("herald_route_paused{route=\"vendor\"} 1"),
        "{metrics}"
    );
    let listed: Value = http
        .get(format!("{}/v1/routes", worker.base))
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let vendor_route = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "vendor")
        .unwrap();
    assert_eq!(
        vendor_route["paused_by_operator"]["note"],
        "the vendor double-sends; their incident INC-42"
    );

    // Resumed through the process that sends: the waiting work goes.
    let resumed = operate(&worker.base, "resume", ACME_ADMIN, note.clone())
        .await
        .unwrap();
    assert_eq!(resumed.status(), StatusCode::OK);
    for id in &waiting {
        state_becomes(&worker.base, id, "delivered", Duration::from_secs(10)).await;
    }
    let again = operate(&worker.base, "resume", ACME_ADMIN, note)
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::CONFLICT, "it is not paused");
    assert_eq!(
        db.scalar("SELECT count(*) FROM route_pause_log WHERE principal = 'acme-admin'")
            .await,
        2,
        "the pause and the resume, audited"
    );
}

/// An operator's pause that sends the route's work to its fallback: nothing waits, the
/// fallback sends under its own key, the paused route's vendor gets no call, and the resume
/// brings the work back. A route without a fallback refuses such a pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_to_the_fallback_sends_the_routes_work_there_until_the_resume() {
    let Some(db) = TestDb::new(Backend::Sqlite).await else {
        return;
    };
    let dir = TempDir::new("herald-pause-fallback");
    let (primary, spare) = (vendor("").await, vendor("").await);
    let config = format!(
        "[routes.vendor]\nprovider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"idempotent\"\n\
         fallback = \"spare\"\noperated_by = \"acme\"\n\n[routes.spare]\nprovider = \"sandbox\"\n\
         base_url = \"{}\"\nprofile = \"idempotent\"\noperated_by = \"acme\"\n\n\
         [channels]\nemail = \"vendor\"\n",
        primary.base_url(),
        spare.base_url()
    );
    let herald = start(&db, &dir, "herald", &config).await;
    let http = http_client();
    let operate = |route: &str, action: &str, body: Value| {
        http.post(format!("{}/v1/routes/{route}/{action}", herald.base))
            .bearer_auth(ACME_ADMIN)
            .json(&body)
            .send()
    };
    let refused = operate(
        "spare",
        "pause",
        serde_json::json!({"note": "maintenance", "to_fallback": true}),
    )
    .await
    .unwrap();
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);

    let paused: Value = operate(
        "vendor",
        "pause",
        serde_json::json!({"note": "their incident INC-7", "to_fallback": true}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        paused["paused_by_operator"]["to_fallback"], true,
        "{paused}"
    );
    // Every process obeys within a second of the answer.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = enqueue(&herald.base, "during").await;
    let n = state_becomes(&herald.base, &during, "delivered", Duration::from_secs(10)).await;
    assert_eq!(n["route"], "spare", "{n}");
    assert_eq!(n["attempts"][0]["evidence"]["stage"], "route_paused", "{n}");
    let spare_key = format!("{during}-f1");
    assert_eq!(
        spare
            .client()
            .unwrap()
            .ledger()
            .await
            .unwrap()
            .deliveries_of(&spare_key),
        1
    );
    assert_eq!(
        primary.client().unwrap().ledger().await.unwrap().requests,
        0
    );

    let resumed = operate("vendor", "resume", serde_json::json!({"note": "over"}))
        .await
        .unwrap();
    assert_eq!(resumed.status(), StatusCode::OK);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = enqueue(&herald.base, "after").await;
    let n = state_becomes(&herald.base, &after, "delivered", Duration::from_secs(10)).await;
    assert_eq!(n["route"], "vendor", "{n}");
    assert_eq!(
        db.scalar("SELECT count(*) FROM route_pause_log WHERE to_fallback")
            .await,
        1,
        "the audit says the pause sent work to the fallback"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_notification_is_sent_without_waiting_for_the_poll() {
    let Some(db) = TestDb::new(Backend::Sqlite).await else {
        return;
    };
    let dir = TempDir::new("herald-wake");
    let vendor = vendor("").await;
    let herald = start_watched(&db, &dir, "herald", &route(&vendor, 5, true)).await;
    dispatcher_is_idle(&herald, false).await;
    let id = enqueue(&herald.base, "wake-up").await;
    state_becomes(&herald.base, &id, "delivered", Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_attempts_outcomes_and_the_queue() {
    let Some(db) = TestDb::new(Backend::Sqlite).await else {
        return;
    };
    let dir = TempDir::new("herald-metrics");
    let vendor = vendor("rate_limited:nth=1").await;
    let herald = start(&db, &dir, "herald", &route(&vendor, 5, true)).await;
    let id = enqueue(&herald.base, "metered").await;
    state_becomes(&herald.base, &id, "delivered", Duration::from_secs(10)).await;
    let metrics = eventually("the queue gauges", Duration::from_secs(10), || async {
        let text = http_client()
            .get(format!("{}/metrics", herald.base))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.contains("herald_queue_depth").then_some(text)
    })
    .await;
    for line in [
        "herald_attempts_total{route=\"vendor\",result=\"rejected\",reason=\"rate_limited\"} 1",
        "herald_attempts_total{route=\"vendor\",result=\"accepted\",reason=\"accepted\"} 1",
        "herald_notifications_finished_total{route=\"vendor\",channel=\"email\",state=\"delivered\",certainty=\"known\"} 1",
        "herald_notifications_accepted_total 1",
        "herald_review_open{reason=\"unknown\"} 0",
        // Series that nothing has touched yet are there at zero, for dashboards and alerts.
        "herald_attempts_total{route=\"vendor\",result=\"ambiguous\",reason=\"ambiguous\"} 0",
        "herald_attempts_total{route=\"vendor\",result=\"rejected\",reason=\"vendor_unavailable\"} 0",
        "herald_notifications_finished_total{route=\"vendor\",channel=\"email\",state=\"unknown\",certainty=\"unknown\"} 0",
        "herald_settlements_total{route=\"vendor\",settled_by=\"idempotent_replay\",accepted=\"true\"} 0",
        // Retention swept once at start: nothing was past it.
        "herald_retention_deleted_total{kind=\"notifications\"} 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing `{line}` in:\n{metrics}"
        );
    }
    // Every family says what it counts.
    for family in metrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let name = family.split(' ').next().unwrap();
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with(&format!("# HELP {name} "))),
            "{name} has no # HELP in:\n{metrics}"
        );
        assert!(
            herald::telemetry::FAMILIES.iter().any(|(f, ..)| *f == name),
            "{name} is not in telemetry::FAMILIES"
        );
    }
    for histogram in [
        "herald_send_seconds_count{route=\"vendor\"} 2",
        "herald_end_to_end_seconds_count 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == histogram),
            "missing `{histogram}` in:\n{metrics}"
        );
    }
}

/// `/metrics` of a herald that has done nothing yet: the documented counters are there at
/// zero, a route has series only for the channels it is configured to carry, and the process
/// says it is ready. Then each request is counted under its route's path template, never the
/// raw path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_exist_at_zero_from_start_and_requests_count_by_route_template() {
    let Some(db) = TestDb::new(Backend::Sqlite).await else {
        return;
    };
    let dir = TempDir::new("herald-metrics-start");
    let vendor = vendor("").await;
    let routes = format!(
        "{}\n[routes.texts]\nprovider = \"sandbox\"\nbase_url = \"{url}\"\ntimeout_seconds = 5\n\
         fallback = \"spare\"\ncallback_secret = \"whsec_YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE=\"\n\
         [routes.spare]\nprovider = \"sandbox\"\nbase_url = \"{url}\"\ntimeout_seconds = 5\n",
        route(&vendor, 5, true).replace("[channels]\n", "[channels]\nsms = \"texts\"\n"),
        url = vendor.base_url()
    );
    let herald = start(&db, &dir, "herald", &routes).await;
    let scrape = || async {
        http_client()
            .get(format!("{}/metrics", herald.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let metrics = eventually(
        "herald to say it is ready",
        Duration::from_secs(20),
        || async {
            let text = scrape().await;
            text.lines().any(|l| l == "herald_ready 1").then_some(text)
        },
    )
    .await;
    for line in [
        "herald_notifications_accepted_total 0",
        "herald_idempotency_replays_total 0",
        "herald_inbox_duplicates_total 0",
        "herald_inbox_rejected_total{reason=\"mapping\"} 0",
        "herald_outbox_published_total{sink=\"log\"} 0",
        "herald_outbox_failures_total{sink=\"log\"} 0",
        "herald_callbacks_total{route=\"texts\",result=\"unauthenticated\"} 0",
        "herald_retention_deleted_total{kind=\"idempotency_records\"} 0",
        "herald_notifications_finished_total{route=\"vendor\",channel=\"email\",state=\"failed\",certainty=\"known\"} 0",
        "herald_notifications_finished_total{route=\"texts\",channel=\"sms\",state=\"failed\",certainty=\"known\"} 0",
        // The fallback of `texts`, which carries sms only.
        "herald_notifications_finished_total{route=\"spare\",channel=\"sms\",state=\"failed\",certainty=\"known\"} 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing `{line}` in:\n{metrics}"
        );
    }
    let finished: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("herald_notifications_finished_total{"))
        .collect();
    assert_eq!(
        finished.len(),
        12,
        "three routes, one channel each: {finished:#?}"
    );
    assert!(
        !metrics.contains("herald_callbacks_total{route=\"vendor\""),
        "a route without callbacks has no callback series"
    );

    let id = enqueue(&herald.base, "counted").await;
    show(&http_client(), &herald.base, &id).await;
    let missing = http_client()
        .get(format!("{}/v1/no-such-thing/{id}", herald.base))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let metrics = scrape().await;
    for line in [
        "herald_http_requests_total{method=\"POST\",route=\"/v1/notifications\",status=\"202\"} 1",
        "herald_http_requests_total{method=\"GET\",route=\"/v1/notifications/{id}\",status=\"200\"} 1",
        "herald_http_requests_total{method=\"GET\",route=\"unmatched\",status=\"404\"} 1",
        "herald_http_request_seconds_count{method=\"GET\",route=\"/v1/notifications/{id}\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing `{line}` in:\n{metrics}"
        );
    }
    assert!(
        !metrics
            .lines()
            .any(|l| l.starts_with("herald_http") && l.contains(&id)),
        "no raw path in a label: {metrics}"
    );
}

#[test]
fn a_bad_config_fails_at_start_with_one_line_naming_the_key() {
    let dir = TempDir::new("herald-bad-config");
    let config = dir.path().join("herald.toml");
    std::fs::write(&config, "[server]\nlisten = \"127.0.0.1:0\"\nlistn = 3\n").unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .expect("run herald");
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("herald: config: server.listn: unknown field `listn`"),
        "{stderr}"
    );

    let usage = Command::new(env!("CARGO_BIN_EXE_herald"))
        .arg("sernve")
        .output()
        .unwrap();
    assert_eq!(usage.status.code(), Some(2), "a usage error exits 2");
}

#[test]
fn an_unreachable_database_fails_at_start_with_its_cause() {
    let run = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["migrate"])
        .env(
            "HERALD_DATABASE__URL",
            format!("postgres://postgres@127.0.0.1:{}/nowhere", free_port()),
        )
        .env_remove("HERALD_CONFIG")
        .output()
        .expect("run herald");
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("herald: cannot open database") && last.contains("Connection refused"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_unknown_outcome_is_one_warn_line_saying_why_and_logs_to_a_file_have_no_colours() {
    let Some(db) = TestDb::new(Backend::Sqlite).await else {
        return;
    };
    let dir = TempDir::new("herald-logs");
    support::install_crypto();
    // Every send is processed and its answer lost; the plain profile cannot settle it.
    let vendor = herald_sandbox::spawn(SandboxConfig {
        profile: Profile::Plain,
        faults: herald_sandbox::parse_faults("accept_then_drop:1").expect("fault syntax"),
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox starts");
    let route = format!(
        "[dispatch]\nlease_seconds = 4\nretry_base_ms = 20\n\n[routes.vendor]\nprovider = \"sandbox\"\n\
         base_url = \"{}\"\nprofile = \"plain\"\ntimeout_seconds = 1\n\n[channels]\nemail = \"vendor\"\n",
        vendor.base_url()
    );
    let herald = start(&db, &dir, "herald", &route).await;
    let id = enqueue(&herald.base, "lost-answer").await;
    state_becomes(&herald.base, &id, "unknown", Duration::from_secs(20)).await;
    let log = eventually("the review line", Duration::from_secs(5), || async {
        let log = herald.log();
        log.contains("finished; in review").then_some(log)
    })
    .await;
    let review: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("finished; in review"))
        .collect();
    assert_eq!(review.len(), 1, "one line per outcome:\n{log}");
    for part in [
        " WARN ",
        &format!("notification_id={id}"),
        "route=vendor",
        "state=unknown",
        "review=unknown",
        "why=1 ambiguous attempt that no outcome query or replay could settle",
    ] {
        assert!(review[0].contains(part), "{part:?} not in {}", review[0]);
    }
    let attempts: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("attempt not accepted"))
        .collect();
    assert_eq!(attempts.len(), 1, "one line per failed attempt:\n{log}");
    for part in [
        " WARN ",
        &format!("notification_id={id}"),
        "reason=\"ambiguous\"",
        "stage=",
    ] {
        assert!(
            attempts[0].contains(part),
            "{part:?} not in {}",
            attempts[0]
        );
    }
    assert!(
        !log.contains('\u{1b}'),
        "no ANSI codes in a log file:\n{log}"
    );
}
