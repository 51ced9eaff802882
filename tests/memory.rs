//! herald's memory under attachments, as it is deployed: a `herald serve` process (SQLite, its
//! default) inside a memory cgroup of the Kubernetes manifests' limit takes twenty enqueues at
//! once, each with a distinct 10 MiB PDF (the documented maximum), and sends them all. It is
//! never killed, every file reaches the vendor whole (by its ledger's SHA-256), and the peak the
//! cgroup measured is printed. The attachment budget (`[attachments] memory_bytes`) is what
//! holds it, with the allocator setting the image ships (glibc's mmap threshold, fixed): without
//! the budget the twenty enqueues alone need well over a gigabyte, and without the setting the
//! process keeps freed buffers (363 MiB at its peak, measured, against 205 with it).
//!
//! Needs root and the memory cgroup controller (v1 or v2), as CI has; without them the test
//! fails, or skips loudly where `HERALD_ALLOW_SKIP=1` asks for it.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use herald_provider::Attachment;
use reqwest::StatusCode;
use serde_json::{Value, json};

use support::binary::{HeraldProcess, free_port, show};
use support::{ACME, TempDir, eventually, http_client, must_run, test_config_text};

const SENDS: usize = 20;
const FILE_BYTES: usize = 10 * 1024 * 1024;

/// A memory cgroup of the test's own, removed when dropped (once its process has gone).
struct MemoryCgroup {
    dir: PathBuf,
    v2: bool,
}

impl MemoryCgroup {
    /// A new cgroup limited to `limit` bytes, or why there can be none here.
    fn new(limit: u64) -> Result<MemoryCgroup, String> {
        let name = format!("herald-test-{}", uuid::Uuid::new_v4().simple());
        let (root, v2) = if Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() {
            (PathBuf::from("/sys/fs/cgroup/memory"), false)
        } else if std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
        {
            (PathBuf::from("/sys/fs/cgroup"), true)
        } else {
            return Err("no memory cgroup controller".to_owned());
        };
        let dir = root.join(name);
        std::fs::create_dir(&dir).map_err(|e| format!("cannot make a cgroup (root?): {e}"))?;
        let cgroup = MemoryCgroup { dir, v2 };
        if v2 {
            cgroup.write("memory.max", &limit.to_string());
            cgroup.write("memory.swap.max", "0");
        } else {
            cgroup.write("memory.limit_in_bytes", &limit.to_string());
        }
        Ok(cgroup)
    }

    /// The file a process joins it by.
    fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    fn write(&self, file: &str, value: &str) {
        std::fs::write(self.dir.join(file), value)
            .unwrap_or_else(|e| panic!("write {value} to {file}: {e}"));
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join(file)).unwrap_or_default()
    }

    /// The most memory the cgroup's processes held at once, in bytes.
    fn peak(&self) -> u64 {
        let file = if self.v2 {
            "memory.peak"
        } else {
            "memory.max_usage_in_bytes"
        };
        self.read(file).trim().parse().unwrap_or(0)
    }

    /// How many times the kernel killed a process of the cgroup for memory.
    fn oom_kills(&self) -> u64 {
        let file = if self.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        self.read(file)
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The memory limit the Kubernetes manifests give herald, in bytes.
fn manifests_limit() -> u64 {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/postgres/deployment.yaml");
    let text = std::fs::read_to_string(path).expect("the manifests");
    // `limits: {memory: 256Mi}`
    let limit = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("limits:"))
        .and_then(|l| l.split_once("memory:"))
        .map(|(_, limit)| limit.trim().trim_end_matches('}').trim().to_owned())
        .expect("a memory limit");
    let mebibytes: u64 = limit
        .strip_suffix("Mi")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a limit in Mi: {limit}"));
    mebibytes * 1024 * 1024
}

/// The allocator settings the image (Containerfile) gives herald: the test runs herald as it
/// ships.
fn image_env() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("Containerfile");
    std::fs::read_to_string(path)
        .expect("the Containerfile")
        .lines()
        .filter_map(|l| l.strip_prefix("ENV MALLOC_"))
        .filter_map(|l| l.split_once('='))
        .map(|(name, value)| (format!("MALLOC_{name}"), value.trim().to_owned()))
        .collect()
}

