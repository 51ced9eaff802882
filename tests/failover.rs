//! Failover on both databases, against two sandbox vendors over loopback HTTP whose ledgers are
//! the ground truth: herald moves a notification from `primary` to its fallback `backup` only
//! when the primary is known not to have taken it (or, under `at_least_once`, may have, and
//! then says `duplicate_possible`), and the primary's circuit breaker keeps new work off it
//! until a probe finds it working again.

mod support;

use std::time::Duration;

use herald_sandbox::{FaultRule, Ledger, Profile, SandboxClient, SandboxConfig, SandboxHandle};
use serde_json::{Value, json};

use herald::dispatch::Dispatcher;
use support::{ACME, ACME_ADMIN, Backend, TestApp, email, spawn_stepped};

on_both_backends!(
    a_primary_that_refuses_before_processing_hands_everything_to_its_fallback,
    an_idempotent_primary_settles_a_dropped_answer_by_replay_without_failing_over,
    a_replay_waits_out_a_pause_to_the_fallback_and_never_fails_over,
    an_ambiguous_plain_primary_fails_over_only_under_at_least_once,
    the_circuit_opens_keeps_new_work_off_the_primary_and_a_probe_closes_it,
);

struct Vendor {
    ledger: SandboxClient,
    base_url: String,
    _handle: SandboxHandle,
}

impl Vendor {
    async fn start(profile: Profile, faults: &str) -> Vendor {
        let handle = herald_sandbox::spawn(SandboxConfig {
            profile,
            faults: herald_sandbox::parse_faults(faults).expect("fault syntax"),
            ..SandboxConfig::default()
        })
        .await
        .expect("sandbox starts");
        Vendor {
            ledger: handle.client().expect("sandbox client"),
            base_url: handle.base_url(),
            _handle: handle,
        }
    }

    async fn ledger(&self) -> Ledger {
        self.ledger.ledger().await.expect("ledger")
    }
}

/// A herald whose email goes to `primary`, with `backup` as its fallback.
struct Rig {
    app: TestApp,
    dispatcher: Dispatcher,
    primary: Vendor,
    backup: Vendor,
}

/// The routes keep the default policy, `at_most_once`; a notification may ask for another.
async fn rig(backend: Backend, primary: (Profile, &str), circuit: &str) -> Option<Rig> {
    support::install_crypto();
    let (primary_vendor, backup) = (
        Vendor::start(primary.0, primary.1).await,
        Vendor::start(Profile::Plain, "").await,
    );
    let config = format!(
        r#"
[dispatch]
lease_seconds = 4
retry_base_ms = 50
retry_max_seconds = 1

[routes.primary]
provider = "sandbox"
base_url = "{primary_url}"
profile = "{profile}"
timeout_seconds = 1
fallback = "backup"
operated_by = "acme"
{circuit}

[routes.backup]
provider = "sandbox"
base_url = "{backup_url}"
profile = "plain"
timeout_seconds = 1

[channels]
email = "primary"
"#,
        primary_url = primary_vendor.base_url,
        backup_url = backup.base_url,
        profile = primary.0.as_str(),
    );
    let (app, dispatcher) = spawn_stepped(backend, &config).await?;
    Some(Rig {
        app,
        dispatcher,
        primary: primary_vendor,
        backup,
    })
}

/// A circuit that does not open in the tests about single notifications.
const NO_CIRCUIT: &str = "circuit_failures = 1000";

impl Rig {
    async fn enqueue(&self, key: &str, delivery: Option<&str>) -> String {
        let mut body = email(&format!("{key}@example.com"));
        if let Some(delivery) = delivery {
            body["delivery"] = json!(delivery);
        }
        self.app.enqueue_id(key, &body).await
    }

    async fn drain(&self) {
        support::drain(&self.dispatcher).await;
    }

    async fn show(&self, id: &str) -> Value {
        self.app.show(id).await
    }

    /// `herald_holds_total{route="primary",reason="paused"}`.
    async fn paused_holds(&self) -> f64 {
        let metrics = self.app.get(ACME, "/metrics").await.text().await.unwrap();
        let series = "herald_holds_total{route=\"primary\",reason=\"paused\"} ";
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(series))
            .map_or(0.0, |v| v.parse().unwrap())
    }

    async fn circuit(&self, state: &str) -> String {
        let metrics = self.app.get(ACME, "/metrics").await.text().await.unwrap();
        let series = format!("herald_route_circuit{{route=\"primary\",state=\"{state}\"}} ");
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(series.as_str()))
            .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
            .to_owned()
    }
}

fn ending(n: &Value) -> String {
    format!("{}/{}", n["state"], n["certainty"]).replace('"', "")
}

