//! The crash test (DESIGN.md, "Invariants"): real herald processes, killed with SIGKILL every
//! 0.2–2 s and restarted, while a sandbox vendor with random faults takes their sends. With the
//! sandbox's ledger as ground truth, every notification must satisfy:
//!
//! - I1 no loss: it reaches a final state (nothing is left `queued` or `sending`);
//! - I2 no silent duplicate: delivered more than once ⇒ `duplicate_possible` or `unknown`;
//! - I3 no false certainty: `delivered`/`known` ⇒ delivered exactly once; `failed`/`known` ⇒ never;
//! - I4 unknown only where unavoidable: with an outcome query or an idempotency key, no `unknown`;
//! - and one outbox event for its acceptance and one for its final state.
//!
//! PostgreSQL runs two processes on one database; SQLite one. The vendor is the sandbox in each
//! profile, and on PostgreSQL also the Resend fake (settled by replaying the idempotency key) and
//! the Twilio fake (settled by its outcome query). `HERALD_CRASH_SCALE=10` soaks ten times longer
//! (the default is 3,000 notifications and 40 kills per run).

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use herald_sandbox::{Profile, SandboxConfig, SandboxHandle};
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use support::binary::{HeraldProcess, free_port};
use support::{ACME, Backend, TempDir, TestDb, eventually, http_client, test_config_text};

const FAULTS: &str = "accept_then_drop:0.03,delay:0.02,error_after_processing:0.03,unavailable_before_processing:0.03,rate_limited:0.03";

macro_rules! crash_tests {
    ($($name:ident: $backend:ident, $vendor:expr;)*) => {
        $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
          async fn $name() { crash(Backend::$backend, $vendor).await })*
    };
}

crash_tests! {
    postgres_idempotent_vendor: Postgres, Vendor::Sandbox(Profile::Idempotent);
    postgres_queryable_vendor: Postgres, Vendor::Sandbox(Profile::Queryable);
    postgres_plain_vendor: Postgres, Vendor::Sandbox(Profile::Plain);
    postgres_resend: Postgres, Vendor::Resend;
    postgres_twilio: Postgres, Vendor::Twilio;
    sqlite_idempotent_vendor: Sqlite, Vendor::Sandbox(Profile::Idempotent);
    sqlite_queryable_vendor: Sqlite, Vendor::Sandbox(Profile::Queryable);
    sqlite_plain_vendor: Sqlite, Vendor::Sandbox(Profile::Plain);
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Vendor {
    Sandbox(Profile),
    Resend,
    Twilio,
}

/// A running vendor, with the fault injector of the fakes (whose faults are set one request at
/// a time).
enum Running {
    Sandbox(SandboxHandle, Profile),
    Resend {
        vendor: Arc<herald_resend::fake::FakeHandle>,
        _faults: AbortOnDrop,
    },
    Twilio {
        vendor: Arc<herald_twilio::fake::FakeHandle>,
        _faults: AbortOnDrop,
    },
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Arms one fault about every 80 ms: about the sandbox's 14 % of requests at this test's pace.
fn inject(arm: impl Fn(usize) + Send + 'static, kinds: usize) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(40)).await;
            if rand::random::<bool>() {
                arm(rand::rng().random_range(0..kinds));
            }
        }
    }))
}

