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
//! The server is herald-provider's fake harness ([`herald_provider::fake::serve`]), which owns
//! each connection so that `accept_then_drop` can close one without writing a byte of the
//! answer.

mod api;

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use herald_provider::fake as harness;

pub use api::{ReceivedRequest, Vendor};

/// How the fake behaves. Only the faults can change while it runs ([`Vendor::set_faults`]).
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
pub type Faults = harness::Faults<Fault>;

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

/// The fake OneSignal, running in a background task on 127.0.0.1; [`Vendor`]'s methods are its
/// own. Dropping it stops the server and closes every connection, answered or not.
pub type FakeHandle = harness::FakeHandle<Vendor>;

/// Binds 127.0.0.1 on a free port and serves the fake there in a background task.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    FakeHandle::spawn(Vendor::new(config), api::router).await
}
