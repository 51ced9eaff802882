//! The OpenAPI document must serve the people who generate clients from it, not only
//! validators: openapi-python-client (a published generator nobody at herald wrote) generates a
//! client from the live `/openapi.json`, with every warning an error, and the README's flow runs
//! through it: enqueue with an idempotency key, read it back until the sandbox route delivered
//! it, list, replay the key, cancel. Each answer must parse into its documented type.
//!
//! Needs `openapi-python-client==0.29.1` (its CLI, and `python3` with the packages a generated
//! client imports: httpx, attrs, python-dateutil); `.ci/run` installs them. Without them the test
//! says loudly that it was skipped; without `HERALD_ALLOW_SKIP=1` it fails instead. The client is generated into
//! a temp dir at every run.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use herald::domain::{NotificationId, State};
use serde_json::Value;

use support::{ACME, Backend, TempDir, must_run, spawn_app_with};

/// The generator's version: another one may generate another module layout.
const GENERATOR_VERSION: &str = "0.29.1";

/// The generator's settings: a fixed package name for the flow script to import, and no
/// formatting hooks (they would need ruff, and change nothing the flow checks).
const GENERATOR_CONFIG: &str = "project_name_override: herald-client
package_name_override: herald_client
post_hooks: []
";

/// Whether the pinned generator and what its clients import are here; panics under CI when
/// they are not.
fn generator_present() -> bool {
    let version = Command::new("openapi-python-client")
        .arg("--version")
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    let client_imports = Command::new("python3")
        .args(["-c", "import httpx, attrs, dateutil"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let missing = match version {
        Some(v) if v.ends_with(GENERATOR_VERSION) && client_imports => return true,
        Some(v) if client_imports => format!("`{v}` is not {GENERATOR_VERSION}"),
        Some(_) | None if !client_imports => {
            "python3 cannot import httpx, attrs and dateutil".to_owned()
        }
        _ => "no openapi-python-client in PATH".to_owned(),
    };
    assert!(
        !must_run(),
        "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips) and {missing} (pip install openapi-python-client=={GENERATOR_VERSION})"
    );
    eprintln!(
        "\n*** OPENAPI CLIENT TEST SKIPPED: {missing} (pip install \
         openapi-python-client=={GENERATOR_VERSION}); without HERALD_ALLOW_SKIP=1 this fails\n"
    );
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_python_client_runs_the_readme_flow() {
    if !generator_present() {
        return;
    }
    // Dispatch on, routes left out: every channel goes to the built-in sandbox vendor.
    let Some(app) = spawn_app_with(Backend::Sqlite, "").await else {
        return;
    };
    let dir = TempDir::new("herald-openapi-client");
    let spec: Value = app.public_json("/openapi.json").await;
    std::fs::write(dir.path().join("openapi.json"), spec.to_string()).unwrap();
    std::fs::write(dir.path().join("generator.yml"), GENERATOR_CONFIG).unwrap();
    generate(dir.path());

    let out = tokio::process::Command::new("python3")
        .arg(format!(
            "{}/tests/python/openapi_client_flow.py",
            env!("CARGO_MANIFEST_DIR")
        ))
        .arg(dir.path())
        .args([&app.base, ACME])
        .output()
        .await
        .expect("run openapi_client_flow.py");
    assert!(
        out.status.success(),
        "the generated client's flow failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");

    // What the client saw is what herald stored: the replay named the first notification and
    // stored nothing, the delivery is the sandbox's, the cancelled one is cancelled.
    assert_eq!(seen["replayed_id"], seen["id"], "{seen}");
    assert_eq!(app.db.count("notifications").await, 2, "{seen}");
    let stored = |key: &str| {
        let id = NotificationId::parse(seen[key].as_str().unwrap()).unwrap();
        let store = app.store.clone();
        async move { store.notification("acme", id).await.unwrap() }
    };
    let delivered = stored("id").await;
    let refs: Vec<_> = delivered
        .attempts
        .iter()
        .map(|a| a.provider_ref.as_deref())
        .collect();
    assert_eq!(refs, [seen["delivered_provider_ref"].as_str()]);
    assert_eq!(
        stored("cancelled_id").await.notification.state,
        State::Cancelled
    );
    assert!(
        seen["cancel_again_type"]
            .as_str()
            .is_some_and(|t| t.ends_with("/conflict")),
        "{seen}"
    );
    app.stop().await;
}

/// Generates the client into `dir/herald_client`, failing on any warning: a warning means a
/// part of the document the generator could not use, and so left out of the client.
fn generate(dir: &Path) {
    let out = Command::new("openapi-python-client")
        .args([
            "generate",
            "--path",
            "openapi.json",
            "--config",
            "generator.yml",
        ])
        .args(["--meta", "none", "--output-path", "herald_client"])
        .arg("--fail-on-warning")
        .current_dir(dir)
        .output()
        .expect("run openapi-python-client");
    assert!(
        out.status.success(),
        "openapi-python-client could not use the document:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
