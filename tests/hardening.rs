//! Holes an outside probe found, each closed and proven here: characters a database cannot
//! store, database errors at connect time, token secrets, the SQLite file, slow clients,
//! routes across tenants, and fair claiming.

mod support;

use reqwest::StatusCode;
use serde_json::{Value, json};

use support::{ACME, ACME_REVIEWER, Backend, TestDb, build_app, problem, spawn_app};

on_both_backends!(
    a_nul_character_is_refused_by_name_on_both_backends,
    a_time_out_of_range_is_refused_by_name_and_never_stored,
);

/// What `App::build` says of a config with these `[[tokens]]`.
async fn built_with(tokens: &str) -> Result<(), String> {
    let db = TestDb::new(Backend::Sqlite).await.unwrap();
    build_app(&db, tokens)
        .await
        .map(|_| ())
        .map_err(|err| format!("{err:#}"))
}

fn token(name: &str, secret: &str) -> String {
    format!(
        "[[tokens]]\nname = \"{name}\"\ntenant = \"t\"\nscopes = [\"send\"]\nsecret = \"{secret}\"\nroutes = [\"*\"]\n"
    )
}

#[tokio::test]
async fn token_secrets_that_are_empty_short_or_shared_are_refused_at_start_up() {
    let long = "0123456789abcdef0123456789abcdef";
    let empty = built_with(&token("blank", "")).await.unwrap_err();
    assert!(
        empty.contains("token `blank`") && empty.contains("0 characters"),
        "{empty}"
    );
    let short = built_with(&token("short", "hunter2")).await.unwrap_err();
    assert!(
        short.contains("token `short`") && short.contains("at least 32"),
        "{short}"
    );
    let shared = built_with(&(token("a", long) + &token("b", long)))
        .await
        .unwrap_err();
    assert!(shared.contains("`a` and `b` share a secret"), "{shared}");
    assert_eq!(built_with(&token("fine", long)).await, Ok(()));
}

/// `Authorization: Bearer ` with nothing after it, over HTTP/1.1 and over HTTP/2 without TLS
/// (h2c, which herald serves too).
/// A client's `X-Request-Id` is echoed (and logged) only where it is short and plain; a long
/// one, or one that could forge a field in a text log line, is replaced by herald's own.
#[tokio::test]
async fn a_request_id_is_taken_only_short_and_plain() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let echoed = |id: &str| {
        let (http, url, id) = (app.http.clone(), app.url("/healthz"), id.to_owned());
        async move {
            let answer = http
                .get(url)
                .header("x-request-id", &id)
                .send()
                .await
                .unwrap();
            answer.headers()["x-request-id"]
                .to_str()
                .unwrap()
                .to_owned()
        }
    };
    for plain in ["req-42", "a1B2.c3_d4", &"x".repeat(64)] {
        assert_eq!(echoed(plain).await, plain);
    }
    for forged in [
        "x".repeat(65),
        "y".repeat(6000),
        "abc status_code=200 note=\"all good\"".to_owned(),
        "tab\there".to_owned(),
    ] {
        let answered = echoed(&forged).await;
        assert_ne!(answered, forged);
        assert!(
            uuid::Uuid::parse_str(&answered).is_ok(),
            "herald's own id in its place: {answered}"
        );
    }
}

#[tokio::test]
async fn an_empty_bearer_token_is_refused_over_both_http_versions() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    for http2 in [false, true] {
        let mut client = reqwest::Client::builder();
        if http2 {
            client = client.http2_prior_knowledge();
        }
        let client = client.build().unwrap();
        for header in ["Bearer ", "Bearer    ", "bearer", "Bearer"] {
            let response = client
                .get(app.url("/v1/notifications"))
                .header("authorization", header)
                .send()
                .await
                .unwrap();
            let version = response.version();
            assert_eq!(
                response.status(),
                StatusCode::UNAUTHORIZED,
                "{header:?} over {version:?}"
            );
            if http2 {
                assert_eq!(version, reqwest::Version::HTTP_2, "h2c is served");
            }
        }
    }
}

