//! A local stand-in for Telnyx's `POST /v2/messages`, for herald's tests (feature `fake`).
//!
//! It speaks what the adapter uses: the API key (401 otherwise), the request checks (422
//! without `to`, `text` or a sender), recipients who texted STOP (40300), and Telnyx's
//! idempotency as documented — a repeat inside the window is answered with the first answer
//! only where that answer was a success; a repeat with another body is 422; and a request that
//! failed keeps no record, so its repeat is processed again. Every message that passes is a
//! delivery: the [`Ledger`] counts it at once under its `Idempotency-Key`, also when a fault then
//! loses, delays or spoils the answer.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use herald_telnyx::fake::{self, FakeConfig, Fault, Faults};
//! let vendor = fake::spawn(FakeConfig::default()).await?;
//! vendor.set_faults(Faults::next([Fault::ErrorAfterProcessing]));
//! // … point a TelnyxRoute at vendor.base_url() and send under provider key "ntf-1" …
//! assert_eq!(vendor.ledger().deliveries_of("ntf-1"), 1);
//! # Ok(()) }
//! ```

mod api;

use std::io;
use std::time::Duration;

use herald_provider::fake as harness;

pub use api::{ReceivedRequest, Vendor};
pub use harness::{Delivery, Ledger};

/// How the fake behaves. Only the faults can change while it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeConfig {
    /// The one API key it accepts as `Authorization: Bearer <key>`.
    pub api_key: String,
    /// How long a key's first successful answer is replayed; Telnyx's is 24 hours.
    pub idempotency_window: Duration,
    /// How long the `delay` fault holds its answer: longer than the client waits.
    pub delay: Duration,
    /// Recipients who texted STOP: a send to one is refused with 40300.
    pub stopped: Vec<String>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            api_key: "KEY0123456789ABCDEF_fake".to_owned(),
            idempotency_window: Duration::from_secs(24 * 60 * 60),
            delay: Duration::from_secs(30),
            stopped: Vec::new(),
        }
    }
}

/// One injectable misbehaviour.
pub type Fault = harness::Fault;

/// Which requests misbehave: the next take `next` in order, one fault each; after that every
/// request takes `then`. Requests refused for their key do not use up a fault.
pub type Faults = harness::Faults<Fault>;

/// The fake Telnyx, running in a background task on 127.0.0.1; [`Vendor`]'s methods are its
/// own. Dropping it stops the server and closes every connection, answered or not.
pub type FakeHandle = harness::FakeHandle<Vendor>;

/// Binds 127.0.0.1 on a free port and serves the fake there in a background task.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    FakeHandle::spawn(Vendor::new(config), api::router).await
}
