//! Secrets stay secret: credentials that vendors refuse, a webhook secret a receiver does not
//! know, and the API token itself appear in no log line (at debug level), no stored evidence,
//! no event and no API answer — neither as written nor in the base64 forms in which
//! credentials travel — while herald records what happened.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use secrecy::SecretString;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use support::binary::{HeraldProcess, free_port};
use support::{Backend, TempDir, TestDb, eventually, http_client};

/// Every secret in this test starts with this, so one search finds any of them.
const CANARY: &str = "canary-7f3a";
const TWILIO_SID: &str = "AC00000000000000000000000000000007";
const MAILJET_KEY: &str = "mj-key";
const SMTP_USER: &str = "herald-smtp";

/// A form in which a secret could show up, and its name for the failure message.
struct Needle {
    form: String,
    text: String,
}

/// Every form of this test's secrets to search for:
/// - as written: the canary that starts each secret, and the webhook secret as configured;
/// - as credentials travel: HTTP Basic `user:secret` (Twilio, Mailjet) and SMTP AUTH PLAIN
///   `\0user\0secret`, base64-encoded;
/// - the canary inside any base64 at all (AUTH LOGIN's password alone, any blob holding a
///   secret): see [`base64_cores`].
fn needles(
    twilio_token: &str,
    mailjet_secret: &str,
    smtp_password: &str,
    webhook_secret: &str,
) -> Vec<Needle> {
    let needle = |form: &str, text: String| Needle {
        form: form.to_owned(),
        text,
    };
    let mut needles = vec![
        needle("the canary", CANARY.to_owned()),
        needle("the webhook secret", webhook_secret.to_owned()),
        needle(
            "Twilio's HTTP Basic credentials",
            STANDARD.encode(format!("{TWILIO_SID}:{twilio_token}")),
        ),
        needle(
            "Mailjet's HTTP Basic credentials",
            STANDARD.encode(format!("{MAILJET_KEY}:{mailjet_secret}")),
        ),
        needle(
            "the SMTP AUTH PLAIN credentials",
            STANDARD.encode(format!("\0{SMTP_USER}\0{smtp_password}")),
        ),
    ];
    for (form, core) in base64_cores(CANARY) {
        needles.push(needle(&format!("the canary in base64, {form}"), core));
    }
    needles
}

/// What any base64 text that encodes `secret` (whatever bytes surround it) must contain, and
/// where from. Base64 writes 3 bytes as 4 characters of 6 bits each, so the characters that
/// `secret` alone decides depend on its offset modulo 3: for each offset, those characters, in
/// the standard and the URL-safe alphabet.
fn base64_cores(secret: &str) -> Vec<(String, String)> {
    let mut cores: Vec<(String, String)> = Vec::new();
    for offset in 0..3 {
        let mut bytes = vec![0u8; offset];
        bytes.extend_from_slice(secret.as_bytes());
        // Skip the characters that hold bits of the bytes before; stop before the one that
        // would hold bits of the byte after.
        let (from, to) = ((8 * offset).div_ceil(6), 8 * bytes.len() / 6);
        for (alphabet, engine) in [("standard", STANDARD_NO_PAD), ("URL-safe", URL_SAFE_NO_PAD)] {
            let core = engine.encode(&bytes)[from..to].to_owned();
            if !cores.iter().any(|(_, c)| *c == core) {
                let form = format!("at offset {offset} mod 3, {alphabet} alphabet");
                cores.push((form, core));
            }
        }
    }
    cores
}

/// The forms of `needles` that `text` holds.
fn leaks<'a>(text: &str, needles: &'a [Needle]) -> Vec<&'a str> {
    needles
        .iter()
        .filter(|n| text.contains(&n.text))
        .map(|n| n.form.as_str())
        .collect()
}

