//! A local stand-in for OneSignal's create-message API, for herald's tests (feature `fake`).
//!
//! It speaks `POST /notifications` as OneSignal documents it, as far as the adapter uses it:
//! the `Authorization: Key …` and `app_id` checks with OneSignal's documented error bodies (from
//! `fixtures/onesignal/`), the targeting and content checks, the documented 200 without an `id`
//! for a subscription that is not subscribed ([`FakeConfig::unsubscribed`]), and OneSignal's
//! idempotency: a request whose `idempotency_key` was seen inside the window delivers nothing
//! and answers the result of the first one, with `Idempotent-Replayed: true` — even while the
//! first one is still being answered, since "OneSignal recognizes the notification has already
//! begun sending". Faults are switched on per request ([`Faults`]), and the [`Ledger`] counts
//! every real delivery per `idempotency_key` — including deliveries whose answer a fault lost.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use herald_onesignal::fake::{self, FakeConfig, Fault, Faults};
//! let vendor = fake::spawn(FakeConfig::default()).await?;
//! vendor.set_faults(Faults::next([Fault::AcceptThenDrop]));
//! // … point a OneSignalRoute at vendor.base_url() with FakeConfig::default()'s app_id and
//! // api_key, send …
//! # let key = herald_provider::ProviderKey::new("01970000-0000-7000-8000-000000000001");
//! let sent_as = herald_onesignal::idempotency_key_for(&key);
//! assert_eq!(vendor.ledger().deliveries_of(&sent_as), 0);
//! # Ok(()) }
//! ```
//!
//! The server runs its connections itself (hyper's HTTP/1 connection per socket) instead of
//! through `axum::serve`, because `accept_then_drop` must close a connection after processing
//! without writing a byte of the answer, and only the code that owns the connection can.

mod api;

use std::collections::BTreeMap;
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
use tokio::task::JoinSet;

pub use api::ReceivedRequest;

/// How the fake behaves. Only the faults can change while it runs ([`FakeHandle::set_faults`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FakeConfig {
    /// The one app it serves; a request for another app is refused like a wrong key.
    pub app_id: String,
    /// The one API key it accepts as `Authorization: Key <key>`.
    pub api_key: String,
    /// Subscription ids that are not subscribed: a message only to them creates nothing
    /// (200, empty `id`, "All included players are not subscribed"). Any other id is a
    /// subscribed device.
    pub unsubscribed: Vec<String>,
    /// How long an `idempotency_key`'s first result is replayed; OneSignal's is 30 days.
    pub idempotency_window: Duration,
    /// How long the `delay` fault holds its answer: longer than the client waits.
    pub delay: Duration,
    pub faults: Faults,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            // The docs' example app id.
            app_id: "8250eaf6-1a58-489e-b136-7c74a864b434".to_owned(),
            api_key: "os_v2_app_fake0123456789".to_owned(),
            unsubscribed: Vec::new(),
            idempotency_window: crate::IDEMPOTENCY_WINDOW,
            delay: Duration::from_secs(30),
            faults: Faults::none(),
        }
    }
}

/// One injectable misbehaviour. Each sits on one side of processing, which is what decides
/// whether the client may conclude anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Process (deliver, record the key), then close the connection without answering.
    AcceptThenDrop,
    /// Process, then hold the answer for [`FakeConfig::delay`]; a repeat of the key meanwhile
    /// is answered at once with the first result.
    Delay,
    /// Process, then answer 500.
    ErrorAfterProcessing,
    /// Answer 503 "Service temporarily unavailable" without processing.
    UnavailableBeforeProcessing,
    /// Answer 429 "API rate limit exceeded." with `Retry-After: 1`, without processing.
    RateLimited,
}

/// Which requests misbehave: the next requests take `next` in order, one fault each; after
/// that every request takes `then` (`None`: answered normally). Requests refused for their
/// API key or app do not use up a fault.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    pub next: Vec<Fault>,
    pub then: Option<Fault>,
}

