//! Categories and one-click unsubscribe (RFC 8058) over real HTTP on both databases: an email in
//! a category recipients may leave carries a signed `List-Unsubscribe` link; a GET of it changes
//! nothing, a POST of `List-Unsubscribe=One-Click` suppresses the recipient for that category
//! only, audited; transactional mail still goes; a person can lift it.

mod support;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use support::{
    ACME, ACME_ADMIN, Backend, TempDir, TestApp, email, eventually, problem, spawn_app_with,
    test_config_text,
};

on_both_backends!(
    a_one_click_unsubscribe_stops_that_category_and_no_other,
    bad_links_bodies_and_categories_are_refused_and_change_nothing,
);

const PUBLIC_URL: &str = "https://mail.herald.example";

const CATEGORIES: &str = r#"
[categories.digest]
unsubscribe = true
[categories.transactional]
unsubscribe = false

[unsubscribe]
public_url = "https://mail.herald.example"
secrets = ["unsubscribe-secret-0123456789abcdef0123456789"]
"#;

fn in_category(to: &str, category: Option<&str>) -> Value {
    let mut body = email(to);
    if let Some(category) = category {
        body["category"] = json!(category);
    }
    body
}

/// The notification once it has ended.
async fn ended(app: &TestApp, id: &str) -> Value {
    eventually(
        "the notification to end",
        Duration::from_secs(20),
        || async {
            let n = app.show(id).await;
            (n["state"] != "queued" && n["state"] != "sending").then_some(n)
        },
    )
    .await
}

/// The path of the link in an email's `List-Unsubscribe` header, as herald serves it.
fn link_path(n: &Value) -> String {
    let header = n["headers"]["List-Unsubscribe"].as_str().unwrap();
    let url = header
        .strip_prefix('<')
        .and_then(|h| h.strip_suffix('>'))
        .unwrap();
    url.strip_prefix(PUBLIC_URL).unwrap().to_owned()
}

