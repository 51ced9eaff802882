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
    serve_with(move |stream, peer, _| run_connection(stream, peer, router.clone())).await
}

/// Binds 127.0.0.1 on a free port and runs `connection` for each connection accepted there
/// (its stream, its peer, and its number, from 1 in the order accepted), in a background task:
/// a fake that speaks another protocol than [`serve`]'s HTTP/1.1 (TLS and HTTP/2, say) with
/// the same lifecycle. Give each request a [`Kill`] and wait on [`Kill::requested`] beside the
/// connection, as [`serve`] does, for faults that close it unanswered.
pub async fn serve_with<C, F>(connection: C) -> io::Result<FakeServer>
where
    C: Fn(TcpStream, SocketAddr, u64) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    let connections = Arc::new(AtomicU64::new(0));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(accept_loop(
        listener,
        connection,
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
async fn accept_loop<C, F>(
    listener: TcpListener,
    connection: C,
    connections: Arc<AtomicU64>,
    stopped: oneshot::Receiver<()>,
) where
    C: Fn(TcpStream, SocketAddr, u64) -> F,
    F: Future<Output = ()> + Send + 'static,
{
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
                    let number = connections.fetch_add(1, Ordering::SeqCst) + 1;
                    running.spawn(connection(stream, peer, number));
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

    /// Resolves once a handler asked to close the connection: what the task that owns it
    /// waits on beside it.
    pub async fn requested(&self) {
        self.0.notified().await;
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
        () = kill.requested() => {
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

/// The five faults of a fake whose vendor is looked up rather than replayed (Postmark's,
/// SendGrid's), for its sends and its look-ups alike. Each sits on one side of processing,
/// which is what decides whether the client may conclude anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Process (a send delivers), then close the connection without answering.
    AcceptThenDrop,
    /// Process, then hold the answer past the client's timeout.
    Delay,
    /// Process, then answer the vendor's 500.
    ErrorAfterProcessing,
    /// Answer 503 without processing.
    UnavailableBeforeProcessing,
    /// Answer the vendor's 429 with `retry-after: 1`, without processing.
    RateLimited,
}

impl Fault {
    /// Whether the fault answers before the request is processed.
    pub fn is_before_processing(self) -> bool {
        matches!(
            self,
            Fault::RateLimited | Fault::UnavailableBeforeProcessing
        )
    }
}

/// A vendor's own answers to [`Fault::RateLimited`] and [`Fault::ErrorAfterProcessing`].
pub struct FaultAnswers {
    /// The vendor's 429 body; the fake adds `retry-after: 1`.
    pub rate_limited: &'static str,
    /// The vendor's 500 body.
    pub server_error: &'static str,
}

impl FaultAnswers {
    /// The answer to a request that drew `fault`: `processed` is what processing answered, or
    /// `None` where the fault answers before processing. `delay` is how long [`Fault::Delay`]
    /// holds; `kill` closes the connection for [`Fault::AcceptThenDrop`].
    pub async fn answer(
        &self,
        fault: Option<Fault>,
        processed: Option<axum::response::Response>,
        kill: Kill,
        delay: Duration,
    ) -> axum::response::Response {
        use axum::http::{HeaderValue, StatusCode, header};
        use axum::response::IntoResponse;
        let json = |status: StatusCode, body: &'static str| {
            (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
        };
        let Some(processed) = processed else {
            return if fault == Some(Fault::RateLimited) {
                tracing::info!("refused before processing (rate_limited)");
                let mut response = json(StatusCode::TOO_MANY_REQUESTS, self.rate_limited);
                let retry = HeaderValue::from_static("1");
                response.headers_mut().insert(header::RETRY_AFTER, retry);
                response
            } else {
                tracing::info!("refused before processing (unavailable_before_processing)");
                (StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable").into_response()
            };
        };
        match fault {
            Some(Fault::AcceptThenDrop) => {
                tracing::info!("closing the connection after processing (accept_then_drop)");
                kill.kill().await
            }
            Some(Fault::Delay) => {
                tracing::info!(?delay, "holding the answer (delay)");
                tokio::time::sleep(delay).await;
                processed
            }
            Some(Fault::ErrorAfterProcessing) => {
                tracing::info!("answering 500 after processing (error_after_processing)");
                json(StatusCode::INTERNAL_SERVER_ERROR, self.server_error)
            }
            _ => processed,
        }
    }
}

/// Ground truth of a fake whose vendor lists its messages by herald's key after a lag: every
/// message it really delivered, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    /// Sends received, whatever became of them.
    pub requests: u64,
    pub deliveries: Vec<Delivery>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The vendor's id of the message, as its send answered it.
    pub message_id: String,
    /// Herald's key, where the vendor keeps it with the message; empty when the send had none.
    pub key: String,
    pub to: String,
    /// When it was processed, by the fake's monotonic clock (for its look-up's lag).
    pub delivered_at: Instant,
    /// When the request that made it arrived, by the fake's wall clock: the witness of when a
    /// send reached the vendor, whatever the sender recorded.
    pub arrived_at: time::OffsetDateTime,
}

impl Delivery {
    /// A message delivered now.
    pub fn now(
        message_id: impl Into<String>,
        key: impl Into<String>,
        to: impl Into<String>,
    ) -> Self {
        Delivery {
            message_id: message_id.into(),
            key: key.into(),
            to: to.into(),
            delivered_at: Instant::now(),
            arrived_at: time::OffsetDateTime::now_utc(),
        }
    }
}

impl Ledger {
    /// How many times a message with this key was delivered; 0 if never.
    pub fn deliveries_of(&self, key: &str) -> u64 {
        self.deliveries.iter().filter(|d| d.key == key).count() as u64
    }

    pub fn total(&self) -> u64 {
        self.deliveries.len() as u64
    }

    /// When the messages with this key arrived, oldest first.
    pub fn arrivals_of(&self, key: &str) -> Vec<time::OffsetDateTime> {
        self.deliveries
            .iter()
            .filter(|d| d.key == key)
            .map(|d| d.arrived_at)
            .collect()
    }

    /// What the vendor's look-up lists at `now` for `key` (every key: `None`), newest first:
    /// the deliveries at least `lag` old.
    pub fn listed<'a>(
        &'a self,
        key: Option<&'a str>,
        lag: Duration,
        now: Instant,
    ) -> impl Iterator<Item = &'a Delivery> {
        self.deliveries.iter().rev().filter(move |delivery| {
            now.duration_since(delivery.delivered_at) >= lag
                && key.is_none_or(|key| delivery.key == key)
        })
    }
}

/// What the fake of a looked-up vendor keeps behind one lock: its ledger, the pending faults of
/// sends and of look-ups, and the last send it received (`R`, the fake's own record of one).
/// Counting a request, drawing its fault and processing it happen under one [`Self::lock`], so
/// they are one step; the lock is never held across an `.await`.
pub struct LookedUpState<R> {
    state: std::sync::Mutex<LookedUp<R>>,
}

/// The state itself, as [`LookedUpState::lock`] hands it out.
pub struct LookedUp<R> {
    pub ledger: Ledger,
    pub faults: Faults<Fault>,
    pub lookup_faults: Faults<Fault>,
    pub last_request: Option<R>,
}

impl<R> Default for LookedUpState<R> {
    fn default() -> Self {
        LookedUpState {
            state: std::sync::Mutex::new(LookedUp {
                ledger: Ledger::default(),
                faults: Faults::none(),
                lookup_faults: Faults::none(),
                last_request: None,
            }),
        }
    }
}

impl<R: Clone> LookedUpState<R> {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, LookedUp<R>> {
        // No code panics while holding the lock, so a poisoned state is still consistent.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A snapshot of the ledger.
    pub fn ledger(&self) -> Ledger {
        self.lock().ledger.clone()
    }

    /// Replaces the pending faults of sends.
    pub fn set_faults(&self, faults: Faults<Fault>) {
        self.lock().faults = faults;
    }

    /// Replaces the pending faults of look-ups.
    pub fn set_lookup_faults(&self, faults: Faults<Fault>) {
        self.lock().lookup_faults = faults;
    }

    /// The last send received, whatever became of it.
    pub fn last_request(&self) -> Option<R> {
        self.lock().last_request.clone()
    }
}