impl Faults {
    pub fn none() -> Faults {
        Faults::default()
    }

    /// These faults for the next requests, one each, then none.
    pub fn next(faults: impl IntoIterator<Item = Fault>) -> Faults {
        Faults {
            next: faults.into_iter().collect(),
            then: None,
        }
    }

    /// This fault for every request until the faults are set again.
    pub fn always(fault: Fault) -> Faults {
        Faults {
            next: Vec::new(),
            then: Some(fault),
        }
    }
}

/// Ground truth: what the fake really received and delivered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    /// `POST /notifications` requests received, whatever became of them.
    pub requests: u64,
    /// Per `idempotency_key`, how many notifications were really delivered (a request without
    /// a key counts under its own notification id). herald's keys are UUIDs and arrive as they
    /// are; see [`crate::idempotency_key_for`] for the others.
    pub deliveries: BTreeMap<String, u64>,
}

impl Ledger {
    /// How many times the notification with this `idempotency_key` was delivered; 0 if never.
    pub fn deliveries_of(&self, key: &str) -> u64 {
        self.deliveries.get(key).copied().unwrap_or(0)
    }

    pub fn total_deliveries(&self) -> u64 {
        self.deliveries.values().sum()
    }
}

/// A running fake on 127.0.0.1. Dropping the handle stops the server and closes its
/// connections, answered or not.
pub struct FakeHandle {
    addr: SocketAddr,
    vendor: Arc<api::Vendor>,
    _stop: oneshot::Sender<()>,
}

/// Binds 127.0.0.1 on a free port and serves the fake there in a background task.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    let vendor = Arc::new(api::Vendor::new(config));
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve(listener, api::router(vendor.clone()), stopped));
    Ok(FakeHandle {
        addr,
        vendor,
        _stop: stop,
    })
}

impl FakeHandle {
    /// `http://127.0.0.1:<port>`, for [`crate::OneSignalRoute::base_url`].
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A snapshot of the ledger.
    pub fn ledger(&self) -> Ledger {
        self.vendor.ledger()
    }

    /// Replaces the pending faults.
    pub fn set_faults(&self, faults: Faults) {
        self.vendor.set_faults(faults);
    }

    /// The last `POST /notifications` received, whatever became of it.
    pub fn last_request(&self) -> Option<ReceivedRequest> {
        self.vendor.last_request()
    }
}

/// Accepts connections until `stopped` resolves (or its sender is dropped), then drops every
/// connection at once: a `delay` fault must not hold a test's teardown.
async fn serve(listener: TcpListener, router: Router, stopped: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    let mut stopped = std::pin::pin!(stopped);
    loop {
        tokio::select! {
            biased;
            _ = &mut stopped => break,
            // Reaps finished connections so the set does not grow with every one ever served.
            Some(_) = connections.join_next() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(run_connection(stream, peer, router.clone()));
                }
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed; retrying shortly");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    connections.shutdown().await;
}

/// Lets a request handler close the connection it arrived on without answering.
///
/// Protocol: the handler calls [`ConnectionKill::trip`] and then never completes; the task that
/// owns the connection waits on the signal alongside the connection and drops it, which closes
/// the socket and drops the pending handler with it. `Notify` keeps a signal sent before the
/// owner starts waiting, so no ordering can lose it.
#[derive(Clone, Default)]
struct ConnectionKill(Arc<Notify>);

impl ConnectionKill {
    fn trip(&self) {
        self.0.notify_one();
    }
}

async fn run_connection(stream: TcpStream, peer: SocketAddr, router: Router) {
    let kill = ConnectionKill::default();
    let service = TowerToHyperService::new(router.layer(Extension(kill.clone())));
    let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        result = connection => {
            if let Err(err) = result {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
        }
        () = kill.0.notified() => {
            tracing::info!(%peer, "closed the connection without answering (accept_then_drop)");
        }
    }
}
