//! A local stand-in for Resend's email API, for herald's tests (feature `fake`).
//!
//! It speaks `POST /emails` as Resend documents it, as far as the adapter uses it: the
//! `User-Agent` and API-key checks with Resend's documented error bodies (from
//! `fixtures/resend/`), field validation, and Resend's idempotency — a repeat inside the window
//! answers the first answer again (same id, nothing delivered), a repeat with another payload is
//! 409 `invalid_idempotent_request`, and a repeat while the first request is still in progress
//! is 409 `concurrent_idempotent_requests`. Faults are switched on per request ([`Faults`]), and
//! the [`Ledger`] counts every real delivery per idempotency key — including deliveries whose
//! answer a fault lost — so tests can compare herald's records with the truth. It decodes each
//! attachment (an attachment without content is 422 `invalid_attachment`, content that is not
//! base64 400 `validation_error`) and the ledger describes what arrived as herald describes an
//! attachment, so a test can tell that the bytes came through intact.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use herald_resend::fake::{self, FakeConfig, Fault, Faults};
//! let vendor = fake::spawn(FakeConfig::default()).await?;
//! vendor.set_faults(Faults::next([Fault::AcceptThenDrop]));
//! // … point a ResendRoute at vendor.base_url() with FakeConfig::default().api_key, send …
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
    /// The one API key it accepts as `Authorization: Bearer <key>`.
    pub api_key: String,
    /// How long a key's first answer is replayed; Resend's is 24 hours.
    pub idempotency_window: Duration,
    /// How long the `delay` fault holds its answer: longer than the client waits.
    pub delay: Duration,
    pub faults: Faults,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            api_key: "re_fake_0123456789".to_owned(),
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
    /// is answered 409 `concurrent_idempotent_requests`.
    Delay,
    /// Process, then answer 500 `application_error`.
    ErrorAfterProcessing,
    /// Answer 503 without processing.
    UnavailableBeforeProcessing,
    /// Answer 429 `rate_limit_exceeded` with `retry-after: 1` and the `ratelimit-*` headers,
    /// without processing.
    RateLimited,
}

/// Which requests misbehave: the next requests take `next` in order, one fault each; after
/// that every request takes `then` (`None`: answered normally). Requests refused for their
/// `User-Agent` or API key do not use up a fault.
pub type Faults = harness::Faults<Fault>;

/// Ground truth: what the fake really received and delivered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    /// `POST /emails` requests received, whatever became of them.
    pub requests: u64,
    /// Per `Idempotency-Key`, how many emails were really delivered (a request without a key
    /// counts under its own email id).
    pub deliveries: BTreeMap<String, u64>,
    /// Per `Idempotency-Key` (as `deliveries` counts it), the attachments of its latest delivery
    /// that had any, decoded: their size and SHA-256 are those of the bytes that arrived.
    pub attachments: BTreeMap<String, Vec<Attachment>>,
    /// Per `Idempotency-Key` (as `deliveries` counts it), when each delivery's request
    /// arrived, by the fake's own clock: the witness of when a send reached the vendor.
    pub arrivals: BTreeMap<String, Vec<time::OffsetDateTime>>,
}

impl Ledger {
    /// How many times the email with this idempotency key was delivered; 0 if never.
    pub fn deliveries_of(&self, key: &str) -> u64 {
        self.deliveries.get(key).copied().unwrap_or(0)
    }

    pub fn total_deliveries(&self) -> u64 {
        self.deliveries.values().sum()
    }
}

/// The fake Resend, running in a background task on 127.0.0.1; [`Vendor`]'s methods are its
/// own. Dropping it stops the server and closes every connection, answered or not.
pub type FakeHandle = harness::FakeHandle<Vendor>;

/// Binds 127.0.0.1 on a free port and serves the fake there in a background task.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    FakeHandle::spawn(Vendor::new(config), api::router).await
}