impl Vendor {
    fn name(self) -> &'static str {
        match self {
            Vendor::Sandbox(profile) => profile.as_str(),
            Vendor::Resend => "resend",
            Vendor::Twilio => "twilio",
        }
    }

    /// I4: only a vendor with neither an outcome query nor an idempotency key may leave a
    /// notification `unknown`.
    fn may_leave_unknown(self) -> bool {
        self == Vendor::Sandbox(Profile::Plain)
    }

    /// Notification `i` goes by email or SMS: whichever the vendor carries, alternating.
    fn channel(self, i: usize) -> &'static str {
        match self {
            Vendor::Resend => "email",
            Vendor::Twilio => "sms",
            Vendor::Sandbox(_) if i.is_multiple_of(2) => "email",
            Vendor::Sandbox(_) => "sms",
        }
    }

    async fn start(self) -> Running {
        support::install_crypto();
        match self {
            Vendor::Sandbox(profile) => Running::Sandbox(
                herald_sandbox::spawn(SandboxConfig {
                    profile,
                    visibility_lag: Duration::from_millis(300),
                    faults: herald_sandbox::parse_faults(FAULTS).expect("fault syntax"),
                    delay: Duration::from_millis(1500),
                    ..SandboxConfig::default()
                })
                .await
                .expect("sandbox starts"),
                profile,
            ),
            Vendor::Resend => {
                use herald_resend::fake::{self, Fault, Faults};
                let config = fake::FakeConfig {
                    delay: Duration::from_millis(1500),
                    ..fake::FakeConfig::default()
                };
                let vendor = Arc::new(fake::spawn(config).await.expect("resend fake starts"));
                let kinds = [
                    Fault::AcceptThenDrop,
                    Fault::Delay,
                    Fault::ErrorAfterProcessing,
                    Fault::UnavailableBeforeProcessing,
                    Fault::RateLimited,
                ];
                let armed = vendor.clone();
                let injector = inject(
                    move |k| armed.set_faults(Faults::next([kinds[k]])),
                    kinds.len(),
                );
                Running::Resend {
                    vendor,
                    _faults: injector,
                }
            }
            Vendor::Twilio => {
                use herald_twilio::fake::{self, Fault};
                let mut config = fake::FakeConfig::new(TWILIO_SID, TWILIO_TOKEN.into());
                config.visibility_lag = Duration::from_millis(300);
                config.delay = Duration::from_millis(1500);
                let vendor = Arc::new(fake::spawn(config).await.expect("twilio fake starts"));
                let kinds = [
                    Fault::AcceptThenDrop,
                    Fault::Delay,
                    Fault::ErrorAfterProcessing,
                    Fault::UnavailableBeforeProcessing,
                    Fault::RateLimited,
                ];
                let armed = vendor.clone();
                let injector = inject(move |k| armed.set_faults([kinds[k]]), kinds.len());
                Running::Twilio {
                    vendor,
                    _faults: injector,
                }
            }
        }
    }
}

const TWILIO_SID: &str = "AC00000000000000000000000000000042";
const TWILIO_TOKEN: &str = "crash-test-token";

impl Running {
    /// The `[routes.vendor]` keys for this vendor.
    fn route(&self) -> String {
        match self {
            Running::Sandbox(vendor, profile) => format!(
                "provider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"{}\"\nvisibility_lag_ms = 300\n",
                vendor.base_url(),
                profile.as_str()
            ),
            Running::Resend { vendor, .. } => format!(
                "provider = \"resend\"\nbase_url = \"{}\"\napi_key = \"{}\"\nfrom = \"noreply@acme.example\"\n",
                vendor.base_url(),
                herald_resend::fake::FakeConfig::default().api_key
            ),
            Running::Twilio { vendor, .. } => format!(
                "provider = \"twilio\"\nbase_url = \"{}\"\naccount_sid = \"{TWILIO_SID}\"\nauth_token = \"{TWILIO_TOKEN}\"\nfrom = \"+15005550006\"\nvisibility_lag_ms = 500\n",
                vendor.base_url()
            ),
        }
    }

    /// Ground truth: how many times each notification (by id, or for Twilio by its unique text)
    /// was really delivered, and in all.
    async fn ledger(&self) -> (HashMap<String, u64>, u64) {
        match self {
            Running::Sandbox(vendor, _) => {
                let ledger = vendor.client().unwrap().ledger().await.expect("ledger");
                let total = ledger.total_deliveries();
                (ledger.deliveries.into_iter().collect(), total)
            }
            Running::Resend { vendor, .. } => {
                let ledger = vendor.ledger();
                let total = ledger.total_deliveries();
                (ledger.deliveries.into_iter().collect(), total)
            }
            Running::Twilio { vendor, .. } => {
                let ledger = vendor.ledger();
                let mut counts = HashMap::new();
                for delivery in &ledger.deliveries {
                    *counts.entry(delivery.body.clone()).or_default() += 1;
                }
                (counts, ledger.total())
            }
        }
    }
}

