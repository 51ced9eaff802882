//! The OpenAPI document is a promise too (CONTRACT.md, "Operations": `GET /openapi.json`).
//! Schemathesis reads it from a live herald, generates valid and invalid requests for every
//! operation, and checks that no answer is a 5xx and every answer matches its documented schema.
//!
//! Needs the schemathesis CLI (`pip install schemathesis==4.32.5`; `.ci/run` installs it).
//! Without it the test says loudly that it was skipped; with `CI=true` it fails instead.

mod support;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use support::binary::{HeraldProcess, free_port};
use support::{Backend, TempDir, TestDb, in_ci, test_config_text};

/// Generated cases per operation and phase: enough to explore, few enough for every test run.
const MAX_EXAMPLES: &str = "30";
/// The whole run; schemathesis usually needs a few seconds.
const TIME_BOUND: Duration = Duration::from_secs(300);
const TOKEN: &str = "test-schemathesis-all-scopes";

/// A token with every scope, so that no operation is out of the fuzzer's reach.
const FUZZ_TOKEN: &str = r#"
[[tokens]]
name = "schemathesis"
tenant = "fuzz"
scopes = ["send", "read", "review", "admin"]
secret = "test-schemathesis-all-scopes"
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
            !in_ci(),
            "CI=true and the schemathesis CLI is not in PATH (pip install schemathesis==4.32.5)"
        );
        eprintln!(
            "\n*** SCHEMATHESIS TEST SKIPPED: no `schemathesis` or `st` in PATH \
             (pip install schemathesis==4.32.5); with CI=true this fails\n"
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

    // Output to a file, so that it can be shown even when the run is cut at the time bound.
    let output_path = dir.path().join("schemathesis.out");
    let output = std::fs::File::create(&output_path).unwrap();
    let mut child = tokio::process::Command::new(&cli)
        .arg("--no-color")
        .arg("run")
        .arg(format!("{}/openapi.json", herald.base))
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--checks", "not_a_server_error,response_schema_conformance"])
        .args(["--max-examples", MAX_EXAMPLES])
        .args(["--request-timeout", "10"])
        // Its example database (.hypothesis/) and any report land in the temp dir.
        .current_dir(dir.path())
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
        Ok(Ok(status)) if status.success() => println!("{output}"),
        Ok(Ok(status)) => panic!(
            "schemathesis found problems ({status}):\n{output}\n--- herald log ---\n{}",
            herald.log()
        ),
        Ok(Err(err)) => panic!("schemathesis could not run: {err}"),
        Err(_) => panic!("schemathesis took more than {TIME_BOUND:?}:\n{output}"),
    }
}