/// An SMTP server on loopback that offers AUTH PLAIN and LOGIN and refuses every credential
/// (`535 5.7.8`). It keeps the lines it read, so that the test knows in which form the
/// password travelled.
async fn refusing_smtp_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let kept = heard.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let heard = kept.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                write.write_all(b"220 refuser ESMTP\r\n").await?;
                while let Some(line) = lines.next_line().await? {
                    heard.lock().unwrap().push(line.clone());
                    let verb = line
                        .split(' ')
                        .next()
                        .unwrap_or_default()
                        .to_ascii_uppercase();
                    let reply: &[u8] = match verb.as_str() {
                        "EHLO" => b"250-refuser\r\n250 AUTH PLAIN LOGIN\r\n",
                        "AUTH" => b"535 5.7.8 Authentication credentials invalid\r\n",
                        "QUIT" => b"221 2.0.0 Bye\r\n",
                        _ => b"530 5.7.0 Authentication required\r\n",
                    };
                    write.write_all(reply).await?;
                    if verb == "QUIT" {
                        break;
                    }
                }
                Ok::<_, std::io::Error>(())
            });
        }
    });
    (port, heard)
}

#[test]
fn the_base64_search_finds_a_secret_at_any_offset_in_either_alphabet() {
    let needles = needles("t", "s", "p", "whsec_x");
    for before in ["", "u", "us", "use", "user:", "\0user\0"] {
        for after in ["", "!", "-token", "-token\n"] {
            let data = format!("{before}{CANARY}{after}");
            for encoded in [STANDARD.encode(&data), URL_SAFE_NO_PAD.encode(&data)] {
                assert!(
                    !leaks(&encoded, &needles).is_empty(),
                    "{data:?} encoded as {encoded} escapes the search"
                );
            }
        }
    }
}

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
        TWILIO_SID,
        SecretString::from("the-right-token"),
    ))
    .await
    .unwrap();
    let mailjet = herald_mailjet::fake::spawn(herald_mailjet::fake::FakeConfig::new(
        MAILJET_KEY,
        SecretString::from("the-right-secret"),
    ))
    .await
    .unwrap();
    let (smtp_port, smtp_heard) = refusing_smtp_server().await;
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
    let twilio_token = format!("{CANARY}-twilio-auth-token");
    let token_file = dir.path().join("twilio-token");
    std::fs::write(&token_file, format!("{twilio_token}\n")).unwrap();
    let mailjet_secret = format!("{CANARY}-mailjet-secret");
    let smtp_password = format!("{CANARY}-smtp-password");
    let api_token = format!("{CANARY}-api-token-0123456789abcdef");
    let needles = needles(
        &twilio_token,
        &mailjet_secret,
        &smtp_password,
        &webhook_secret,
    );

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
routes = ["*"]

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
account_sid = "{TWILIO_SID}"
auth_token = {{ file = "{token_file}" }}
from = "+15005550006"
visibility_lag_ms = 500
timeout_seconds = 2

[routes.mailjet]
provider = "mailjet"
base_url = "{mailjet}"
api_key = "{MAILJET_KEY}"
api_secret = "{mailjet_secret}"
from = "noreply@acme.example"
visibility_lag_ms = 500
timeout_seconds = 2

[routes.smtp]
provider = "smtp"
host = "127.0.0.1"
port = {smtp_port}
tls = "none"
username = "{SMTP_USER}"
password = {{ env = "HERALD_TEST_CANARY_SMTP" }}
from = "noreply@acme.example"
timeout_seconds = 2

