//! Email attachments over real HTTP on both databases: a file arrives at the vendor intact, a
//! replay under the same key sends the very same bytes, a file sent to 10,000 recipients is
//! stored once and goes with the last notification that names it, and bad attachments are
//! refused by field without storing anything.

mod support;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use herald::review::PermanentRefusals;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use support::{
    ACME, Backend, GLOBEX, TestApp, drain, email, eventually, problem, results, spawn_app,
    spawn_app_with, spawn_stepped,
};

on_both_backends!(
    an_attachment_arrives_intact_and_a_replay_sends_the_same_bytes,
    a_file_sent_to_ten_thousand_recipients_is_stored_once_and_goes_with_the_last_of_them,
    bad_attachments_are_refused_by_field_and_store_nothing,
    a_file_gone_from_the_store_fails_the_send_without_a_call,
    a_file_gone_before_a_replay_leaves_the_first_send_unknown_without_another_call,
);

/// Bytes that are not UTF-8 and span several base64 lines.
fn pdf(len: usize) -> Vec<u8> {
    let mut bytes = b"%PDF-1.7\n".to_vec();
    bytes.extend((0..len as u32).map(|i| (i * 31 % 251) as u8));
    bytes
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn attachment(filename: &str, content_type: &str, content: &[u8]) -> Value {
    json!({"filename": filename, "content_type": content_type, "content": STANDARD.encode(content)})
}

fn with_attachments(to: &str, attachments: Value) -> Value {
    let mut body = email(to);
    body["attachments"] = attachments;
    body
}

async fn an_attachment_arrives_intact_and_a_replay_sends_the_same_bytes(backend: Backend) {
    // The first send is processed but its answer lost: herald replays it under the same key,
    // and the vendor, which compares a repeated key's body, takes it as the same request.
    let vendor = herald_sandbox::spawn(herald_sandbox::SandboxConfig {
        profile: herald_sandbox::Profile::Idempotent,
        faults: herald_sandbox::parse_faults("accept_then_drop:nth=1").unwrap(),
        ..herald_sandbox::SandboxConfig::default()
    })
    .await
    .expect("the sandbox vendor starts");
    let config = format!(
        r#"
[dispatch]
retry_base_ms = 100

[routes.vendor]
provider = "sandbox"
base_url = "{}"
profile = "idempotent"
timeout_seconds = 2

[channels]
email = "vendor"
"#,
        vendor.base_url()
    );
    let Some((app, dispatcher)) = spawn_stepped(backend, &config).await else {
        return;
    };
    let invoice = pdf(4000);
    let terms = "Conditions générales\n".repeat(20).into_bytes();
    let id = app
        .enqueue_id(
            "with-attachments",
            &with_attachments(
                "ada@example.com",
                json!([
                    attachment("invoice.pdf", "application/pdf", &invoice),
                    attachment("conditions générales.txt", "text/plain", &terms),
                    attachment("copy of the invoice.pdf", "application/pdf", &invoice),
                ]),
            ),
        )
        .await;

    let n = eventually(
        "the notification to be delivered",
        Duration::from_secs(30),
        || async {
            drain(&dispatcher).await;
            let n = app.show(&id).await;
            (n["state"] == "delivered").then_some(n)
        },
    )
    .await;

    assert_eq!(n["certainty"], "known");
    assert_eq!(results(&n), ["ambiguous", "accepted"], "{n:#}");
    // The API shows what each attachment is, never its content.
    assert_eq!(
        n["attachments"],
        json!([
            {"filename": "invoice.pdf", "content_type": "application/pdf",
             "size": invoice.len(), "sha256": sha256(&invoice)},
            {"filename": "conditions générales.txt", "content_type": "text/plain",
             "size": terms.len(), "sha256": sha256(&terms)},
            {"filename": "copy of the invoice.pdf", "content_type": "application/pdf",
             "size": invoice.len(), "sha256": sha256(&invoice)},
        ])
    );
    let ledger = vendor.client().unwrap().ledger().await.unwrap();
    assert_eq!(
        ledger.deliveries_of(&id),
        1,
        "delivered once, replayed once"
    );
    let received: Vec<(String, String)> = ledger.attachments[&id]
        .iter()
        .map(|a| (a.filename.clone(), a.sha256.clone()))
        .collect();
    assert_eq!(
        received,
        [
            ("invoice.pdf".to_owned(), sha256(&invoice)),
            ("conditions générales.txt".to_owned(), sha256(&terms)),
            ("copy of the invoice.pdf".to_owned(), sha256(&invoice)),
        ]
    );
    // Events say what was attached, as the API does.
    let events = app.db.texts("SELECT CAST(data AS text) FROM outbox").await;
    assert!(!events.is_empty());
    for event in events {
        let data: Value = serde_json::from_str(&event).unwrap();
        assert_eq!(data["attachments"], n["attachments"], "{data:#}");
    }
    // Two contents, each stored once; the stored request names them and holds neither.
    assert_eq!(app.db.count("attachments").await, 2);
    let stored = app
        .db
        .texts("SELECT CAST(provider_request AS text) FROM notifications")
        .await;
    assert_eq!(stored.len(), 1);
    assert!(stored[0].contains("{{herald-attachment:"), "{}", stored[0]);
    assert!(!stored[0].contains(&STANDARD.encode(&invoice)[..64]));
}

async fn a_file_gone_from_the_store_fails_the_send_without_a_call(backend: Backend) {
    let vendor = support::plain_vendor("").await;
    let config = format!(
        "[routes.vendor]\nprovider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"plain\"\n\n\
         [channels]\nemail = \"vendor\"\n",
        vendor.base_url()
    );
    let Some((app, dispatcher)) = spawn_stepped(backend, &config).await else {
        return;
    };
    let id = app
        .enqueue_id(
            "gone",
            &with_attachments(
                "ada@example.com",
                json!([attachment("a.pdf", "application/pdf", &pdf(100))]),
            ),
        )
        .await;
    // Retention never does this to a notification it keeps; a hand in the database might.
    app.db.execute("DELETE FROM notification_attachments").await;
    app.db.execute("DELETE FROM attachments").await;

    drain(&dispatcher).await;

    let n = app.show(&id).await;
    assert_eq!(
        (&n["state"], &n["certainty"]),
        (&json!("failed"), &json!("known"))
    );
    let detail = n["attempts"][0]["evidence"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("`a.pdf`") && detail.contains("not stored"),
        "{detail}"
    );
    assert_eq!(vendor.client().unwrap().ledger().await.unwrap().requests, 0);
}

async fn a_file_sent_to_ten_thousand_recipients_is_stored_once_and_goes_with_the_last_of_them(
    backend: Backend,
) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let flyer = pdf(2000);
    let shared = json!([attachment("flyer.pdf", "application/pdf", &flyer)]);
    for batch in 0..10 {
        let items: Vec<Value> = (0..1000)
            .map(|i| {
                let mut item =
                    with_attachments(&format!("user{batch}-{i}@example.com"), shared.clone());
                item["idempotency_key"] = json!(format!("flyer-{batch}-{i}"));
                item["cancellation_key"] = json!("flyer-campaign");
                item
            })
            .collect();
        let response = app
            .post_json(ACME, "/v1/notifications/batch", &json!({"items": items}))
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        let answer: Value = response.json().await.unwrap();
        assert!(
            answer["results"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["status"] == 202),
            "batch {batch}: {answer:#}"
        );
    }
    let straggler = app
        .enqueue_id(
            "flyer-late",
            &with_attachments("late@example.com", shared.clone()),
        )
        .await;

    assert_eq!(app.db.count("notifications").await, 10_001);
    assert_eq!(app.db.count("attachments").await, 1);
    assert_eq!(app.db.count("notification_attachments").await, 10_001);

    // The campaign is called off; the late one still waits, and keeps the file.
    let cancelled = app
        .post_json(
            ACME,
            "/v1/notifications/cancel",
            &json!({"cancellation_key": "flyer-campaign"}),
        )
        .await;
    assert_eq!(cancelled.status(), StatusCode::OK);
    let swept = sweep_a_month_on(&app).await;
    assert_eq!(swept.notifications, 10_000);
    assert_eq!(swept.files, 0);
    assert_eq!(app.db.count("attachments").await, 1);
    assert_eq!(app.db.count("notification_attachments").await, 1);

    // Another tenant that sends the same file stores a copy of its own: its enqueue does not
    // find acme's (and so cannot tell that acme holds it), and acme's sweep leaves it.
    let globex = app
        .enqueue(
            GLOBEX,
            "flyer-globex",
            &with_attachments("gl@example.com", shared),
        )
        .await;
    assert_eq!(globex.status(), StatusCode::ACCEPTED);
    assert_eq!(
        app.db
            .texts("SELECT tenant FROM attachments ORDER BY tenant")
            .await,
        ["acme", "globex"]
    );

    // The last notification that names it goes, and the file with it.
    let response = app
        .post_json(
            ACME,
            &format!("/v1/notifications/{straggler}/cancel"),
            &json!({}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let swept = sweep_a_month_on(&app).await;
    assert_eq!((swept.notifications, swept.files), (1, 1));
    assert_eq!(
        app.db.texts("SELECT tenant FROM attachments").await,
        ["globex"]
    );
}

/// Waits for the relay to publish every event, then sweeps as if 31 days had passed with
/// finished notifications kept for 30.
async fn sweep_a_month_on(app: &TestApp) -> herald::retention::Swept {
    eventually(
        "every event to be published",
        Duration::from_secs(60),
        || async {
            let unpublished = app
                .db
                .scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL")
                .await;
            (unpublished == 0).then_some(())
        },
    )
    .await;
    let settings = herald::retention::Settings {
        idempotency: Duration::from_secs(30 * 86_400),
        finished: Some(Duration::from_secs(30 * 86_400)),
        batch_size: 5000,
        refusals: PermanentRefusals::Final,
    };
    herald::retention::sweep(
        &*app.store,
        &settings,
        OffsetDateTime::now_utc() + Duration::from_secs(31 * 86_400),
        &tokio_util::sync::CancellationToken::new(),
    )
    .await
    .expect("retention sweeps")
}

async fn bad_attachments_are_refused_by_field_and_store_nothing(backend: Backend) {
    let Some(app) = spawn_app_with(
        backend,
        "[dispatch]\nenabled = false\n\n[attachments]\nmax_total_bytes = 1048576\n",
    )
    .await
    else {
        return;
    };
    let ok = attachment("ok.txt", "text/plain", b"fine");
    let eleven: Vec<Value> = (0..11).map(|_| ok.clone()).collect();
    let cases = [
        (
            json!([attachment("../../etc/passwd", "text/plain", b"x")]),
            "attachments[0].filename",
        ),
        (
            json!([
                ok,
                attachment("a\r\nBcc: x@evil.example", "text/plain", b"x")
            ]),
            "attachments[1].filename",
        ),
        (
            json!([attachment("setup.exe", "application/x-msdownload", b"MZ")]),
            "attachments[0].content_type",
        ),
        (
            json!([{"filename": "a.txt", "content_type": "text/plain", "content": "%%%"}]),
            "attachments[0].content",
        ),
        (
            json!([{"filename": "a.txt", "content_type": "text/plain", "content": 7}]),
            "attachments[0].content",
        ),
        (
            json!([{"filename": "a.txt", "content_type": "text/plain"}]),
            "attachments[0].content",
        ),
        (
            json!([{"filename": "a.txt", "content_type": "text/plain", "content": "eA==", "url": "x"}]),
            "attachments[0].url",
        ),
        (json!(eleven), "attachments"),
        (
            json!([
                attachment("big.pdf", "application/pdf", &pdf(600 * 1024)),
                attachment("bigger.pdf", "application/pdf", &pdf(600 * 1024))
            ]),
            "attachments[1].content",
        ),
    ];
    for (i, (attachments, field)) in cases.into_iter().enumerate() {
        let response = app
            .enqueue(
                ACME,
                &format!("bad-{i}"),
                &with_attachments("ada@example.com", attachments),
            )
            .await;
        let problem = problem(response, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(problem["field"], field, "case {i}: {problem:#}");
    }
    let sms = json!({"channel": "sms", "to": "+15555550100", "text": "hi",
                     "attachments": [attachment("a.txt", "text/plain", b"x")]});
    let response = app.enqueue(ACME, "bad-sms", &sms).await;
    let refused = problem(response, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(refused["field"], "attachments");

    // The enqueue route's body limit grows with the attachments it may carry (1 MiB here,
    // beyond the 256 KiB of every other route), and only that route's. (Just over 256 KiB in
    // base64: a body far over a limit is cut off mid-upload, and a client may see the reset
    // before the 413.)
    let large = with_attachments(
        "ada@example.com",
        json!([attachment("large.pdf", "application/pdf", &pdf(200 * 1024))]),
    );
    let response = app.enqueue(ACME, "large", &large).await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let response = app
        .post_json(ACME, "/v1/notifications/cancel", &large)
        .await;
    problem(response, StatusCode::PAYLOAD_TOO_LARGE).await;
    // That room is the files': as much text without them, alone or spread over a batch, is over
    // the limit.
    let mut wordy = email("ada@example.com");
    wordy["text"] = "x".repeat(300 * 1024).into();
    let response = app.enqueue(ACME, "wordy", &wordy).await;
    let refused = problem(response, StatusCode::PAYLOAD_TOO_LARGE).await;
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("besides its attachments"),
        "{refused}"
    );
    let mut half = email("ada@example.com");
    half["text"] = "x".repeat(150 * 1024).into();
    let items: Vec<Value> = ["wordy-1", "wordy-2"]
        .iter()
        .map(|key| {
            let mut item = half.clone();
            item["idempotency_key"] = (*key).into();
            item
        })
        .collect();
    let response = app
        .post_json(ACME, "/v1/notifications/batch", &json!({"items": items}))
        .await;
    problem(response, StatusCode::PAYLOAD_TOO_LARGE).await;
    // A batch whose items carry more distinct files than it has room for items: the one
    // transaction would hold SQLite's writer for each of them.
    let crowded: Vec<Value> = (0..101)
        .map(|i| {
            let files: Vec<Value> = (0..10)
                .map(|j| attachment("a.txt", "text/plain", format!("{i}-{j}").as_bytes()))
                .collect();
            let mut item = with_attachments("ada@example.com", json!(files));
            item["idempotency_key"] = format!("crowded-{i}").into();
            item
        })
        .collect();
    let response = app
        .post_json(ACME, "/v1/notifications/batch", &json!({"items": crowded}))
        .await;
    let refused = problem(response, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(refused["field"], "items", "{refused}");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("1010 distinct"),
        "{refused}"
    );

    assert_eq!(app.db.count("notifications").await, 1);
    assert_eq!(app.db.count("attachments").await, 1);
}

async fn a_file_gone_before_a_replay_leaves_the_first_send_unknown_without_another_call(
    backend: Backend,
) {
    // The vendor takes the first send and its answer is lost: only a replay of the very same
    // request, files and all, could settle it. The first replay is refused with 429 and
    // `Retry-After: 1`, so the next waits at least that long.
    let vendor = herald_sandbox::spawn(herald_sandbox::SandboxConfig {
        profile: herald_sandbox::Profile::Idempotent,
        faults: herald_sandbox::parse_faults("accept_then_drop:nth=1,rate_limited:nth=2").unwrap(),
        ..herald_sandbox::SandboxConfig::default()
    })
    .await
    .expect("the sandbox vendor starts");
    let config = format!(
        "[dispatch]\nretry_base_ms = 100\n\n\
         [routes.vendor]\nprovider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"idempotent\"\n\
         timeout_seconds = 2\n\n[channels]\nemail = \"vendor\"\n",
        vendor.base_url()
    );
    let Some((app, dispatcher)) = spawn_stepped(backend, &config).await else {
        return;
    };
    let id = app
        .enqueue_id(
            "gone-before-replay",
            &with_attachments(
                "ada@example.com",
                json!([attachment("a.pdf", "application/pdf", &pdf(100))]),
            ),
        )
        .await;
    // The first send and the refused replay only: the next replay falls due later.
    dispatcher.drain(Duration::ZERO).await.unwrap();
    let n = app.show(&id).await;
    assert_eq!(results(&n), ["ambiguous", "rejected"], "{n:#}");
    app.db.execute("DELETE FROM notification_attachments").await;
    app.db.execute("DELETE FROM attachments").await;
    // Another process replays it: this one's cache still holds the content, which is the same
    // by its hash, and would send it.
    drop(dispatcher);
    let (app, dispatcher) = app.restart_stepped(&config).await;

    drain(&dispatcher).await;

    // A request without its file would be another request: none is sent, and what became of
    // the first is for a person to settle.
    let n = app.show(&id).await;
    assert_eq!(
        (&n["state"], &n["certainty"]),
        (&json!("unknown"), &json!("unknown")),
        "{n:#}"
    );
    assert_eq!(results(&n), ["ambiguous", "rejected"], "{n:#}");
    let why = &n["attempts"][0]["evidence"]["look_up"]["findings"]["cannot_send_again"];
    assert!(why["detail"].as_str().unwrap().contains("`a.pdf`"), "{n:#}");
    assert_eq!(n["review"]["reason"], "unknown", "{n:#}");
    let ledger = vendor.client().unwrap().ledger().await.unwrap();
    assert_eq!(ledger.requests, 2, "no request after the file was gone");
    assert_eq!(ledger.deliveries_of(&id), 1);
}
