//! The OpenAPI document is a promise too (`GET /openapi.json`).
//! Schemathesis reads it from a live herald, generates valid and invalid requests for every
//! operation, and checks that no answer is a 5xx and every answer matches its documented schema.
//!
//! Needs the schemathesis CLI (`pip install schemathesis==4.32.5`; `.ci/run` installs it).
//! Without it the test says loudly that it was skipped; without `HERALD_ALLOW_SKIP=1` it fails instead.

mod support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use support::binary::{HeraldProcess, free_port};
use support::{Backend, TempDir, TestDb, eventually, http_client, must_run, test_config_text};

/// Generated cases per operation and phase: enough to explore, few enough for every test run.
const MAX_EXAMPLES: &str = "30";
/// Each run: about half a minute alone, nearly three beside two crash runs on two cores.
const TIME_BOUND: Duration = Duration::from_secs(300);
const TOKEN: &str = "test-schemathesis-all-scopes-0123456789";

/// A token with every scope, and the route its tenant operates, so that no operation is out of
/// the fuzzer's reach.
const FUZZ_TOKEN: &str = r#"
[[tokens]]
name = "schemathesis"
tenant = "fuzz"
scopes = ["send", "read", "review", "admin"]
secret = "test-schemathesis-all-scopes-0123456789"
routes = ["*"]

# The in-process sandbox, operated by the fuzzer's tenant so that it may pause and resume it.
[routes.sandbox]
provider = "sandbox"
operated_by = "fuzz"

[channels]
email = "sandbox"
sms = "sandbox"
push = "sandbox"
webhook = "sandbox"
chat = "sandbox"
"#;

/// `schemathesis` or its short name `st`, from `PATH`.
fn schemathesis_cli() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["schemathesis", "st"].iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| {
                std::process::Command::new(candidate)
                    .arg("--version")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_and_no_answer_that_breaks_the_schema() {
    let Some(cli) = schemathesis_cli() else {
        assert!(
            !must_run(),
            "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips) and the schemathesis CLI is not in PATH (pip install schemathesis==4.32.5)"
        );
        eprintln!(
            "\n*** SCHEMATHESIS TEST SKIPPED: no `schemathesis` or `st` in PATH \
             (pip install schemathesis==4.32.5); without HERALD_ALLOW_SKIP=1 this fails\n"
        );
        return;
    };
    let db = TestDb::new(Backend::Sqlite)
        .await
        .expect("SQLite needs no server");
    let dir = TempDir::new("herald-schemathesis");
    let listen = format!("127.0.0.1:{}", free_port());
    let herald = HeraldProcess::start(
        &test_config_text(&db.url, &listen, FUZZ_TOKEN),
        dir.path(),
        "herald",
    )
    .await;

    // First run: everything generated, path ids included (they mostly meet 404s).
    run(&cli, dir.path(), &herald, "unconstrained", &[]).await;

    // Second run: the same, with the `{id}` operations pointed at real notifications, so that
    // their 200 bodies (attempts included) and the list's items are checked against the schema
    // too. A separate run, so that the first one still fuzzes the ids themselves.
    let http = http_client();
    let enqueue = |key: &'static str, body: Value| {
        let (http, url) = (http.clone(), format!("{}/v1/notifications", herald.base));
        async move {
            let response = http
                .post(url)
                .bearer_auth(TOKEN)
                .header("Idempotency-Key", key)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::ACCEPTED, "seeding {key}");
            let body: Value = response.json().await.unwrap();
            body["id"].as_str().unwrap().to_owned()
        }
    };
    // The fuzzer holds the admin scope, so it may have paused the one route: resume it (a 409
    // says it was not paused) before seeding what the dispatcher must try.
    let resumed = http
        .post(format!("{}/v1/routes/sandbox/resume", herald.base))
        .bearer_auth(TOKEN)
        .json(&json!({"note": "after the fuzzer"}))
        .send()
        .await
        .unwrap();
    assert!(
        matches!(resumed.status(), StatusCode::OK | StatusCode::CONFLICT),
        "{}",
        resumed.status()
    );
    let later = json!({"channel": "email", "to": "ada@example.com", "subject": "Later",
        "text": "t", "send_at": "2999-01-01T00:00:00Z", "metadata": {"case": "queued"}});
    let queued = enqueue("seed-queued", later.clone()).await;
    let cancelled = enqueue("seed-cancelled", later).await;
    let sent = enqueue(
        "seed-sent",
        json!({"channel": "sms", "to": "+14155550100", "text": "Your code is 123456"}),
    )
    .await;
    let response = http
        .post(format!(
            "{}/v1/notifications/{cancelled}/cancel",
            herald.base
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    eventually(
        "the dispatcher to try the seeded sms",
        Duration::from_secs(30),
        || {
            let (http, url) = (
                http.clone(),
                format!("{}/v1/notifications/{sent}", herald.base),
            );
            async move {
                let shown: Value = http
                    .get(url)
                    .bearer_auth(TOKEN)
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                shown["attempts"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
                    .then_some(())
            }
        },
    )
    .await;
    let config = dir.path().join("seeded.toml");
    std::fs::write(
        &config,
        format!(
            "[[operations]]\ninclude-name = \"GET /v1/notifications/{{id}}\"\n\
             parameters = {{ \"path.id\" = \"{sent}\" }}\n\n\
             [[operations]]\ninclude-name = \"POST /v1/notifications/{{id}}/cancel\"\n\
             parameters = {{ \"path.id\" = \"{queued}\" }}\n"
        ),
    )
    .unwrap();
    run(
        &cli,
        dir.path(),
        &herald,
        "seeded",
        &["--config-file".as_ref(), config.as_os_str()],
    )
    .await;
}

/// Runs schemathesis against `herald` and panics, with its output, unless it passes in time.
/// `global` goes before `run` (schemathesis' global options, such as `--config-file`).
async fn run(cli: &Path, dir: &Path, herald: &HeraldProcess, label: &str, global: &[&OsStr]) {
    // Output to a file, so that it can be shown even when the run is cut at the time bound.
    let output_path = dir.join(format!("schemathesis-{label}.out"));
    let output = std::fs::File::create(&output_path).unwrap();
    let mut child = tokio::process::Command::new(cli)
        .arg("--no-color")
        .args(global)
        .arg("run")
        .arg(format!("{}/openapi.json", herald.base))
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--checks", "not_a_server_error,response_schema_conformance"])
        .args(["--max-examples", MAX_EXAMPLES])
        .args(["--request-timeout", "10"])
        // Its example database (.hypothesis/) and any report land in the temp dir, and no
        // schemathesis.toml of a parent directory applies.
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "120")
        .stdin(Stdio::null())
        .stdout(output.try_clone().unwrap())
        .stderr(output)
        .kill_on_drop(true)
        .spawn()
        .expect("start schemathesis");
    let status = tokio::time::timeout(TIME_BOUND, child.wait()).await;
    let output = std::fs::read_to_string(&output_path).unwrap_or_default();
    match status {
        Ok(Ok(status)) if status.success() => println!("--- schemathesis, {label} ---\n{output}"),
        Ok(Ok(status)) => panic!(
            "schemathesis ({label}) found problems ({status}):\n{output}\n--- herald log ---\n{}",
            herald.log()
        ),
        Ok(Err(err)) => panic!("schemathesis could not run: {err}"),
        Err(_) => panic!("schemathesis ({label}) took more than {TIME_BOUND:?}:\n{output}"),
    }
}
