//! Events out and in: the
//! relay publishes every outbox event to real NATS JetStream and to signed webhooks, and the
//! inbox turns upstream CloudEvents (over HTTP and from JetStream) into notifications once.
//!
//! Needs NATS JetStream on 127.0.0.1:4222 (`.ci/run` starts it) and, for the interop cases,
//! Python with `cloudevents` and `standardwebhooks` from PyPI (`.ci/run` installs them).
//! Without them those tests say loudly that they were skipped; without `HERALD_ALLOW_SKIP=1` they fail.

mod support;

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use rand::Rng;
use reqwest::Response;
use serde_json::{Value, json};

use support::binary::{HeraldProcess, free_port};
use support::nats::{self, Names, OwnServer, RawPublishes, SHARED_URL};
use support::{
    ACME, ACME_READER, Backend, GLOBEX, TempDir, TestApp, TestDb, build_app, email, eventually,
    must_run, problem, spawn_app_with, test_config_text,
};

on_both_backends!(
    the_export_scenario_creates_one_notification_and_publishes_its_events_once,
    an_enqueue_and_its_delivery_reach_the_sink_without_waiting_for_the_relays_poll,
    a_relay_killed_between_publish_and_mark_republishes_the_same_ids_and_loses_none,
    the_backlog_grows_while_nats_is_down_and_drains_when_it_is_back,
    bad_events_are_refused_naming_the_attribute,
    an_event_may_send_only_through_routes_its_sender_may_use,
    a_routes_pause_resume_and_circuit_reach_the_sink_as_route_events,
);

const TEMPLATES: &str = r#"
[templates.export-ready]
subject = "Your export {{ job }} is ready"
text = "Download it at {{ url }} ({{ event.source }})"

[templates.export-ready.locales.fr]
subject = "Votre export {{ job }} est prêt"
text = "Téléchargez-le sur {{ url }} ({{ event.source }})"
"#;

const MAPPING: &str = r#"
[events."ExportCompleted"]
template = "export-ready"
channel = "email"
to = "{{ email }}"
metadata = { export = "{{ event.id }}" }
cancellation_key = "exports/{{ email }}"
locale = "{{ locale | default('') }}"
"#;

const ACCEPTED: &str = "dev.herald.notification.accepted";
const DELIVERED: &str = "dev.herald.notification.delivered";

fn export_completed(source: &str, id: &str) -> Value {
    json!({
        "specversion": "1.0", "id": id, "source": source, "type": "ExportCompleted",
        "datacontenttype": "application/json",
        "data": {"email": "ada@example.com", "job": "job-42", "url": "https://example.com/x",
                 "locale": "fr-CA"}
    })
}

async fn post_event(app: &TestApp, token: &str, event: &Value) -> Response {
    app.http
        .post(app.url("/v1/events"))
        .bearer_auth(token)
        .header("content-type", "application/cloudevents+json")
        .body(event.to_string())
        .send()
        .await
        .expect("POST /v1/events")
}

/// The stream's messages once it holds at least `count` events.
async fn events_on_nats(
    client: &async_nats::Client,
    names: &Names,
    count: usize,
) -> Vec<nats::Stored> {
    eventually("the events on NATS", Duration::from_secs(20), || async {
        let stored = nats::stored(client, &names.stream).await;
        (stored.len() >= count).then_some(stored)
    })
    .await
}

/// The outbox event ids of the whole database, as simple (hyphenless) UUID text.
async fn outbox_ids(db: &TestDb) -> BTreeSet<String> {
    let sql = match db.backend {
        Backend::Sqlite => "SELECT lower(hex(id)) FROM outbox",
        Backend::Postgres => "SELECT replace(id::text, '-', '') FROM outbox",
    };
    db.texts(sql).await.into_iter().collect()
}

fn simple(id: &str) -> String {
    id.replace('-', "")
}

