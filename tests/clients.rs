//! herald's clients, and the OpenAPI document they come from. `clients/` holds the document as
//! herald serves it, what two published generators nobody at herald wrote make of it
//! (openapi-python-client: `clients/python`; openapi-typescript: `clients/typescript/generated`)
//! and a small hand-written send for each that reuses the idempotency key on every retry and
//! honours `Retry-After`. These tests hold all of it to the running code:
//!
//! - the served document is the committed one, and each generator, run again on it (every
//!   warning an error), makes exactly what is committed: a change to the API that was not
//!   regenerated (`clients/regenerate`) fails here;
//! - the README's flow runs through each client against a real herald (enqueue with a key, read
//!   until the sandbox delivered it, replay the key, a token over its rate retried after its
//!   `Retry-After` with the same key), each answer parsing into its documented type, and what
//!   the clients saw is what herald stored;
//! - TypeScript's compiler checks the hand-written send against the generated types.
//!
//! Needs `openapi-python-client==0.29.1` with what its clients import (httpx, attrs,
//! python-dateutil), and in `NODE_PATH` openapi-typescript, openapi-fetch and typescript (the
//! versions `clients/typescript/package.json` pins); `.ci/run` installs them. Without them a test
//! says loudly that it was skipped; without `HERALD_ALLOW_SKIP=1` it fails instead.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use herald::domain::{NotificationId, State};
use serde_json::Value;

use support::{ACME, Backend, TempDir, TestApp, must_run, spawn_app_with};

/// The Python generator's version: another one may generate another module layout.
const GENERATOR_VERSION: &str = "0.29.1";

/// A token of the test tenant held to one notification a second, burst 1: its second send in a
/// row meets a 429 the clients must wait out.
const LIMITED: &str = "test-acme-limited-client-0123456789abcdef";

fn clients() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients")
}

/// Says loudly that the test is skipped for want of `missing`; fails instead under CI.
fn skipped(missing: &str) -> bool {
    assert!(
        !must_run(),
        "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips) and {missing}; .ci/run installs it"
    );
    eprintln!("\n*** CLIENT TEST SKIPPED: {missing}; without HERALD_ALLOW_SKIP=1 this fails\n");
    true
}

/// Whether the pinned Python generator and what its clients import are here.
fn python_missing() -> bool {
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
    match version {
        Some(v) if v.ends_with(GENERATOR_VERSION) && client_imports => false,
        Some(v) if client_imports => skipped(&format!("`{v}` is not {GENERATOR_VERSION}")),
        Some(_) | None if !client_imports => {
            skipped("python3 cannot import httpx, attrs and dateutil")
        }
        _ => skipped(&format!(
            "no openapi-python-client in PATH (pip install openapi-python-client=={GENERATOR_VERSION})"
        )),
    }
}

/// The `node_modules` that holds openapi-typescript, openapi-fetch and typescript, from
/// `NODE_PATH`; `None` (the test skipped) where it does not.
fn node_modules() -> Option<PathBuf> {
    let found = std::env::var("NODE_PATH").ok().and_then(|paths| {
        std::env::split_paths(&paths).find(|dir| {
            ["openapi-typescript", "openapi-fetch", "typescript"]
                .iter()
                .all(|package| dir.join(package).join("package.json").is_file())
        })
    });
    if found.is_none() {
        skipped(
            "NODE_PATH holds no node_modules with openapi-typescript, openapi-fetch and typescript",
        );
    }
    found
}

/// A herald on SQLite whose every channel goes to the built-in sandbox, with [`LIMITED`].
async fn herald() -> Option<TestApp> {
    spawn_app_with(
        Backend::Sqlite,
        &format!(
            "[[tokens]]\nname = \"acme-limited\"\ntenant = \"acme\"\nscopes = [\"send\", \"read\"]\n\
             secret = \"{LIMITED}\"\nroutes = [\"*\"]\nrate_limit_per_second = 1\nburst = 1\n"
        ),
    )
    .await
}