/// Each attempt as `route:result`.
fn attempts(n: &Value) -> Vec<String> {
    n["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| format!("{}:{}", a["route"], a["result"]).replace('"', ""))
        .collect()
}

fn key_of(n: &Value, attempt: usize) -> String {
    n["attempts"][attempt]["provider_idempotency_key"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn a_primary_that_refuses_before_processing_hands_everything_to_its_fallback(
    backend: Backend,
) {
    let Some(rig) = rig(
        backend,
        (Profile::Plain, "unavailable_before_processing:1"),
        NO_CIRCUIT,
    )
    .await
    else {
        return;
    };
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(rig.enqueue(&format!("refused-{i}"), None).await);
    }
    rig.drain().await;
    let backup = rig.backup.ledger().await;
    for id in &ids {
        let n = rig.show(id).await;
        assert_eq!(ending(&n), "delivered/known", "{n}");
        assert_eq!(attempts(&n), ["primary:rejected", "backup:accepted"], "{n}");
        assert_eq!(n["route"], "backup", "the route that finally sent");
        assert_eq!(n["failovers"], 1);
        let switch = &n["attempts"][0]["evidence"]["failover"];
        assert_eq!(switch["from"], "primary", "{n}");
        assert_eq!(switch["to"], "backup", "{n}");
        assert!(
            switch["because"]
                .as_str()
                .unwrap()
                .contains("vendor_unavailable"),
            "{switch}"
        );
        let (primary_key, backup_key) = (key_of(&n, 0), key_of(&n, 1));
        assert_eq!(
            primary_key, *id,
            "the primary sees the notification's own key"
        );
        assert_eq!(
            backup_key,
            format!("{id}-f1"),
            "the fallback a key of its own"
        );
        assert_eq!(backup.deliveries_of(&backup_key), 1);
        let events = rig.app.db.event_types(id.parse().unwrap()).await;
        assert_eq!(
            events,
            [
                "dev.herald.notification.accepted",
                "dev.herald.notification.delivered"
            ]
        );
    }
    // Events name the route that finally sent.
    let routes = rig
        .app
        .db
        .texts("SELECT data->>'route' FROM outbox WHERE type = 'dev.herald.notification.delivered'")
        .await;
    assert_eq!(routes, ["backup"; 5]);
    let primary = rig.primary.ledger().await;
    assert_eq!(primary.requests, 5, "each was tried on the primary once");
    assert_eq!(
        primary.total_deliveries(),
        0,
        "the primary's ledger is empty"
    );
    assert_eq!(backup.total_deliveries(), 5);
}

async fn an_idempotent_primary_settles_a_dropped_answer_by_replay_without_failing_over(
    backend: Backend,
) {
    let Some(rig) = rig(
        backend,
        (Profile::Idempotent, "accept_then_drop:nth=1"),
        NO_CIRCUIT,
    )
    .await
    else {
        return;
    };
    let id = rig.enqueue("dropped-answer", None).await;
    rig.drain().await;
    let n = rig.show(&id).await;
    assert_eq!(ending(&n), "delivered/known", "{n}");
    assert_eq!(attempts(&n), ["primary:ambiguous", "primary:accepted"]);
    assert_eq!(n["attempts"][0]["settled_by"], "idempotent_replay");
    assert_eq!(n["route"], "primary");
    assert_eq!(rig.primary.ledger().await.deliveries_of(&id), 1);
    let backup = rig.backup.ledger().await;
    assert_eq!(backup.requests, 0, "the fallback was never called");
}

/// An operator sends the primary's work to its fallback while a send there awaits its replay:
/// the replay asks the primary about the message it already has, which the fallback cannot
/// answer, so it waits for the resume rather than spend an attempt or fail over.
async fn a_replay_waits_out_a_pause_to_the_fallback_and_never_fails_over(backend: Backend) {
    // The first send's answer is lost and the first replay refused with 429 and `Retry-After:
    // 1`: the next replay waits at least that long.
    let faults = "accept_then_drop:nth=1,rate_limited:nth=2";
    let Some(rig) = rig(backend, (Profile::Idempotent, faults), NO_CIRCUIT).await else {
        return;
    };
    let id = rig.enqueue("paused-replay", None).await;
    rig.dispatcher.drain(Duration::ZERO).await.unwrap();
    let before = ["primary:ambiguous", "primary:rejected"];
    assert_eq!(attempts(&rig.show(&id).await), before);
    let pause = json!({"note": "vendor incident", "to_fallback": true});
    let paused = rig
        .app
        .post_json(ACME_ADMIN, "/v1/routes/primary/pause", &pause)
        .await;
    assert_eq!(paused.status(), 200, "{}", paused.text().await.unwrap());
    // The replay falls due (after the vendor's `Retry-After: 1`), and is held at every step
    // while the pause stands.
    let held_before = rig.paused_holds().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    rig.dispatcher.drain(Duration::ZERO).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    rig.dispatcher.drain(Duration::ZERO).await.unwrap();
    assert!(
        rig.paused_holds().await >= held_before + 2.0,
        "the replay was held at each step"
    );
    let n = rig.show(&id).await;
    assert_eq!(attempts(&n), before, "{n}");
    assert_eq!(n["route"], "primary");
    assert_eq!(
        rig.primary.ledger().await.requests,
        2,
        "no replay while paused"
    );
    assert_eq!(rig.backup.ledger().await.requests, 0, "no failover");

    let resumed = rig
        .app
        .post_json(
            ACME_ADMIN,
            "/v1/routes/primary/resume",
            &json!({"note": "over"}),
        )
        .await;
    assert_eq!(resumed.status(), 200, "{}", resumed.text().await.unwrap());
    rig.drain().await;
    let n = rig.show(&id).await;
    assert_eq!(ending(&n), "delivered/known", "{n}");
    assert_eq!(
        attempts(&n),
        ["primary:ambiguous", "primary:rejected", "primary:accepted"]
    );
    assert_eq!(n["attempts"][0]["settled_by"], "idempotent_replay");
    assert_eq!(rig.primary.ledger().await.deliveries_of(&id), 1);
    assert_eq!(
        rig.backup.ledger().await.requests,
        0,
        "the fallback was never called"
    );
}

async fn an_ambiguous_plain_primary_fails_over_only_under_at_least_once(backend: Backend) {
    let Some(rig) = rig(backend, (Profile::Plain, "accept_then_drop:1"), NO_CIRCUIT).await else {
        return;
    };
    let at_most_once = rig.enqueue("at-most-once", None).await;
    let at_least_once = rig.enqueue("at-least-once", Some("at_least_once")).await;
    rig.drain().await;
    let (primary, backup) = (rig.primary.ledger().await, rig.backup.ledger().await);

    let n = rig.show(&at_most_once).await;
    assert_eq!(ending(&n), "unknown/unknown", "{n}");
    assert_eq!(attempts(&n), ["primary:ambiguous"]);
    assert_eq!(
        n["route"], "primary",
        "no failover on an unsettled ambiguity"
    );
    assert_eq!(
        primary.deliveries_of(&at_most_once),
        1,
        "the primary did send it"
    );

    let n = rig.show(&at_least_once).await;
    assert_eq!(ending(&n), "delivered/duplicate_possible", "{n}");
    assert_eq!(attempts(&n), ["primary:ambiguous", "backup:accepted"]);
    assert_eq!(n["attempts"][0]["settled_by"], Value::Null);
    assert!(
        n["attempts"][0]["evidence"]["failover"]["because"]
            .as_str()
            .unwrap()
            .contains("at_least_once"),
        "{n}"
    );
    assert_eq!(
        primary.deliveries_of(&at_least_once),
        1,
        "both ledgers show it"
    );
    assert_eq!(backup.deliveries_of(&key_of(&n, 1)), 1);
    assert_eq!(
        backup.requests, 1,
        "only the at_least_once one reached the fallback"
    );
}

async fn the_circuit_opens_keeps_new_work_off_the_primary_and_a_probe_closes_it(backend: Backend) {
    let Some(rig) = rig(
        backend,
        (Profile::Plain, "unavailable_before_processing:1"),
        "circuit_failures = 2\ncircuit_open_seconds = 3",
    )
    .await
    else {
        return;
    };
    assert_eq!(rig.circuit("closed").await, "1");
    for i in 0..2 {
        rig.enqueue(&format!("opening-{i}"), None).await;
    }
    rig.drain().await;
    assert_eq!(rig.circuit("open").await, "1", "two failures in a row");
    let routes: Value = rig.app.get(ACME, "/v1/routes").await.json().await.unwrap();
    assert_eq!(routes["data"][1]["name"], "primary", "{routes}");
    let primary = &routes["data"][1];
    assert_eq!(primary["fallback"], "backup");
    assert_eq!(primary["default_for"], json!(["email"]));
    assert_eq!(
        primary["circuit"],
        json!({"state": "open", "failures_to_open": 2, "open_seconds": 3})
    );
    assert_eq!(primary["capabilities"]["outcome_query"], false);
    assert_eq!(routes["data"][0]["circuit"]["state"], "closed", "{routes}");

    let mut skipped = Vec::new();
    for i in 0..3 {
        skipped.push(rig.enqueue(&format!("while-open-{i}"), None).await);
    }
    rig.drain().await;
    assert_eq!(
        rig.primary.ledger().await.requests,
        2,
        "nothing reached the primary while its circuit was open"
    );
    for id in &skipped {
        let n = rig.show(id).await;
        assert_eq!(ending(&n), "delivered/known", "{n}");
        assert_eq!(attempts(&n), ["primary:rejected", "backup:accepted"]);
        assert_eq!(n["attempts"][0]["evidence"]["stage"], "circuit_open", "{n}");
    }

    rig.primary
        .ledger
        .set_faults(&[] as &[FaultRule])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let probe = rig.enqueue("probe", None).await;
    rig.drain().await;
    let n = rig.show(&probe).await;
    assert_eq!(ending(&n), "delivered/known", "{n}");
    assert_eq!(
        attempts(&n),
        ["primary:accepted"],
        "the probe went to the primary"
    );
    assert_eq!(rig.circuit("closed").await, "1", "the probe closed it");
    assert_eq!(rig.circuit("open").await, "0");
    let after = rig.enqueue("after", None).await;
    rig.drain().await;
    assert_eq!(attempts(&rig.show(&after).await), ["primary:accepted"]);
    assert_eq!(rig.primary.ledger().await.total_deliveries(), 2);
    assert_eq!(rig.backup.ledger().await.total_deliveries(), 5);
}