/// `ExportCompleted` (source `academy.exports`, id `evt-90`) published to NATS twice and posted
/// over HTTP once: one notification, delivered through the sandbox; its `accepted` and
/// `delivered` events reach NATS once each, with the ids the outbox holds.
async fn the_export_scenario_creates_one_notification_and_publishes_its_events_once(
    backend: Backend,
) {
    let Some(client) = nats::shared().await else {
        return;
    };
    let names = Names::new();
    let source = "academy.exports";
    let jetstream = jetstream::new(client.clone());
    // The upstream stream, as the upstream service would have it; herald's consumer uses it.
    jetstream
        .get_or_create_stream(jetstream::stream::Config {
            name: names.upstream.clone(),
            subjects: vec![format!("{}.>", names.upstream_root)],
            ..Default::default()
        })
        .await
        .expect("the upstream stream");
    let extra = format!(
        "{TEMPLATES}{MAPPING}{}{}[relay]\npoll_interval_ms = 50\n",
        names.sink("bus", SHARED_URL),
        names.inbox(SHARED_URL, "acme")
    );
    let Some(app) = spawn_app_with(backend, &extra).await else {
        return;
    };

    let event = export_completed(source, "evt-90");
    for _ in 0..2 {
        jetstream
            .publish(
                format!("{}.exports", names.upstream_root),
                event.to_string().into(),
            )
            .await
            .expect("publish upstream")
            .await
            .expect("the upstream stream acknowledges");
    }
    let response = post_event(&app, ACME, &event).await;
    assert!(
        [StatusCode::ACCEPTED, StatusCode::OK].contains(&response.status()),
        "{}",
        response.status()
    );
    let receipt: Value = response.json().await.unwrap();
    let ids = receipt["notification_ids"].as_array().unwrap().clone();
    assert_eq!(ids.len(), 1, "{receipt}");
    let id = ids[0].as_str().unwrap().to_owned();

    // Both NATS copies are acknowledged (after their transactions), and nothing more exists.
    let upstream = names.upstream.clone();
    eventually(
        "herald to consume both upstream copies",
        Duration::from_secs(20),
        || {
            let jetstream = jetstream.clone();
            let upstream = upstream.clone();
            async move {
                let stream = jetstream.get_stream(&upstream).await.ok()?;
                let mut consumer: jetstream::consumer::PullConsumer =
                    stream.get_consumer("herald").await.ok()?;
                let info = consumer.info().await.ok()?;
                (info.num_pending == 0
                    && info.num_ack_pending == 0
                    && info.delivered.stream_sequence >= 2)
                    .then_some(())
            }
        },
    )
    .await;
    assert_eq!(app.db.count("notifications").await, 1);
    assert_eq!(app.db.count("inbox").await, 1);

    let delivered = eventually(
        "the notification to be delivered",
        Duration::from_secs(20),
        || {
            let app = &app;
            let id = id.clone();
            async move {
                let body: Value = app
                    .get(ACME, &format!("/v1/notifications/{id}"))
                    .await
                    .json()
                    .await
                    .ok()?;
                (body["state"] == "delivered").then_some(body)
            }
        },
    )
    .await;
    assert_eq!(delivered["to"], "ada@example.com");
    // Rendered in the nearest locale the template has to the one the event asked for.
    assert_eq!(delivered["subject"], "Votre export job-42 est prêt");
    assert_eq!(delivered["locale"], "fr");
    assert_eq!(delivered["metadata"]["export"], "evt-90");
    assert_eq!(delivered["cancellation_key"], "exports/ada@example.com");

    let stored = events_on_nats(&client, &names, 2).await;
    let types: Vec<&str> = stored
        .iter()
        .map(|s| s.event["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [ACCEPTED, DELIVERED],
        "each event exactly once, in order"
    );
    let outbox = outbox_ids(&app.db).await;
    for message in &stored {
        let event = &message.event;
        assert_eq!(
            message.msg_id.as_deref(),
            event["id"].as_str(),
            "Nats-Msg-Id = the event id"
        );
        assert!(
            outbox.contains(&simple(event["id"].as_str().unwrap())),
            "the outbox's own id"
        );
        assert_eq!(event["specversion"], "1.0");
        assert_eq!(event["source"], "/herald/acme");
        assert_eq!(event["subject"], id.as_str());
        assert_eq!(event["datacontenttype"], "application/json");
        assert_eq!(event["data"]["id"], id.as_str());
        assert_eq!(event["data"]["metadata"]["export"], "evt-90");
        assert_eq!(event["data"]["cancellation_key"], "exports/ada@example.com");
        assert_eq!(event["data"]["locale"], "fr");
    }
    assert_eq!(
        stored[0].subject,
        format!("{}.notification.accepted", names.prefix)
    );
    assert_eq!(
        stored[1].subject,
        format!("{}.notification.delivered", names.prefix)
    );
    assert_eq!(stored[1].event["data"]["state"], "delivered");
    assert_eq!(stored[1].event["data"]["certainty"], "known");
    app.stop().await;
}

/// The relay is woken by the commits that write events — an enqueue's `accepted`, a record's
/// `delivered`, a cancellation's `cancelled` — not by its poll: with a poll of ten minutes, each
/// reaches NATS within seconds.
async fn an_enqueue_and_its_delivery_reach_the_sink_without_waiting_for_the_relays_poll(
    backend: Backend,
) {
    let Some(client) = nats::shared().await else {
        return;
    };
    let names = Names::new();
    let extra = format!(
        "{}[relay]\npoll_interval_ms = 600000\n",
        names.sink("bus", SHARED_URL)
    );
    let Some(app) = spawn_app_with(backend, &extra).await else {
        return;
    };
    // The first notification's events show the relay past its first claim, whenever that was;
    // from then on it has only its wake-ups. The second's are claimed one at a time (a
    // notification's later event waits for its earlier one), so each needs its own: without
    // the enqueue's, `accepted` waits for the record's signal and `delivered` for the poll;
    // without the record's, `delivered` does.
    for (round, key) in ["woken-1", "woken-2"].into_iter().enumerate() {
        let id = app.enqueue_id(key, &email("a@example.com")).await;
        let stored = events_on_nats(&client, &names, 2 * (round + 1)).await;
        let seen: Vec<(&str, &str)> = stored[2 * round..]
            .iter()
            .map(|s| {
                (
                    s.event["type"].as_str().unwrap(),
                    s.event["subject"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(seen, [(ACCEPTED, id.as_str()), (DELIVERED, id.as_str())]);
    }
    // A cancellation's event too: no caller wakes the relay, the store's commit does.
    let mut later = email("a@example.com");
    later["send_at"] = json!("2099-01-01T00:00:00Z");
    let id = app.enqueue_id("woken-3", &later).await;
    let cancelled = app
        .post_json(ACME, &format!("/v1/notifications/{id}/cancel"), &json!({}))
        .await;
    assert_eq!(cancelled.status(), StatusCode::OK);
    let stored = events_on_nats(&client, &names, 6).await;
    let types: Vec<&str> = stored[4..]
        .iter()
        .map(|s| s.event["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, [ACCEPTED, "dev.herald.notification.cancelled"]);
    app.stop().await;
}

/// herald creates its stream as soon as it starts, not at its first event: a consumer set up
/// against a fresh herald, before anything happened, finds the stream and then gets the first
/// event. Through the real binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_started_before_the_first_event_finds_the_stream_and_gets_it() {
    let Some(client) = nats::shared().await else {
        return;
    };
    let Some(db) = TestDb::new(Backend::Sqlite).await else {
        return;
    };
    let names = Names::new();
    let dir = TempDir::new("herald-stream-at-start");
    let listen = format!("127.0.0.1:{}", free_port());
    let extra = format!(
        "{}[relay]\npoll_interval_ms = 50\n[routes.sandbox]\nprovider = \"sandbox\"\n\
         [channels]\nemail = \"sandbox\"\n",
        names.sink("bus", SHARED_URL)
    );
    let herald = HeraldProcess::start(
        &test_config_text(&db.url, &listen, &extra),
        dir.path(),
        "herald",
    )
    .await;
    assert_eq!(db.count("outbox").await, 0, "nothing has happened yet");
    let jetstream = jetstream::new(client.clone());
    let stream = eventually(
        "herald to create its stream",
        Duration::from_secs(20),
        || {
            let jetstream = jetstream.clone();
            let name = names.stream.clone();
            async move { jetstream.get_stream(&name).await.ok() }
        },
    )
    .await;
    let consumer: jetstream::consumer::PullConsumer = stream
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some("downstream".into()),
            ..Default::default()
        })
        .await
        .expect("a consumer on the stream, before any event");

    let http = support::http_client();
    let response = http
        .post(format!("{}/v1/notifications", herald.base))
        .bearer_auth(ACME)
        .header("Idempotency-Key", "first")
        .json(&email("ada@example.com"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let id = response.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut messages = consumer
        .fetch()
        .max_messages(1)
        .expires(Duration::from_secs(20))
        .messages()
        .await
        .expect("fetch from the consumer");
    let message = futures::StreamExt::next(&mut messages)
        .await
        .expect("the first event arrives")
        .expect("a message");
    let event: Value = serde_json::from_slice(&message.payload).unwrap();
    assert_eq!(event["type"], ACCEPTED);
    assert_eq!(event["subject"], id.as_str());
    message.ack().await.expect("ack");
}

/// An operator's pause and resume, and the circuit opening on a failed send and closing on its
/// probe, each reach the sink once as a CloudEvent of herald's own (source `/herald`, the route
/// as its subject), in the order they happened.
async fn a_routes_pause_resume_and_circuit_reach_the_sink_as_route_events(backend: Backend) {
    let Some(client) = nats::shared().await else {
        return;
    };
    let vendor = support::plain_vendor("unavailable_before_processing:nth=1").await;
    let names = Names::new();
    let extra = format!(
        "{}[relay]\npoll_interval_ms = 50\n[dispatch]\nretry_base_ms = 50\n\n\
         [routes.vendor]\nprovider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"plain\"\n\
         circuit_failures = 1\ncircuit_open_seconds = 1\noperated_by = \"acme\"\n\n\
         [channels]\nemail = \"vendor\"\n",
        names.sink("bus", SHARED_URL),
        vendor.base_url()
    );
    let Some(app) = spawn_app_with(backend, &extra).await else {
        return;
    };
    for (action, note) in [("pause", "their incident INC-9"), ("resume", "over")] {
        let response = app
            .post_json(
                support::ACME_ADMIN,
                &format!("/v1/routes/vendor/{action}"),
                &json!({ "note": note }),
            )
            .await;
        assert_eq!(response.status(), StatusCode::OK, "{action}");
    }
    let id = app
        .enqueue_id("through-the-circuit", &email("ada@example.com"))
        .await;
    let route_events = eventually("four route events on NATS", Duration::from_secs(30), || {
        let client = client.clone();
        let stream = names.stream.clone();
        async move {
            let stored = nats::stored(&client, &stream).await;
            let routes: Vec<Value> = stored
                .into_iter()
                .filter(|s| s.subject.contains(".route."))
                .map(|s| s.event)
                .collect();
            (routes.len() >= 4).then_some(routes)
        }
    })
    .await;

    let types: Vec<&str> = route_events
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "dev.herald.route.paused",
            "dev.herald.route.resumed",
            "dev.herald.route.circuit_opened",
            "dev.herald.route.circuit_closed"
        ]
    );
    for event in &route_events {
        assert_eq!(event["source"], "/herald", "{event:#}");
        assert_eq!(event["subject"], "vendor", "{event:#}");
        assert_eq!(event["data"]["route"], "vendor", "{event:#}");
    }
    assert_eq!(route_events[0]["data"]["principal"], "acme-admin");
    assert_eq!(route_events[0]["data"]["note"], "their incident INC-9");
    assert_eq!(route_events[0]["data"]["to_fallback"], false);
    assert!(
        route_events[2]["data"]["process"]
            .as_str()
            .unwrap()
            .ends_with(&format!(":{}", std::process::id())),
        "the process whose circuit it was: {}",
        route_events[2]
    );
    let n = app.show(&id).await;
    assert_eq!(n["state"], "delivered", "{n}");
}

/// The real binary, SIGKILLed again and again while its relay publishes, and once while its
/// marks are refused after a batch was seen published, so that a publish certainly
/// happened without its mark. Afterwards: every event the outbox holds is in the stream exactly once under its
/// own id, and the republished ones went out again with the same ids.
async fn a_relay_killed_between_publish_and_mark_republishes_the_same_ids_and_loses_none(
    backend: Backend,
) {
    let Some(client) = nats::shared().await else {
        return;
    };
    let Some(db) = TestDb::new(backend).await else {
        return;
    };
    let names = Names::new();
    let raw = RawPublishes::watch(&client, &format!("{}.>", names.prefix)).await;
    let dir = TempDir::new("herald-relay-kill");
    let listen = format!("127.0.0.1:{}", free_port());
    let extra = format!(
        "{}[relay]\nbatch_size = 8\nlease_seconds = 1\npoll_interval_ms = 20\nretry_max_seconds = 1\n\
         [routes.sandbox]\nprovider = \"sandbox\"\ntimeout_seconds = 2\n\
         [channels]\nemail = \"sandbox\"\n[dispatch]\nlease_seconds = 4\n",
        names.sink("bus", SHARED_URL)
    );
    let mut herald = HeraldProcess::start(
        &test_config_text(&db.url, &listen, &extra),
        dir.path(),
        "herald",
    )
    .await;
    let mut http = support::http_client();
    let mut enqueued = 0;
    let mut enqueue = async |http: &reqwest::Client, base: &str, count: usize| {
        for _ in 0..count {
            enqueued += 1;
            let response = http
                .post(format!("{base}/v1/notifications"))
                .bearer_auth(ACME)
                .header("Idempotency-Key", format!("kill-{enqueued}"))
                .json(&email(&format!("user{enqueued}@example.com")))
                .send()
                .await
                .expect("enqueue");
            assert_eq!(response.status(), StatusCode::ACCEPTED);
        }
    };
    enqueue(&http, &herald.base, 60).await;
    let mut rng = rand::rng();
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..500))).await;
        herald.kill();
        herald.restart().await;
        http = support::http_client();
        enqueue(&http, &herald.base, 10).await;
    }

    // Refuse every mark (publishes need none), and kill herald once events are seen published
    // but not marked: after the restart they must go out again under the same ids.
    refuse_marks(&db, true).await;
    enqueue(&http, &herald.base, 10).await;
    let mut held_up = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while held_up.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let marked = published_ids(&db).await;
        held_up = raw
            .counts()
            .keys()
            .map(|id| simple(id))
            .filter(|id| !marked.contains(id))
            .collect();
    }
    assert!(
        !held_up.is_empty(),
        "no publish was seen while marks were refused; herald's log:\n{}",
        herald.log()
    );
    herald.kill();
    let before_kill = raw.counts();
    refuse_marks(&db, false).await;
    herald.restart().await;

    eventually(
        "every notification final and every event published",
        Duration::from_secs(90),
        || {
            let db = &db;
            async move {
                let open = db
                    .scalar(
                        "SELECT count(*) FROM notifications WHERE state IN ('queued', 'sending')",
                    )
                    .await;
                let unpublished = db
                    .scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL")
                    .await;
                (open == 0 && unpublished == 0).then_some(())
            }
        },
    )
    .await;
    let outbox = outbox_ids(&db).await;
    let stored = nats::stored(&client, &names.stream).await;
    let mut seen: HashMap<String, usize> = HashMap::new();
    for message in &stored {
        let id = message.event["id"].as_str().unwrap();
        assert_eq!(message.msg_id.as_deref(), Some(id));
        *seen.entry(simple(id)).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "the stream kept events twice: {twice:?}");
    let stored_ids: BTreeSet<String> = seen.keys().cloned().collect();
    assert_eq!(
        stored_ids, outbox,
        "every outbox event is in the stream, and nothing else"
    );
    assert!(
        outbox.len() >= 2 * enqueued,
        "an accepted and a final event per notification"
    );

    let republished: Vec<String> = raw
        .counts()
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(id, _)| simple(&id))
        .collect();
    eprintln!(
        "{backend:?}: {} events, {} caught published and not marked, {} published more than once (same ids), 7 kills",
        outbox.len(),
        held_up.len(),
        republished.len(),
    );
    let after = raw.counts();
    for (id, n) in &before_kill {
        if held_up.contains(&simple(id)) {
            assert!(
                after.get(id).is_some_and(|m| m > n),
                "published again after the kill: {id}"
            );
        }
    }
    for id in &republished {
        assert!(
            outbox.contains(id),
            "a republish carries an id of the outbox: {id}"
        );
    }
    drop(herald);
}

