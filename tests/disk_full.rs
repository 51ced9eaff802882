//! A full disk under SQLite, on a small tmpfs of the test's own (mounting one needs root; CI
//! runs as root, elsewhere the test skips loudly).
//!
//! While writes fail herald must refuse each request with a 503 that names the cause and asks
//! for a retry, and say on `/readyz` that it is not ready; once space is freed it must accept
//! and deliver again by itself, without a restart, and every notification it acknowledged
//! before, during or after the fault must be delivered.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use support::binary::{HeraldProcess, free_port};
use support::{ACME, TempDir, email, eventually, must_run, test_config_text};

/// Small enough to fill in a moment, large enough for herald's database to be created.
const TMPFS_SIZE: &str = "size=8m";
/// Enqueues tried on the full disk before the test gives up waiting for a refusal.
const MAX_ON_FULL_DISK: usize = 2_000;

/// A tmpfs mounted for the test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount() -> Option<Tmpfs> {
        let dir = std::env::temp_dir().join(format!("herald-full-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("create the mount point");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", TMPFS_SIZE, "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|status| status.success());
        if mounted {
            return Some(Tmpfs(dir));
        }
        let _ = std::fs::remove_dir(&dir);
        assert!(
            !must_run(),
            "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips) and a tmpfs cannot be mounted (is CI root?)"
        );
        eprintln!(
            "\n*** DISK-FULL TEST SKIPPED: mounting a tmpfs needs root; without HERALD_ALLOW_SKIP=1 this fails\n"
        );
        None
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Writes `path` until the file system has no space left.
fn fill(path: &Path) {
    let mut file = std::fs::File::create(path).expect("create the filler");
    let chunk = vec![0u8; 64 * 1024];
    loop {
        match file.write_all(&chunk).and_then(|()| file.sync_all()) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::StorageFull => break,
            Err(err) => panic!("filling the disk: {err}"),
        }
    }
    // The last chunk may have gone in part: write byte by byte until not one more fits.
    while file.write_all(&[0]).and_then(|()| file.sync_all()).is_ok() {}
}

async fn enqueue(http: &reqwest::Client, base: &str, key: &str) -> reqwest::Response {
    http.post(format!("{base}/v1/notifications"))
        .bearer_auth(ACME)
        .header("Idempotency-Key", key)
        .json(&email(&format!("{key}@example.com")))
        .send()
        .await
        .expect("herald answers")
}

async fn id_of(response: reqwest::Response) -> String {
    let body: Value = response.json().await.expect("a JSON answer");
    body["id"].as_str().expect("an id").to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_is_refused_with_its_cause_and_herald_recovers_by_itself_when_space_returns() {
    let Some(tmpfs) = Tmpfs::mount() else {
        return;
    };
    let dir = TempDir::new("herald-disk-full");
    let listen = format!("127.0.0.1:{}", free_port());
    let url = format!("sqlite://{}", tmpfs.0.join("herald.db").display());
    let extra = "[routes.sandbox]\nprovider = \"sandbox\"\ntimeout_seconds = 2\n\
                 [channels]\nemail = \"sandbox\"\n[dispatch]\nlease_seconds = 4\n";
    let herald = HeraldProcess::start(
        &test_config_text(&url, &listen, extra),
        dir.path(),
        "herald",
    )
    .await;
    let http = support::http_client();

    let mut acknowledged = Vec::new();
    for n in 0..5 {
        let response = enqueue(&http, &herald.base, &format!("before-{n}")).await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        acknowledged.push(id_of(response).await);
    }

    let filler = tmpfs.0.join("filler");
    fill(&filler);
    // SQLite may still find room in pages it holds already: enqueue until it runs out.
    let mut refused = None;
    for n in 0..MAX_ON_FULL_DISK {
        let key = format!("full-{n}");
        let response = enqueue(&http, &herald.base, &key).await;
        match response.status() {
            StatusCode::ACCEPTED => acknowledged.push(id_of(response).await),
            StatusCode::SERVICE_UNAVAILABLE => {
                refused = Some((key, response));
                break;
            }
            other => panic!(
                "on a full disk: {other} {}\n{}",
                response.text().await.unwrap_or_default(),
                herald.log()
            ),
        }
    }
    let (refused_key, response) = refused
        .unwrap_or_else(|| panic!("{MAX_ON_FULL_DISK} enqueues on a full disk, none refused"));
    assert!(
        response.headers().contains_key("retry-after"),
        "a refusal asks for a retry"
    );
    let problem: Value = response.json().await.unwrap();
    assert_eq!(
        problem["type"]
            .as_str()
            .map(|t| t.ends_with("/storage-full")),
        Some(true),
        "{problem}"
    );
    assert!(
        problem["detail"].as_str().unwrap().contains("disk"),
        "{problem}"
    );

    let ready = http
        .get(format!("{}/readyz", herald.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let ready: Value = ready.json().await.unwrap();
    assert!(
        ready["detail"].as_str().unwrap().contains("disk"),
        "{ready}"
    );

    std::fs::remove_file(&filler).expect("free the space");
    // The refused request, sent again with its key: nothing of it was stored, so it is new.
    let retried = eventually("enqueue to succeed again", Duration::from_secs(30), || {
        let (http, base, key) = (&http, &herald.base, &refused_key);
        async move {
            let response = enqueue(http, base, key).await;
            (response.status() == StatusCode::ACCEPTED).then_some(response)
        }
    })
    .await;
    acknowledged.push(id_of(retried).await);
    let ready = http
        .get(format!("{}/readyz", herald.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        ready.status(),
        StatusCode::OK,
        "ready again once writes succeed"
    );
    for n in 0..5 {
        let response = enqueue(&http, &herald.base, &format!("after-{n}")).await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        acknowledged.push(id_of(response).await);
    }

    eventually(
        "every acknowledged notification delivered",
        Duration::from_secs(60),
        || {
            let (http, base, ids) = (&http, &herald.base, &acknowledged);
            async move {
                for id in ids {
                    let n: Value = http
                        .get(format!("{base}/v1/notifications/{id}"))
                        .bearer_auth(ACME)
                        .send()
                        .await
                        .ok()?
                        .json()
                        .await
                        .ok()?;
                    if n["state"] != "delivered" {
                        return None;
                    }
                }
                Some(())
            }
        },
    )
    .await;
    eprintln!(
        "{} acknowledged (of which {} on the full disk before the first refusal), all delivered without a restart",
        acknowledged.len(),
        acknowledged.len() - 11
    );
    drop(herald);
}