async fn a_nul_character_is_refused_by_name_on_both_backends(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let cases = [
        (
            json!({"channel": "email", "to": "a@example.com", "subject": "Hi", "text": "a\u{0}b"}),
            "text",
        ),
        (
            json!({"channel": "email", "to": "a@example.com", "subject": "Hi", "text": "t",
                   "metadata": {"k": "v\u{0}"}}),
            "metadata.k",
        ),
        (
            json!({"channel": "webhook", "to": "https://example.com/h",
                   "payload": {"list": ["ok", "no\u{0}"]}}),
            "payload.list[1]",
        ),
    ];
    for (i, (body, field)) in cases.into_iter().enumerate() {
        let response = app.enqueue(ACME, &format!("nul-{i}"), &body).await;
        let problem = problem(response, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(problem["field"], field, "{problem}");
    }
    // In a batch, the item is refused on its own and the others commit.
    let batch = json!({"items": [
        {"idempotency_key": "b-1", "channel": "email", "to": "a@example.com", "subject": "Hi", "text": "fine"},
        {"idempotency_key": "b-2", "channel": "email", "to": "a@example.com", "subject": "Hi", "text": "bad\u{0}"},
    ]});
    let response = app.post_json(ACME, "/v1/notifications/batch", &batch).await;
    assert_eq!(response.status(), StatusCode::OK);
    let results: Value = response.json().await.unwrap();
    assert_eq!(results["results"][0]["status"], 202);
    assert_eq!(results["results"][1]["status"], 422);
    assert_eq!(results["results"][1]["problem"]["field"], "items[1].text");
    assert_eq!(
        app.db.count("notifications").await,
        1,
        "only the valid item"
    );

    // The same wherever else text reaches the database: an event's attributes and data, a
    // review filter, a suppression cursor and path.
    let event = |attribute: &str, value: Value| {
        let mut event = json!({"specversion": "1.0", "id": "e1", "source": "s", "type": "T",
                               "data": {"k": "v"}});
        event[attribute] = value;
        event
    };
    for (body, field) in [
        (event("id", json!("e\u{0}")), "id"),
        (event("source", json!("s\u{0}")), "source"),
        (event("subject", json!("\u{0}")), "subject"),
        (event("tenantid", json!("t\u{0}")), "tenantid"),
        (event("data", json!({"k": "v\u{0}"})), "data.k"),
    ] {
        let response = app
            .http
            .post(app.url("/v1/events"))
            .bearer_auth(ACME)
            .header("content-type", "application/cloudevents+json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let refused = problem(response, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(refused["field"], field, "{refused}");
    }
    // Each as that endpoint answers its other invalid parameters.
    for (token, path, field, status) in [
        (
            ACME_REVIEWER,
            "/v1/review?route=a%00b",
            "route",
            StatusCode::BAD_REQUEST,
        ),
        (
            ACME,
            "/v1/suppressions?cursor=email/a%00b",
            "cursor",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let refused = problem(app.get(token, path).await, status).await;
        assert_eq!(refused["field"], field, "{path}: {refused}");
    }
    let lift = app
        .http
        .delete(app.url("/v1/suppressions/email/a%00b"))
        .bearer_auth(support::ACME_ADMIN)
        .json(&json!({"note": "lift it"}))
        .send()
        .await
        .unwrap();
    let refused = problem(lift, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(refused["field"], "recipient", "{refused}");
}

#[tokio::test]
async fn a_symlink_or_a_hard_link_to_the_same_sqlite_file_cannot_open_it_twice() {
    use std::os::unix::fs::PermissionsExt;
    let dir = support::TempDir::new("herald-sqlite-lock");
    let real = dir.path().join("herald.db");
    let first = herald::store::connect(&format!("sqlite://{}", real.display()), 1)
        .await
        .expect("the first opens");
    let symlink = dir.path().join("symlink.db");
    std::os::unix::fs::symlink(&real, &symlink).unwrap();
    let hard_link = dir.path().join("hard-link.db");
    std::fs::hard_link(&real, &hard_link).unwrap();
    for other in [&symlink, &hard_link] {
        let second = herald::store::connect(&format!("sqlite://{}", other.display()), 1).await;
        let err = format!(
            "{:#}",
            second.err().expect("another name must not open it again")
        );
        assert!(
            err.contains("another herald process"),
            "{}: {err}",
            other.display()
        );
    }

    // The file holds message content: only its owner reads it.
    let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // Once the first is closed, the lock goes with it.
    first.close().await;
    drop(first);
    herald::store::connect(&format!("sqlite://{}", hard_link.display()), 1)
        .await
        .expect("free again");
}

/// A PostgreSQL database that refuses new connections (SQLSTATE 55000) is unavailable, not an
/// internal error: 503 with Retry-After, and /readyz names it; it recovers by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_refuses_connections_answers_503_and_recovers() {
    let Some(app) = spawn_app(Backend::Postgres).await else {
        return;
    };
    let name = url::Url::parse(&app.db.url)
        .unwrap()
        .path()
        .trim_start_matches('/')
        .to_owned();
    let admin_url = std::env::var("HERALD_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let admin = sqlx::PgPool::connect(&admin_url).await.unwrap();
    let run = |sql: String| {
        let admin = admin.clone();
        async move {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&admin)
                .await
                .unwrap();
        }
    };
    run(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false")).await;
    run(format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
    ))
    .await;

    let response = app
        .enqueue(ACME, "refused", &support::email("a@example.com"))
        .await;
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap()),
        Some("1")
    );
    problem(response, StatusCode::SERVICE_UNAVAILABLE).await;
    let ready = app.http.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let text = ready.text().await.unwrap();
    assert!(text.contains("database unreachable"), "{text}");
    assert!(
        !text.contains(&name) && !text.contains("accepting connections"),
        "the database's own words stay in the log: {text}"
    );

    run(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true")).await;
    let response = app
        .enqueue(ACME, "accepted", &support::email("a@example.com"))
        .await;
    assert_eq!(
        response.status(),
        StatusCode::ACCEPTED,
        "recovered without a restart"
    );
    admin.close().await;
}

/// An endpoint that answers 500 with everything it was sent, headers included: what a broken
/// proxy or a debugging endpoint would do.
async fn a_time_out_of_range_is_refused_by_name_and_never_stored(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // Valid RFC 3339 whose offset moves the year out of four digits in UTC: stored, such a time
    // could not be read back, and every claim of the queue failed.
    let poisons = ["0000-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59"];
    for (i, poison) in poisons.into_iter().enumerate() {
        let body = json!({"channel": "email", "to": "a@example.com", "subject": "Hi",
                          "text": "t", "send_at": poison});
        let refused = problem(
            app.enqueue(ACME, &format!("poison-{i}"), &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert!(
            refused.to_string().contains("send_at")
                && refused.to_string().contains("9999-12-31T23:59:59Z"),
            "{refused}"
        );
        for (token, path) in [
            (ACME, format!("/v1/notifications?created_after={poison}")),
            (ACME_REVIEWER, format!("/v1/review?since={poison}")),
        ] {
            let path = path.replace('+', "%2B");
            // Refused as every invalid query parameter is: 400, naming it.
            let refused = problem(app.get(token, &path).await, StatusCode::BAD_REQUEST).await;
            assert!(
                refused.to_string().contains("between 1970"),
                "{path}: {refused}"
            );
        }
    }
    assert_eq!(
        app.db.count("notifications").await,
        0,
        "nothing stored that a claim could not read back"
    );
}

#[tokio::test]
async fn a_query_parameter_of_the_wrong_type_answers_a_problem() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    for path in ["/v1/suppressions?limit=many", "/v1/suppressions?limit=-1"] {
        let refused = problem(app.get(ACME, path).await, StatusCode::BAD_REQUEST).await;
        assert_eq!(
            refused["type"]
                .as_str()
                .map(|t| t.ends_with("invalid-parameter")),
            Some(true),
            "{path}: {refused}"
        );
        assert!(
            refused["detail"].as_str().unwrap().contains("limit"),
            "{path}: {refused}"
        );
    }
}

async fn echo_server() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65_536];
                let n = socket.read(&mut buf).await.unwrap_or(0);
                let echoed = String::from_utf8_lossy(&buf[..n]).replace("\r\n", " | ");
                let answer = format!(
                    "HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{echoed}",
                    echoed.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}

/// Every vendor adapter scrubs its credentials from what an echoing endpoint sends back, in
/// every form they travelled in (as they are, base64, HTTP Basic `user:secret`), before the
/// answer becomes evidence that a `read` token can see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_echoed_back_never_reach_the_evidence() {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    support::install_crypto();
    let echo = echo_server().await;
    let secret = "canary-b64-0123456789abcdef";
    let sid = "AC00000000000000000000000000000009";
    let config = format!(
        "[dispatch]\nlease_seconds = 4\nretry_base_ms = 20\n\n\
         [routes.twilio]\nprovider = \"twilio\"\nbase_url = \"{echo}\"\naccount_sid = \"{sid}\"\n\
         auth_token = \"{secret}\"\nfrom = \"+15005550006\"\ntimeout_seconds = 1\nmax_attempts = 1\nmax_age_seconds = 1\n\n\
         [routes.mailjet]\nprovider = \"mailjet\"\nbase_url = \"{echo}\"\napi_key = \"mj-user\"\n\
         api_secret = \"{secret}\"\nfrom = \"noreply@acme.example\"\ntimeout_seconds = 1\nmax_attempts = 1\nmax_age_seconds = 1\n\n\
         [routes.resend]\nprovider = \"resend\"\nbase_url = \"{echo}\"\napi_key = \"{secret}\"\n\
         from = \"noreply@acme.example\"\ntimeout_seconds = 1\nmax_attempts = 1\n\n\
         [routes.onesignal]\nprovider = \"onesignal\"\nbase_url = \"{echo}\"\n\
         app_id = \"00000000-0000-4000-8000-000000000001\"\napi_key = \"{secret}\"\ntimeout_seconds = 1\nmax_attempts = 1\n"
    );
    let app = support::spawn_app_with(Backend::Sqlite, &config)
        .await
        .unwrap();
    let bodies = [
        json!({"channel": "sms", "to": "+14155550100", "text": "hi", "route": "twilio"}),
        json!({"channel": "email", "to": "a@example.com", "subject": "Hi", "text": "hi", "route": "mailjet"}),
        json!({"channel": "email", "to": "a@example.com", "subject": "Hi", "text": "hi", "route": "resend"}),
        json!({"channel": "push", "to": "device-1", "subject": "Hi", "text": "hi", "route": "onesignal"}),
    ];
    let mut ids = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let created: Value = app
            .enqueue(ACME, &format!("echo-{i}"), body)
            .await
            .json()
            .await
            .unwrap();
        ids.push(created["id"].as_str().unwrap().to_owned());
    }
    let forms = [
        secret.to_owned(),
        STANDARD.encode(format!("{sid}:{secret}")),
        STANDARD.encode(format!("mj-user:{secret}")),
        URL_SAFE_NO_PAD.encode(secret),
        STANDARD.encode(secret),
    ];
    for id in &ids {
        let n: Value = support::eventually(
            "an attempt with evidence",
            std::time::Duration::from_secs(20),
            || async {
                let n: Value = app
                    .get(ACME, &format!("/v1/notifications/{id}"))
                    .await
                    .json()
                    .await
                    .ok()?;
                // Text, or the vendor's JSON answer as JSON.
                let detail = &n["attempts"][0]["evidence"]["detail"];
                (!detail.is_null() && detail != "").then_some(n)
            },
        )
        .await;
        let shown = n.to_string();
        assert!(
            shown.contains("[REDACTED]"),
            "the echo reached the evidence, scrubbed: {shown}"
        );
        for form in &forms {
            assert!(
                !shown.contains(form.as_str()),
                "{} leaks `{form}`: {shown}",
                n["route"]
            );
        }
    }
}