/// The ids of every event some sink has published, as simple UUID text.
async fn published_ids(db: &TestDb) -> BTreeSet<String> {
    let sql = match db.backend {
        Backend::Sqlite => "SELECT lower(hex(event_id)) FROM outbox_published",
        Backend::Postgres => "SELECT replace(event_id::text, '-', '') FROM outbox_published",
    };
    db.texts(sql).await.into_iter().collect()
}

/// Makes every mark of a published event fail (`on`), or stops doing so: a trigger refuses rows
/// of `outbox_published`, so herald publishes and cannot record that it did.
async fn refuse_marks(db: &TestDb, on: bool) {
    let statements: &[&str] = match (db.backend, on) {
        (Backend::Sqlite, true) => &["CREATE TRIGGER herald_test_refuse_marks \
             BEFORE INSERT ON outbox_published \
             BEGIN SELECT RAISE(ABORT, 'marks refused by the test'); END"],
        (Backend::Postgres, true) => &[
            "CREATE FUNCTION herald_test_refuse_marks() RETURNS trigger LANGUAGE plpgsql \
             AS $$ BEGIN RAISE EXCEPTION 'marks refused by the test'; END $$",
            "CREATE TRIGGER herald_test_refuse_marks BEFORE INSERT ON outbox_published \
             FOR EACH STATEMENT EXECUTE FUNCTION herald_test_refuse_marks()",
        ],
        (Backend::Sqlite, false) => &["DROP TRIGGER herald_test_refuse_marks"],
        (Backend::Postgres, false) => {
            &["DROP TRIGGER herald_test_refuse_marks ON outbox_published"]
        }
    };
    for sql in statements {
        db.execute(sql).await;
    }
}