fn scale() -> usize {
    std::env::var("HERALD_CRASH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

async fn crash(backend: Backend, vendor: Vendor) {
    let Some(db) = TestDb::new(backend).await else {
        return;
    };
    let (notifications, min_kills) = (3000 * scale(), 40 * scale());
    let running = vendor.start().await;
    let dir = TempDir::new("herald-crash");
    let route = format!(
        r#"
[dispatch]
lease_seconds = 3
retry_base_ms = 100
retry_max_seconds = 2

[routes.vendor]
timeout_seconds = 1
max_attempts = 25
{}
[channels]
{}
"#,
        running.route(),
        ["email", "sms"]
            .iter()
            .filter(|c| (0..2).any(|i| vendor.channel(i) == **c))
            .map(|c| format!("{c} = \"vendor\"\n"))
            .collect::<String>()
    );
    let processes = if backend == Backend::Postgres { 2 } else { 1 };
    let mut fleet = Vec::new();
    for i in 0..processes {
        let listen = format!("127.0.0.1:{}", free_port());
        let config = test_config_text(&db.url, &listen, &route);
        fleet.push(HeraldProcess::start(&config, dir.path(), &format!("herald-{i}")).await);
    }
    let bases: Arc<Vec<String>> = Arc::new(fleet.iter().map(|p| p.base.clone()).collect());
    let fleet = Arc::new(Mutex::new(fleet));

    // Enqueue at a pace that spreads the notifications over the kills.
    let ids: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let next = Arc::new(AtomicUsize::new(0));
    let pace = Duration::from_millis((50_000 / notifications as u64).max(1) * 8);
    let enqueuers: Vec<_> = (0..8)
        .map(|_| {
            let (bases, ids, next) = (bases.clone(), ids.clone(), next.clone());
            tokio::spawn(async move {
                let http = http_client();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= notifications {
                        return;
                    }
                    let id = enqueue_until_acknowledged(&http, &bases, vendor, i).await;
                    ids.lock().await.insert(format!("crash-{i}"), id);
                    tokio::time::sleep(pace).await;
                }
            })
        })
        .collect();

    let mut kills = 0;
    let enqueue_done = || enqueuers.iter().all(|e| e.is_finished());
    while kills < min_kills || !enqueue_done() {
        let pause = rand::rng().random_range(200..=2000);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let mut fleet = fleet.lock().await;
        let victim = rand::rng().random_range(0..fleet.len());
        fleet[victim].kill();
        kills += 1;
        fleet[victim].restart().await;
    }
    for e in enqueuers {
        e.await.expect("enqueuer");
    }
    let ids = ids.lock().await.clone();
    assert_eq!(
        ids.len(),
        notifications,
        "every notification was acknowledged"
    );

    // I1: with the processes left running, everything reaches a final state.
    eventually(
        "every notification to reach a final state",
        Duration::from_secs(120),
        || async {
            let open = db
                .scalar("SELECT count(*) FROM notifications WHERE state IN ('queued', 'sending')")
                .await;
            (open == 0).then_some(())
        },
    )
    .await;

    let (ledger, vendor_deliveries) = running.ledger().await;
    let http = http_client();
    let mut counts: HashMap<(String, String), usize> = HashMap::new();
    let mut violations = Vec::new();
    for (key, id) in &ids {
        let n: Value = http
            .get(format!("{}/v1/notifications/{id}", bases[0]))
            .bearer_auth(ACME)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let (state, certainty) = (
            n["state"].as_str().unwrap().to_owned(),
            n["certainty"].as_str().unwrap_or("-").to_owned(),
        );
        let reference = if vendor == Vendor::Twilio {
            text_of(key)
        } else {
            id.clone()
        };
        let delivered = ledger.get(&reference).copied().unwrap_or(0);
        let ok = match (state.as_str(), certainty.as_str()) {
            ("delivered", "known") => delivered == 1, // I3
            ("failed", "known") => delivered == 0,    // I3
            ("delivered", "duplicate_possible") => delivered >= 1,
            ("unknown", "unknown") => vendor.may_leave_unknown(), // I4
            _ => false,                                           // I1
        } && (delivered <= 1 || certainty != "known"); // I2
        if !ok {
            violations.push(format!(
                "{id}: {state}/{certainty}, delivered {delivered} times; attempts {}",
                n["attempts"]
            ));
        }
        *counts.entry((state, certainty)).or_default() += 1;
    }

    let events_wrong = db
        .scalar(
            "SELECT count(*) FROM notifications n WHERE
                 (SELECT count(*) FROM outbox e WHERE e.notification_id = n.id
                    AND e.type = 'dev.herald.notification.accepted') <> 1
              OR (SELECT count(*) FROM outbox e WHERE e.notification_id = n.id
                    AND e.type = 'dev.herald.notification.' || n.state) <> 1",
        )
        .await;
    let settled = |by: &'static str| {
        let db = &db;
        async move {
            db.scalar(&format!(
                "SELECT count(*) FROM attempts WHERE settled_by = '{by}'"
            ))
            .await
        }
    };
    let count = |s: &str, c: &str| {
        counts
            .get(&(s.to_owned(), c.to_owned()))
            .copied()
            .unwrap_or(0)
    };
    println!(
        "crash test {backend:?}/{}: {notifications} notifications, {kills} kills, {} processes | delivered/known {} | delivered/duplicate_possible {} | unknown {} | failed {} | ambiguous attempts {} | settled by outcome_query {}, idempotent_replay {} | vendor deliveries {}",
        vendor.name(),
        processes,
        count("delivered", "known"),
        count("delivered", "duplicate_possible"),
        count("unknown", "unknown"),
        count("failed", "known"),
        db.scalar("SELECT count(*) FROM attempts WHERE result = 'ambiguous'")
            .await,
        settled("outcome_query").await,
        settled("idempotent_replay").await,
        vendor_deliveries,
    );
    assert!(
        violations.is_empty(),
        "{} invariant violations:\n{}",
        violations.len(),
        violations.join("\n")
    );
    assert_eq!(
        events_wrong, 0,
        "every notification has one accepted and one final event"
    );
    assert!(kills >= min_kills);
}