async fn unsubscribe(app: &TestApp, path: &str, body: &'static str) -> reqwest::Response {
    app.http
        .post(app.url(path))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("user-agent", "Mail-Provider-Unsubscriber/1.0")
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn suppressions(app: &TestApp) -> Vec<Value> {
    let list: Value = app
        .get(ACME, "/v1/suppressions")
        .await
        .json()
        .await
        .unwrap();
    list["data"].as_array().unwrap().clone()
}

async fn a_one_click_unsubscribe_stops_that_category_and_no_other(backend: Backend) {
    let Some(app) = spawn_app_with(backend, CATEGORIES).await else {
        return;
    };
    let digest = app
        .enqueue_id("digest-1", &in_category("Ada@Example.com", Some("digest")))
        .await;
    let n = ended(&app, &digest).await;
    assert_eq!(n["state"], "delivered", "{n:#}");
    assert_eq!(n["category"], "digest");
    assert_eq!(
        n["headers"]["List-Unsubscribe-Post"],
        "List-Unsubscribe=One-Click"
    );
    let path = link_path(&n);
    assert!(path.starts_with("/v1/unsubscribe/"), "{path}");

    // Following the link (a person, or a scanner) shows a question and changes nothing.
    let page = app.http.get(app.url(&path)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let text = page.text().await.unwrap();
    assert!(
        text.contains("Stop sending digest messages to ada@example.com?"),
        "{text}"
    );
    assert!(suppressions(&app).await.is_empty());

    // The mail provider's one-click POST: no token, the link's signature is enough.
    let done = unsubscribe(&app, &path, "List-Unsubscribe=One-Click").await;
    assert_eq!(done.status(), StatusCode::OK);
    assert!(
        done.text()
            .await
            .unwrap()
            .contains("will receive no more digest messages")
    );
    let again = unsubscribe(&app, &path, "List-Unsubscribe=One-Click").await;
    assert_eq!(
        again.status(),
        StatusCode::OK,
        "a repeat is answered the same"
    );
    let listed = suppressions(&app).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let s = &listed[0];
    assert_eq!(
        (
            s["channel"].as_str(),
            s["recipient"].as_str(),
            s["category"].as_str(),
            s["reason"].as_str(),
            s["source"].as_str()
        ),
        (
            Some("email"),
            Some("ada@example.com"),
            Some("digest"),
            Some("unsubscribed"),
            Some("unsubscribe")
        )
    );
    assert_eq!(
        s["evidence"]["user_agent"],
        "Mail-Provider-Unsubscriber/1.0"
    );
    assert_eq!(
        app.db
            .scalar(
                "SELECT count(*) FROM suppression_log WHERE action = 'added' \
                 AND category = 'digest' AND principal = 'unsubscribe'"
            )
            .await,
        1,
        "audited once"
    );

    // The next digest to her is not sent; her transactional and uncategorized mail is, and
    // another recipient's digest too.
    let next = app
        .enqueue_id("digest-2", &in_category("ada@example.com", Some("digest")))
        .await;
    let n = ended(&app, &next).await;
    assert_eq!(
        (n["state"].as_str(), n["failure_reason"].as_str()),
        (Some("failed"), Some("suppressed")),
        "{n:#}"
    );
    for (key, body) in [
        (
            "receipt",
            in_category("ada@example.com", Some("transactional")),
        ),
        ("plain", in_category("ada@example.com", None)),
        ("grace", in_category("grace@example.com", Some("digest"))),
    ] {
        let id = app.enqueue_id(key, &body).await;
        let n = ended(&app, &id).await;
        assert_eq!(n["state"], "delivered", "{key}: {n:#}");
        assert_eq!(
            n["headers"].get("List-Unsubscribe").is_some(),
            key == "grace",
            "only an unsubscribable category carries the link: {key}"
        );
    }

    // A person lifts the category's suppression, naming it; the digest goes again.
    let path = "/v1/suppressions/email/ada%40example.com";
    let lift = |query: &str| {
        let request = app
            .http
            .delete(app.url(&format!("{path}{query}")))
            .bearer_auth(ACME_ADMIN)
            .json(&json!({"note": "she subscribed again"}));
        async move { request.send().await.unwrap() }
    };
    problem(lift("").await, StatusCode::NOT_FOUND).await;
    let lifted: Value = lift("?category=digest").await.json().await.unwrap();
    assert_eq!(lifted["category"], "digest");
    let third = app
        .enqueue_id("digest-3", &in_category("ada@example.com", Some("digest")))
        .await;
    assert_eq!(ended(&app, &third).await["state"], "delivered");
}

async fn bad_links_bodies_and_categories_are_refused_and_change_nothing(backend: Backend) {
    let Some(app) = spawn_app_with(
        backend,
        &format!("[dispatch]\nenabled = false\n{CATEGORIES}"),
    )
    .await
    else {
        return;
    };
    let id = app
        .enqueue_id("digest", &in_category("ada@example.com", Some("digest")))
        .await;
    let path = link_path(&app.show(&id).await);
    let token = path.rsplit('/').next().unwrap();
    let (_, tag) = token.split_once('.').unwrap();
    // Another recipient under the same signature, and a token that is not one.
    let forged = format!(
        "/v1/unsubscribe/{}.{tag}",
        base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            br#"{"t":"acme","r":"grace@example.com","c":"digest"}"#
        )
    );
    for bad in [forged.as_str(), "/v1/unsubscribe/nonsense"] {
        problem(
            unsubscribe(&app, bad, "List-Unsubscribe=One-Click").await,
            StatusCode::NOT_FOUND,
        )
        .await;
        let page = app.http.get(app.url(bad)).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::NOT_FOUND);
    }
    for body in ["", "List-Unsubscribe=Yes", "unsubscribe=1"] {
        problem(
            unsubscribe(&app, &path, body).await,
            StatusCode::BAD_REQUEST,
        )
        .await;
    }
    assert!(suppressions(&app).await.is_empty());

    for (body, field, detail) in [
        (
            in_category("ada@example.com", Some("news")),
            "category",
            "unknown category `news`: one of digest, transactional",
        ),
        (
            {
                let mut body = in_category("ada@example.com", Some("digest"));
                body["headers"] = json!({"list-unsubscribe": "<https://elsewhere.example/u>"});
                body
            },
            "headers.list-unsubscribe",
            "herald writes it for the category `digest`",
        ),
    ] {
        let refused = problem(
            app.enqueue(ACME, "refused", &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(
            (refused["field"].as_str(), refused["detail"].as_str()),
            (Some(field), Some(format!("{field}: {detail}").as_str())),
        );
    }
    // A manual suppression names a configured category, or none.
    let refused = problem(
        app.post_json(
            ACME_ADMIN,
            "/v1/suppressions",
            &json!({"channel": "email", "recipient": "ada@example.com", "category": "news",
                    "note": "asked by phone"}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(refused["field"], "category");
    // Unsubscribe links need where they point and a secret long enough to sign them.
    for (config, problem) in [
        (
            CATEGORIES.replace("unsubscribe-secret-0123456789abcdef0123456789", "short"),
            "unsubscribe.secrets[0]: the secret has 5 bytes besides blanks; use at least 32",
        ),
        (
            CATEGORIES.replace(
                "unsubscribe-secret-0123456789abcdef0123456789",
                &" ".repeat(40),
            ),
            "unsubscribe.secrets[0]: the secret has 0 bytes besides blanks; use at least 32",
        ),
        (
            CATEGORIES.replace(
                "unsubscribe-secret-0123456789abcdef0123456789",
                support::ACME_ADMIN,
            ),
            "unsubscribe.secrets[0]: the secret is token `acme-admin`'s too",
        ),
        (
            CATEGORIES.replace("public_url = \"https://mail.herald.example\"\n", ""),
            "unsubscribe.public_url: is required: category `digest` has unsubscribe links",
        ),
    ] {
        let dir = TempDir::new("herald-unsubscribe");
        let path = dir.path().join("herald.toml");
        std::fs::write(&path, test_config_text(&app.db.url, "127.0.0.1:0", &config)).unwrap();
        let refused = herald::check::load(Some(&path), std::iter::empty(), false)
            .await
            .expect_err("refused");
        assert!(refused.to_string().contains(problem), "{refused}");
    }
    let transactional = problem(
        app.post_json(
            ACME_ADMIN,
            "/v1/suppressions",
            &json!({"channel": "email", "recipient": "ada@example.com",
                    "category": "transactional", "note": "asked by phone"}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(
        transactional["detail"],
        "category: recipients cannot leave `transactional` (its unsubscribe is false)"
    );
}
