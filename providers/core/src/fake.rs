//! The harness every vendor fake shares (feature `fake`): a local HTTP server on 127.0.0.1
//! that can close a connection without answering, the one-shot fault queue the fakes take
//! their misbehaviour from, and the idempotency records of a vendor that keeps a key's first
//! request and answer for a window ([`IdempotencyRecords`]: Resend's and SparkPost's fakes).
//!
//! [`serve`] runs each connection itself (hyper's HTTP/1 connection per socket) instead of
//! through `axum::serve`, because an `accept_then_drop` fault must close a connection after
//! processing without writing a byte of the answer, and only the code that owns the connection
//! can. A handler asks for that with the [`Kill`] request extension.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use axum::response::Response;
//! use axum::{Extension, Router, routing::post};
//! use herald_provider::fake::{self, Kill};
//!
//! async fn drop_it(Extension(kill): Extension<Kill>) -> Response {
//!     kill.kill().await
//! }
//! let server = fake::serve(Router::new().route("/", post(drop_it))).await?;
//! // … point a client at server.base_url(); dropping `server` stops it …
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::{Extension, Router};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tokio::task::{JoinHandle, JoinSet};

/// A fake's server, running in a background task on 127.0.0.1. Dropping it stops the server
/// and closes every connection at once, answered or not, so that a held answer (a `delay`
/// fault) cannot hold a test's teardown; [`FakeServer::shutdown`] also waits until it has.
pub struct FakeServer {
    addr: SocketAddr,
    /// Incremented by the accept loop for every connection, read by [`FakeServer::connections`].
    connections: Arc<AtomicU64>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

/// A running fake: its server, and the vendor its routes share. The handle offers the vendor's
/// own methods (its ledger, its faults, what it received) as its own. Dropping it stops the
/// server and closes every connection, answered or not.
pub struct FakeHandle<V> {
    server: FakeServer,
    vendor: Arc<V>,
}

impl<V: Send + Sync + 'static> FakeHandle<V> {
    /// Serves `router(vendor)` on 127.0.0.1, on a free port, in a background task.
    pub async fn spawn(vendor: V, router: impl FnOnce(Arc<V>) -> Router) -> io::Result<Self> {
        let vendor = Arc::new(vendor);
        let server = serve(router(Arc::clone(&vendor))).await?;
        Ok(FakeHandle { server, vendor })
    }

    /// `http://127.0.0.1:<port>`: the route's `base_url`.
    pub fn base_url(&self) -> String {
        self.server.base_url()
    }
}

impl<V> std::ops::Deref for FakeHandle<V> {
    type Target = V;

    fn deref(&self) -> &V {
        &self.vendor
    }
}

/// Binds 127.0.0.1 on a free port and serves `router` there in a background task. Every
/// request carries a [`Kill`] extension for the connection it arrived on.
pub async fn serve(router: Router) -> io::Result<FakeServer> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    let connections = Arc::new(AtomicU64::new(0));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(accept_loop(
        listener,
        router,
        Arc::clone(&connections),
        stopped,
    ));
    Ok(FakeServer {
        addr,
        connections,
        stop: Some(stop),
        task: Some(task),
    })
}

