//! A local stand-in for SendGrid's Mail Send and Email Activity, for herald's tests (feature
//! `fake`).
//!
//! It speaks what the adapter uses: the API key (401 otherwise), the request checks (400
//! without a recipient, a sender, a subject or content, or with an attachment without
//! `filename` or whose `content` is missing or not base64), 202 with `X-Message-Id`, and
//! `GET /v3/messages` filtered by `unique_args['herald_key']` — where the account has Email
//! Activity ([`FakeConfig::activity`]; 403 otherwise). Every message that passes is a delivery:
//! the [`Ledger`] counts it at once under its `herald_key`, and Email Activity lists it once
//! [`FakeConfig::visibility_lag`] has passed — also when a fault then loses, delays or spoils the
//! answer. Its attachments, decoded, are kept by message id ([`Vendor::attachments_of`]), so a
//! test can tell that the bytes came through intact.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use herald_sendgrid::fake::{self, FakeConfig, Fault, Faults};
//! let vendor = fake::spawn(FakeConfig::default()).await?;
//! vendor.set_faults(Faults::next([Fault::ErrorAfterProcessing]));
//! // … point a SendGridRoute at vendor.base_url() and send under provider key "ntf-1" …
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
    /// Whether the account has Email Activity (a paid add-on).
    pub activity: bool,
    /// How long after it was accepted a message starts to be listed by Email Activity.
    pub visibility_lag: Duration,
    /// How long the `delay` fault holds its answer: longer than the client waits.
    pub delay: Duration,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            api_key: "SG.fake-key.0123456789".to_owned(),
            activity: true,
            visibility_lag: Duration::ZERO,
            delay: Duration::from_secs(30),
        }
    }
}

/// One injectable misbehaviour, of a send or of a look-up.
pub type Fault = harness::Fault;

/// Which requests misbehave: the next take `next` in order, one fault each; after that every
/// request takes `then`. Requests refused for their key do not use up a fault.
pub type Faults = harness::Faults<Fault>;

/// The fake SendGrid, running in a background task on 127.0.0.1; [`Vendor`]'s methods are its
/// own. Dropping it stops the server and closes every connection, answered or not.
pub type FakeHandle = harness::FakeHandle<Vendor>;

/// Binds 127.0.0.1 on a free port and serves the fake there in a background task.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    FakeHandle::spawn(Vendor::new(config), api::router).await
}
