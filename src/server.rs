//! Serving HTTP with the limits a public service needs, which `axum::serve` does not offer: a
//! header read timeout, an idle deadline on every connection (HTTP/1.1 and HTTP/2 alike: a
//! connection with no request in progress is closed once it has been idle that long, however
//! many PINGs it answers), a cap on connections served at once, and a deadline on graceful
//! shutdown, so that a slow or silent client can neither hold a connection forever nor hold up
//! a stop. (The body timeout is a layer of the router.) HTTP/1.1 and HTTP/2 without TLS (h2c)
//! are both served.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::Request;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// How connections are served.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_timeout: Duration,
    pub max_connections: usize,
    pub shutdown_grace: Duration,
}

impl From<&crate::config::ServerConfig> for Limits {
    fn from(server: &crate::config::ServerConfig) -> Self {
        Limits {
            header_timeout: Duration::from_secs(server.header_timeout_seconds),
            max_connections: server.max_connections,
            shutdown_grace: Duration::from_secs(server.shutdown_grace_seconds),
        }
    }
}

/// HTTP/1 and HTTP/2 connections that a client cannot hold open for free: headers must arrive,
/// and HTTP/2 pings be answered, within `header_timeout`.
fn connection_builder(limits: Limits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(limits.header_timeout))
        .keep_alive_timeout(limits.header_timeout);
    builder
}

/// Serves `router` on `listener` until `shutdown`; then stops accepting, lets open connections
/// finish their requests for up to `shutdown_grace`, and closes what is left.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let builder = Arc::new(connection_builder(limits));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let connections = TaskTracker::new();
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let (stream, _) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors, say: pause instead of spinning.
                    tracing::warn!(%err, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity::new());
        let service = {
            let (router, activity) = (router.clone(), activity.clone());
            tower::service_fn(move |request: Request<hyper::body::Incoming>| {
                let (router, activity) = (router.clone(), activity.clone());
                async move {
                    let _busy = activity.begin();
                    router.oneshot(request.map(axum::body::Body::new)).await
                }
            })
        };
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service))
            .into_owned();
        let (shutdown, idle) = (shutdown.clone(), limits.header_timeout);
        connections.spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let mut closing = false;
            loop {
                tokio::select! {
                    ended = connection.as_mut() => {
                        if let Err(err) = ended {
                            tracing::debug!(err = %err, "connection ended with an error");
                        }
                        break;
                    }
                    _ = shutdown.cancelled(), if !closing => {
                        connection.as_mut().graceful_shutdown();
                        closing = true;
                    }
                    _ = activity.idle_for(idle), if !closing => {
                        connection.as_mut().graceful_shutdown();
                        closing = true;
                    }
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    connections.close();
    if tokio::time::timeout(limits.shutdown_grace, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            grace = ?limits.shutdown_grace,
            "connections still open after the shutdown grace; closing them"
        );
    }
}

/// What a connection is doing: requests in progress, and when the last one began or ended.
struct Activity {
    in_progress: AtomicUsize,
    last: Mutex<Instant>,
}

/// A request in progress; its end is activity too.
struct Busy<'a>(&'a Activity);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_progress.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Activity {
    fn new() -> Self {
        Activity {
            in_progress: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
        }
    }

    fn begin(&self) -> Busy<'_> {
        self.in_progress.fetch_add(1, Ordering::SeqCst);
        self.touch();
        Busy(self)
    }

    fn touch(&self) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// Returns once no request has been in progress for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let last = *self.last.lock().unwrap_or_else(|e| e.into_inner());
            if self.in_progress.load(Ordering::SeqCst) == 0 && last.elapsed() >= idle {
                return;
            }
            tokio::time::sleep_until(last + idle).await;
        }
    }
}
