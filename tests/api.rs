//! The enqueue and read API over real HTTP, on SQLite and on PostgreSQL.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};

use support::{
    ACME, ACME_ADMIN, ACME_READER, Backend, GLOBEX, email, eventually, problem, spawn_app,
    spawn_app_with,
};

on_both_backends!(
    the_same_key_and_body_replay_the_original_answer,
    a_reused_key_with_another_body_is_rejected,
    a_missing_or_malformed_key_is_rejected,
    keys_belong_to_their_tenant,
    sixty_four_concurrent_requests_with_one_key_create_one_notification,
    two_thousand_keys_over_32_connections_create_two_thousand_notifications,
    invalid_requests_name_their_field_and_store_nothing,
    auth_tokens_scopes_and_tenants_are_enforced,
    a_notification_reads_back_with_its_state_and_attempts,
    lists_are_newest_first_filtered_and_paginated,
    lists_filter_by_channel_route_time_and_metadata_within_the_tenant,
    a_bad_list_filter_is_refused_naming_its_parameter,
    only_a_queued_notification_can_be_cancelled,
    a_cancellation_key_calls_off_what_is_still_queued_and_says_what_was_not,
    a_template_renders_in_the_nearest_locale_it_has_and_records_which,
    strict_locales_refuse_a_locale_no_translation_serves,
    a_sandbox_route_for_some_channels_refuses_the_others,
    a_token_over_its_rate_is_answered_429_with_when_to_try_again_and_nothing_stored,
    a_chat_message_keeps_its_blocks_reaches_its_vendor_and_may_be_suppressed,
    a_batch_answers_each_item_in_order_in_one_transaction,
    a_batch_that_fails_at_the_database_part_way_commits_nothing,
    operations_endpoints_answer,
);

const GLOBEX_ADMIN: &str = "test-globex-admin-0123456789abcdef";
const ACME_OPERATOR: &str = "test-acme-operate-0123456789abcdef";
const ACME_SPARE_OPERATOR: &str = "test-acme-operate-spare-0123456789abcdef";

/// Two tenants share `shared`, which acme operates; `spare` is shared with no operator named;
/// `globex-only` keeps to globex. Only a route's operator pauses it: a token with `operate` (or
/// `admin`) of the operating tenant that names the route. Another tenant that uses it sees that
/// it is paused, not who paused it or why; `operate` reads and reviews but never sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_is_paused_only_by_its_operator_and_a_pause_stays_in_its_tenant() {
    let Some(app) = spawn_app_with(
        Backend::Sqlite,
        "[dispatch]\nenabled = false\n\
         [routes.shared]\nprovider = \"sandbox\"\noperated_by = \"acme\"\nfallback = \"spare\"\n\
         [routes.spare]\nprovider = \"sandbox\"\n\
         [routes.globex-only]\nprovider = \"sandbox\"\ntenants = [\"globex\"]\n\
         [channels]\nemail = \"shared\"\n\
         [[tokens]]\nname = \"globex-admin\"\ntenant = \"globex\"\nscopes = [\"admin\"]\n\
         secret = \"test-globex-admin-0123456789abcdef\"\nroutes = [\"*\"]\n\
         [[tokens]]\nname = \"acme-operator\"\ntenant = \"acme\"\nscopes = [\"operate\"]\n\
         secret = \"test-acme-operate-0123456789abcdef\"\nroutes = [\"*\"]\n\
         [[tokens]]\nname = \"acme-spare-operator\"\ntenant = \"acme\"\nscopes = [\"operate\"]\n\
         secret = \"test-acme-operate-spare-0123456789abcdef\"\nroutes = [\"spare\"]\n",
    )
    .await
    else {
        return;
    };
    let act = |token: &'static str, route: &'static str, action: &'static str| {
        let app = &app;
        async move {
            app.post_json(
                token,
                &format!("/v1/routes/{route}/{action}"),
                &json!({"note": "INC-7: the vendor double-sends"}),
            )
            .await
        }
    };
    let route = |token: &'static str, name: &'static str| {
        let app = &app;
        async move {
            let routes: Value = app.get(token, "/v1/routes").await.json().await.unwrap();
            routes["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == name)
                .cloned()
        }
    };

    let paused = act(ACME_OPERATOR, "shared", "pause").await;
    assert_eq!(paused.status(), StatusCode::OK);
    let paused: Value = paused.json().await.unwrap();
    assert_eq!(paused["operable"], true);
    assert_eq!(paused["paused_by_operator"]["principal"], "acme-operator");

    // globex uses the route: it sees the pause, not who gave it or why, and cannot lift it.
    let seen = route(GLOBEX_ADMIN, "shared").await.expect("globex uses it");
    assert_eq!(seen["operable"], false);
    let pause = &seen["paused_by_operator"];
    assert_eq!(
        (&pause["principal"], &pause["note"], &pause["to_fallback"]),
        (&Value::Null, &Value::Null, &json!(false)),
        "{seen:#}"
    );
    for action in ["resume", "pause"] {
        let refused = problem(
            act(GLOBEX_ADMIN, "shared", action).await,
            StatusCode::FORBIDDEN,
        )
        .await;
        assert!(
            refused["type"]
                .as_str()
                .unwrap()
                .ends_with("/route-not-operated"),
            "{refused}"
        );
        assert!(
            refused["detail"]
                .as_str()
                .unwrap()
                .contains("another tenant operates it")
        );
    }
    // An acme operator whose token does not name the route cannot either.
    let refused = problem(
        act(ACME_SPARE_OPERATOR, "shared", "resume").await,
        StatusCode::FORBIDDEN,
    )
    .await;
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("does not name it"),
        "{refused}"
    );
    // A route shared with no operator named is nobody's to pause, admin or not.
    let refused = problem(
        act(ACME_ADMIN, "spare", "pause").await,
        StatusCode::FORBIDDEN,
    )
    .await;
    assert!(
        refused["detail"].as_str().unwrap().contains("operated_by"),
        "{refused}"
    );
    // A route that keeps to one tenant is that tenant's, and no other's to see.
    assert_eq!(
        act(GLOBEX_ADMIN, "globex-only", "pause").await.status(),
        StatusCode::OK
    );
    assert_eq!(route(ACME_OPERATOR, "globex-only").await, None);
    problem(
        act(ACME_OPERATOR, "globex-only", "resume").await,
        StatusCode::NOT_FOUND,
    )
    .await;

    // `operate` reads and reviews, and never sends.
    let id = app.enqueue_id("operated", &email("ada@example.com")).await;
    assert_eq!(
        app.get(ACME_OPERATOR, &format!("/v1/notifications/{id}"))
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        app.get(ACME_OPERATOR, "/v1/review").await.status(),
        StatusCode::OK
    );
    let send = app
        .enqueue(ACME_OPERATOR, "by-an-operator", &email("ada@example.com"))
        .await;
    let refused = problem(send, StatusCode::FORBIDDEN).await;
    assert!(
        refused["detail"].as_str().unwrap().contains("`send`"),
        "{refused}"
    );

    let resumed = act(ACME_OPERATOR, "shared", "resume").await;
    assert_eq!(resumed.status(), StatusCode::OK);
    assert_eq!(
        route(GLOBEX_ADMIN, "shared").await.unwrap()["paused_by_operator"],
        Value::Null
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_are_listed_with_what_they_declare_to_the_tenants_that_may_use_them() {
    let Some(app) = spawn_app_with(
        Backend::Sqlite,
        "[dispatch]\nenabled = false\n\
         [routes.shared]\nprovider = \"sandbox\"\nprofile = \"queryable\"\n\
         visibility_lag_ms = 1500\nrate_limit_per_second = 5\nburst = 2\nfallback = \"spare\"\n\
         [routes.spare]\nprovider = \"sandbox\"\nprofile = \"idempotent\"\n\
         [routes.globex-only]\nprovider = \"sandbox\"\ntenants = [\"globex\"]\n\
         [channels]\nemail = \"shared\"\nsms = \"shared\"\n",
    )
    .await
    else {
        return;
    };
    let names = |body: &Value| -> Vec<String> {
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let acme: Value = app
        .get(ACME_READER, "/v1/routes")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        names(&acme),
        ["shared", "spare"],
        "not another tenant's route"
    );
    let globex: Value = app.get(GLOBEX, "/v1/routes").await.json().await.unwrap();
    assert_eq!(names(&globex), ["globex-only", "shared", "spare"]);
    let shared = &acme["data"][0];
    assert_eq!(shared["provider"], "sandbox");
    assert_eq!(shared["default_for"], json!(["email", "sms"]));
    assert_eq!(shared["delivery"], "at_most_once");
    assert_eq!(shared["fallback"], "spare");
    assert_eq!(
        shared["capabilities"],
        json!({"idempotency_window_seconds": null, "outcome_query": true,
               "visibility_lag_ms": 1500, "max_payload_bytes": 20_971_520, "tags": true,
               "attachments": true}),
        "{shared}"
    );
    assert_eq!(
        shared["pace"],
        json!({"rate_limit_per_second": 5.0, "burst": 2, "paused_for_ms": 0})
    );
    assert_eq!(shared["circuit"]["state"], "closed");
    let spare = &acme["data"][1];
    assert_eq!(spare["capabilities"]["idempotency_window_seconds"], 86_400);
    assert_eq!(spare["capabilities"]["outcome_query"], false);
    assert_eq!(spare["default_for"], json!([]));
    app.stop().await;
}

/// The OpenAPI document promises what herald answers: every status with its problem type,
/// every header, one notification shape, a server entry, and descriptions in plain prose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_types_every_answer_and_header() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let spec: Value = app.public_json("/openapi.json").await;
    assert_eq!(spec["servers"][0]["url"], "/");

    let enqueue = &spec["paths"]["/v1/notifications"]["post"]["responses"];
    for header in ["Location", "Idempotent-Replayed", "X-Request-Id"] {
        assert!(enqueue["202"]["headers"].get(header).is_some(), "{header}");
    }
    // A request racing another with its key waits for it: there is no "in progress" answer.
    assert!(enqueue.get("409").is_none(), "{enqueue:#}");

    let body = |path: &str, method: &str, status: &str| {
        spec["paths"][path][method]["responses"][status]["content"]["application/json"]
            ["schema"]["$ref"]
            .clone()
    };
    let notification = json!("#/components/schemas/NotificationBody");
    assert_eq!(body("/v1/notifications", "post", "202"), notification);
    assert_eq!(body("/v1/notifications/{id}", "get", "200"), notification);
    assert_eq!(
        body("/v1/notifications/{id}/cancel", "post", "200"),
        notification
    );
    let list = &spec["components"]["schemas"]["ListBody"]["properties"]["data"];
    assert_eq!(list["items"]["$ref"], notification);
    let request = &spec["components"]["schemas"]["NotificationRequest"]["properties"];
    assert_eq!(request["channel"]["$ref"], "#/components/schemas/Channel");
    assert_eq!(request["delivery"]["$ref"], "#/components/schemas/Delivery");
    let list_parameters = spec["paths"]["/v1/notifications"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let parameter = |name: &str| {
        list_parameters
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("the list documents {name}"))
    };
    assert_eq!(
        parameter("channel")["schema"]["$ref"],
        "#/components/schemas/Channel"
    );
    for name in ["route", "created_after", "created_before"] {
        assert_eq!(parameter(name)["in"], "query");
    }
    assert_eq!(parameter("created_after")["schema"]["format"], "date-time");
    let list_description = spec["paths"]["/v1/notifications"]["get"]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(list_description.contains("metadata.<key>=<value>"));
    let attempt = &spec["components"]["schemas"]["Attempt"]["properties"];
    assert_eq!(attempt["evidence"]["$ref"], "#/components/schemas/Evidence");

    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let responses = operation["responses"].as_object().unwrap();
            let secured = operation.get("security").is_some();
            for status in ["401", "403", "500", "503"] {
                // A vendor's callback carries its own signature instead of a token, and so does
                // an unsubscribe link.
                let unsecured_but = match (method.as_str(), path.as_str()) {
                    (_, "/readyz") => ["500", "503"].as_slice(),
                    (_, "/v1/callbacks/{route}") => ["401", "503"].as_slice(),
                    ("post", "/v1/unsubscribe/{token}") => ["500", "503"].as_slice(),
                    _ => [].as_slice(),
                };
                assert_eq!(
                    responses.contains_key(status),
                    secured || unsecured_but.contains(&status),
                    "{method} {path} {status}"
                );
            }
            for (status, response) in responses {
                if status.starts_with(['4', '5']) {
                    assert_eq!(
                        response["content"]["application/problem+json"]["schema"]["$ref"],
                        "#/components/schemas/Problem",
                        "{method} {path} {status}"
                    );
                }
                if status == "503" {
                    assert!(
                        response["headers"].get("Retry-After").is_some(),
                        "{method} {path}"
                    );
                }
            }
        }
    }

    let text = spec.to_string();
    for rust in ["[`", "crate::", "Self::", "super::"] {
        assert!(!text.contains(rust), "a Rust doc link leaks: {rust}");
    }
    app.stop().await;
}

