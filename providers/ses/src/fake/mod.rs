//! A local stand-in for Amazon SES's `SendEmail` and for SNS's side of SES's events, for
//! herald's tests (feature `fake`).
//!
//! As SES, it checks each request's Signature Version 4 against the credentials it was given
//! (403 `SignatureDoesNotMatch` otherwise, recomputed over the request as it arrived: host,
//! content type, date and body), the request itself (400 `BadRequestException` without a
//! sender, a recipient or a body, or with an attachment without `FileName` or whose
//! `RawContent` is missing or not base64) and refuses a configured unverified sender (400
//! `MessageRejected`). Every message that passes is a delivery: the [`Ledger`] counts it under
//! its `herald_key` tag, also when a fault then loses, delays or spoils the answer, and its
//! attachments, decoded, are kept by `MessageId` ([`Vendor::attachments_of`]), so a test can
//! tell that the bytes came through intact.
//!
//! As SNS, it serves its signing certificate and a `ConfirmSubscription` URL, and writes the
//! messages SNS would POST to herald, signed with SignatureVersion 2 by its own RSA key
//! (`fixtures/ses/sns-signing.key`, a test key): [`Vendor::notification`] for an SES event and
//! [`Vendor::subscription_confirmation`]. Look-up faults apply to those GETs.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use herald_ses::fake::{self, FakeConfig, Fault, Faults};
//! let vendor = fake::spawn(FakeConfig::default()).await?;
//! vendor.set_faults(Faults::next([Fault::AcceptThenDrop]));
//! // … point an SesRoute at vendor.base_url() and send under provider key "ntf-1" …
//! assert_eq!(vendor.ledger().deliveries_of("ntf-1"), 1);
//! # Ok(()) }
//! ```

mod api;
mod sns;

use std::io;
use std::time::Duration;

use herald_provider::fake as harness;

pub use api::{ReceivedRequest, Vendor};
pub use harness::{Delivery, Ledger};

/// How the fake behaves. Only the faults can change while it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeConfig {
    pub region: String,
    /// The one key pair it accepts; AWS's documented example keys by default.
    pub access_key_id: String,
    pub secret_access_key: String,
    /// With temporary credentials, the session token that must come with them.
    pub session_token: Option<String>,
    /// The topic its SNS messages are for.
    pub topic_arn: String,
    /// How long the `delay` fault holds its answer: longer than the client waits.
    pub delay: Duration,
    /// Senders not verified in the account: a send from one is refused (`MessageRejected`).
    pub unverified: Vec<String>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            region: "us-east-1".to_owned(),
            access_key_id: "AKIAIOSFODNN7EXAMPLE".to_owned(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".to_owned(),
            session_token: None,
            topic_arn: "arn:aws:sns:us-east-1:123456789012:herald-ses-events".to_owned(),
            delay: Duration::from_secs(30),
            unverified: Vec::new(),
        }
    }
}

/// One injectable misbehaviour, of a send or of an SNS GET.
pub type Fault = harness::Fault;

/// Which requests misbehave: the next take `next` in order, one fault each; after that every
/// request takes `then`. Requests refused for their signature do not use up a fault.
pub type Faults = harness::Faults<Fault>;

/// The fake SES and SNS, running in a background task on 127.0.0.1; [`Vendor`]'s methods are
/// its own. Dropping it stops the server and closes every connection, answered or not.
pub type FakeHandle = harness::FakeHandle<Vendor>;

/// Binds 127.0.0.1 on a free port and serves the fake there in a background task.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    let handle = FakeHandle::spawn(Vendor::new(config), api::router).await?;
    handle.set_origin(handle.base_url());
    Ok(handle)
}
