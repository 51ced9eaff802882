//! The processes a bench runs: `herald serve` and the sandbox vendor as children, their logs,
//! and a receiver for the spans herald exports.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

use super::{Children, TOKEN};

/// An OTLP/HTTP trace receiver (`POST /v1/traces`, protobuf) that counts the spans it is sent
/// and keeps nothing.
pub(super) struct TraceSink {
    pub(super) endpoint: String,
    pub(super) spans: Arc<AtomicUsize>,
    pub(super) task: tokio::task::JoinHandle<()>,
}

impl TraceSink {
    pub(super) async fn start() -> anyhow::Result<TraceSink> {
        use opentelemetry_proto::tonic::collector::trace::v1::{
            ExportTraceServiceRequest, ExportTraceServiceResponse,
        };
        use prost::Message as _;

        let spans = Arc::new(AtomicUsize::new(0));
        let counted = spans.clone();
        let receive = move |body: axum::body::Bytes| {
            let counted = counted.clone();
            async move {
                let Ok(export) = ExportTraceServiceRequest::decode(body) else {
                    return Err(axum::http::StatusCode::BAD_REQUEST);
                };
                let n: usize = export
                    .resource_spans
                    .iter()
                    .flat_map(|resource| &resource.scope_spans)
                    .map(|scope| scope.spans.len())
                    .sum();
                counted.fetch_add(n, Ordering::Relaxed);
                Ok((
                    [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")],
                    ExportTraceServiceResponse::default().encode_to_vec(),
                ))
            }
        };
        let router = axum::Router::new().route("/v1/traces", axum::routing::post(receive));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(TraceSink {
            endpoint,
            spans,
            task,
        })
    }
}

impl Drop for TraceSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A child process on a free loopback port; killed if dropped without [`Server::stop`].
pub(super) struct Server {
    pub(super) child: Child,
    pub(super) base: String,
}

impl Server {
    /// `herald serve` with its one route on the sandbox vendor at `vendor`; without one, on
    /// the built-in sandbox vendor inside the process, as the quick start runs.
    pub(super) async fn herald(
        url: &str,
        name: &str,
        dispatch: bool,
        vendor: Option<&str>,
        children: &Children<'_>,
    ) -> anyhow::Result<Server> {
        Self::start(children.dir, name, "/readyz", |command, listen| {
            command
                .arg("serve")
                .env_remove("HERALD_CONFIG")
                .env("HERALD_DATABASE__URL", url)
                .env("HERALD_SERVER__LISTEN", listen)
                .env("HERALD_DEV_TOKEN", TOKEN)
                .env("HERALD_DISPATCH__ENABLED", dispatch.to_string())
                .env("HERALD_ROUTES__SANDBOX__PROVIDER", "sandbox")
                .env("HERALD_CHANNELS__EMAIL", "sandbox")
                // Events are herald's own work, but not what the peers it is compared with do.
                .env("HERALD_RELAY__ENABLED", "false");
            if let Some(vendor) = vendor {
                command.env("HERALD_ROUTES__SANDBOX__BASE_URL", vendor);
            }
            if let Some(sends) = children.route_concurrency {
                command.env("HERALD_ROUTES__SANDBOX__CONCURRENCY", sends.to_string());
            }
            if let Some(sink) = children.traces {
                // The bench's own receiver, and nothing the environment would put in its place.
                command
                    .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                    .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
                    .env("OTEL_EXPORTER_OTLP_ENDPOINT", &sink.endpoint)
                    .env("OTEL_SERVICE_NAME", format!("herald-bench-{name}"));
            }
        })
        .await
    }

    /// `herald sandbox`, the stand-in vendor.
    pub(super) async fn vendor(dir: &Path) -> anyhow::Result<Server> {
        Self::start(dir, "vendor", "/profile", |command, listen| {
            command.args(["sandbox", "--listen", listen]);
        })
        .await
    }

    /// A child of this binary, set up by `configure` to listen on the address it is given,
    /// once `ready` answers 2xx.
    pub(super) async fn start(
        dir: &Path,
        name: &str,
        ready: &str,
        configure: impl FnOnce(&mut Command, &str),
    ) -> anyhow::Result<Server> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = std::fs::File::create(log_path(dir, name))?;
        let mut command = Command::new(std::env::current_exe()?);
        configure(&mut command, &format!("127.0.0.1:{port}"));
        let child = command
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start the {name} process"))?;
        let mut server = Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let started = Instant::now();
        while !reqwest::get(server.url(ready))
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            if let Some(status) = server.child.try_wait()? {
                bail!(
                    "the {name} process exited ({status}) before it was ready; its log: {}",
                    log_path(dir, name).display()
                );
            }
            if started.elapsed() > Duration::from_secs(60) {
                bail!("the {name} process was not ready within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(server)
    }

    /// A memory figure of the child from `/proc` (`VmRSS` now, `VmHWM` its peak), in KiB.
    pub(super) fn rss_kib(&self, field: &str) -> u64 {
        let Some(pid) = self.child.id() else { return 0 };
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// The CPU time the child has used so far, user and system, all its threads.
    pub(super) fn cpu_time(&self) -> Option<Duration> {
        super::measure::process_cpu(self.child.id()?, false).map(|(_, used)| used)
    }

    /// SIGTERM, and the child's own orderly exit.
    pub(super) async fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = Command::new("kill").arg(pid.to_string()).status().await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

pub(super) fn log_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.log"))
}
