//! A local stand-in for Postmark's `POST /email` and outbound message search, for herald's tests
//! (feature `fake`).
//!
//! It speaks what the adapter uses: the server token (401, ErrorCode 10, otherwise), the
//! request checks (422 ErrorCode 300 without `From`, `To` or a body, or with an attachment
//! without `Name` or whose `Content` is missing or not base64), inactive recipients (422
//! ErrorCode 406), and `GET /messages/outbound` filtered by `metadata_herald_key`. Every message
//! that passes is a delivery: the [`Ledger`] counts it at once under its `herald_key`, and the
//! search lists it once [`FakeConfig::visibility_lag`] has passed — also when a fault then
//! loses, delays or spoils the answer. That is what lets a test settle an ambiguous send through
//! the adapter's look-up and compare it with the ground truth. Its attachments, decoded, are
//! kept by `MessageID` ([`Vendor::attachments_of`]), so a test can tell that the bytes came
//! through intact.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use herald_postmark::fake::{self, FakeConfig, Fault, Faults};
//! let vendor = fake::spawn(FakeConfig::default()).await?;
//! vendor.set_faults(Faults::next([Fault::ErrorAfterProcessing]));
//! // … point a PostmarkRoute at vendor.base_url() and send under provider key "ntf-1" …
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
    /// The one server token it accepts; by default Postmark's documented test token.
    pub server_token: String,
    /// How long after it was accepted a message starts to be listed by the search.
    pub visibility_lag: Duration,
    /// How long the `delay` fault holds its answer: longer than the client waits.
    pub delay: Duration,
    /// Inactive recipients: a send to one is refused (422, ErrorCode 406).
    pub inactive: Vec<String>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            server_token: "POSTMARK_API_TEST".to_owned(),
            visibility_lag: Duration::ZERO,
            delay: Duration::from_secs(30),
            inactive: Vec::new(),
        }
    }
}

/// One injectable misbehaviour, of a send or of a look-up.
pub type Fault = harness::Fault;

/// Which requests misbehave: the next take `next` in order, one fault each; after that every
/// request takes `then`. Requests refused for their token do not use up a fault.
pub type Faults = harness::Faults<Fault>;

/// The fake Postmark, running in a background task on 127.0.0.1; [`Vendor`]'s methods are its
/// own. Dropping it stops the server and closes every connection, answered or not.
pub type FakeHandle = harness::FakeHandle<Vendor>;

/// Binds 127.0.0.1 on a free port and serves the fake there in a background task.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    FakeHandle::spawn(Vendor::new(config), api::router).await
}
