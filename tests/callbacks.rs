//! After the send, over real HTTP on both databases: the sandbox vendor posts signed delivery
//! reports to `POST /v1/callbacks/{route}`, late, repeated and out of order; receipts only move
//! forward; a report settles a send whose answer was lost (and its event leaves at once, without
//! the relay's poll); a hard bounce suppresses its recipient; and what is not the vendor's, or
//! names no message, stores nothing.

mod support;

use std::time::Duration;

use base64::Engine;
use herald_provider::signature::SigningSecret;
use herald_sandbox::{CallbackTarget, Profile, SandboxConfig, SandboxHandle, parse_faults};
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use support::nats::{self, Names, SHARED_URL};
use support::{
    ACME, ACME_ADMIN, ACME_REVIEWER, Backend, GLOBEX, TestApp, email, eventually, problem,
    spawn_app_with,
};

on_both_backends!(
    reports_move_the_receipt_forward_once_whatever_their_order_and_repeats,
    one_report_twenty_times_and_a_history_in_reverse_leave_one_receipt_history,
    a_report_settles_a_send_whose_answer_was_lost,
    a_reports_event_reaches_the_sink_without_waiting_for_the_relays_poll,
    a_report_that_came_before_the_ambiguity_settles_it_once_recorded,
    a_hard_bounce_suppresses_the_recipient_until_a_person_lifts_it,
    a_delivery_report_after_a_person_closed_it_reopens_it_and_nothing_sends_it_again,
    a_report_of_a_second_message_under_the_key_reopens_a_known_delivery,
    callbacks_that_are_not_the_vendors_or_name_no_message_store_nothing,
    reports_over_the_route_rate_are_refused_there_only_and_forged_ones_never_count,
);

/// The secret the sandbox signs its reports with, as the route configures it.
const SECRET: &str = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn secret() -> SigningSecret {
    SigningSecret::parse(&SecretString::from(SECRET)).unwrap()
}

/// A sandbox that signs reports with [`SECRET`], and a herald whose route `vendor` reaches it
/// and takes its reports; the sandbox reports to herald as `target` says (none: it does not).
async fn vendor_and_herald(
    backend: Backend,
    profile: Profile,
    faults: &str,
    target: Option<CallbackTarget>,
) -> Option<(SandboxHandle, TestApp)> {
    vendor_and_herald_with(backend, profile, faults, target, "").await
}