const SLOW_CLIENTS: &str = "[server]\nheader_timeout_seconds = 1\nbody_timeout_seconds = 1\nshutdown_grace_seconds = 1\n\n[dispatch]\nenabled = false\n";

/// Reads until the server closes the connection; what it said, or `None` if it never did
/// within a bound far above the configured timeouts.
async fn until_closed(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(15), async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok()
        .map(|()| String::from_utf8_lossy(&answer).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_do_not_hold_up_a_shutdown() {
    use tokio::io::AsyncWriteExt;
    let app = support::spawn_app_with(Backend::Sqlite, SLOW_CLIENTS)
        .await
        .unwrap();
    let addr = app.base.trim_start_matches("http://").to_owned();

    // Half a request line, then silence.
    let mut slowloris = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slowloris.write_all(b"GET /healthz HT").await.unwrap();
    assert!(
        until_closed(&mut slowloris).await.is_some(),
        "a connection that never finishes its headers is closed"
    );

    // Headers, then a body that never comes.
    let mut trickle = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/notifications HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ACME}\r\n\
         idempotency-key: slow\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{{\"channel\""
    );
    trickle.write_all(head.as_bytes()).await.unwrap();
    let answer = until_closed(&mut trickle)
        .await
        .expect("a body that never arrives is cut off");
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "answered that the body came too slowly: {answer}"
    );
    assert!(answer.contains("body-timeout"), "{answer}");
    assert_eq!(app.db.count("notifications").await, 0);

    // A stop completes while a silent connection is open.
    let mut silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    silent.write_all(b"GET /heal").await.unwrap();
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(15), app.stop()).await;
    assert!(
        stopped.is_ok(),
        "the shutdown deadline bounds a silent client"
    );
}