/// Posts notification `i` until some herald acknowledges it, the same key every time, as a
/// careful upstream would: a retry after a lost answer is a replay, never a second notification.
async fn enqueue_until_acknowledged(
    http: &reqwest::Client,
    bases: &[String],
    vendor: Vendor,
    i: usize,
) -> String {
    let key = format!("crash-{i}");
    let delivery = if i % 4 < 2 {
        "at_least_once"
    } else {
        "at_most_once"
    };
    let body = match vendor.channel(i) {
        "email" => json!({"channel": "email", "to": format!("user{i}@example.com"),
                          "subject": "Crash test", "text": text_of(&key), "delivery": delivery}),
        _ => json!({"channel": "sms", "to": format!("+1415555{:04}", i % 10_000),
                    "text": text_of(&key), "delivery": delivery}),
    };
    for round in 0.. {
        let base = &bases[(i + round) % bases.len()];
        let response = http
            .post(format!("{base}/v1/notifications"))
            .bearer_auth(ACME)
            .header("Idempotency-Key", &key)
            .timeout(Duration::from_secs(5))
            .json(&body)
            .send()
            .await;
        match response {
            Ok(r) if r.status() == reqwest::StatusCode::ACCEPTED => {
                let body: Value = r.json().await.expect("a notification");
                return body["id"].as_str().unwrap().to_owned();
            }
            Ok(r)
                if r.status().is_client_error() && r.status() != reqwest::StatusCode::CONFLICT =>
            {
                panic!(
                    "notification {i} refused: {} {}",
                    r.status(),
                    r.text().await.unwrap_or_default()
                );
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    unreachable!("the loop returns or panics")
}

/// Each notification's text is unique, so a vendor without a client reference (Twilio) can be
/// matched to it.
fn text_of(key: &str) -> String {
    format!("Crash test message {key}")
}
