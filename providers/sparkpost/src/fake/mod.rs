//! A local stand-in for SparkPost's Transmissions API, for herald's tests (feature `fake`).
//!
//! It speaks `POST /transmissions` as SparkPost documents it, as far as the adapter uses it: the
//! API key (in its bare form, the one the adapter sends), field validation with SparkPost's documented error
//! bodies (from `fixtures/sparkpost/`), recipients on the account's suppression list answered
//! 200 with none accepted, and SparkPost's idempotency — a repeat inside the window answers the
//! original response again with `X-Idempotent-Replayed: true` (same id, nothing delivered), a
//! repeat with another payload is 409 code 1600, and a repeat while the first request is still
//! in progress is 409 code 1601. Faults are switched on per request ([`Faults`]), and the
//! [`Ledger`] counts every real delivery per idempotency key — including deliveries whose answer
//! a fault lost — so tests can compare herald's records with the truth. It decodes each
//! attachment (one without `name`, `type` or `data` is 422 code 1400, `data` that is not base64
//! 422 code 1300) and the ledger describes what arrived as herald describes an attachment, so a
//! test can tell that the bytes came through intact.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use herald_sparkpost::fake::{self, FakeConfig, Fault, Faults};
//! let vendor = fake::spawn(FakeConfig::default()).await?;
//! vendor.set_faults(Faults::next([Fault::AcceptThenDrop]));
//! // … point a SparkPostRoute at vendor.base_url() with FakeConfig::default().api_key, send …
//! assert_eq!(vendor.ledger().deliveries_of("the-provider-key"), 0);
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

use herald_provider::Attachment;
use herald_provider::fake as harness;

pub use api::{ReceivedRequest, Vendor};

/// How the fake behaves. Only the faults can change while it runs ([`Vendor::set_faults`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FakeConfig {
    /// The one API key it accepts.
    pub api_key: String,
    /// How long a key's original response is replayed; SparkPost's is 24 hours.
    pub idempotency_window: Duration,
    /// How long the `delay` fault holds its answer: longer than the client waits.
    pub delay: Duration,
    /// Addresses on the account's suppression list: a transmission to one is created with no
    /// recipient accepted.
    pub suppressed: Vec<String>,
    pub faults: Faults,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            api_key: "14ac5499cfdd2bb2859e4476d2e5b1d2bad079bf".to_owned(),
            idempotency_window: crate::IDEMPOTENCY_WINDOW,
            delay: Duration::from_secs(30),
            suppressed: Vec::new(),
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
    /// is answered 409 code 1601.
    Delay,
    /// Process, then answer 500.
    ErrorAfterProcessing,
    /// Answer 503 without processing.
    UnavailableBeforeProcessing,
    /// Answer 429 with `retry-after: 1`, without processing.
    RateLimited,
}

/// Which requests misbehave: the next requests take `next` in order, one fault each; after
/// that every request takes `then` (`None`: answered normally). Requests refused for their API
/// key do not use up a fault.
pub type Faults = harness::Faults<Fault>;

/// Ground truth: what the fake really received and delivered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    /// `POST /transmissions` requests received, whatever became of them.
    pub requests: u64,
    /// Per `Idempotency-Key`, how many transmissions were really sent to an accepted recipient
    /// (a request without a key counts under its own transmission id).
    pub deliveries: BTreeMap<String, u64>,
    /// Per `Idempotency-Key` (as `deliveries` counts it), the attachments of its latest
    /// delivery that had any, decoded: their size and SHA-256 are those of the bytes that
    /// arrived.
    pub attachments: BTreeMap<String, Vec<Attachment>>,
    /// Per `Idempotency-Key` (as `deliveries` counts it), when each delivery's request
    /// arrived, by the fake's own clock: the witness of when a send reached the vendor.
    pub arrivals: BTreeMap<String, Vec<time::OffsetDateTime>>,
}

impl Ledger {
    /// How many times the transmission with this idempotency key was sent; 0 if never.
    pub fn deliveries_of(&self, key: &str) -> u64 {
        self.deliveries.get(key).copied().unwrap_or(0)
    }

    pub fn total_deliveries(&self) -> u64 {
        self.deliveries.values().sum()
    }
}

/// The fake SparkPost, running in a background task on 127.0.0.1; [`Vendor`]'s methods are its
/// own. Dropping it stops the server and closes every connection, answered or not.
pub type FakeHandle = harness::FakeHandle<Vendor>;

/// Binds 127.0.0.1 on a free port and serves the fake there in a background task.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    FakeHandle::spawn(Vendor::new(config), api::router).await
}