/// A body that keeps coming, a byte at a time, is cut off at its deadline all the same: an idle
/// timer between its bytes would never fire, and each such client would hold a connection slot
/// for as long as it liked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_drips_a_byte_at_a_time_is_cut_off_at_its_deadline() {
    use tokio::io::AsyncWriteExt;
    let app = support::spawn_app_with(Backend::Sqlite, SLOW_CLIENTS)
        .await
        .unwrap();
    let addr = app.base.trim_start_matches("http://").to_owned();
    let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let head = format!(
        "POST /v1/notifications HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ACME}\r\n\
         idempotency-key: drip\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n"
    );
    writer.write_all(head.as_bytes()).await.unwrap();
    // 500 bytes at five a second take 100 s; the read below gives up after 15.
    let drip = tokio::spawn(async move {
        for _ in 0..500 {
            if writer.write_all(b" ").await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    });
    let answer = until_closed(&mut reader)
        .await
        .expect("a dripping body is cut off long before it would end");
    drip.abort();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body-timeout"), "{answer}");
    assert_eq!(app.db.count("notifications").await, 0);
    app.stop().await;
}

/// A link herald did not sign is refused on its token alone: a body that never comes does not
/// hold the request. (Were the body read first, the answer would wait for its deadline, an hour
/// here, far past the read's bound.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_unsubscribe_link_is_refused_before_its_body_is_read() {
    use tokio::io::AsyncWriteExt;
    let app = support::spawn_app_with(
        Backend::Sqlite,
        "[server]\nbody_timeout_seconds = 3600\nshutdown_grace_seconds = 1\n\n[dispatch]\nenabled = false\n",
    )
    .await
    .unwrap();
    let addr = app.base.trim_start_matches("http://").to_owned();
    let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let head = "POST /v1/unsubscribe/forged.token HTTP/1.1\r\nhost: x\r\n\
                content-type: application/x-www-form-urlencoded\r\ncontent-length: 100000\r\n\r\n";
    writer.write_all(head.as_bytes()).await.unwrap();
    let answer = until_closed(&mut reader)
        .await
        .expect("answered and closed");
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    drop(writer);
    app.stop().await;
}