/// Whether process `pid` is running (not gone, not a zombie waiting to be reaped).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| Some(stat.rsplit_once(')')?.1.trim_start().starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// A distinct PDF of `FILE_BYTES`: a header, then bytes no other file shares.
fn pdf(seed: usize) -> Vec<u8> {
    let mut content = b"%PDF-1.7\n".to_vec();
    let mut state = (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while content.len() < FILE_BYTES {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        content.extend_from_slice(&state.to_le_bytes());
    }
    content.truncate(FILE_BYTES);
    content
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_ten_mib_attachments_at_once_stay_inside_the_manifests_memory_limit() {
    let limit = manifests_limit();
    let cgroup = match MemoryCgroup::new(limit) {
        Ok(cgroup) => cgroup,
        Err(why) => {
            assert!(
                !must_run(),
                "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips): {why}"
            );
            eprintln!("\n*** MEMORY TEST SKIPPED: {why}\n");
            return;
        }
    };
    support::install_crypto();
    let vendor = support::plain_vendor("").await;
    let ledger = vendor.client().unwrap();
    let dir = TempDir::new("herald-memory");
    let listen = format!("127.0.0.1:{}", free_port());
    let route = format!(
        "[routes.mail]\nprovider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"plain\"\n\
         timeout_seconds = 10\n[channels]\nemail = \"mail\"\n",
        vendor.base_url()
    );
    let db = format!("sqlite://{}", dir.path().join("herald.db").display());
    let env = image_env();
    assert!(!env.is_empty(), "the image sets its allocator");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut herald = HeraldProcess::start_in_cgroup(
        &test_config_text(&db, &listen, &route),
        dir.path(),
        "herald",
        &env,
        &cgroup.procs(),
    )
    .await;
    assert!(
        cgroup
            .read("cgroup.procs")
            .lines()
            .any(|p| p.trim() == herald.pid().to_string()),
        "herald runs in the cgroup"
    );

    // Twenty clients at once, each retrying its own request (same key) while herald says busy.
    let http = http_client();
    let files: Vec<Attachment> = (0..SENDS)
        .map(|i| Attachment::describe(&format!("invoice-{i}.pdf"), "application/pdf", &pdf(i)))
        .collect();
    let pid = herald.pid();
    let enqueues = (0..SENDS).map(|i| {
        let (http, base) = (http.clone(), herald.base.clone());
        async move {
            let body = json!({
                "channel": "email", "to": format!("ada+{i}@example.com"),
                "subject": "Your invoice", "text": "Attached.",
                "attachments": [{"filename": format!("invoice-{i}.pdf"),
                                 "content_type": "application/pdf",
                                 "content": STANDARD.encode(pdf(i))}],
            })
            .to_string();
            let mut busy = 0;
            loop {
                let answer = http
                    .post(format!("{base}/v1/notifications"))
                    .bearer_auth(ACME)
                    .header("Idempotency-Key", format!("invoice-{i}"))
                    .header("Content-Type", "application/json")
                    .body(body.clone())
                    .send()
                    .await;
                // herald answers "busy" before it reads a body it has no room for, and closes
                // the connection then: the client may see the reset rather than the answer.
                // Either way it sends the same request again, as any client of an
                // idempotent API does (a killed herald is caught below).
                let Ok(answer) = answer else {
                    assert!(alive(pid), "herald was killed while it took the enqueues");
                    busy += 1;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                };
                match answer.status() {
                    StatusCode::ACCEPTED => {
                        let created: Value = answer.json().await.unwrap();
                        return (created["id"].as_str().unwrap().to_owned(), busy);
                    }
                    StatusCode::SERVICE_UNAVAILABLE => {
                        busy += 1;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    other => panic!("enqueue {i}: {other}: {}", answer.text().await.unwrap()),
                }
            }
        }
    });
    let enqueued = futures::future::join_all(enqueues).await;
    let busy: usize = enqueued.iter().map(|(_, busy)| busy).sum();
    for (id, _) in &enqueued {
        eventually("each invoice delivered", Duration::from_secs(180), || {
            let (http, base) = (http.clone(), herald.base.clone());
            async move {
                let n = show(&http, &base, id).await;
                match n["state"].as_str() {
                    Some("delivered") => Some(()),
                    Some("queued" | "sending") => None,
                    other => panic!("{id} ended {other:?}: {n:#}"),
                }
            }
        })
        .await;
    }

    assert!(herald.running(), "herald was killed:\n{}", herald.log());
    assert_eq!(
        cgroup.oom_kills(),
        0,
        "the kernel killed a process for memory"
    );
    let seen = ledger.ledger().await.unwrap();
    let mut arrived: Vec<&Attachment> = seen.attachments.values().flatten().collect();
    arrived.sort_by(|a, b| a.filename.cmp(&b.filename));
    let mut sent: Vec<&Attachment> = files.iter().collect();
    sent.sort_by(|a, b| a.filename.cmp(&b.filename));
    assert_eq!(arrived, sent, "every file reached the vendor whole");
    let peak = cgroup.peak();
    // The process's own peak (its resident set at most), apart from the page cache its
    // database file used, which the cgroup counts too but gives back under pressure.
    let hwm = std::fs::read_to_string(format!("/proc/{}/status", herald.pid()))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    eprintln!(
        "{SENDS} enqueues of a {} MiB attachment at once, and their sends, in a {} MiB cgroup: \
         peak {:.0} MiB in the cgroup's count (the process and the page cache its SQLite file \
         used), the process's own resident peak {:.0} MiB; {busy} answer(s) busy",
        FILE_BYTES >> 20,
        limit >> 20,
        peak as f64 / (1024.0 * 1024.0),
        hwm as f64 / 1024.0,
    );
    assert!(peak <= limit);
    herald.kill();
}