/// [`vendor_and_herald`], with `vendor_keys` added to route `vendor`'s table.
async fn vendor_and_herald_with(
    backend: Backend,
    profile: Profile,
    faults: &str,
    target: Option<CallbackTarget>,
    vendor_keys: &str,
) -> Option<(SandboxHandle, TestApp)> {
    support::install_crypto();
    let sandbox = herald_sandbox::spawn(SandboxConfig {
        profile,
        faults: parse_faults(faults).unwrap(),
        delay: Duration::from_secs(3),
        callback_secret: Some(secret()),
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let app = spawn_app_with(
        backend,
        &format!(
            "[dispatch]\nretry_base_ms = 50\nretry_max_seconds = 1\n\
             [routes.vendor]\nprovider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"{profile}\"\n\
             timeout_seconds = 1\ncallback_secret = \"{SECRET}\"\n{vendor_keys}\n\
             [routes.other]\nprovider = \"sandbox\"\nbase_url = \"{0}\"\nprofile = \"{profile}\"\n\
             callback_secret = \"{SECRET}\"\n\
             [routes.quiet]\nprovider = \"sandbox\"\nbase_url = \"{0}\"\nprofile = \"{profile}\"\n\
             [channels]\nemail = \"vendor\"\n",
            sandbox.base_url()
        ),
    )
    .await?;
    if let Some(mut target) = target {
        target.url = app.url("/v1/callbacks/vendor");
        let client = sandbox.client().unwrap();
        client.set_callbacks(Some(&target)).await.unwrap();
    }
    Some((sandbox, app))
}

fn target(delay_ms: u64, duplicates: u32, reorder: bool) -> Option<CallbackTarget> {
    Some(CallbackTarget {
        url: String::new(),
        delay_ms,
        duplicates,
        reorder,
    })
}

/// Polls the notification until `check` holds; on timeout, fails showing it as it stands.
async fn settled(app: &TestApp, id: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let n = app.show(id).await;
        if check(&n) {
            return n;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; the notification stands as {n:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Counter `name` of route `vendor` with `labels` besides, from `/metrics` (0 where it has no
/// such series); `None` where `/metrics` does not answer.
async fn counter(app: &TestApp, name: &str, labels: &[&str]) -> Option<u64> {
    let metrics = app
        .http
        .get(app.url("/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let value = metrics
        .lines()
        .find(|l| {
            l.starts_with(&format!("{name}{{"))
                && l.contains("route=\"vendor\"")
                && labels.iter().all(|label| l.contains(label))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok());
    Some(value.unwrap_or(0))
}

/// What waits for a person: the default view of the review queue.
async fn review_queue(app: &TestApp) -> Value {
    app.get(ACME_REVIEWER, "/v1/review")
        .await
        .json()
        .await
        .unwrap()
}

fn statuses(n: &Value) -> Vec<&str> {
    n["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect()
}

async fn reports_move_the_receipt_forward_once_whatever_their_order_and_repeats(backend: Backend) {
    // Each report three times, `delivered` before `sent`.
    let Some((_sandbox, app)) =
        vendor_and_herald(backend, Profile::Idempotent, "", target(0, 2, true)).await
    else {
        return;
    };
    let id = app.enqueue_id("k-1", &email("ada@example.com")).await;
    let n = settled(&app, &id, "the delivery report", |n| {
        n["receipt"]["status"] == "delivered" && n["state"] == "delivered"
    })
    .await;
    assert_eq!(
        (n["state"].as_str(), n["certainty"].as_str()),
        (Some("delivered"), Some("known"))
    );
    assert_eq!(n["receipt"]["source"], "callback:vendor");
    assert_eq!(n["receipt"]["vendor_status"], "delivered");
    // Every post has been answered once herald counted both reports taken and their four
    // repeats; `sent`, late, moved nothing.
    eventually(
        "all six posts answered",
        Duration::from_secs(20),
        || async {
            let taken = counter(&app, "herald_callbacks_total", &["result=\"taken\""]).await?;
            let repeat = counter(&app, "herald_callbacks_total", &["result=\"repeat\""]).await?;
            (taken == 2 && repeat == 4).then_some(())
        },
    )
    .await;
    assert_eq!(app.db.count("callbacks").await, 2);
    let n = app.show(&id).await;
    assert_eq!(statuses(&n), ["delivered"], "{n:#}");
    let uuid: uuid::Uuid = id.parse().unwrap();
    let receipts = app
        .db
        .event_types(uuid)
        .await
        .into_iter()
        .filter(|t| t == "dev.herald.notification.receipt")
        .count();
    assert_eq!(receipts, 1, "one event per move of the receipt");
}

/// Signs a sandbox report as the sandbox does, stamped `at` seconds from now.
fn signed(id: &str, body: &Value, skew: i64) -> (Vec<u8>, [(String, String); 3]) {
    let body = serde_json::to_vec(body).unwrap();
    let timestamp = time::OffsetDateTime::now_utc().unix_timestamp() + skew;
    let signature = secret().sign(id, timestamp, &body);
    (
        body,
        [
            ("webhook-id".into(), id.into()),
            ("webhook-timestamp".into(), timestamp.to_string()),
            ("webhook-signature".into(), signature),
        ],
    )
}

async fn post_report(
    app: &TestApp,
    route: &str,
    body: Vec<u8>,
    headers: &[(String, String)],
) -> reqwest::Response {
    let mut request = app
        .http
        .post(app.url(&format!("/v1/callbacks/{route}")))
        .header("content-type", "application/json")
        .body(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    request.send().await.unwrap()
}

fn report(key: &str, status: &str) -> Value {
    json!({"reference": key, "message_id": "sbx_1", "to": "ada@example.com", "status": status,
           "at": "2026-12-01T10:00:00Z"})
}

async fn sent_key(app: &TestApp, id: &str) -> String {
    let n = settled(app, id, "the send", |n| n["state"] == "delivered").await;
    n["attempts"][0]["provider_idempotency_key"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn one_report_twenty_times_and_a_history_in_reverse_leave_one_receipt_history(
    backend: Backend,
) {
    let Some((_sandbox, app)) = vendor_and_herald(backend, Profile::Idempotent, "", None).await
    else {
        return;
    };
    let id = app.enqueue_id("k-1", &email("ada@example.com")).await;
    let key = sent_key(&app, &id).await;
    for (i, status) in ["complained", "delivered", "sent"].into_iter().enumerate() {
        let event = format!("evt_{i}");
        for round in 0..20 {
            let (body, headers) = signed(&event, &report(&key, status), 0);
            let answer = post_report(&app, "vendor", body, &headers).await;
            assert_eq!(answer.status(), StatusCode::OK);
            let taken: Value = answer.json().await.unwrap();
            let new = if round == 0 { 1 } else { 0 };
            assert_eq!(
                taken,
                json!({"events": 1, "new": new, "repeats": 1 - new, "unknown": 0})
            );
        }
    }
    // A time the vendor sends that herald could not store and read back (year 10000 in UTC)
    // is left out; the report is taken, timed at its arrival.
    let mut poison = report(&key, "complained");
    poison["at"] = json!("9999-12-31T23:59:59-23:59");
    let (body, headers) = signed("evt_poison", &poison, 0);
    assert_eq!(
        post_report(&app, "vendor", body, &headers).await.status(),
        StatusCode::OK
    );
    let n = app.show(&id).await;
    assert_eq!(statuses(&n), ["complained"], "{n:#}");
    assert_eq!(n["receipt"]["at"], "2026-12-01T10:00:00Z");
    assert_eq!(app.db.count("callbacks").await, 4);
    assert_eq!(app.db.count("receipts").await, 1);
    // The complaint suppressed the recipient, once.
    let list: Value = app
        .get(ACME, "/v1/suppressions")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list:#}");
    assert_eq!(list["data"][0]["reason"], "complained");
    assert_eq!(app.db.count("suppression_log").await, 1);
}

async fn a_report_settles_a_send_whose_answer_was_lost(backend: Backend) {
    // The vendor takes the message and drops the connection; it reports 1.5 s later, by which
    // time herald (at_most_once, nothing to ask) has put it in review.
    let Some((sandbox, app)) = vendor_and_herald(
        backend,
        Profile::Plain,
        "accept_then_drop:nth=1",
        target(1500, 0, false),
    )
    .await
    else {
        return;
    };
    let id = app.enqueue_id("k-1", &email("ada@example.com")).await;
    let n = settled(&app, &id, "review", |n| n["state"] == "unknown").await;
    assert_eq!(n["attempts"][0]["result"], "ambiguous");
    let n = settled(&app, &id, "the report to settle it", |n| {
        n["state"] == "delivered"
    })
    .await;
    assert_eq!(n["certainty"], "known", "{n:#}");
    assert_eq!(n["attempts"].as_array().unwrap().len(), 1, "not sent again");
    assert_eq!(
        n["attempts"][0]["result"], "ambiguous",
        "what the attempt saw stays"
    );
    assert_eq!(n["attempts"][0]["settled_by"], "callback");
    assert!(n["review"].is_null(), "never was a person's: {n:#}");
    let review = review_queue(&app).await;
    assert_eq!(review["data"], json!([]), "out of review by itself");
    // It was in review for a while, then the report finished it: both are events.
    let states = app.db.state_event_types(id.parse().unwrap()).await;
    assert_eq!(
        states,
        [
            "dev.herald.notification.accepted",
            "dev.herald.notification.unknown",
            "dev.herald.notification.delivered"
        ]
    );
    let ledger = sandbox.client().unwrap().ledger().await.unwrap();
    assert_eq!(ledger.total_deliveries(), 1, "known: it was delivered once");
}

/// The store wakes the relay at every commit that writes events, a vendor's report's included:
/// with a poll of ten minutes, the `receipt` and `delivered` a report writes reach NATS within
/// seconds. (Before, only an enqueue and a send's record woke it; a report's waited for the poll.)
async fn a_reports_event_reaches_the_sink_without_waiting_for_the_relays_poll(backend: Backend) {
    let Some(client) = nats::shared().await else {
        return;
    };
    let names = Names::new();
    let relay = format!(
        "\n[relay]\npoll_interval_ms = 600000\n{}",
        names.sink("bus", SHARED_URL)
    );
    let Some((_sandbox, app)) = vendor_and_herald_with(
        backend,
        Profile::Plain,
        "accept_then_drop:nth=1",
        target(1500, 0, false),
        &relay,
    )
    .await
    else {
        return;
    };
    let id = app.enqueue_id("k-1", &email("ada@example.com")).await;
    settled(&app, &id, "the report to settle it", |n| {
        n["state"] == "delivered"
    })
    .await;
    // Every event the outbox holds for it, in order, including those one commit wrote together
    // (a report's receipt and the delivery it proves).
    let uuid: uuid::Uuid = id.parse().unwrap();
    let types = eventually("its events on NATS", Duration::from_secs(20), || async {
        let stored = nats::stored(&client, &names.stream).await;
        let on_nats: Vec<String> = stored
            .iter()
            .filter(|s| s.event["subject"] == id.as_str())
            .map(|s| s.event["type"].as_str().unwrap().to_owned())
            .collect();
        let written = app.db.event_types(uuid).await;
        (on_nats == written && on_nats.len() >= 4).then_some(on_nats)
    })
    .await;
    assert_eq!(
        types[..4],
        [
            "dev.herald.notification.accepted",
            "dev.herald.notification.unknown",
            "dev.herald.notification.receipt",
            "dev.herald.notification.delivered"
        ]
    );
    app.stop().await;
}

async fn a_report_that_came_before_the_ambiguity_settles_it_once_recorded(backend: Backend) {
    // The vendor holds its answer for 3 s, past the route's 1 s timeout, and reports at once:
    // the report arrives while the attempt is still in flight, before there is an ambiguity.
    let Some((sandbox, app)) =
        vendor_and_herald(backend, Profile::Plain, "delay:nth=1", target(0, 0, false)).await
    else {
        return;
    };
    let id = app.enqueue_id("k-1", &email("ada@example.com")).await;
    let n = settled(&app, &id, "the report to settle it", |n| {
        n["state"] == "delivered"
    })
    .await;
    assert_eq!(n["certainty"], "known", "{n:#}");
    assert_eq!(n["attempts"][0]["result"], "ambiguous");
    assert_eq!(n["attempts"][0]["settled_by"], "callback");
    assert_eq!(n["receipt"]["status"], "delivered");
    // Settled in the record's own transaction, and counted as the report's settlement (the
    // store says so; dispatch no longer infers it): nobody could see it `unknown`.
    let by_report = ["settled_by=\"callback\"", "accepted=\"true\""];
    // (The worker counts it once its record has committed.)
    eventually(
        "the settlement counted",
        Duration::from_secs(10),
        || async {
            let settlements = counter(&app, "herald_settlements_total", &by_report).await?;
            (settlements == 1).then_some(())
        },
    )
    .await;
    let states = app.db.state_event_types(id.parse().unwrap()).await;
    assert_eq!(
        states,
        [
            "dev.herald.notification.accepted",
            "dev.herald.notification.delivered"
        ]
    );
    let ledger = sandbox.client().unwrap().ledger().await.unwrap();
    assert_eq!(ledger.total_deliveries(), 1);
}

async fn a_delivery_report_after_a_person_closed_it_reopens_it_and_nothing_sends_it_again(
    backend: Backend,
) {
    // The vendor takes the message and drops the connection; herald (at_most_once, nothing to
    // ask) puts it in review, and a person wrongly closes it as not delivered. Then the
    // vendor's signed report says delivered.
    let Some((sandbox, app)) =
        vendor_and_herald(backend, Profile::Plain, "accept_then_drop:nth=1", None).await
    else {
        return;
    };
    let id = app.enqueue_id("k-1", &email("ada@example.com")).await;
    let n = settled(&app, &id, "review", |n| n["state"] == "unknown").await;
    let key = n["attempts"][0]["provider_idempotency_key"]
        .as_str()
        .unwrap()
        .to_owned();
    let resolve = |body: Value| {
        let app = &app;
        let path = format!("/v1/notifications/{id}/resolve");
        async move { app.post_json(ACME_REVIEWER, &path, &body).await }
    };
    let closed = resolve(json!({"outcome": "not_delivered", "then": "close",
                                "note": "not on the vendor's dashboard"}))
    .await;
    assert_eq!(closed.status(), StatusCode::OK);
    assert_eq!(app.show(&id).await["state"], "failed");

    let (body, headers) = signed("evt_late", &report(&key, "delivered"), 0);
    assert_eq!(
        post_report(&app, "vendor", body, &headers).await.status(),
        StatusCode::OK
    );
    let n = app.show(&id).await;
    assert_eq!(
        (&n["state"], &n["certainty"]),
        (&json!("delivered"), &json!("known")),
        "the vendor's word outranks the person's: one message, delivered. {n:#}"
    );
    let why = n["contradiction"]["why"].as_str().unwrap();
    assert!(why.contains(&key), "the evidence is named: {why}");
    assert_eq!(n["review"]["reason"], "contradicted", "{n:#}");
    assert_eq!(n["review"]["open"], true);
    assert_eq!(n["review"]["resolutions"].as_array().unwrap().len(), 1);

    let queue = review_queue(&app).await;
    assert_eq!(queue["data"].as_array().unwrap().len(), 1, "{queue:#}");
    assert_eq!(queue["data"][0]["reason"], "contradicted");
    assert!(
        app.db
            .event_types(id.parse().unwrap())
            .await
            .contains(&"dev.herald.notification.reopened".to_owned())
    );

    // A resend is refused: it has a delivery report. Acknowledging it closes the review.
    let resend = resolve(
        json!({"outcome": "not_delivered", "then": "resend", "force": true,
                                "note": "send it again"}),
    )
    .await;
    assert_eq!(resend.status(), StatusCode::CONFLICT);
    let acknowledged =
        resolve(json!({"outcome": "acknowledged", "note": "the vendor delivered it"})).await;
    assert_eq!(acknowledged.status(), StatusCode::OK);
    let queue = review_queue(&app).await;
    assert_eq!(queue["data"], json!([]));
    let ledger = sandbox.client().unwrap().ledger().await.unwrap();
    assert_eq!(ledger.total_deliveries(), 1, "sent once, never again");
}

/// A stale worker's second send makes a second message under the notification's key, which
/// herald's record does not hold; the vendor's signed report of it is the only sign. It reopens
/// the `known` delivery as a possible duplicate, in review, and the ledger agrees: two messages.
async fn a_report_of_a_second_message_under_the_key_reopens_a_known_delivery(backend: Backend) {
    let Some((sandbox, app)) =
        vendor_and_herald(backend, Profile::Plain, "", target(0, 0, false)).await
    else {
        return;
    };
    let id = app.enqueue_id("k-1", &email("ada@example.com")).await;
    let n = settled(&app, &id, "the first message's report", |n| {
        n["state"] == "delivered" && n["receipts"].as_array().is_some_and(|r| !r.is_empty())
    })
    .await;
    assert_eq!(n["certainty"], "known", "its report agrees: {n:#}");
    let key = n["attempts"][0]["provider_idempotency_key"]
        .as_str()
        .unwrap()
        .to_owned();
    let first = n["attempts"][0]["provider_ref"]
        .as_str()
        .unwrap()
        .to_owned();

    // The same request again, as the stale worker's would be: a second message under the key.
    let second: Value = app
        .http
        .post(format!("{}/messages", sandbox.base_url()))
        .json(
            &json!({"reference": key, "channel": "email", "to": "ada@example.com",
                      "subject": "hello", "text": "hello"}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let second = second["id"].as_str().unwrap().to_owned();
    assert_ne!(second, first);

    let n = settled(&app, &id, "the second message's report", |n| {
        n["certainty"] == "duplicate_possible"
    })
    .await;
    assert_eq!(n["state"], "delivered");
    assert_eq!(n["review"]["reason"], "contradicted", "{n:#}");
    let why = n["contradiction"]["why"].as_str().unwrap();
    assert!(why.contains(&second), "the second message is named: {why}");
    let queue = review_queue(&app).await;
    assert_eq!(queue["data"][0]["id"], json!(id), "{queue:#}");
    let ledger = sandbox.client().unwrap().ledger().await.unwrap();
    assert_eq!(ledger.deliveries_of(&key), 2, "the vendor holds two");
}

async fn a_hard_bounce_suppresses_the_recipient_until_a_person_lifts_it(backend: Backend) {
    let Some((sandbox, app)) =
        vendor_and_herald(backend, Profile::Idempotent, "", target(0, 0, false)).await
    else {
        return;
    };
    let ledger = sandbox.client().unwrap();
    let first = app.enqueue_id("k-1", &email("bounce@example.com")).await;
    settled(&app, &first, "the bounce", |n| {
        n["receipt"]["status"] == "bounced"
    })
    .await;
    let list: Value = app
        .get(ACME, "/v1/suppressions?channel=email")
        .await
        .json()
        .await
        .unwrap();
    let suppression = &list["data"][0];
    assert_eq!(suppression["recipient"], "bounce@example.com", "{list:#}");
    assert_eq!(suppression["reason"], "bounced");
    assert_eq!(suppression["source"], "callback:vendor");
    assert_eq!(suppression["evidence"]["notification_id"], first);

    // The same address in other case: refused without a call to the vendor.
    let calls = ledger.ledger().await.unwrap().requests;
    let second = app.enqueue_id("k-2", &email("Bounce@Example.com")).await;
    let n = settled(&app, &second, "the refusal", |n| n["state"] == "failed").await;
    assert_eq!(n["certainty"], "known");
    assert_eq!(n["failure_reason"], "suppressed", "{n:#}");
    assert_eq!(n["attempts"][0]["evidence"]["stage"], "suppressed");
    assert_eq!(
        ledger.ledger().await.unwrap().requests,
        calls,
        "no vendor call"
    );
    // Another tenant's sends to it are its own business.
    let globex = app
        .enqueue(GLOBEX, "k-g", &email("bounce@example.com"))
        .await;
    assert_eq!(globex.status(), StatusCode::ACCEPTED);
    let globex: Value = globex.json().await.unwrap();
    let globex_id = globex["id"].as_str().unwrap();
    eventually("globex's send", Duration::from_secs(20), || async {
        let n: Value = app
            .get(GLOBEX, &format!("/v1/notifications/{globex_id}"))
            .await
            .json()
            .await
            .unwrap();
        (n["state"] == "delivered").then_some(())
    })
    .await;

    // Lifting needs `admin` and a note, and is audited.
    let path = "/v1/suppressions/email/bounce%40example.com";
    let lift = |token: &'static str, body: Value| {
        let request = app
            .http
            .delete(app.url(path))
            .bearer_auth(token)
            .json(&body);
        async move { request.send().await.unwrap() }
    };
    problem(
        lift(ACME, json!({"note": "fixed"})).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    let missing = problem(
        lift(ACME_ADMIN, json!({"note": " "})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(missing["field"], "note");
    let lifted = lift(ACME_ADMIN, json!({"note": "the mailbox exists again"})).await;
    assert_eq!(lifted.status(), StatusCode::OK);
    problem(
        lift(ACME_ADMIN, json!({"note": "again"})).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let list: Value = app
        .get(ACME, "/v1/suppressions")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["data"], json!([]));
    // Globex's own send bounced too: its suppression stays, and only acme's was lifted.
    let lifted_log = app
        .db
        .scalar("SELECT count(*) FROM suppression_log WHERE tenant = 'acme'")
        .await;
    assert_eq!(lifted_log, 2, "added, then lifted");
    let third = app.enqueue_id("k-3", &email("bounce@example.com")).await;
    settled(&app, &third, "the send after lifting", |n| {
        n["state"] == "delivered"
    })
    .await;

    // A person may suppress a recipient by hand, with a note.
    let add = |token: &'static str, body: Value| {
        let request = app
            .http
            .post(app.url("/v1/suppressions"))
            .bearer_auth(token)
            .json(&body);
        async move { request.send().await.unwrap() }
    };
    let body = json!({"channel": "sms", "recipient": "+14155550100", "note": "asked by phone"});
    problem(add(ACME, body.clone()).await, StatusCode::FORBIDDEN).await;
    let bad = json!({"channel": "sms", "recipient": "not a number", "note": "x"});
    let refused = problem(add(ACME_ADMIN, bad).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(refused["field"], "recipient");
    let added = add(ACME_ADMIN, body.clone()).await;
    assert_eq!(added.status(), StatusCode::CREATED);
    let added: Value = added.json().await.unwrap();
    assert_eq!(
        (added["reason"].as_str(), added["source"].as_str()),
        (Some("manual"), Some("acme-admin"))
    );
    assert_eq!(
        add(ACME_ADMIN, body).await.status(),
        StatusCode::OK,
        "already suppressed"
    );
    let others: Value = app
        .get(GLOBEX, "/v1/suppressions")
        .await
        .json()
        .await
        .unwrap();
    let recipients: Vec<&str> = others["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["recipient"].as_str().unwrap())
        .collect();
    assert_eq!(
        recipients,
        ["bounce@example.com"],
        "a tenant sees only its own"
    );
}

async fn callbacks_that_are_not_the_vendors_or_name_no_message_store_nothing(backend: Backend) {
    let Some((_sandbox, app)) = vendor_and_herald(backend, Profile::Idempotent, "", None).await
    else {
        return;
    };
    let id = app.enqueue_id("k-1", &email("ada@example.com")).await;
    let key = sent_key(&app, &id).await;
    let good = report(&key, "delivered");

    let (body, headers) = signed("evt_1", &good, 0);
    let unsigned = post_report(&app, "vendor", body.clone(), &headers[..2]).await;
    let detail = problem(unsigned, StatusCode::UNAUTHORIZED).await;
    assert!(
        detail["type"]
            .as_str()
            .unwrap()
            .ends_with("callback-unauthenticated")
    );

    let mut tampered = body.clone();
    tampered.extend_from_slice(b" ");
    problem(
        post_report(&app, "vendor", tampered, &headers).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;

    let other = SigningSecret::parse(&SecretString::from(format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode([9u8; 32])
    )))
    .unwrap();
    let mut forged = headers.clone();
    forged[2].1 = other.sign("evt_1", headers[1].1.parse().unwrap(), &body);
    problem(
        post_report(&app, "vendor", body.clone(), &forged).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;

    let (old_body, old) = signed("evt_1", &good, -600);
    problem(
        post_report(&app, "vendor", old_body, &old).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;

    let (bad_body, bad) = signed("evt_2", &json!({"reference": key}), 0);
    problem(
        post_report(&app, "vendor", bad_body, &bad).await,
        StatusCode::BAD_REQUEST,
    )
    .await;
    let (text, text_headers) = {
        let body = b"not json".to_vec();
        let timestamp = time::OffsetDateTime::now_utc().unix_timestamp();
        let signature = secret().sign("evt_3", timestamp, &body);
        (
            body,
            [
                ("webhook-id".to_owned(), "evt_3".to_owned()),
                ("webhook-timestamp".to_owned(), timestamp.to_string()),
                ("webhook-signature".to_owned(), signature),
            ],
        )
    };
    problem(
        post_report(&app, "vendor", text, &text_headers).await,
        StatusCode::BAD_REQUEST,
    )
    .await;

    let nobody = report(&uuid::Uuid::now_v7().to_string(), "delivered");
    let (body_x, headers_x) = signed("evt_4", &nobody, 0);
    let unknown = problem(
        post_report(&app, "vendor", body_x, &headers_x).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert!(
        unknown["type"]
            .as_str()
            .unwrap()
            .ends_with("callback-unknown-message")
    );
    // A key of a message sent on another route is not this route's vendor's to report.
    let elsewhere = app
        .enqueue_id(
            "k-2",
            &json!({"channel": "email", "to": "bo@example.com", "route": "quiet",
                                    "subject": "Hi", "text": "hello"}),
        )
        .await;
    let elsewhere_key = sent_key(&app, &elsewhere).await;
    let (body_y, headers_y) = signed("evt_5", &report(&elsewhere_key, "delivered"), 0);
    problem(
        post_report(&app, "vendor", body_y, &headers_y).await,
        StatusCode::NOT_FOUND,
    )
    .await;

    let (body_q, headers_q) = signed("evt_6", &good, 0);
    let no_callbacks = problem(
        post_report(&app, "quiet", body_q.clone(), &headers_q).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert!(
        no_callbacks["detail"]
            .as_str()
            .unwrap()
            .contains("takes no callbacks"),
        "{no_callbacks}"
    );
    problem(
        post_report(&app, "nowhere", body_q, &headers_q).await,
        StatusCode::NOT_FOUND,
    )
    .await;

    let huge = vec![b' '; 300 * 1024];
    let (_, huge_headers) = signed("evt_7", &good, 0);
    problem(
        post_report(&app, "vendor", huge, &huge_headers).await,
        StatusCode::PAYLOAD_TOO_LARGE,
    )
    .await;

    // Signed, but holding text no database here can store (PostgreSQL refuses U+0000).
    let (nul_body, nul_headers) = signed("evt_8", &report(&format!("{key}\u{0}"), "delivered"), 0);
    let refused = problem(
        post_report(&app, "vendor", nul_body, &nul_headers).await,
        StatusCode::BAD_REQUEST,
    )
    .await;
    assert!(
        refused["detail"].as_str().unwrap().contains("NUL"),
        "{refused}"
    );

    for table in ["callbacks", "receipts", "suppressions"] {
        assert_eq!(app.db.count(table).await, 0, "{table}: nothing stored");
    }
    // And the genuine report is taken.
    let answer = post_report(&app, "vendor", body, &headers).await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(app.show(&id).await["receipt"]["status"], "delivered");
}

async fn reports_over_the_route_rate_are_refused_there_only_and_forged_ones_never_count(
    backend: Backend,
) {
    let Some((_sandbox, app)) = vendor_and_herald_with(
        backend,
        Profile::Idempotent,
        "",
        None,
        "callback_rate_limit_per_second = 1\ncallback_burst = 5",
    )
    .await
    else {
        return;
    };
    let id = app.enqueue_id("k-1", &email("ada@example.com")).await;
    let key = sent_key(&app, &id).await;
    let elsewhere = app
        .enqueue_id(
            "k-2",
            &json!({"channel": "email", "to": "bo@example.com", "route": "other",
                    "subject": "Hi", "text": "hello"}),
        )
        .await;
    let elsewhere_key = sent_key(&app, &elsewhere).await;

    // Forty forged requests at once: each is refused as unauthenticated, and none spends the
    // route's budget, so the vendor's own report right behind them is taken.
    const STORM: usize = 40;
    let (body, headers) = signed("evt_0", &report(&key, "sent"), 0);
    let mut forged = headers.clone();
    forged[2].1 = "v1,AAAA".into();
    let answers = futures::future::join_all(
        (0..STORM).map(|_| post_report(&app, "vendor", body.clone(), &forged)),
    )
    .await;
    for answer in answers {
        problem(answer, StatusCode::UNAUTHORIZED).await;
    }
    let answer = post_report(&app, "vendor", body.clone(), &headers).await;
    assert_eq!(answer.status(), StatusCode::OK, "the budget is whole");

    // Forty replays of that genuine report, captured on the way: each is told it is a repeat,
    // and none spends the budget either (the storm below still finds four of the five).
    let answers = futures::future::join_all(
        (0..STORM).map(|_| post_report(&app, "vendor", body.clone(), &headers)),
    )
    .await;
    for answer in answers {
        assert_eq!(answer.status(), StatusCode::OK);
        let receipt: Value = answer.json().await.unwrap();
        assert_eq!(
            (receipt["new"].as_u64(), receipt["repeats"].as_u64()),
            (Some(0), Some(1))
        );
    }

    // Forty genuine reports at once, on a route that takes one a second after a burst of five
    // (one spent above): the rest are refused, told when to come back, and stored nothing.
    let storm: Vec<_> = (1..=STORM)
        .map(|i| signed(&format!("evt_{i}"), &report(&key, "delivered"), 0))
        .collect();
    let started = std::time::Instant::now();
    let answers = futures::future::join_all(
        storm
            .iter()
            .map(|(body, headers)| post_report(&app, "vendor", body.clone(), headers)),
    )
    .await;
    let elapsed = started.elapsed();
    let mut refused = Vec::new();
    for (i, answer) in answers.into_iter().enumerate() {
        if answer.status() == StatusCode::OK {
            continue;
        }
        let wait: u64 = answer.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=2).contains(&wait), "Retry-After {wait}");
        let detail = problem(answer, StatusCode::TOO_MANY_REQUESTS).await;
        assert!(
            detail["type"]
                .as_str()
                .unwrap()
                .ends_with("callback-rate-limited"),
            "{detail}"
        );
        refused.push(i);
    }
    let taken = STORM - refused.len();
    assert!(
        (4..=4 + elapsed.as_secs() as usize + 1).contains(&taken),
        "{taken} of {STORM} taken in {elapsed:?} at 1/s after a burst of 4"
    );
    assert_eq!(
        app.db.count("callbacks").await,
        1 + taken as i64,
        "a refused report stores nothing"
    );

    // Another route's reports are not held up by this one's storm.
    let (other_body, other_headers) = signed("evt_other", &report(&elsewhere_key, "delivered"), 0);
    let answer = post_report(&app, "other", other_body, &other_headers).await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(app.show(&elsewhere).await["receipt"]["status"], "delivered");

    // A refused report sent again, as told, is taken.
    let again = refused[0] + 1;
    eventually(
        "a refused report sent again",
        Duration::from_secs(20),
        || async {
            let (body, headers) = signed(&format!("evt_{again}"), &report(&key, "delivered"), 0);
            let answer = post_report(&app, "vendor", body, &headers).await;
            (answer.status() == StatusCode::OK).then_some(())
        },
    )
    .await;
    assert_eq!(app.show(&id).await["receipt"]["status"], "delivered");
    assert_eq!(app.db.count("callbacks").await, 3 + taken as i64);
}
