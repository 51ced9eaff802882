//! The sandbox vendor's HTTP server: configuration, the accept loop, and a handle for tests.
//!
//! The server runs its connections itself (hyper's HTTP/1 connection per socket) instead of
//! through `axum::serve`, because the `accept_then_drop` fault must close a connection after
//! processing without writing a byte of the answer, and only the code that owns the connection
//! can do that. The routes and the ledger live in `routes`, the fault rules in `faults`, and a
//! small typed client for tests in `client`.

mod callbacks;
mod client;
mod faults;
mod routes;

use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::{Extension, Router};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tokio::task::{JoinHandle, JoinSet};

pub use callbacks::CallbackTarget;
pub use client::{Arrival, Ledger, SandboxClient};
pub use faults::{Fault, FaultRule, ParseFaultError, Trigger, TriggerError, parse_faults};

pub use crate::wire::{Profile, UnknownProfile};

/// How the sandbox behaves. Everything but `faults` is fixed for the server's lifetime; the
/// fault rules can be replaced at runtime with `PUT /faults`.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    pub profile: Profile,
    /// How long, from the first processing, a repeated `Idempotency-Key` is answered from the
    /// stored answer instead of delivering again (profile `idempotent` only).
    pub idempotency_window: Duration,
    /// How old a delivery must be before `GET /messages` lists it (profile `queryable` only).
    pub visibility_lag: Duration,
    pub faults: Vec<FaultRule>,
    /// How long the `delay` fault holds its answer; longer than any sane client timeout.
    pub delay: Duration,
    /// The `Retry-After` of a `rate_limited` refusal.
    pub retry_after: Duration,
    /// The secret that signs delivery reports (Standard Webhooks); without it, the sandbox
    /// reports nothing.
    pub callback_secret: Option<herald_provider::signature::SigningSecret>,
    /// Where each new delivery is reported, if anywhere; replaceable with `PUT /callbacks`.
    pub callbacks: Option<CallbackTarget>,
    /// How many of the most recent deliveries, and of the most recent idempotency keys, the
    /// sandbox keeps: older ones are forgotten (and counted), so that its memory stays flat in
    /// a long run. Keys are also forgotten once their window has passed.
    pub history: usize,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            profile: Profile::Idempotent,
            idempotency_window: Duration::from_secs(24 * 60 * 60),
            visibility_lag: Duration::ZERO,
            faults: Vec::new(),
            delay: Duration::from_secs(30),
            retry_after: Duration::from_secs(1),
            callback_secret: None,
            callbacks: None,
            history: 10_000,
        }
    }
}

/// Serves the sandbox on `listener` until `shutdown` completes.
///
/// On shutdown every open connection is closed at once, answered or not: the sandbox keeps
/// nothing that needs flushing, and a `delay` fault must not hold a test's teardown for its
/// whole delay. Errors on one connection end that connection only; failing `accept` calls are
/// logged and retried after a pause, because a crash test needs its ground truth to outlive a
/// brief shortage of file descriptors. So it returns `Ok(())` once shut down; binding, the
/// one step that can fail for good, is the caller's.
pub async fn serve(
    listener: TcpListener,
    config: SandboxConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let router = routes::router(config).map_err(io::Error::other)?;
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            // Reaps finished connections so the set does not grow with every one ever served.
            Some(_) = connections.join_next() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(run_connection(stream, peer, router.clone()));
                }
                Err(err) if is_connection_error(&err) => {
                    tracing::debug!(error = %err, "a connection failed before it was accepted");
                }
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed; retrying shortly");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    connections.shutdown().await;
    Ok(())
}

fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Lets a request handler close the connection it arrived on without answering.
///
/// Protocol: the handler calls [`ConnectionKill::trip`] and then never completes; the task that
/// owns the connection waits on [`ConnectionKill::tripped`] alongside the connection and drops
/// it, which closes the socket and drops the pending handler with it. `Notify` keeps the signal
/// if it is sent before the owner starts waiting, so no ordering can lose it.
#[derive(Clone, Default)]
pub(crate) struct ConnectionKill(Arc<Notify>);

impl ConnectionKill {
    pub(crate) fn trip(&self) {
        self.0.notify_one();
    }

    async fn tripped(&self) {
        self.0.notified().await;
    }
}

async fn run_connection(stream: TcpStream, peer: SocketAddr, router: Router) {
    let kill = ConnectionKill::default();
    let service = TowerToHyperService::new(router.layer(Extension(kill.clone())));
    // No timer, hence no header-read timeout: the server never closes an idle keep-alive
    // connection itself, because a close racing a client's reuse of it would fail a request
    // the client cannot tell from a lost answer — a spurious ambiguity in the ground truth.
    let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        result = connection => {
            if let Err(err) = result {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
        }
        () = kill.tripped() => {
            tracing::info!(%peer, "closed the connection without answering (accept_then_drop)");
        }
    }
}

/// A sandbox running in a background task on 127.0.0.1, for tests and `herald sandbox`.
/// Dropping the handle shuts the server down; [`SandboxHandle::shutdown`] also waits for it.
#[derive(Debug)]
pub struct SandboxHandle {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<io::Result<()>>>,
}

/// Binds 127.0.0.1 on a free port and serves `config` there in a background task.
pub async fn spawn(config: SandboxConfig) -> io::Result<SandboxHandle> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = oneshot::channel::<()>();
    // A dropped sender ends the wait too, so the server cannot outlive a forgotten handle.
    let task = tokio::spawn(serve(listener, config, async move {
        let _ = stopped.await;
    }));
    Ok(SandboxHandle {
        addr,
        stop: Some(stop),
        task: Some(task),
    })
}

impl SandboxHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A typed client for the ledger and the fault rules of this sandbox.
    pub fn client(&self) -> Result<SandboxClient, reqwest::Error> {
        SandboxClient::new(self.base_url())
    }

    /// Stops the server, closes its connections and waits until it has.
    pub async fn shutdown(mut self) -> io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.map_err(io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Drop for SandboxHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_from_their_names() {
        for profile in Profile::ALL {
            assert_eq!(profile.as_str().parse::<Profile>(), Ok(profile));
        }
        assert_eq!(
            "sometimes".parse::<Profile>(),
            Err(UnknownProfile("sometimes".into()))
        );
    }
}