/// The sink's NATS goes away: the API stays ready, the backlog grows and shows in the metrics;
/// it comes back: the backlog drains to zero, every event once.
async fn the_backlog_grows_while_nats_is_down_and_drains_when_it_is_back(backend: Backend) {
    let Some(mut server) = OwnServer::start().await else {
        return;
    };
    let names = Names::new();
    // The metrics registry is the process's: a sink name of this test's own.
    let sink = format!("outage_{}", &names.prefix[6..]);
    let extra = format!(
        "{}[relay]\npoll_interval_ms = 50\nretry_base_ms = 100\nretry_max_seconds = 1\n\
         [dispatch]\nenabled = false\n",
        names.sink(&sink, &server.url())
    );
    let Some(app) = spawn_app_with(backend, &extra).await else {
        return;
    };
    let backlog = |app: &TestApp| {
        let store = app.store.clone();
        let sink = sink.clone();
        async move { store.outbox_backlog(&sink).await.unwrap().events }
    };
    for i in 0..5 {
        let response = app
            .enqueue(ACME, &format!("before-{i}"), &email("a@example.com"))
            .await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
    }
    eventually(
        "the first events published",
        Duration::from_secs(20),
        || {
            let b = backlog(&app);
            async move { (b.await == 0).then_some(()) }
        },
    )
    .await;

    server.stop();
    for i in 0..50 {
        let response = app
            .enqueue(ACME, &format!("during-{i}"), &email("a@example.com"))
            .await;
        assert_eq!(
            response.status(),
            StatusCode::ACCEPTED,
            "the API does not need the sink"
        );
    }
    assert_eq!(app.get(ACME, "/readyz").await.status(), StatusCode::OK);
    let metric = format!("herald_outbox_backlog{{sink=\"{sink}\"}} 50");
    eventually(
        "the backlog in the metrics",
        Duration::from_secs(20),
        || {
            let app = &app;
            let metric = metric.clone();
            async move {
                let text = app.get(ACME, "/metrics").await.text().await.ok()?;
                text.contains(&metric).then_some(())
            }
        },
    )
    .await;
    assert_eq!(backlog(&app).await, 50);
    let oldest = format!("herald_outbox_oldest_seconds{{sink=\"{sink}\"}} 0");
    let text = app.get(ACME, "/metrics").await.text().await.unwrap();
    assert!(
        text.contains(&format!("herald_outbox_oldest_seconds{{sink=\"{sink}\"}}"))
            && !text.contains(&format!("{oldest}\n")),
        "the oldest event's age shows: {text}"
    );
    assert_eq!(app.get(ACME, "/readyz").await.status(), StatusCode::OK);

    server.resume().await;
    let back = Instant::now();
    eventually("the backlog to drain", Duration::from_secs(60), || {
        let b = backlog(&app);
        async move { (b.await == 0).then_some(()) }
    })
    .await;
    eprintln!(
        "{backend:?}: 50 events drained {} ms after NATS came back",
        back.elapsed().as_millis()
    );
    let client = async_nats::connect(server.url()).await.unwrap();
    let stored = nats::stored(&client, &names.stream).await;
    let ids: BTreeSet<&str> = stored
        .iter()
        .map(|s| s.event["id"].as_str().unwrap())
        .collect();
    assert_eq!((stored.len(), ids.len()), (55, 55), "every event, once");
    app.stop().await;
}