impl FakeServer {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// TCP connections accepted so far, so a test can prove that a refused send never connected.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// Stops the server, closes its connections and waits until it has.
    pub async fn shutdown(mut self) {
        self.stop();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Accepts connections until `stopped` resolves (or its sender is dropped, so the server cannot
/// outlive its [`FakeServer`]), then drops every connection at once.
async fn accept_loop(
    listener: TcpListener,
    router: Router,
    connections: Arc<AtomicU64>,
    stopped: oneshot::Receiver<()>,
) {
    let mut running = JoinSet::new();
    let mut stopped = std::pin::pin!(stopped);
    loop {
        tokio::select! {
            biased;
            _ = &mut stopped => break,
            // Reaps finished connections so the set does not grow with every one ever served.
            Some(_) = running.join_next() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.fetch_add(1, Ordering::SeqCst);
                    running.spawn(run_connection(stream, peer, router.clone()));
                }
                // A failed accept (a client gone already, no file descriptors) ends nothing but
                // that connection; the pause keeps a persistent failure from spinning.
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed; retrying shortly");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    running.shutdown().await;
}

/// Lets a request handler close the connection it arrived on without a byte of answer; every
/// request served by [`serve`] carries one as an `Extension<Kill>`.
///
/// Protocol: [`Kill::kill`] signals the task that owns the connection and then never completes;
/// that task waits on the signal alongside the connection and drops it, which closes the socket
/// and drops the pending handler with it. `Notify` keeps a signal sent before the owner starts
/// waiting, so no ordering can lose it.
#[derive(Clone, Default)]
pub struct Kill(Arc<Notify>);

impl Kill {
    /// Closes this request's connection without answering. Never returns: await it as the
    /// handler's answer.
    pub async fn kill<T>(&self) -> T {
        self.0.notify_one();
        std::future::pending().await
    }
}

async fn run_connection(stream: TcpStream, peer: SocketAddr, router: Router) {
    let kill = Kill::default();
    let service = TowerToHyperService::new(router.layer(Extension(kill.clone())));
    let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        result = connection => {
            if let Err(err) = result {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
        }
        () = kill.0.notified() => {
            tracing::debug!(%peer, "closed the connection without answering");
        }
    }
}

/// Which requests misbehave: the next requests take `next` in order, one fault each; after
/// that every request takes `then` (`None`: answered normally). A fake keeps one as its
/// pending faults and [`Faults::draw`]s from it once per request that can meet a fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Faults<F> {
    pub next: Vec<F>,
    pub then: Option<F>,
}

// By hand: a derived `Default` would demand `F: Default`, which no fault is.
impl<F> Default for Faults<F> {
    fn default() -> Self {
        Faults {
            next: Vec::new(),
            then: None,
        }
    }
}

impl<F> Faults<F> {
    pub fn none() -> Faults<F> {
        Faults::default()
    }

    /// These faults for the next requests, one each, then none.
    pub fn next(faults: impl IntoIterator<Item = F>) -> Faults<F> {
        Faults {
            next: faults.into_iter().collect(),
            then: None,
        }
    }

    /// This fault for every request until the faults are set again.
    pub fn always(fault: F) -> Faults<F> {
        Faults {
            next: Vec::new(),
            then: Some(fault),
        }
    }
}

impl<F: Copy> Faults<F> {
    /// The fault for the request at hand, used up if it was one of `next`.
    pub fn draw(&mut self) -> Option<F> {
        if self.next.is_empty() {
            self.then
        } else {
            Some(self.next.remove(0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_faults_are_drawn_once_each_in_order_then_the_standing_one() {
        let mut faults = Faults {
            next: vec![1, 2],
            then: Some(9),
        };
        assert_eq!(
            [faults.draw(), faults.draw(), faults.draw(), faults.draw()],
            [Some(1), Some(2), Some(9), Some(9)]
        );
        let mut once = Faults::next([7]);
        assert_eq!([once.draw(), once.draw()], [Some(7), None]);
        assert_eq!(Faults::<u8>::none().draw(), None);
    }
}

/// The idempotency records of a vendor that keeps a key's first request and answer for a
/// window: what a fake of such a vendor decides about a request with a key it has seen.
#[derive(Debug)]
pub struct IdempotencyRecords<A> {
    records: HashMap<String, Record<A>>,
}

// By hand: a derived `Default` would demand `A: Default`.
impl<A> Default for IdempotencyRecords<A> {
    fn default() -> Self {
        IdempotencyRecords {
            records: HashMap::new(),
        }
    }
}

#[derive(Debug)]
struct Record<A> {
    answer: A,
    payload: serde_json::Value,
    processed_at: Instant,
    /// How long after processing the first request still counts as in progress (a fault that
    /// holds its answer), otherwise zero. A time span rather than a flag flipped when the
    /// answer goes out, because a handler whose client hung up is dropped before then.
    in_progress_for: Duration,
}

/// What the records say of a request under a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen<A> {
    /// No record inside the window: process it.
    New,
    /// The same payload, finished: answer the first answer again.
    Replay(A),
    /// Another payload under the key: the first request was processed, this one is not.
    OtherPayload,
    /// The same payload while the first request is still in progress.
    InProgress,
}

impl<A: Clone> IdempotencyRecords<A> {
    /// What to do with `payload` under `key` at `now`, for a vendor that keeps a key for
    /// `window`.
    pub fn seen(
        &self,
        key: &str,
        payload: &serde_json::Value,
        now: Instant,
        window: Duration,
    ) -> Seen<A> {
        let Some(record) = self.records.get(key) else {
            return Seen::New;
        };
        let age = now.duration_since(record.processed_at);
        if age >= window {
            Seen::New
        } else if record.payload != *payload {
            Seen::OtherPayload
        } else if age < record.in_progress_for {
            Seen::InProgress
        } else {
            Seen::Replay(record.answer.clone())
        }
    }

    /// Keeps the first processed request under `key` and its answer, in progress for
    /// `in_progress_for` after `now`.
    pub fn record(
        &mut self,
        key: &str,
        payload: serde_json::Value,
        answer: A,
        now: Instant,
        in_progress_for: Duration,
    ) {
        let record = Record {
            answer,
            payload,
            processed_at: now,
            in_progress_for,
        };
        self.records.insert(key.to_owned(), record);
    }
}
