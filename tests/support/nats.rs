//! NATS JetStream for the event tests: the shared server on 127.0.0.1:4222 (which `.ci/run`
//! starts), names of a test's own so that parallel tests never share a stream, readers of what
//! a stream holds and of every raw publish, and a server of a test's own to stop and start.
//!
//! Without a reachable server the tests fail, or, where `HERALD_ALLOW_SKIP=1` asks for it,
//! say loudly that they were skipped.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use futures::StreamExt;
use serde_json::Value;

use super::{TempDir, eventually, must_run};

pub const SHARED_URL: &str = "nats://127.0.0.1:4222";
const NATS_SERVER: &str = "/usr/sbin/nats-server";

/// A client of the shared server, or `None` (a loud skip) where it is down outside CI.
pub async fn shared() -> Option<async_nats::Client> {
    match async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(2))
        .connect(SHARED_URL)
        .await
    {
        Ok(client) => Some(client),
        Err(err) if !must_run() => {
            eprintln!(
                "\n*** NATS TEST SKIPPED: cannot reach {SHARED_URL}: {err}\n*** start nats-server -js (bash .ci/run does); without HERALD_ALLOW_SKIP=1 this fails\n"
            );
            None
        }
        Err(err) => panic!(
            "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips) and NATS is unreachable at {SHARED_URL}: {err}"
        ),
    }
}

/// Stream and subject names of one test's own.
pub struct Names {
    /// herald's stream and subject prefix (the relay's sink).
    pub stream: String,
    pub prefix: String,
    /// The upstream stream and its subjects' root (the inbox).
    pub upstream: String,
    pub upstream_root: String,
}

impl Names {
    pub fn new() -> Names {
        let unique = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        Names {
            stream: format!("HERALD_{unique}"),
            prefix: format!("herald{unique}"),
            upstream: format!("UPSTREAM_{unique}"),
            upstream_root: format!("academy{unique}"),
        }
    }

    /// A `[sinks.NAME]` table publishing to this test's stream at `url`.
    pub fn sink(&self, name: &str, url: &str) -> String {
        format!(
            "[sinks.{name}]\nkind = \"nats\"\nurl = \"{url}\"\nstream = \"{}\"\nsubject_prefix = \"{}\"\n",
            self.stream, self.prefix
        )
    }

    /// An `[inbox.nats]` table consuming this test's upstream stream at `url` for `tenant`.
    pub fn inbox(&self, url: &str, tenant: &str) -> String {
        format!(
            "[inbox.nats]\nurl = \"{url}\"\nstream = \"{}\"\nsubjects = [\"{}.>\"]\ndurable = \"herald\"\ntenant = \"{tenant}\"\n",
            self.upstream, self.upstream_root
        )
    }
}

/// One message a stream holds.
#[derive(Debug, Clone)]
pub struct Stored {
    pub subject: String,
    pub msg_id: Option<String>,
    pub event: Value,
}

/// Everything `stream` holds, in order; empty if the stream does not exist yet.
pub async fn stored(client: &async_nats::Client, stream: &str) -> Vec<Stored> {
    let jetstream = jetstream::new(client.clone());
    let Ok(mut stream) = jetstream.get_stream(stream).await else {
        return Vec::new();
    };
    let state = stream.info().await.expect("stream info").state.clone();
    let mut out = Vec::new();
    if state.messages == 0 {
        return out;
    }
    for sequence in state.first_sequence..=state.last_sequence {
        let Ok(message) = stream.get_raw_message(sequence).await else {
            continue;
        };
        out.push(Stored {
            subject: message.subject.to_string(),
            msg_id: message
                .headers
                .get("Nats-Msg-Id")
                .map(|v| v.as_str().to_owned()),
            event: serde_json::from_slice(&message.payload).expect("a JSON event"),
        });
    }
    out
}

/// Counts every message published on `subjects` by its `Nats-Msg-Id`, duplicates included:
/// a core subscription sees each publish, whatever JetStream then kept.
pub struct RawPublishes {
    counts: Arc<Mutex<HashMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RawPublishes {
    pub async fn watch(client: &async_nats::Client, subjects: &str) -> RawPublishes {
        let mut subscriber = client
            .subscribe(subjects.to_owned())
            .await
            .expect("subscribe");
        client.flush().await.expect("flush the subscription");
        let counts: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let task = tokio::spawn({
            let counts = counts.clone();
            async move {
                while let Some(message) = subscriber.next().await {
                    let id = message
                        .headers
                        .as_ref()
                        .and_then(|h| h.get("Nats-Msg-Id"))
                        .map(|v| v.as_str().to_owned())
                        .unwrap_or_default();
                    *counts.lock().unwrap().entry(id).or_default() += 1;
                }
            }
        });
        RawPublishes { counts, task }
    }

    pub fn counts(&self) -> HashMap<String, usize> {
        self.counts.lock().unwrap().clone()
    }
}

impl Drop for RawPublishes {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A JetStream server of the test's own, on a free port with its own store: stopped and
/// started without touching the shared one.
pub struct OwnServer {
    child: Option<Child>,
    pub port: u16,
    dir: TempDir,
}

impl OwnServer {
    /// `None` (a loud skip) where there is no nats-server binary outside CI.
    pub async fn start() -> Option<OwnServer> {
        if !Path::new(NATS_SERVER).exists() {
            assert!(
                !must_run(),
                "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips) and {NATS_SERVER} is missing"
            );
            eprintln!(
                "\n*** NATS OUTAGE TEST SKIPPED: no {NATS_SERVER}; without HERALD_ALLOW_SKIP=1 this fails\n"
            );
            return None;
        }
        let mut server = OwnServer {
            child: None,
            port: super::binary::free_port(),
            dir: TempDir::new("herald-nats"),
        };
        server.resume().await;
        Some(server)
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server again (same port, same store) and waits until it takes connections.
    pub async fn resume(&mut self) {
        let store = self.dir.path().join("store");
        let log = std::fs::File::create(self.dir.path().join("nats.log")).expect("a log file");
        self.child = Some(
            Command::new(NATS_SERVER)
                .args([
                    "-a",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-js",
                    "-sd",
                ])
                .arg(&store)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("clone the log handle"))
                .stderr(log)
                .spawn()
                .expect("start nats-server"),
        );
        let url = self.url();
        eventually(
            "our nats-server to take connections",
            Duration::from_secs(20),
            || {
                let url = url.clone();
                async move { async_nats::connect(url).await.ok().map(drop) }
            },
        )
        .await;
    }

    /// Kills the server: connections drop, nothing is flushed politely.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.stop();
    }
}
