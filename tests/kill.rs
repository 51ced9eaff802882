//! A 202 is a promise: the notification, its idempotency record and its `accepted` outbox event
//! are committed before herald answers. These tests
//! SIGKILL the real `herald` binary right after a 202, so that no shutdown code runs, restart
//! it, and check that nothing acknowledged was lost and every key still means what it meant.
//!
//! Notifications are due in 2999, so that the dispatcher leaves them `queued` and the test
//! stays about enqueue durability.

mod support;

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::StatusCode;
use serde_json::{Value, json};

use support::binary::{HeraldProcess, free_port};
use support::{ACME, Backend, TempDir, TestDb, email, http_client, test_config_text};

on_both_backends!(killing_the_server_right_after_a_202_loses_nothing);

const ROUNDS: usize = 5;
const PER_ROUND: usize = 10;
const FAR_FUTURE: &str = "2999-01-01T00:00:00Z";
const ACCEPTED: &str = "dev.herald.notification.accepted";

fn body(n: usize) -> Value {
    let mut body = email(&format!("user{n}@example.com"));
    body["send_at"] = json!(FAR_FUTURE);
    body
}

/// What one POST got: the status, whether it was a replay, and the body; `Err` when the
/// connection was cut before an answer (the kill).
type Answer = Result<(StatusCode, bool, Value), String>;

async fn enqueue(http: &reqwest::Client, base: &str, key: &str, body: &Value) -> Answer {
    let response = http
        .post(format!("{base}/v1/notifications"))
        .bearer_auth(ACME)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    let status = response.status();
    let replayed = match response.headers().get("idempotent-replayed") {
        None => false,
        Some(v) if v == "true" => true,
        Some(v) => return Err(format!("Idempotent-Replayed: {v:?}")),
    };
    let body = response.json().await.map_err(|e| format!("{e:?}"))?;
    Ok((status, replayed, body))
}

fn id_of(body: &Value) -> String {
    body["id"].as_str().expect("a 202 names its id").to_owned()
}

/// In each of five rounds, ten requests go out at once and herald is SIGKILLed the moment a
/// randomly chosen one of them is answered 202; requests still in flight are cut. After the
/// restarts: every acknowledged id reads back `queued`, every acknowledged key replays its id,
/// every cut request can be retried safely, and each notification has exactly one `accepted`
/// event.
async fn killing_the_server_right_after_a_202_loses_nothing(backend: Backend) {
    let Some(db) = TestDb::new(backend).await else {
        return;
    };
    let dir = TempDir::new("herald-kill");
    let listen = format!("127.0.0.1:{}", free_port());
    let mut herald = HeraldProcess::start(
        &test_config_text(&db.url, &listen, ""),
        dir.path(),
        "herald",
    )
    .await;
    // A fresh client for each life of the process: a pooled connection to the killed one
    // must not turn a request of the next round into a transport error.
    let mut http = http_client();
    let seed: u64 = std::env::var("HERALD_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("seed {seed} (set HERALD_TEST_SEED to repeat)");
    let mut rng = StdRng::seed_from_u64(seed);

    // key → id, for every request answered 202.
    let mut acknowledged = BTreeMap::<String, String>::new();
    // Requests whose answer the kill cut off: stored or not, nobody was told.
    let mut cut = Vec::<(usize, String)>::new();
    for round in 0..ROUNDS {
        let trigger = rng.random_range(0..PER_ROUND);
        let mut requests: Vec<_> = (0..PER_ROUND)
            .map(|i| {
                let n = round * PER_ROUND + i;
                let key = format!("kill-{n}");
                let (http, base) = (http.clone(), herald.base.clone());
                let task = tokio::spawn(async move { enqueue(&http, &base, &key, &body(n)).await });
                (n, format!("kill-{n}"), Some(task))
            })
            .collect();

        let answer = requests[trigger].2.take().unwrap().await.unwrap();
        // SIGKILL before anything else: the 202 has left herald, nothing after it may matter.
        herald.kill();
        let (n, key) = (requests[trigger].0, requests[trigger].1.clone());
        match answer {
            Ok((StatusCode::ACCEPTED, false, body)) => {
                acknowledged.insert(key, id_of(&body));
            }
            other => panic!(
                "round {round}: request {n} should have been accepted before the kill: {other:?}\n{}",
                herald.log()
            ),
        }
        for (n, key, task) in requests {
            let Some(task) = task else { continue };
            match task.await.unwrap() {
                Ok((StatusCode::ACCEPTED, false, body)) => {
                    acknowledged.insert(key, id_of(&body));
                }
                Ok(other) => panic!("round {round}: request {n}: unexpected answer {other:?}"),
                Err(_) => cut.push((n, key)),
            }
        }
        herald.restart().await;
        http = http_client();
    }
    println!(
        "{} requests acknowledged, {} cut by {ROUNDS} kills",
        acknowledged.len(),
        cut.len()
    );

    for (key, id) in &acknowledged {
        let response = http
            .get(format!("{}/v1/notifications/{id}", herald.base))
            .bearer_auth(ACME)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{key} → {id} is lost");
        let shown: Value = response.json().await.unwrap();
        assert_eq!(shown["id"], id.as_str());
        assert_eq!(shown["state"], "queued", "{key}: {shown}");
        assert_eq!(shown["send_at"], FAR_FUTURE);
    }

    for (key, id) in &acknowledged {
        let n: usize = key.trim_start_matches("kill-").parse().unwrap();
        let replay = enqueue(&http, &herald.base, key, &body(n)).await;
        match replay {
            Ok((StatusCode::ACCEPTED, true, body)) => {
                assert_eq!(&id_of(&body), id, "{key} replays another notification")
            }
            other => panic!("{key} should replay {id}: {other:?}"),
        }
    }

    // A cut request may or may not have committed; its retry must settle which, once.
    let mut committed_before_the_cut = 0;
    for (n, key) in &cut {
        match enqueue(&http, &herald.base, key, &body(*n)).await {
            Ok((StatusCode::ACCEPTED, replayed, _)) => {
                committed_before_the_cut += replayed as usize
            }
            other => panic!("retrying cut request {key}: {other:?}"),
        }
    }
    println!("{committed_before_the_cut} of the cut requests had committed before the kill");

    let total = (ROUNDS * PER_ROUND) as i64;
    assert_eq!(db.count("notifications").await, total);
    assert_eq!(db.count("idempotency_keys").await, total);
    assert_eq!(
        db.scalar(&format!(
            "SELECT count(*) FROM outbox WHERE type = '{ACCEPTED}'"
        ))
        .await,
        total
    );
    assert_eq!(
        db.scalar(&format!(
            "SELECT count(*) FROM notifications n WHERE (SELECT count(*) FROM outbox o
             WHERE o.notification_id = n.id AND o.type = '{ACCEPTED}') <> 1"
        ))
        .await,
        0,
        "every notification has exactly one accepted event"
    );
}