[routes.webhook]
provider = "webhook"
secrets = ["{webhook_secret}"]
allow_private_networks = true
tenants = ["acme"]
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
        ("HERALD_TEST_CANARY_SMTP", smtp_password.as_str()),
    ];
    let herald = HeraldProcess::start_with_env(&config, dir.path(), "herald", &env).await;

    let http = http_client();
    // Each body with the refusals its vendor may answer (HTTP status, or SMTP reply code).
    let (http_refusal, smtp_refusal): (&[u64], &[u64]) = (&[401, 403], &[535]);
    let bodies = [
        (
            json!({"channel": "email", "to": "ada@example.com", "subject": "s", "text": "t"}),
            http_refusal,
        ),
        (
            json!({"channel": "email", "route": "mailjet", "to": "ada@example.com", "subject": "s", "text": "t"}),
            http_refusal,
        ),
        (
            json!({"channel": "sms", "to": "+14155550100", "text": "t"}),
            http_refusal,
        ),
        (
            json!({"channel": "push", "to": "device-1", "text": "t"}),
            http_refusal,
        ),
        (
            json!({"channel": "webhook", "to": format!("{}/hook", receiver.base_url()), "payload": {"a": 1}}),
            http_refusal,
        ),
        (
            json!({"channel": "email", "route": "smtp", "to": "ada@example.com", "subject": "s", "text": "t"}),
            smtp_refusal,
        ),
    ];
    let mut answers = Vec::new();
    let mut ids = Vec::new();
    for (i, (body, _)) in bodies.iter().enumerate() {
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
    for (id, (_, refusals)) in ids.iter().zip(&bodies) {
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
        let status = n.0["attempts"][0]["evidence"]["status"].as_u64();
        assert!(
            status.is_some_and(|s| refusals.contains(&s)),
            "the refusal is recorded: {}",
            n.1
        );
        answers.push(n.1);
    }
    // The credentials went out in the forms searched for below.
    assert!(
        twilio
            .received()
            .iter()
            .any(|r| r.basic_user.as_deref() == Some(TWILIO_SID)),
        "Twilio's credentials went out as HTTP Basic"
    );
    assert!(
        mailjet
            .received()
            .iter()
            .any(|r| r.basic_user.as_deref() == Some(MAILJET_KEY)),
        "Mailjet's credentials went out as HTTP Basic"
    );
    let auth_plain = format!(
        "AUTH PLAIN {}",
        STANDARD.encode(format!("\0{SMTP_USER}\0{smtp_password}"))
    );
    let heard = smtp_heard.lock().unwrap().clone();
    assert!(
        heard.contains(&auth_plain),
        "the SMTP password went out as AUTH PLAIN: {heard:?}"
    );
    for path in [
        "/v1/notifications",
        "/v1/routes",
        "/metrics",
        "/readyz",
        "/openapi.json",
    ] {
        let response = http
            .get(format!("{}{path}", herald.base))
            .bearer_auth(&api_token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        answers.push(response.text().await.unwrap());
    }
    let routes: Value = serde_json::from_str(&answers[answers.len() - 4]).unwrap();
    assert!(
        routes["data"].as_array().unwrap().len() >= 4,
        "every vendor's route is listed, so its answer was searched: {routes}"
    );
    let wrong = http
        .get(format!("{}/v1/notifications", herald.base))
        .bearer_auth(format!("{CANARY}-wrong"))
        .send()
        .await
        .unwrap();
    answers.push(wrong.text().await.unwrap());

    for answer in &answers {
        let found = leaks(answer, &needles);
        assert!(found.is_empty(), "an API answer leaks {found:?}: {answer}");
    }
    let log = herald.log();
    assert!(log.lines().count() > 20, "the debug log was written: {log}");
    for line in log.lines() {
        let found = leaks(line, &needles);
        assert!(found.is_empty(), "a log line leaks {found:?}: {line}");
    }
    for (table, column) in [
        ("attempts", "evidence"),
        ("outbox", "data"),
        ("notifications", "content"),
        ("idempotency_keys", "response_body"),
    ] {
        let texts = db
            .texts(&format!("SELECT CAST({column} AS TEXT) FROM {table}"))
            .await;
        assert!(!texts.is_empty(), "{table} has rows to search");
        for text in &texts {
            let found = leaks(text, &needles);
            assert!(found.is_empty(), "{table}.{column} leaks {found:?}: {text}");
        }
    }
}