/// An HTTP/2 client (h2c) that sends the preface and then only acknowledges the server's
/// settings and PINGs holds no slot for ever: it is closed once idle past the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_h2c_connection_that_answers_pings_is_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = support::spawn_app_with(Backend::Sqlite, SLOW_CLIENTS)
        .await
        .unwrap();
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut idle = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // The client preface, then empty SETTINGS (frame: length 3 bytes, type, flags, stream 4).
    idle.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let (mut pings, mut goaway) = (0, false);
    let closed = tokio::time::timeout(std::time::Duration::from_secs(15), async {
        loop {
            let mut head = [0u8; 9];
            if idle.read_exact(&mut head).await.is_err() {
                return;
            }
            let length =
                usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let mut payload = vec![0u8; length];
            if idle.read_exact(&mut payload).await.is_err() {
                return;
            }
            let (kind, ack) = (head[3], head[4] & 1 == 1);
            let reply: Option<Vec<u8>> = match kind {
                4 if !ack => Some(vec![0, 0, 0, 4, 1, 0, 0, 0, 0]),
                6 if !ack => {
                    pings += 1;
                    let mut pong = vec![0, 0, 8, 6, 1, 0, 0, 0, 0];
                    pong.extend_from_slice(&payload);
                    Some(pong)
                }
                7 => {
                    goaway = true;
                    None
                }
                _ => None,
            };
            if let Some(reply) = reply
                && idle.write_all(&reply).await.is_err()
            {
                return;
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "an idle h2c connection is closed (it answered {pings} PING(s) meanwhile)"
    );
    assert!(goaway, "with a GOAWAY, as HTTP/2 says");
}

/// Routes keep to their tenants: a token sends only through the routes it names, and a route
/// that may reach private networks only for the tenants it names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_outside_a_tokens_grant_is_refused_by_name() {
    let secret = "whsec_YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE=";
    let routes = format!(
        "[dispatch]\nenabled = false\n\n[routes.public]\nprovider = \"sandbox\"\n\n\
         [routes.internal]\nprovider = \"webhook\"\nsecrets = [\"{secret}\"]\n\
         allow_private_networks = true\ntenants = [\"acme\"]\n\n\
         [channels]\nemail = \"public\"\nwebhook = \"internal\"\n"
    );
    let app = support::spawn_app_with(Backend::Sqlite, &routes)
        .await
        .unwrap();
    let hook = json!({"channel": "webhook", "to": "http://127.0.0.1:9/x", "payload": {"a": 1},
                      "route": "internal"});
    let response = app.enqueue(support::GLOBEX, "ssrf", &hook).await;
    let problem = problem(response, StatusCode::FORBIDDEN).await;
    assert_eq!(problem["field"], "route");
    assert!(
        problem["detail"].as_str().unwrap().contains("`internal`"),
        "{problem}"
    );
    let response = app.enqueue(ACME, "allowed", &hook).await;
    assert_eq!(
        response.status(),
        StatusCode::ACCEPTED,
        "acme is named by the route"
    );
    assert_eq!(app.db.count("notifications").await, 1);

    // Start-up refuses a private-network route that names no tenant, and a multi-tenant token
    // that names no routes.
    let db = TestDb::new(Backend::Sqlite).await.unwrap();
    let unnamed = format!(
        "[routes.internal]\nprovider = \"webhook\"\nsecrets = [\"{secret}\"]\nallow_private_networks = true\n"
    );
    let err = format!("{:#}", build_app(&db, &unnamed).await.err().unwrap());
    assert!(
        err.contains("routes.internal.tenants: the route may reach private networks"),
        "{err}"
    );
    let loose = "[[tokens]]\nname = \"loose\"\ntenant = \"initech\"\nscopes = [\"send\"]\n\
                 secret = \"0123456789abcdef0123456789abcdef-x\"\n";
    let err = format!("{:#}", build_app(&db, loose).await.err().unwrap());
    assert!(err.contains("token `loose`: with several tenants"), "{err}");
}
