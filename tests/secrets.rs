//! Secrets stay secret: credentials that vendors refuse, a webhook secret a receiver does not
//! know, and the API token itself appear in no log line (at debug level), no stored evidence,
//! no event and no API answer — while herald records what happened.

mod support;

use std::time::Duration;

use base64::Engine;
use secrecy::SecretString;
use serde_json::{Value, json};

use support::binary::{HeraldProcess, free_port};
use support::{Backend, TempDir, TestDb, eventually, http_client};

/// Every secret in this test starts with this, so one search finds any of them.
const CANARY: &str = "canary-7f3a";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_a_log_an_answer_or_the_database() {
    let Some(db) = TestDb::new(Backend::Sqlite).await else {
        return;
    };
    support::install_crypto();
    let dir = TempDir::new("herald-secrets");
    let resend = herald_resend::fake::spawn(Default::default())
        .await
        .unwrap();
    let onesignal = herald_onesignal::fake::spawn(Default::default())
        .await
        .unwrap();
    let twilio = herald_twilio::fake::spawn(herald_twilio::fake::FakeConfig::new(
        "AC00000000000000000000000000000007",
        SecretString::from("the-right-token"),
    ))
    .await
    .unwrap();
    let mailjet = herald_mailjet::fake::spawn(herald_mailjet::fake::FakeConfig::new(
        "mj-key",
        SecretString::from("the-right-secret"),
    ))
    .await
    .unwrap();
    let receiver = herald_webhook::fake::spawn(herald_webhook::fake::FakeConfig {
        secrets: vec!["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let webhook_secret = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(format!("{CANARY}-webhook-signing-key"))
    );
    let token_file = dir.path().join("twilio-token");
    std::fs::write(&token_file, format!("{CANARY}-twilio-auth-token\n")).unwrap();
    let api_token = format!("{CANARY}-api-token");

    let listen = format!("127.0.0.1:{}", free_port());
    let config = format!(
        r#"
[server]
listen = "{listen}"

[database]
url = "{db}"

[[tokens]]
name = "app"
tenant = "acme"
scopes = ["send", "read", "review"]
secret = {{ env = "HERALD_TEST_CANARY_TOKEN" }}

[dispatch]
lease_seconds = 5

[routes.resend]
provider = "resend"
base_url = "{resend}"
api_key = "{CANARY}-resend-api-key"
from = "noreply@acme.example"
timeout_seconds = 2

[routes.onesignal]
provider = "onesignal"
base_url = "{onesignal}"
app_id = "{app_id}"
api_key = {{ env = "HERALD_TEST_CANARY_ONESIGNAL" }}
timeout_seconds = 2

[routes.twilio]
provider = "twilio"
base_url = "{twilio}"
account_sid = "AC00000000000000000000000000000007"
auth_token = {{ file = "{token_file}" }}
from = "+15005550006"
visibility_lag_ms = 500
timeout_seconds = 2

[routes.mailjet]
provider = "mailjet"
base_url = "{mailjet}"
api_key = "mj-key"
api_secret = "{CANARY}-mailjet-secret"
from = "noreply@acme.example"
visibility_lag_ms = 500
timeout_seconds = 2

[routes.webhook]
provider = "webhook"
secrets = ["{webhook_secret}"]
allow_private_networks = true
timeout_seconds = 2

[channels]
email = "resend"
sms = "twilio"
push = "onesignal"
webhook = "webhook"
"#,
        db = db.url,
        resend = resend.base_url(),
        onesignal = onesignal.base_url(),
        app_id = herald_onesignal::fake::FakeConfig::default().app_id,
        twilio = twilio.base_url(),
        mailjet = mailjet.base_url(),
        token_file = token_file.display(),
    );
    let onesignal_key = format!("{CANARY}-onesignal-key");
    let env = [
        ("RUST_LOG", "debug"),
        ("HERALD_TEST_CANARY_TOKEN", api_token.as_str()),
        ("HERALD_TEST_CANARY_ONESIGNAL", onesignal_key.as_str()),
    ];
    let herald = HeraldProcess::start_with_env(&config, dir.path(), "herald", &env).await;

    let http = http_client();
    let bodies = [
        json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t"}),
        json!({"channel": "email", "route": "mailjet", "to": "ada@example.com", "subject": "s", "text": "t"}),
        json!({"channel": "sms", "to": "+14155550100", "text": "t"}),
        json!({"channel": "push", "to": "device-1", "text": "t"}),
        json!({"channel": "webhook", "to": format!("{}/hook", receiver.base_url()), "payload": {"a": 1}}),
    ];
    let mut answers = Vec::new();
    let mut ids = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let response = http
            .post(format!("{}/v1/notifications", herald.base))
            .bearer_auth(&api_token)
            .header("Idempotency-Key", format!("secret-{i}"))
            .json(body)
            .send()
            .await
            .unwrap();
        let text = response.text().await.unwrap();
        let created: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("enqueued: {text}"));
        ids.push(created["id"].as_str().unwrap().to_owned());
        answers.push(text);
    }
    for id in &ids {
        let n = eventually(
            &format!("{id} to fail"),
            Duration::from_secs(20),
            || async {
                let text = http
                    .get(format!("{}/v1/notifications/{id}", herald.base))
                    .bearer_auth(&api_token)
                    .send()
                    .await
                    .ok()?
                    .text()
                    .await
                    .ok()?;
                let n: Value = serde_json::from_str(&text).ok()?;
                (n["state"] == "failed").then_some((n, text))
            },
        )
        .await;
        assert_eq!(
            n.0["attempts"][0]["evidence"]["status"]
                .as_u64()
                .map(|s| s == 401 || s == 403),
            Some(true),
            "the refusal is recorded: {}",
            n.1
        );
        answers.push(n.1);
    }
    for path in ["/v1/notifications", "/metrics", "/readyz", "/openapi.json"] {
        let response = http
            .get(format!("{}{path}", herald.base))
            .bearer_auth(&api_token)
            .send()
            .await
            .unwrap();
        answers.push(response.text().await.unwrap());
    }
    let wrong = http
        .get(format!("{}/v1/notifications", herald.base))
        .bearer_auth(format!("{CANARY}-wrong"))
        .send()
        .await
        .unwrap();
    answers.push(wrong.text().await.unwrap());

    for answer in &answers {
        assert!(
            !answer.contains(CANARY) && !answer.contains(&webhook_secret),
            "an API answer leaks a secret: {answer}"
        );
    }
    let log = herald.log();
    assert!(log.lines().count() > 20, "the debug log was written: {log}");
    for line in log.lines() {
        assert!(
            !line.contains(CANARY) && !line.contains(&webhook_secret),
            "a log line leaks a secret: {line}"
        );
    }
    for (table, column) in [
        ("attempts", "evidence"),
        ("outbox", "data"),
        ("notifications", "content"),
        ("idempotency_keys", "response_body"),
    ] {
        let leaks = db
            .scalar(&format!(
                "SELECT count(*) FROM {table} WHERE {column} LIKE '%{CANARY}%'"
            ))
            .await;
        assert_eq!(leaks, 0, "{table}.{column} holds a secret");
    }
}