fn run(command: &mut Command, what: &str) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every file under `dir`, by its path inside it.
fn files(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut found = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "__pycache__") {
                    continue;
                }
                stack.push(path);
            } else {
                let inside = path.strip_prefix(dir).unwrap().to_path_buf();
                found.insert(inside, std::fs::read(&path).unwrap());
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committed_clients_are_what_the_generators_make_of_the_served_document() {
    let Some(app) = herald().await else {
        return;
    };
    let served: Value = app.public_json("/openapi.json").await;
    let committed: Value =
        serde_json::from_slice(&std::fs::read(clients().join("openapi.json")).unwrap()).unwrap();
    assert!(
        served == committed,
        "clients/openapi.json is not the document herald serves: run clients/regenerate"
    );
    app.stop().await;

    if !python_missing() {
        let dir = TempDir::new("herald-python-client");
        run(
            Command::new("openapi-python-client")
                .args(["generate", "--path"])
                .arg(clients().join("openapi.json"))
                .arg("--config")
                .arg(clients().join("python-generator.yml"))
                .arg("--output-path")
                .arg(dir.path().join("python"))
                .arg("--fail-on-warning"),
            "openapi-python-client",
        );
        let made = files(&dir.path().join("python"));
        let kept = files(&clients().join("python"));
        let differ: std::collections::BTreeSet<&PathBuf> = made
            .keys()
            .chain(kept.keys())
            .filter(|path| made.get(*path) != kept.get(*path))
            .collect();
        assert!(
            differ.is_empty(),
            "clients/python differs from what the generator makes (run clients/regenerate): {differ:?}"
        );
    }
    if let Some(modules) = node_modules() {
        let dir = TempDir::new("herald-typescript-client");
        let schema = dir.path().join("schema.d.ts");
        run(
            Command::new("node")
                .arg(modules.join("openapi-typescript/bin/cli.js"))
                .arg(clients().join("openapi.json"))
                .arg("-o")
                .arg(&schema),
            "openapi-typescript",
        );
        assert!(
            std::fs::read(&schema).unwrap()
                == std::fs::read(clients().join("typescript/generated/schema.d.ts")).unwrap(),
            "clients/typescript/generated/schema.d.ts differs from what openapi-typescript makes \
             (run clients/regenerate)"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_runs_the_readme_flow_and_retries_with_the_same_key() {
    if python_missing() {
        return;
    }
    let Some(app) = herald().await else {
        return;
    };
    let out = run(
        Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/client_flow.py"))
            .arg(clients().join("python"))
            .arg(clients().join("python_retry"))
            .args([&app.base, ACME, LIMITED])
            // Nothing compiled is left in the committed client.
            .env("PYTHONDONTWRITEBYTECODE", "1"),
        "client_flow.py",
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");

    // What the client saw is what herald stored: the replay named the first notification and
    // stored nothing, the delivery is the sandbox's, the cancelled one is cancelled, and the
    // retried send made one notification, not two.
    assert_eq!(seen["replayed_id"], seen["id"], "{seen}");
    assert_eq!(seen["limited_tries"], 2, "{seen}");
    assert_eq!(app.db.count("notifications").await, 4, "{seen}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_type_checks_runs_the_readme_flow_and_retries_with_the_same_key() {
    let Some(modules) = node_modules() else {
        return;
    };
    // The client as a user installs it: its files, with the packages it names beside them.
    let dir = TempDir::new("herald-typescript-flow");
    let root = dir.path();
    std::fs::create_dir(root.join("generated")).unwrap();
    let typescript = clients().join("typescript");
    for file in ["herald.mjs", "package.json", "generated/schema.d.ts"] {
        std::fs::copy(typescript.join(file), root.join(file)).unwrap();
    }
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/typescript/client_flow.mjs"),
        root.join("client_flow.mjs"),
    )
    .unwrap();
    std::os::unix::fs::symlink(&modules, root.join("node_modules")).unwrap();
    // The compiler holds the hand-written send to the generated types, as `npm run check` does.
    run(
        Command::new("node")
            .arg(modules.join("typescript/bin/tsc"))
            .args([
                "--noEmit",
                "--allowJs",
                "--checkJs",
                "--strict",
                "--module",
                "nodenext",
                "--moduleResolution",
                "nodenext",
                "--target",
                "es2022",
                "--skipLibCheck",
                "herald.mjs",
            ])
            .current_dir(root),
        "tsc",
    );

    let Some(app) = herald().await else {
        return;
    };
    let out = run(
        Command::new("node")
            .arg("client_flow.mjs")
            .args([&app.base, ACME, LIMITED])
            .current_dir(root),
        "client_flow.mjs",
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(seen["replayed_id"], seen["id"], "{seen}");
    assert_eq!(seen["limited_tries"], 2, "{seen}");
    // The first, and the two the limited token sent: the replay, the refusal and the 429 stored
    // nothing.
    assert_eq!(app.db.count("notifications").await, 3, "{seen}");
    let id = NotificationId::parse(seen["id"].as_str().unwrap()).unwrap();
    let delivered = app.store.notification("acme", id).await.unwrap();
    assert_eq!(delivered.notification.state, State::Delivered);
    app.stop().await;
}