async fn bad_events_are_refused_naming_the_attribute(backend: Backend) {
    let extra = format!("{TEMPLATES}{MAPPING}[dispatch]\nenabled = false\n");
    let Some(app) = spawn_app_with(backend, &extra).await else {
        return;
    };
    let good = export_completed("academy.exports", "evt-1");
    let without = |attribute: &str| {
        let mut event = good.clone();
        event.as_object_mut().unwrap().remove(attribute);
        event
    };
    let with = |attribute: &str, value: Value| {
        let mut event = good.clone();
        event[attribute] = value;
        event
    };
    let cases = [
        (without("id"), "id", "invalid-event"),
        (without("source"), "source", "invalid-event"),
        (without("type"), "type", "invalid-event"),
        (without("specversion"), "specversion", "invalid-event"),
        (
            with("specversion", json!("0.3")),
            "specversion",
            "invalid-event",
        ),
        (
            with("type", json!("Unmapped")),
            "type",
            "unmapped-event-type",
        ),
        (
            with("data", json!({"email": "ada@example.com"})),
            "data",
            "event-not-mappable",
        ),
        (
            with("data", json!({"email": "nope", "job": "j", "url": "u"})),
            "to",
            "event-not-mappable",
        ),
    ];
    for (event, field, kind) in cases {
        let body = problem(
            post_event(&app, ACME, &event).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(body["field"], field, "{body}");
        assert!(body["type"].as_str().unwrap().ends_with(kind), "{body}");
    }
    let missing = problem(
        post_event(
            &app,
            ACME,
            &with("data", json!({"email": "a@b.io", "url": "u"})),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert!(
        missing["detail"].as_str().unwrap().contains("`job`"),
        "names the variable: {missing}"
    );

    // Not JSON at all: 400. A batch: 415. Plain JSON without ce- headers: which attribute.
    let post = |content_type: &'static str, body: &'static str| {
        app.http
            .post(app.url("/v1/events"))
            .bearer_auth(ACME)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    problem(
        post("application/cloudevents+json", "{nope").await.unwrap(),
        StatusCode::BAD_REQUEST,
    )
    .await;
    problem(
        post("application/cloudevents-batch+json", "[]")
            .await
            .unwrap(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
    )
    .await;
    let plain = problem(
        post("application/json", "{}").await.unwrap(),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(plain["field"], "specversion");
    assert_eq!(app.db.count("notifications").await, 0, "nothing was stored");
    assert_eq!(app.db.count("inbox").await, 0);

    // A token without `send` may not post; another tenant's same event is its own.
    problem(
        post_event(&app, ACME_READER, &good).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    assert_eq!(
        post_event(&app, ACME, &good).await.status(),
        StatusCode::ACCEPTED
    );
    assert_eq!(
        post_event(&app, GLOBEX, &good).await.status(),
        StatusCode::ACCEPTED
    );
    let again = post_event(&app, GLOBEX, &good).await;
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(app.db.count("notifications").await, 2);
}

// --- Webhook sink ---------------------------------------------------------------------------

/// A `whsec_` secret (32 bytes, base64).
const WEBHOOK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwmEkbPFuqKbg=";

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    headers: HashMap<String, String>,
    body: String,
    status: u16,
}

/// A webhook receiver on a free loopback port that answers `answer(n)` to its `n`-th request
/// (from 0) and keeps every request.
struct Receiver {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

type Answers = Arc<dyn Fn(usize) -> u16 + Send + Sync>;

impl Receiver {
    async fn start(answer: impl Fn(usize) -> u16 + Send + Sync + 'static) -> Receiver {
        async fn take(
            State((got, answer)): State<(Arc<Mutex<Vec<Received>>>, Answers)>,
            headers: HeaderMap,
            body: Bytes,
        ) -> StatusCode {
            let mut got = got.lock().unwrap();
            let status = answer(got.len());
            got.push(Received {
                headers: headers
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.as_str().to_owned(),
                            v.to_str().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect(),
                body: String::from_utf8_lossy(&body).into_owned(),
                status,
            });
            StatusCode::from_u16(status).unwrap()
        }
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let answers: Answers = Arc::new(answer);
        let router = axum::Router::new()
            .route("/events", axum::routing::post(take))
            .with_state((got.clone(), answers));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Receiver { addr, got, task }
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn webhook_sink(url: &str, private: bool, retry_max_seconds: u64) -> String {
    format!(
        "[sinks.hook]\nkind = \"webhook\"\nurl = \"{url}\"\nsecret = \"{WEBHOOK_SECRET}\"\n\
         allow_private_networks = {private}\n\
         [relay]\npoll_interval_ms = 20\nretry_base_ms = 50\nretry_max_seconds = {retry_max_seconds}\n\
         [dispatch]\nenabled = false\n"
    )
}

/// Python 3 with `modules` importable, or `None` (a loud skip) outside CI.
fn python_with(modules: &[&str]) -> Option<PathBuf> {
    let imports = format!("import {}", modules.join(", "));
    let found = std::process::Command::new("python3")
        .args(["-c", &imports])
        .output()
        .is_ok_and(|out| out.status.success());
    if found {
        return Some(PathBuf::from("python3"));
    }
    assert!(
        !must_run(),
        "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips) and python3 cannot `{imports}` (pip install cloudevents==2.2.0 standardwebhooks==1.1.0)"
    );
    eprintln!(
        "\n*** PYTHON INTEROP TEST SKIPPED: python3 cannot `{imports}`; without HERALD_ALLOW_SKIP=1 this fails\n"
    );
    None
}

fn script(name: &str) -> String {
    format!("{}/tests/python/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_events_are_signed_per_standard_webhooks_and_retried_after_a_5xx() {
    let Some(python) = python_with(&["standardwebhooks", "cloudevents"]) else {
        return;
    };
    // The first two requests fail as a server error would; then everything lands.
    let receiver = Receiver::start(|n| if n < 2 { 500 } else { 200 }).await;
    let url = format!("http://{}/events", receiver.addr);
    let Some(app) = spawn_app_with(Backend::Sqlite, &webhook_sink(&url, true, 1)).await else {
        return;
    };
    for i in 0..3 {
        let response = app
            .enqueue(ACME, &format!("hook-{i}"), &email("a@example.com"))
            .await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
    }
    eventually(
        "every event delivered to the receiver",
        Duration::from_secs(20),
        || {
            let store = app.store.clone();
            async move { (store.outbox_backlog("hook").await.ok()?.events == 0).then_some(()) }
        },
    )
    .await;
    let got = receiver.got();
    let failed: Vec<&Received> = got.iter().filter(|r| r.status == 500).collect();
    let landed: Vec<&Received> = got.iter().filter(|r| r.status == 200).collect();
    assert_eq!(failed.len(), 2);
    let landed_ids: BTreeSet<&str> = landed
        .iter()
        .map(|r| r.headers["webhook-id"].as_str())
        .collect();
    assert_eq!(
        landed_ids.len(),
        3,
        "each event landed once: {landed_ids:?}"
    );
    for r in &failed {
        assert!(
            landed_ids.contains(r.headers["webhook-id"].as_str()),
            "a retry keeps its webhook-id"
        );
    }
    for r in &got {
        assert_eq!(r.headers["content-type"], "application/cloudevents+json");
        let event: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(
            simple(event["id"].as_str().unwrap()),
            simple(&r.headers["webhook-id"])
        );
    }

    // An implementation nobody here wrote verifies every signature, the retries' included,
    // and reads every body as a CloudEvent.
    let dir = TempDir::new("herald-webhooks");
    let requests = dir.path().join("requests.json");
    let list: Vec<Value> = got
        .iter()
        .map(|r| json!({"headers": r.headers, "body": r.body}))
        .collect();
    std::fs::write(&requests, serde_json::to_string(&list).unwrap()).unwrap();
    let out = std::process::Command::new(python)
        .arg(script("verify_webhooks.py"))
        .arg(WEBHOOK_SECRET)
        .arg(&requests)
        .output()
        .expect("run verify_webhooks.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verified: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(verified["verified"], 5);
    for event in verified["events"].as_array().unwrap() {
        assert_eq!(event["type"], ACCEPTED);
        assert_eq!(event["source"], "/herald/acme");
        assert_eq!(event["id"], event["webhook_id"]);
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_receiver_meets_no_retry_storm() {
    let receiver = Receiver::start(|_| 400).await;
    let url = format!("http://{}/events", receiver.addr);
    // A second sink whose receiver takes everything: it shows the relay publishing throughout,
    // so that a starved relay cannot pass for a paused one.
    let control = Receiver::start(|_| 200).await;
    let sinks = format!(
        "[sinks.control]\nkind = \"webhook\"\nurl = \"http://{}/events\"\n\
         secret = \"{WEBHOOK_SECRET}\"\nallow_private_networks = true\n{}",
        control.addr,
        webhook_sink(&url, true, 30)
    );
    let Some(app) = spawn_app_with(Backend::Sqlite, &sinks).await else {
        return;
    };
    for i in 0..5 {
        app.enqueue(ACME, &format!("refused-{i}"), &email("a@example.com"))
            .await;
    }
    eventually(
        "the receiver to refuse something",
        Duration::from_secs(20),
        || {
            let n = receiver.got().len();
            async move { (n > 0).then_some(()) }
        },
    )
    .await;
    // Two seconds of a relay polling every 20 ms: without the pause, hundreds of requests.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The relay still runs at the end of them: an event enqueued now reaches the control.
    let last = app
        .enqueue(ACME, "after-the-window", &email("a@example.com"))
        .await;
    assert_eq!(last.status(), 202);
    eventually(
        "the control sink to get the event enqueued after the window",
        Duration::from_secs(20),
        || {
            let n = control.got().len();
            async move { (n >= 6).then_some(()) }
        },
    )
    .await;
    let got = receiver.got();
    let mut per_event: HashMap<&str, usize> = HashMap::new();
    for r in &got {
        *per_event
            .entry(r.headers["webhook-id"].as_str())
            .or_default() += 1;
    }
    assert!(got.len() <= 6, "{} requests in 2 s", got.len());
    assert!(per_event.values().all(|n| *n == 1), "{per_event:?}");
    assert_eq!(
        app.store.outbox_backlog("hook").await.unwrap().events,
        6,
        "refused events wait; none is lost"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_sink_to_a_private_address_is_refused() {
    let receiver = Receiver::start(|_| 200).await;
    // An address literal is refused at start-up, naming the sink.
    let db = TestDb::new(Backend::Sqlite).await.unwrap();
    let literal = format!("http://{}/events", receiver.addr);
    let err = build_app(&db, &webhook_sink(&literal, false, 1))
        .await
        .err()
        .expect("a loopback sink is refused");
    let err = format!("{err:#}");
    assert!(
        err.contains("sinks.hook") && err.contains("loopback"),
        "{err}"
    );
    drop(db);

    // A name is checked where it resolves, on every send: nothing reaches the receiver.
    let named = format!("http://localhost:{}/events", receiver.addr.port());
    let Some(app) = spawn_app_with(Backend::Sqlite, &webhook_sink(&named, false, 30)).await else {
        return;
    };
    app.enqueue(ACME, "ssrf", &email("a@example.com")).await;
    eventually("the refusal recorded", Duration::from_secs(20), || {
        let db = &app.db;
        async move {
            let errors = db
                .texts("SELECT last_error FROM outbox_leases WHERE last_error IS NOT NULL")
                .await;
            errors.into_iter().next()
        }
    })
    .await;
    let error = app
        .db
        .texts("SELECT last_error FROM outbox_leases")
        .await
        .remove(0);
    assert!(error.contains("loopback"), "{error}");
    assert!(receiver.got().is_empty(), "no request left herald");
    assert_eq!(app.store.outbox_backlog("hook").await.unwrap().events, 1);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloudevents_client_posts_in_both_modes_and_gets_the_documented_answers() {
    let Some(python) = python_with(&["cloudevents"]) else {
        return;
    };
    let extra = format!("{TEMPLATES}{MAPPING}[dispatch]\nenabled = false\n");
    let Some(app) = spawn_app_with(Backend::Sqlite, &extra).await else {
        return;
    };
    let out = tokio::process::Command::new(python)
        .arg(script("cloudevents_client.py"))
        .args([&app.base, ACME, "academy.exports"])
        .output()
        .await
        .expect("run cloudevents_client.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: HashMap<String, Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let answer: Value = serde_json::from_str(line).unwrap();
            (answer["case"].as_str().unwrap().to_owned(), answer)
        })
        .collect();
    let answer = |case: &str| {
        answers
            .get(case)
            .unwrap_or_else(|| panic!("no answer to {case}: {answers:?}"))
    };

    let first = answer("structured_new");
    assert_eq!(first["status"], 202, "{first}");
    assert_eq!(first["body"]["duplicate"], false);
    let ids = &first["body"]["notification_ids"];
    assert_eq!(ids.as_array().unwrap().len(), 1);

    let repeat = answer("binary_repeat");
    assert_eq!(repeat["status"], 200, "{repeat}");
    assert_eq!(&repeat["body"]["notification_ids"], ids, "the original ids");
    assert_eq!(repeat["headers"]["idempotent-replayed"], "true");

    assert_eq!(answer("binary_new")["status"], 202);

    let unmapped = answer("structured_unmapped");
    assert_eq!(unmapped["status"], 422);
    assert_eq!(unmapped["body"]["field"], "type");
    assert_eq!(
        unmapped["headers"]["content-type"],
        "application/problem+json"
    );

    let missing = answer("binary_missing_variable");
    assert_eq!(missing["status"], 422);
    assert!(
        missing["body"]["detail"]
            .as_str()
            .unwrap()
            .contains("`email`"),
        "{missing}"
    );

    let old = answer("structured_v03");
    assert_eq!(old["status"], 422);
    assert_eq!(old["body"]["field"], "specversion");

    let untyped = answer("binary_untyped");
    assert_eq!(
        untyped["status"], 202,
        "JSON data without a type: {untyped}"
    );

    assert_eq!(app.db.count("notifications").await, 3);
    app.stop().await;
}

/// The relay's throughput to NATS JetStream, on each backend: 20,000 `accepted` events wait in
/// the outbox, then one relay publishes them all. Not run by default (it measures, it does not
/// prove); run it with
/// `cargo nextest run --test events --run-ignored only --success-output final relay_throughput`.
async fn relay_throughput_to_nats(backend: Backend) {
    const EVENTS: usize = 20_000;
    let Some(client) = nats::shared().await else {
        return;
    };
    let names = Names::new();
    let sink = format!("bench_{}", &names.prefix[6..]);
    let extra = "[relay]\nenabled = false\n[dispatch]\nenabled = false\n";
    let Some(app) = spawn_app_with(backend, extra).await else {
        return;
    };
    for batch in 0..EVENTS / 1000 {
        let items: Vec<Value> = (0..1000)
            .map(|i| {
                let mut item = email("a@example.com");
                item["idempotency_key"] = json!(format!("bench-{batch}-{i}"));
                item
            })
            .collect();
        let response = app
            .post_json(ACME, "/v1/notifications/batch", &json!({"items": items}))
            .await;
        assert_eq!(response.status(), StatusCode::OK);
    }
    // PostgreSQL's statistics as autovacuum leaves them within a minute: on a fresh table's
    // (still saying it is empty), its planner joins every unpublished event to each one a
    // claim looks at (seen: 280 ms a claim at 16,000 unpublished, 3,600-4,200 events/s in
    // all). SQLite is left as herald leaves it, without statistics.
    if backend == Backend::Postgres {
        app.db.execute("ANALYZE").await;
    }
    let dir = TempDir::new("herald-bench");
    let path = dir.path().join("relay.toml");
    std::fs::write(&path, names.sink(&sink, SHARED_URL)).unwrap();
    let config = herald::config::Config::load(Some(&path), std::iter::empty()).unwrap();
    let relay = herald::relay::Relay::build(&config, app.store.clone())
        .await
        .unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let started = Instant::now();
    let task = tokio::spawn(relay.run(shutdown.clone()));
    eventually(
        "the relay to publish everything",
        Duration::from_secs(600),
        || {
            let store = app.store.clone();
            let sink = sink.clone();
            async move { (store.outbox_backlog(&sink).await.ok()?.events == 0).then_some(()) }
        },
    )
    .await;
    let elapsed = started.elapsed();
    shutdown.cancel();
    task.await.unwrap();
    let stored = nats::stored(&client, &names.stream).await.len();
    assert_eq!(stored, EVENTS);
    eprintln!(
        "{backend:?}: {EVENTS} events to NATS JetStream in {:.2} s: {:.0} events/s (batch 256, one relay)",
        elapsed.as_secs_f64(),
        EVENTS as f64 / elapsed.as_secs_f64()
    );
    app.stop().await;
}

mod throughput {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a measurement: run with --run-ignored only"]
    async fn relay_throughput_sqlite() {
        super::relay_throughput_to_nats(super::Backend::Sqlite).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a measurement: run with --run-ignored only"]
    async fn relay_throughput_postgres() {
        super::relay_throughput_to_nats(super::Backend::Postgres).await
    }
}

/// `POST /v1/events` holds what a mapping creates to the rule `POST /v1/notifications` holds a
/// request to: the route must admit the tenant, and the token must name the route.
async fn an_event_may_send_only_through_routes_its_sender_may_use(backend: Backend) {
    let extra = format!(
        "{TEMPLATES}\
         [events.\"ExportCompleted\"]\ntemplate = \"export-ready\"\nchannel = \"email\"\n\
         to = \"{{{{ email }}}}\"\nroute = \"globex-mail\"\n\n\
         [events.\"ReportReady\"]\ntemplate = \"export-ready\"\nchannel = \"email\"\n\
         to = \"{{{{ email }}}}\"\nroute = \"shared\"\n\n\
         [routes.globex-mail]\nprovider = \"sandbox\"\ntenants = [\"globex\"]\n\n\
         [routes.shared]\nprovider = \"sandbox\"\n\n\
         [routes.other]\nprovider = \"sandbox\"\n\n\
         [[tokens]]\nname = \"acme-narrow\"\ntenant = \"acme\"\nscopes = [\"send\"]\n\
         secret = \"test-acme-narrow-0123456789abcdef\"\nroutes = [\"other\"]\n\n\
         [dispatch]\nenabled = false\n"
    );
    let Some(app) = spawn_app_with(backend, &extra).await else {
        return;
    };
    let report = |id: &str| {
        let mut event = export_completed("academy.reports", id);
        event["type"] = json!("ReportReady");
        event
    };
    for (token, event, route) in [
        (
            ACME,
            export_completed("academy.exports", "evt-1"),
            "globex-mail",
        ),
        (
            "test-acme-narrow-0123456789abcdef",
            report("evt-2"),
            "shared",
        ),
    ] {
        let refused = problem(post_event(&app, token, &event).await, StatusCode::FORBIDDEN).await;
        assert_eq!(refused["field"], "route", "{refused}");
        assert!(
            refused["detail"]
                .as_str()
                .unwrap()
                .contains(&format!("`{route}`")),
            "{refused}"
        );
    }
    assert_eq!(
        app.db.count("notifications").await,
        0,
        "nothing sent through them"
    );
    // The route's own tenant, and a token that names the route, are taken.
    let taken = post_event(&app, GLOBEX, &export_completed("academy.exports", "evt-3")).await;
    assert_eq!(taken.status(), StatusCode::ACCEPTED);
    assert_eq!(
        post_event(&app, ACME, &report("evt-4")).await.status(),
        StatusCode::ACCEPTED
    );
    assert_eq!(app.db.count("notifications").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapping_that_could_never_work_is_refused_at_start_up() {
    let cases = [
        (
            "template = \"nope\"\nchannel = \"email\"\nto = \"{{ email }}\"",
            "template",
        ),
        (
            "template = \"export-ready\"\nchannel = \"email\"\nto = \"{{ email }}\"\nroute = \"nope\"",
            "route",
        ),
        (
            "template = \"export-ready\"\nchannel = \"email\"\nto = \"{{ email \"",
            "to",
        ),
        (
            "template = \"export-ready\"\nchannel = \"webhook\"\nto = \"{{ url }}\"",
            "channel: a template renders a subject and text, not the JSON payload",
        ),
    ];
    for (mapping, key) in cases {
        let db = TestDb::new(Backend::Sqlite).await.unwrap();
        let extra = format!("{TEMPLATES}[events.\"ExportCompleted\"]\n{mapping}\n");
        let err = match build_app(&db, &extra).await {
            Ok(_) => panic!("{mapping} was accepted"),
            Err(err) => format!("{err:#}"),
        };
        assert!(
            err.contains("events.\"ExportCompleted\"") && err.contains(key),
            "{key}: {err}"
        );
    }
}