async fn the_same_key_and_body_replay_the_original_answer(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let first = app
        .enqueue(ACME, "order-42", &email("ada@example.com"))
        .await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let location = first.headers()["location"].to_str().unwrap().to_owned();
    let first: Value = first.json().await.unwrap();
    assert_eq!(
        location,
        format!("/v1/notifications/{}", first["id"].as_str().unwrap())
    );
    assert_eq!(first["state"], "queued");

    // The same body with its keys in another order is the same request.
    let mut reordered = serde_json::Map::new();
    for (k, v) in email("ada@example.com").as_object().unwrap().iter().rev() {
        reordered.insert(k.clone(), v.clone());
    }
    let again = app
        .enqueue(ACME, "order-42", &Value::Object(reordered))
        .await;
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.headers()["location"].to_str().unwrap(), location);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again, first, "the replay is the original body");

    assert_eq!(app.db.count("notifications").await, 1);
    assert_eq!(app.db.count("outbox").await, 1);
    assert_eq!(app.db.count("idempotency_keys").await, 1);
}

async fn a_reused_key_with_another_body_is_rejected(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    assert_eq!(
        app.enqueue(ACME, "k1", &email("ada@example.com"))
            .await
            .status(),
        StatusCode::ACCEPTED
    );
    let body = problem(
        app.enqueue(ACME, "k1", &email("bob@example.com")).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert!(
        body["type"]
            .as_str()
            .unwrap()
            .ends_with("/idempotency-key-reused"),
        "{body}"
    );
    assert_eq!(app.db.count("notifications").await, 1);
}

async fn a_missing_or_malformed_key_is_rejected(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let response = app
        .http
        .post(app.url("/v1/notifications"))
        .bearer_auth(ACME)
        .json(&email("ada@example.com"))
        .send()
        .await
        .unwrap();
    let body = problem(response, StatusCode::BAD_REQUEST).await;
    assert_eq!(body["type"], "/problems/idempotency-key-missing");
    assert_eq!(body["field"], "Idempotency-Key");
    // The type is a reference into the herald that answered, and says what it means there.
    let meaning = app
        .http
        .get(app.url(body["type"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(meaning.status(), StatusCode::OK);
    assert!(
        meaning
            .text()
            .await
            .unwrap()
            .contains("needs an Idempotency-Key header")
    );
    let unknown = app
        .http
        .get(app.url("/problems/no-such-type"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);

    let too_long = "k".repeat(256);
    let body = problem(
        app.enqueue(ACME, &too_long, &email("ada@example.com"))
            .await,
        StatusCode::BAD_REQUEST,
    )
    .await;
    assert_eq!(body["field"], "Idempotency-Key");

    let response = app
        .http
        .post(app.url("/v1/notifications"))
        .bearer_auth(ACME)
        .header("Idempotency-Key", "a")
        .header("Idempotency-Key", "b")
        .json(&email("ada@example.com"))
        .send()
        .await
        .unwrap();
    problem(response, StatusCode::BAD_REQUEST).await;
    assert_eq!(app.db.count("notifications").await, 0);
    assert_eq!(app.db.count("idempotency_keys").await, 0);
}

async fn keys_belong_to_their_tenant(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let acme: Value = app
        .enqueue(ACME, "shared-key", &email("ada@example.com"))
        .await
        .json()
        .await
        .unwrap();
    let globex = app
        .enqueue(GLOBEX, "shared-key", &email("bob@example.com"))
        .await;
    assert_eq!(globex.status(), StatusCode::ACCEPTED);
    assert!(globex.headers().get("idempotent-replayed").is_none());
    let globex: Value = globex.json().await.unwrap();
    assert_ne!(acme["id"], globex["id"]);
    assert_eq!(app.db.count("notifications").await, 2);
}

async fn sixty_four_concurrent_requests_with_one_key_create_one_notification(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let body = email("ada@example.com");
    let responses = join_all((0..64).map(|_| app.enqueue(ACME, "one-key", &body))).await;
    let mut ids = HashSet::new();
    let (mut created, mut replayed) = (0, 0);
    for response in responses {
        // None is told to come back later: each waits for the one that stores the key, and is
        // answered as its replay.
        match response.status() {
            StatusCode::ACCEPTED => {
                if response.headers().contains_key("idempotent-replayed") {
                    replayed += 1;
                } else {
                    created += 1;
                }
                let body: Value = response.json().await.unwrap();
                ids.insert(body["id"].as_str().unwrap().to_owned());
            }
            other => panic!("unexpected {other}: {}", response.text().await.unwrap()),
        }
    }
    assert_eq!(created, 1, "exactly one request creates");
    assert_eq!(replayed, 63);
    assert_eq!(ids.len(), 1, "every 202 names the same notification");
    assert_eq!(app.db.count("notifications").await, 1);
    assert_eq!(app.db.count("outbox").await, 1);
}

async fn two_thousand_keys_over_32_connections_create_two_thousand_notifications(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let app = std::sync::Arc::new(app);
    // Worker w sends requests w, w + 32, w + 64, …: each of the 2,000 exactly once.
    let workers = (0..32).map(|w| {
        let app = app.clone();
        tokio::spawn(async move {
            let mut ids = Vec::new();
            for n in (w..2000).step_by(32) {
                let response = app
                    .enqueue(
                        ACME,
                        &format!("bulk-{n}"),
                        &email(&format!("user{n}@example.com")),
                    )
                    .await;
                assert_eq!(response.status(), StatusCode::ACCEPTED, "request {n}");
                let body: Value = response.json().await.unwrap();
                ids.push(body["id"].as_str().unwrap().to_owned());
            }
            ids
        })
    });
    let ids: HashSet<String> = join_all(workers)
        .await
        .into_iter()
        .flat_map(Result::unwrap)
        .collect();
    assert_eq!(ids.len(), 2000);
    assert_eq!(app.db.count("notifications").await, 2000);
    assert_eq!(app.db.count("outbox").await, 2000);
}

async fn invalid_requests_name_their_field_and_store_nothing(backend: Backend) {
    // Small attachments keep the enqueue route's limit near `server.max_body_bytes`: a body
    // many megabytes over it would be cut off mid-upload, and the client may see the reset
    // before the 413.
    let Some(app) = spawn_app_with(
        backend,
        "[dispatch]\nenabled = false\n\n[attachments]\nmax_total_bytes = 1024\n",
    )
    .await
    else {
        return;
    };
    let cases: Vec<(Value, StatusCode, &str)> = vec![
        (
            json!({"channel": "fax", "to": "x"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "channel",
        ),
        (
            json!({"channel": "email", "to": "not-an-address", "subject": "s", "text": "t"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
        ),
        (
            json!({"channel": "sms", "to": "4155550100", "text": "t"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
        ),
        (
            json!({"channel": "webhook", "to": "file:///etc/passwd", "payload": {}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
        ),
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "Hi\r\nBcc: eve@example.com", "text": "t"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "subject",
        ),
        (
            json!({"channel": "email", "to": "ada@example.com\nBcc: eve@example.com", "subject": "s", "text": "t"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
        ),
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "x".repeat(999), "text": "t"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "subject",
        ),
        (
            json!({"channel": "sms", "to": "+14155550100", "text": "x".repeat(1601)}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "text",
        ),
        // Within the body's limit, over the field's.
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s",
                   "html": "x".repeat(210 * 1024)}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "html",
        ),
        (
            json!({"channel": "chat", "to": "#ops", "text": "t"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
        ),
        (
            json!({"channel": "chat", "to": "C0123456789"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "text",
        ),
        (
            json!({"channel": "chat", "to": "c0123456789", "text": "t"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
        ),
        (
            json!({"channel": "chat", "to": "C0123456789", "text": "  "}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "text",
        ),
        (
            // 20,001 emoji: 40,002 UTF-16 units, Slack's count, though 20,001 characters.
            json!({"channel": "chat", "to": "C0123456789", "text": "\u{1F600}".repeat(20_001)}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "text",
        ),
        (
            json!({"channel": "chat", "to": "C0123456789", "text": "t", "subject": "s"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "subject",
        ),
        (
            json!({"channel": "chat", "to": "C0123456789", "text": "t", "blocks": {"type": "section"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "blocks",
        ),
        (
            json!({"channel": "chat", "to": "C0123456789", "text": "t", "blocks": vec![json!({"type": "divider"}); 51]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "blocks",
        ),
        (
            json!({"channel": "chat", "to": "C0123456789", "text": "x".repeat(40_001)}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "text",
        ),
        (
            json!({"channel": "sms", "to": "+14155550100", "text": "t", "blocks": [{"type": "divider"}]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "blocks",
        ),
        (
            json!({"channel": "chat", "to": "C0OPS", "template": "export-ready", "data": {}, "blocks": [{"type": "divider"}]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "blocks",
        ),
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t", "send_at": "tomorrow"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "send_at",
        ),
        (
            json!({"channel": "sms", "to": "+14155550100", "text": "t", "expires_at": "in an hour"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "expires_at",
        ),
        (
            json!({"channel": "sms", "to": "+14155550100", "text": "t", "expires_at": "2001-01-01T00:00:00Z"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "expires_at",
        ),
        (
            json!({"channel": "sms", "to": "+14155550100", "text": "t", "ttl_seconds": -1}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "ttl_seconds",
        ),
        (
            json!({"channel": "sms", "to": "+14155550100", "text": "t", "ttl_seconds": 0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "ttl_seconds",
        ),
        (
            json!({"channel": "sms", "to": "+14155550100", "text": "t", "ttl_seconds": 60,
                   "send_at": "2999-01-01T00:00:00Z"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "ttl_seconds",
        ),
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t", "route": "nowhere"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "route",
        ),
        (
            json!({"channel": "email", "to": 42, "subject": "s", "text": "t"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
        ),
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t", "colour": "red"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "colour",
        ),
        (
            json!({"to": "ada@example.com", "subject": "s", "text": "t"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "channel",
        ),
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t", "delivery": "twice"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "delivery",
        ),
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t", "metadata": {"n": 1}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "metadata.n",
        ),
        // The default route lists no `allowed_from`: a message may not pick its own sender.
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t", "from": "ceo@acme.example"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "from",
        ),
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t", "cc": ["grace@example.com", "eve@x.io\r\nBcc: all@x.io"]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "cc[1]",
        ),
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t", "headers": {"X-Kind": "a\nBcc: eve@example.com"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "headers.X-Kind",
        ),
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t", "headers": {"Message-ID": "<x@y>"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "headers.Message-ID",
        ),
        (
            json!({"channel": "sms", "to": "+14155550100", "text": "t", "reply_to": "a@b.io"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "reply_to",
        ),
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t", "bcc": "audit@acme.example"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "bcc",
        ),
    ];
    // Display names that pass for something else, and headers that belong to the mail system.
    let spoofs = [
        "support@bank.example <eve@example.com>",
        "=?utf-8?b?c3VwcG9ydEBiYW5rLmV4YW1wbGU=?= <eve@example.com>",
        "Undisclosed: <eve@example.com>",
        "Ada \u{202E}elpmaxe.knab <eve@example.com>",
        // A comment, which a mail client shows and the API and a vendor read differently.
        "Acme (billing) <eve@example.com>",
        // Look-alikes of `<` `@` `>`, and a line separator that breaks the name on screen.
        "\u{FF1C}ceo\u{FF20}acme.example\u{FF1E} <eve@example.com>",
        "Ada\u{2028}Lovelace <eve@example.com>",
        "Ada\u{200B} <eve@example.com>",
    ]
    .map(|reply_to| {
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t",
                   "reply_to": reply_to}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "reply_to".to_owned(),
        )
    });
    let relays = [
        "Resent-From",
        "ARC-Seal",
        "Errors-To",
        "Disposition-Notification-To",
        "Authentication-Results",
        "Received-SPF",
        "Delivered-To",
        "X-Original-To",
    ]
    .map(|name| {
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t",
                   "headers": {name: "x"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("headers.{name}"),
        )
    });
    let cases = cases
        .into_iter()
        .map(|(body, status, field)| (body, status, field.to_owned()))
        .chain(spoofs)
        .chain(relays);
    for (i, (body, status, field)) in cases.into_iter().enumerate() {
        let answer = problem(app.enqueue(ACME, &format!("bad-{i}"), &body).await, status).await;
        assert_eq!(answer["field"], field, "case {i}: {body} → {answer}");
    }

    let raw = |body: &'static str| {
        app.http
            .post(app.url("/v1/notifications"))
            .bearer_auth(ACME)
            .header("Idempotency-Key", "raw")
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    problem(
        raw("{\"channel\": \"email\",").await.unwrap(),
        StatusCode::BAD_REQUEST,
    )
    .await;
    problem(raw("[1, 2]").await.unwrap(), StatusCode::BAD_REQUEST).await;
    // A repeated key is read differently by different readers: refused, naming it.
    let repeated = problem(
        raw(
            "{\"channel\": \"email\", \"to\": \"ada@example.com\", \"subject\": \"s\", \
             \"text\": \"t\", \"to\": \"eve@example.com\"}",
        )
        .await
        .unwrap(),
        StatusCode::BAD_REQUEST,
    )
    .await;
    assert!(
        repeated["detail"]
            .as_str()
            .unwrap()
            .contains("the key `to` appears twice"),
        "{repeated}"
    );
    // Over the enqueue route's limit: `server.max_body_bytes` and room for the largest
    // attachments in base64.
    let oversized = format!(
        "{{\"channel\":\"email\",\"text\":\"{}\"}}",
        "x".repeat(300 * 1024)
    );
    let response = app
        .http
        .post(app.url("/v1/notifications"))
        .bearer_auth(ACME)
        .header("Idempotency-Key", "big")
        .header("content-type", "application/json")
        .body(oversized)
        .send()
        .await
        .unwrap();
    problem(response, StatusCode::PAYLOAD_TOO_LARGE).await;
    problem(
        app.get(ACME, "/v1/nothing-here").await,
        StatusCode::NOT_FOUND,
    )
    .await;

    assert_eq!(app.db.count("notifications").await, 0);
    assert_eq!(app.db.count("idempotency_keys").await, 0);
    assert_eq!(app.db.count("outbox").await, 0);
}

async fn auth_tokens_scopes_and_tenants_are_enforced(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let response = app
        .enqueue("wrong-token", "k", &email("ada@example.com"))
        .await;
    let headers = response.headers().clone();
    problem(response, StatusCode::UNAUTHORIZED).await;
    assert_eq!(headers["www-authenticate"], "Bearer");
    let response = app
        .http
        .get(app.url("/v1/notifications"))
        .send()
        .await
        .unwrap();
    problem(response, StatusCode::UNAUTHORIZED).await;

    problem(
        app.enqueue(ACME_READER, "k", &email("ada@example.com"))
            .await,
        StatusCode::FORBIDDEN,
    )
    .await;
    assert_eq!(app.db.count("notifications").await, 0);

    let created: Value = app
        .enqueue(ACME, "k", &email("ada@example.com"))
        .await
        .json()
        .await
        .unwrap();
    let path = format!("/v1/notifications/{}", created["id"].as_str().unwrap());
    assert_eq!(app.get(ACME_READER, &path).await.status(), StatusCode::OK);
    problem(app.get(GLOBEX, &path).await, StatusCode::NOT_FOUND).await;
    problem(
        app.post_json(GLOBEX, &format!("{path}/cancel"), &json!({}))
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let listed: Value = app
        .get(GLOBEX, "/v1/notifications")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["data"], json!([]));
}

async fn a_notification_reads_back_with_its_state_and_attempts(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let mut body = email("ada@example.com");
    body["send_at"] = json!("2999-12-01T09:00:00Z");
    body["expires_at"] = json!("2999-12-01T10:00:00.123456789+01:00");
    body["delivery"] = json!("at_least_once");
    let created: Value = app
        .enqueue(ACME, "read-back", &body)
        .await
        .json()
        .await
        .unwrap();
    let shown: Value = app
        .get(
            ACME,
            &format!("/v1/notifications/{}", created["id"].as_str().unwrap()),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["id"], created["id"]);
    assert_eq!(shown["state"], "queued");
    assert_eq!(shown["certainty"], Value::Null);
    assert_eq!(shown["delivery"], "at_least_once");
    assert_eq!(shown["route"], "sandbox");
    assert_eq!(shown["subject"], "Your export is ready");
    assert_eq!(shown["metadata"], json!({"export": "export-intent-7"}));
    assert_eq!(shown["send_at"], "2999-12-01T09:00:00Z");
    assert_eq!(shown["next_attempt_at"], "2999-12-01T09:00:00Z");
    // In UTC, to the microsecond both databases keep; the answer to the enqueue says the same.
    assert_eq!(shown["expires_at"], "2999-12-01T09:00:00.123456Z");
    assert_eq!(created["expires_at"], shown["expires_at"]);
    assert_eq!(shown["attempts"], json!([]));
    assert_eq!(shown["review"], Value::Null);
    problem(
        app.get(ACME, "/v1/notifications/not-a-uuid").await,
        StatusCode::NOT_FOUND,
    )
    .await;
}

async fn lists_are_newest_first_filtered_and_paginated(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let mut ids = Vec::new();
    for i in 0..5 {
        let body: Value = app
            .enqueue(ACME, &format!("list-{i}"), &email("ada@example.com"))
            .await
            .json()
            .await
            .unwrap();
        ids.push(body["id"].as_str().unwrap().to_owned());
    }
    app.post_json(
        ACME,
        &format!("/v1/notifications/{}/cancel", ids[1]),
        &json!({}),
    )
    .await;

    let mut seen = Vec::new();
    let mut path = "/v1/notifications?limit=2".to_owned();
    loop {
        let page: Value = app.get(ACME, &path).await.json().await.unwrap();
        seen.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["id"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/notifications?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(seen, newest_first);

    let cancelled: Value = app
        .get(ACME, "/v1/notifications?state=cancelled")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(cancelled["data"].as_array().unwrap().len(), 1);
    // A listed notification is what a read shows, attempts and review included.
    let shown: Value = app
        .get(ACME, &format!("/v1/notifications/{}", ids[1]))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(cancelled["data"][0], shown);
    let known: Value = app
        .get(ACME, "/v1/notifications?certainty=known")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(known["data"].as_array().unwrap().len(), 1);

    for bad in [
        "state=lost",
        "limit=0",
        "limit=500",
        "cursor=zzz",
        "colour=red",
    ] {
        let answer = problem(
            app.get(ACME, &format!("/v1/notifications?{bad}")).await,
            StatusCode::BAD_REQUEST,
        )
        .await;
        assert_eq!(answer["field"], bad.split('=').next().unwrap());
    }
}

/// The ids a list answers, newest first, on one page.
async fn listed_ids(app: &support::TestApp, token: &str, query: &str) -> Vec<String> {
    let response = app.get(token, &format!("/v1/notifications?{query}")).await;
    assert_eq!(response.status(), StatusCode::OK, "{query}");
    let page: Value = response.json().await.unwrap();
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect()
}

fn encoded(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

async fn lists_filter_by_channel_route_time_and_metadata_within_the_tenant(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let sms = |export: &str| {
        json!({"channel": "sms", "to": "+14155550100", "text": "t",
               "metadata": {"export": export, "team.name": "billing"}})
    };
    let mut ids = Vec::new();
    for (key, body) in [
        ("filter-0", email("ada@example.com")),
        ("filter-1", sms("export-intent-7")),
        ("filter-2", sms("export-intent-8")),
    ] {
        let created: Value = app.enqueue(ACME, key, &body).await.json().await.unwrap();
        ids.push(created["id"].as_str().unwrap().to_owned());
    }
    // Another tenant's notifications match every filter below.
    app.enqueue(GLOBEX, "filter-0", &email("ada@example.com"))
        .await;
    app.enqueue(GLOBEX, "filter-1", &sms("export-intent-7"))
        .await;
    // The stored time, as the list compares it (the store keeps microseconds).
    let shown: Value = app
        .get(ACME, &format!("/v1/notifications/{}", ids[1]))
        .await
        .json()
        .await
        .unwrap();
    let second = encoded(shown["created_at"].as_str().unwrap());

    let after = format!("created_after={second}");
    let before = format!("created_before={second}");
    let combined = format!("channel=sms&route=sandbox&{after}&metadata.team.name=billing&limit=1");
    let everything = &[0, 1, 2];
    let cases: [(&str, &[usize]); 12] = [
        ("channel=sms", &[1, 2]),
        ("channel=email", &[0]),
        ("channel=push", &[]),
        ("route=sandbox", everything),
        ("route=smtp-main", &[]),
        (&after, &[1, 2]),
        (&before, &[0]),
        ("created_after=2000-01-01T00:00:00%2B02:00", everything),
        ("metadata.export=export-intent-7", &[0, 1]),
        (
            "metadata.export=export-intent-7&metadata.team.name=billing",
            &[1],
        ),
        ("metadata.export=export-intent", &[]),
        (&combined, &[2]),
    ];
    for (query, expected) in cases {
        // Newest first.
        let expected: Vec<String> = expected.iter().rev().map(|&i| ids[i].clone()).collect();
        assert_eq!(listed_ids(&app, ACME, query).await, expected, "{query}");
    }
    let theirs = listed_ids(&app, GLOBEX, "channel=sms&metadata.export=export-intent-7").await;
    assert_eq!(theirs.len(), 1);
    assert!(!ids.contains(&theirs[0]), "a tenant sees only its own rows");

    // The cursor pages within the filters.
    let first: Value = app
        .get(ACME, "/v1/notifications?channel=sms&limit=1")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first["data"][0]["id"], ids[2].as_str());
    let cursor = first["next_cursor"].as_str().unwrap();
    assert_eq!(
        listed_ids(&app, ACME, &format!("channel=sms&limit=1&cursor={cursor}")).await,
        [ids[1].clone()]
    );
}

async fn a_bad_list_filter_is_refused_naming_its_parameter(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let long_key = format!("metadata.{}", "k".repeat(41));
    let long_key_query = format!("{long_key}=x");
    for (query, field, detail) in [
        (
            "channel=fax",
            "channel",
            "must be one of email, sms, push, webhook, chat",
        ),
        (
            "channel=SMS",
            "channel",
            "must be one of email, sms, push, webhook, chat",
        ),
        (
            "created_after=yesterday",
            "created_after",
            "`yesterday` is not an RFC 3339 date-time: use e.g. 2026-12-01T09:30:00Z or \
             2026-12-01T10:30:00+01:00 (a `T`, seconds, and a zone)",
        ),
        (
            "created_before=2026-11-30",
            "created_before",
            "`2026-11-30` is not an RFC 3339 date-time: use e.g. 2026-12-01T09:30:00Z or \
             2026-12-01T10:30:00+01:00 (a `T`, seconds, and a zone)",
        ),
        (
            "metadata.=x",
            "metadata.",
            "keys must be 1 to 40 characters",
        ),
        (
            long_key_query.as_str(),
            long_key.as_str(),
            "keys must be 1 to 40 characters",
        ),
        (
            "route=a%00b",
            "route",
            "must not contain the NUL character (U+0000)",
        ),
        (
            "metadata.export=a%00b",
            "metadata.export",
            "must not contain the NUL character (U+0000)",
        ),
        (
            "channel=sms&channel=email",
            "channel",
            "must be given at most once",
        ),
        ("metadata=x", "metadata", "unknown query parameter"),
    ] {
        let answer = problem(
            app.get(ACME, &format!("/v1/notifications?{query}")).await,
            StatusCode::BAD_REQUEST,
        )
        .await;
        assert_eq!(answer["field"], field, "{query}");
        assert_eq!(answer["detail"], detail, "{query}");
    }
}

async fn only_a_queued_notification_can_be_cancelled(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let mut body = email("ada@example.com");
    body["send_at"] = json!("2999-01-01T00:00:00Z");
    let created: Value = app
        .enqueue(ACME, "cancel-me", &body)
        .await
        .json()
        .await
        .unwrap();
    let path = format!(
        "/v1/notifications/{}/cancel",
        created["id"].as_str().unwrap()
    );
    let cancelled = app.post_json(ACME, &path, &json!({})).await;
    assert_eq!(cancelled.status(), StatusCode::OK);
    let cancelled: Value = cancelled.json().await.unwrap();
    assert_eq!(
        (cancelled["state"].as_str(), cancelled["certainty"].as_str()),
        (Some("cancelled"), Some("known"))
    );
    // The same shape as a read, attempts and review included, so one client type serves both.
    let shown: Value = app
        .get(
            ACME,
            &format!("/v1/notifications/{}", created["id"].as_str().unwrap()),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(cancelled, shown);
    assert_eq!(cancelled["attempts"], json!([]));
    let again = problem(
        app.post_json(ACME, &path, &json!({})).await,
        StatusCode::CONFLICT,
    )
    .await;
    assert!(again["detail"].as_str().unwrap().contains("cancelled"));
    assert_eq!(
        app.db
            .scalar("SELECT count(*) FROM outbox WHERE type = 'dev.herald.notification.cancelled'")
            .await,
        1
    );
}

async fn a_chat_message_keeps_its_blocks_reaches_its_vendor_and_may_be_suppressed(
    backend: Backend,
) {
    let Some(app) = spawn_app_with(
        backend,
        "[templates.deployed]\ntext = \"<!here> Deploy {{ version }} finished\"\n",
    )
    .await
    else {
        return;
    };
    let blocks = json!([
        {"type": "section", "text": {"type": "mrkdwn", "text": "*Deploy* finished"}},
        {"type": "divider"}
    ]);
    let chat = json!({"channel": "chat", "to": "C0123456789", "text": "Deploy finished",
                      "blocks": blocks});
    let created = app.enqueue(ACME, "chat-1", &chat).await;
    assert_eq!(created.status(), StatusCode::ACCEPTED);
    let created: Value = created.json().await.unwrap();
    assert_eq!(
        (&created["channel"], &created["to"], &created["blocks"]),
        (&json!("chat"), &json!("C0123456789"), &blocks)
    );
    let url = format!("/v1/notifications/{}", created["id"].as_str().unwrap());
    eventually(
        "the chat message delivered",
        Duration::from_secs(10),
        || async {
            let n: Value = app.get(ACME, &url).await.json().await.ok()?;
            (n["state"] == "delivered").then_some(n)
        },
    )
    .await;

    // A template renders a chat message's text, as it does an SMS; what the data puts in it is
    // escaped as Slack escapes text, so that it cannot ping everyone or plant a link. The
    // template's own text may (here `<!here>`).
    let rendered: Value = app
        .enqueue(
            ACME,
            "chat-template",
            &json!({"channel": "chat", "to": "C0OPS", "template": "deployed",
                    "data": {"version": "1.2 <!channel> & <https://evil.example|docs>"}}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        rendered["text"],
        "<!here> Deploy 1.2 &lt;!channel&gt; &amp; &lt;https://evil.example|docs&gt; finished"
    );
    assert_eq!(rendered["blocks"], Value::Null);
    let sms: Value = app
        .enqueue(
            ACME,
            "sms-template",
            &json!({"channel": "sms", "to": "+14155550100", "template": "deployed",
                    "data": {"version": "<1.2>"}}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        sms["text"], "<!here> Deploy <1.2> finished",
        "only chat escapes"
    );

    // A person may keep a channel from getting any more messages, as any other recipient.
    let suppressed = app
        .http
        .post(app.url("/v1/suppressions"))
        .bearer_auth(ACME_ADMIN)
        .json(&json!({"channel": "chat", "recipient": "C0123456789", "note": "archived"}))
        .send()
        .await
        .unwrap();
    assert_eq!(suppressed.status(), StatusCode::CREATED);
    let held: Value = app
        .enqueue(ACME, "chat-2", &chat)
        .await
        .json()
        .await
        .unwrap();
    let url = format!("/v1/notifications/{}", held["id"].as_str().unwrap());
    let failed = eventually(
        "the suppressed one failed",
        Duration::from_secs(10),
        || async {
            let n: Value = app.get(ACME, &url).await.json().await.ok()?;
            (n["state"] == "failed").then_some(n)
        },
    )
    .await;
    assert_eq!(failed["failure_reason"], "suppressed");
    assert_eq!(failed["attempts"][0]["provider_ref"], Value::Null);
}

async fn a_template_renders_in_the_nearest_locale_it_has_and_records_which(backend: Backend) {
    let Some(app) = spawn_app_with(
        backend,
        "[dispatch]\nenabled = false\n\
         [templates.code]\ntext = \"Your code is {{ code }}\"\n\
         [templates.code.locales.fr]\ntext = \"Votre code est {{ code }}\"\n\
         [templates.code.locales.fr-CA]\ntext = \"Ton code est {{ code }}\"\n",
    )
    .await
    else {
        return;
    };
    let code = |locale: Option<&str>| {
        let mut body = json!({"channel": "sms", "to": "+14155550100", "template": "code",
                              "data": {"code": "4242"}});
        if let Some(locale) = locale {
            body["locale"] = json!(locale);
        }
        body
    };
    for (key, asked, text, recorded, fell_back) in [
        (
            "quebec",
            Some("fr-CA"),
            "Ton code est 4242",
            json!("fr-CA"),
            false,
        ),
        (
            "belgium",
            Some("fr-BE"),
            "Votre code est 4242",
            json!("fr"),
            false,
        ),
        // No translation serves German: the default goes, and the answer says so.
        (
            "germany",
            Some("de"),
            "Your code is 4242",
            Value::Null,
            true,
        ),
        (
            "french",
            Some("french"),
            "Your code is 4242",
            Value::Null,
            true,
        ),
        ("none", None, "Your code is 4242", Value::Null, false),
    ] {
        let answer = app.enqueue(ACME, key, &code(asked)).await;
        assert_eq!(answer.status(), StatusCode::ACCEPTED);
        let warned = answer.headers().get("herald-locale-fallback").cloned();
        let accepted: Value = answer.json().await.unwrap();
        let shown = app.show(accepted["id"].as_str().unwrap()).await;
        assert_eq!(
            (&shown["text"], &shown["locale"]),
            (&json!(text), &recorded),
            "{asked:?}"
        );
        assert_eq!(warned.is_some(), fell_back, "{asked:?}");
        let flag = if fell_back { json!(true) } else { Value::Null };
        assert_eq!(
            (&accepted["locale_fallback"], &shown["locale_fallback"]),
            (&flag, &flag)
        );
        // A retry with the same key is answered the same, warning included.
        let again = app.enqueue(ACME, key, &code(asked)).await;
        assert_eq!(
            again.headers().get("herald-locale-fallback"),
            warned.as_ref()
        );
    }
    for (body, detail) in [
        (
            json!({"channel": "sms", "to": "+14155550100", "text": "hi", "locale": "fr"}),
            "locale: is only used with a template",
        ),
        (
            code(Some("fr_CA")),
            "locale: must be a language tag such as fr or fr-CA",
        ),
    ] {
        let refused = problem(
            app.enqueue(ACME, "bad-locale", &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(
            (refused["field"].as_str(), refused["detail"].as_str()),
            (Some("locale"), Some(detail))
        );
    }
}

/// A token with `rate_limit_per_second` is held to it in this process: a full bucket takes a
/// burst, a batch counts every item, and what is over is refused before anything is stored,
/// with a `Retry-After` the same request (same keys) then meets. Other tokens are untouched.
async fn a_token_over_its_rate_is_answered_429_with_when_to_try_again_and_nothing_stored(
    backend: Backend,
) {
    const LIMITED: &str = "test-acme-limited-0123456789abcdef";
    let Some(app) = spawn_app_with(
        backend,
        &format!(
            "[dispatch]\nenabled = false\n\
             [[tokens]]\nname = \"acme-batch-job\"\ntenant = \"acme\"\nscopes = [\"send\", \"read\"]\n\
             secret = \"{LIMITED}\"\nroutes = [\"*\"]\nrate_limit_per_second = 1\nburst = 3\n"
        ),
    )
    .await
    else {
        return;
    };
    for n in 0..3 {
        let taken = app
            .enqueue(LIMITED, &format!("burst-{n}"), &email("ada@example.com"))
            .await;
        assert_eq!(taken.status(), StatusCode::ACCEPTED, "{n} of the burst");
    }
    let over = app
        .enqueue(LIMITED, "over", &email("ada@example.com"))
        .await;
    assert_eq!(over.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = over.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    let refused = problem(over, StatusCode::TOO_MANY_REQUESTS).await;
    assert_eq!(refused["type"], "/problems/rate-limited");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("token `acme-batch-job`"),
        "{refused}"
    );
    // Another token of the same tenant is not held by this one's limit.
    let other = app
        .enqueue(ACME, "other-token", &email("ada@example.com"))
        .await;
    assert_eq!(other.status(), StatusCode::ACCEPTED);

    // After the wait the same key is new: nothing was stored for it.
    tokio::time::sleep(Duration::from_secs(retry_after)).await;
    let again = app
        .enqueue(LIMITED, "over", &email("ada@example.com"))
        .await;
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    assert!(again.headers().get("idempotent-replayed").is_none());

    // A batch counts its items: five from a full bucket of three go, and leave a debt the
    // next request waits out (Retry-After past the two seconds a token alone would need).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let items: Vec<Value> = (0..5)
        .map(|n| {
            let mut item = email("ada@example.com");
            item["idempotency_key"] = json!(format!("batch-{n}"));
            item
        })
        .collect();
    let batch = app
        .post_json(
            LIMITED,
            "/v1/notifications/batch",
            &json!({ "items": items }),
        )
        .await;
    assert_eq!(batch.status(), StatusCode::OK);
    let after = app
        .enqueue(LIMITED, "after-batch", &email("ada@example.com"))
        .await;
    assert_eq!(after.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = after.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after >= 3, "{retry_after}");

    let metrics = app.http.get(app.url("/metrics")).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    assert!(
        metrics.contains("herald_rate_limited_total{token=\"acme-batch-job\"} 2"),
        "{metrics}"
    );
    assert!(
        !metrics.contains(LIMITED),
        "a token's secret is never a label"
    );
}

/// A sandbox route named for mail stands in for mail only: an SMS sent to it is refused as a
/// real mail vendor's route would refuse it, not "delivered" by a stand-in.
async fn a_sandbox_route_for_some_channels_refuses_the_others(backend: Backend) {
    let Some(app) = spawn_app_with(
        backend,
        "[dispatch]\nenabled = false\n[routes.mail]\nprovider = \"sandbox\"\nchannels = [\"email\"]\n",
    )
    .await
    else {
        return;
    };
    let mut sms = json!({"channel": "sms", "to": "+14155550100", "text": "hi"});
    sms["route"] = json!("mail");
    let refused = problem(
        app.enqueue(ACME, "sms-to-mail", &sms).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(
        (refused["field"].as_str(), refused["detail"].as_str()),
        (
            Some("route"),
            Some("route: route `mail` does not carry sms")
        )
    );
    let mut mail = email("ada@example.com");
    mail["route"] = json!("mail");
    assert_eq!(
        app.enqueue(ACME, "mail", &mail).await.status(),
        StatusCode::ACCEPTED
    );
}

/// `[templates] strict_locales = true`: a locale no translation serves is refused, not sent in
/// another language; one a translation serves (itself or a shorter tag) goes as ever.
async fn strict_locales_refuse_a_locale_no_translation_serves(backend: Backend) {
    let Some(app) = spawn_app_with(
        backend,
        "[dispatch]\nenabled = false\n\
         [templates]\nstrict_locales = true\n\
         [templates.code]\nlocale = \"en\"\ntext = \"Your code is {{ code }}\"\n\
         [templates.code.locales.fr]\ntext = \"Votre code est {{ code }}\"\n",
    )
    .await
    else {
        return;
    };
    let code = |locale: &str| {
        json!({"channel": "sms", "to": "+14155550100", "template": "code",
               "data": {"code": "4242"}, "locale": locale})
    };
    let refused = problem(
        app.enqueue(ACME, "german", &code("de")).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(refused["field"], "locale");
    assert_eq!(
        refused["detail"],
        "locale: no translation of template `code` serves `de` (it has: fr), and [templates] \
         strict_locales refuses the default language"
    );
    let id = app.enqueue_id("belgium", &code("fr-BE")).await;
    assert_eq!(app.show(&id).await["text"], "Votre code est 4242");
    // The template's own language (`locale = "en"`) serves English as asked, not as a fallback.
    let english = app.enqueue(ACME, "britain", &code("en-GB")).await;
    assert_eq!(english.status(), StatusCode::ACCEPTED);
    assert!(english.headers().get("herald-locale-fallback").is_none());
    let english: Value = english.json().await.unwrap();
    assert_eq!(
        (&english["text"], &english["locale_fallback"]),
        (&json!("Your code is 4242"), &Value::Null)
    );
}

async fn a_cancellation_key_calls_off_what_is_still_queued_and_says_what_was_not(backend: Backend) {
    // The sandbox route delivers what is due at once; what waits for `send_at` stays queued.
    let Some(app) = spawn_app_with(backend, "").await else {
        return;
    };
    let keyed = |send_at: Option<&str>| {
        let mut body = email("ada@example.com");
        body["cancellation_key"] = json!("signup-flow/user-42");
        if let Some(at) = send_at {
            body["send_at"] = json!(at);
        }
        body
    };
    let app = &app;
    let enqueue = |key: &'static str, body: Value| async move {
        let created: Value = app.enqueue(ACME, key, &body).await.json().await.unwrap();
        created["id"].as_str().unwrap().to_owned()
    };
    let now = enqueue("welcome", keyed(None)).await;
    let reminder = enqueue("reminder", keyed(Some("2999-01-01T00:00:00Z"))).await;
    let nudge = enqueue("nudge", keyed(Some("2999-01-02T00:00:00Z"))).await;
    let shown: Value = app
        .get(ACME, &format!("/v1/notifications/{reminder}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["cancellation_key"], "signup-flow/user-42");
    eventually(
        "the first to be delivered",
        Duration::from_secs(10),
        || async {
            let n: Value = app
                .get(ACME, &format!("/v1/notifications/{now}"))
                .await
                .json()
                .await
                .ok()?;
            (n["state"] == "delivered").then_some(())
        },
    )
    .await;

    let answer = app
        .post_json(
            ACME,
            "/v1/notifications/cancel",
            &json!({"cancellation_key": "signup-flow/user-42"}),
        )
        .await;
    assert_eq!(answer.status(), StatusCode::OK);
    let answer: Value = answer.json().await.unwrap();
    let mut cancelled = vec![reminder.clone(), nudge.clone()];
    cancelled.sort();
    assert_eq!(
        answer,
        json!({"cancelled": cancelled, "not_cancelled": [{"id": now, "state": "delivered"}]})
    );
    // Each cancelled one has its event, which carries the key.
    assert_eq!(
        app.db
            .scalar(
                "SELECT count(*) FROM outbox WHERE type = 'dev.herald.notification.cancelled' \
                 AND CAST(data AS text) LIKE '%signup-flow/user-42%'"
            )
            .await,
        2
    );

    // By the Idempotency-Key of one request; another tenant's keys name nothing of ACME's.
    let later = enqueue("later", keyed(Some("2999-01-03T00:00:00Z"))).await;
    let none = app
        .post_json(
            GLOBEX,
            "/v1/notifications/cancel",
            &json!({"idempotency_key": "later"}),
        )
        .await;
    assert_eq!(
        none.json::<Value>().await.unwrap(),
        json!({"cancelled": [], "not_cancelled": []})
    );
    let answer: Value = app
        .post_json(
            ACME,
            "/v1/notifications/cancel",
            &json!({"idempotency_key": "later"}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["cancelled"], json!([later]));

    for (body, field) in [
        (json!({}), "cancellation_key"),
        (
            json!({"cancellation_key": "a", "idempotency_key": "b"}),
            "cancellation_key",
        ),
        (json!({"cancellation_key": ""}), "cancellation_key"),
        (
            json!({"cancellation_key": "tab\tin it"}),
            "cancellation_key",
        ),
        (
            json!({"idempotency_key": "x".repeat(256)}),
            "idempotency_key",
        ),
        (json!({"cancellation_key": 42}), "cancellation_key"),
        (json!({"id": "x"}), "id"),
    ] {
        let refused = problem(
            app.post_json(ACME, "/v1/notifications/cancel", &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(refused["field"], field, "{body}: {refused}");
    }
    let mut bad = email("ada@example.com");
    bad["cancellation_key"] = json!("ключ");
    let refused = problem(
        app.enqueue(ACME, "bad-key", &bad).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(refused["field"], "cancellation_key");
}

async fn a_batch_answers_each_item_in_order_in_one_transaction(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let already = app
        .enqueue(ACME, "already", &email("ada@example.com"))
        .await;
    assert_eq!(already.status(), StatusCode::ACCEPTED);
    let already: Value = already.json().await.unwrap();
    let item = |key: &str, to: &str| {
        let mut body = email(to);
        body["idempotency_key"] = json!(key);
        body
    };
    let mut invalid = item("b-bad", "nope");
    invalid["channel"] = json!("email");
    let response = app
        .post_json(
            ACME,
            "/v1/notifications/batch",
            &json!({"items": [
                item("b-1", "one@example.com"),
                invalid,
                item("already", "ada@example.com"),
                item("already", "changed@example.com"),
                item("b-2", "two@example.com"),
                {"channel": "email"},
            ]}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let results = body["results"].as_array().unwrap();
    let statuses: Vec<u64> = results
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, vec![202, 422, 202, 422, 202, 422]);
    let keys: Vec<&Value> = results.iter().map(|r| &r["idempotency_key"]).collect();
    assert_eq!(
        keys,
        [
            &json!("b-1"),
            &json!("b-bad"),
            &json!("already"),
            &json!("already"),
            &json!("b-2"),
            &Value::Null
        ]
    );
    assert_eq!(results[0]["notification"]["to"], "one@example.com");
    assert_eq!(results[0]["replayed"], false);
    assert_eq!(results[1]["problem"]["field"], "items[1].to");
    assert_eq!(results[2]["replayed"], true);
    assert_eq!(results[2]["notification"], already, "the original answer");
    assert!(
        results[3]["problem"]["type"]
            .as_str()
            .unwrap()
            .ends_with("/idempotency-key-reused")
    );
    assert_eq!(results[4]["notification"]["to"], "two@example.com");
    assert_eq!(results[4]["replayed"], false);
    assert_eq!(results[5]["problem"]["field"], "items[5].idempotency_key");
    // The one stored before, and the batch's two new ones; the invalid items stored nothing.
    assert_eq!(app.db.count("notifications").await, 3);
    assert_eq!(app.db.count("outbox").await, 3);
    assert_eq!(app.db.count("idempotency_keys").await, 3);
    let created = app.enqueue(ACME, "b-bad", &email("bad@example.com")).await;
    assert_eq!(created.status(), StatusCode::ACCEPTED);
    assert!(
        created.headers().get("idempotent-replayed").is_none(),
        "an invalid item does not burn its key"
    );

    let too_many: Vec<Value> = (0..1001)
        .map(|i| item(&format!("m-{i}"), "a@example.com"))
        .collect();
    let answer = problem(
        app.post_json(ACME, "/v1/notifications/batch", &json!({"items": too_many}))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(answer["field"], "items");
}

/// The recipient that the database refuses in the test below.
const FAILS_AT_THE_DATABASE: &str = "fails-at-the-database@example.com";

async fn a_batch_that_fails_at_the_database_part_way_commits_nothing(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // No input that herald should accept fails at the database (on PostgreSQL a U+0000 in a
    // text does, but that is a gap in validation, not a case to rely on), so the test makes its
    // own database refuse one recipient, as a full disk or a broken constraint would: after
    // the batch's first two items were written in the transaction.
    let refuse = format!("NEW.recipient = '{FAILS_AT_THE_DATABASE}'");
    match backend {
        Backend::Sqlite => {
            app.db
                .execute(&format!(
                    "CREATE TRIGGER refuse BEFORE INSERT ON notifications WHEN {refuse}
                     BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
                ))
                .await
        }
        Backend::Postgres => {
            app.db
                .execute(
                    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql
                     AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$",
                )
                .await;
            app.db
                .execute(&format!(
                    "CREATE TRIGGER refuse BEFORE INSERT ON notifications FOR EACH ROW
                     WHEN ({refuse}) EXECUTE FUNCTION refuse()"
                ))
                .await
        }
    }
    let item = |key: &str, to: &str| {
        let mut body = email(to);
        body["idempotency_key"] = json!(key);
        body
    };
    let batch = json!({"items": [
        item("f-1", "one@example.com"),
        item("f-2", "two@example.com"),
        item("f-3", FAILS_AT_THE_DATABASE),
        item("f-4", "four@example.com"),
    ]});
    let answer = problem(
        app.post_json(ACME, "/v1/notifications/batch", &batch).await,
        StatusCode::INTERNAL_SERVER_ERROR,
    )
    .await;
    assert!(
        answer["type"].as_str().unwrap().ends_with("/internal")
            && !answer.to_string().contains("refused by the test"),
        "a 500 that leaks nothing of the database: {answer}"
    );
    assert_eq!(app.db.count("notifications").await, 0);
    assert_eq!(app.db.count("outbox").await, 0);
    assert_eq!(app.db.count("idempotency_keys").await, 0);

    // Nothing of it was kept: once the database takes every item, the same batch creates all
    // four, none of them a replay.
    app.db
        .execute(match backend {
            Backend::Sqlite => "DROP TRIGGER refuse",
            Backend::Postgres => "DROP TRIGGER refuse ON notifications",
        })
        .await;
    let response = app.post_json(ACME, "/v1/notifications/batch", &batch).await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let results: Vec<(u64, bool)> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["status"].as_u64().unwrap(),
                r["replayed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(results, vec![(202, false); 4]);
    assert_eq!(app.db.count("notifications").await, 4);
}

async fn operations_endpoints_answer(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    assert_eq!(
        app.http
            .get(app.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    let ready: Value = app.public_json("/readyz").await;
    assert_eq!(ready["status"], "ready");

    let first = app.enqueue(ACME, "m-1", &email("ada@example.com")).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let again = app.enqueue(ACME, "m-1", &email("ada@example.com")).await;
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let metrics = app
        .http
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |name: &str| {
        metrics
            .lines()
            .filter_map(|l| l.split_once(' '))
            .find(|(metric, _)| *metric == name)
            .and_then(|(_, v)| v.parse::<f64>().ok())
    };
    // The recorder is process-wide, and nextest runs each test in a process of its own: these
    // counts are this test's requests, one created and one replayed.
    assert_eq!(
        value("herald_notifications_accepted_total"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        value("herald_idempotency_replays_total"),
        Some(1.0),
        "{metrics}"
    );

    let spec: Value = app.public_json("/openapi.json").await;
    assert!(spec["openapi"].as_str().unwrap().starts_with("3."));
    for path in [
        "/v1/notifications",
        "/v1/notifications/{id}",
        "/v1/notifications/batch",
        "/problems/{slug}",
    ] {
        assert!(spec["paths"].get(path).is_some(), "openapi lists {path}");
    }
    tokio::time::timeout(Duration::from_secs(10), app.stop())
        .await
        .expect("a graceful stop");
}
