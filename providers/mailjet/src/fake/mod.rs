//! A local stand-in for Mailjet's Send API v3.1 and `/message` resource, for herald's tests
//! (feature `fake`).
//!
//! It speaks what the adapter uses — `POST /v3.1/send` and `GET /v3/REST/message` — with
//! Mailjet's Basic auth (the documented 401 body on wrong credentials), Mailjet's global and
//! per-message errors (malformed JSON `mj-0002`, missing property `mj-0003`, empty array
//! `mj-0007`, invalid address `mj-0013`, no content `send-0003`, subject too long `mj-0006`,
//! unauthorised sender `send-0008`, an attachment's empty property `mj-0012`), and the look-up
//! by `CustomID` with `FromTS`, `ShowCustomID`, `Limit` and `Offset`. Mailjet documents no code
//! for an attachment whose `Base64Content` is not base64; the fake answers the type mismatch
//! `mj-0004`.
//!
//! Every message that passes validation is a delivery: the [`Ledger`] counts it at once under
//! its `CustomID`, with its attachments decoded, and `/message` lists it once
//! [`FakeConfig::visibility_lag`] has passed — also when a fault then loses, delays or spoils
//! the answer. That is what lets a test reconcile an ambiguous send through the adapter's query
//! and compare with the ground truth.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use herald_mailjet::fake::{self, Fault, FakeConfig};
//! let mailjet = fake::spawn(FakeConfig::new("key", "secret".into())).await?;
//! mailjet.set_faults([Fault::ErrorAfterProcessing]); // the next send is delivered, then 500
//! // … point a MailjetRoute at mailjet.base_url() and send under provider key "ntf-1" …
//! assert_eq!(mailjet.ledger().deliveries_of("ntf-1"), 1);
//! # Ok(()) }
//! ```

mod routes;

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use herald_provider::Attachment;
use herald_provider::fake as harness;
use secrecy::SecretString;

pub use routes::Vendor;

/// How the fake Mailjet behaves. Fixed for the server's lifetime; faults are set on the handle.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// The Basic auth pair.
    pub api_key: String,
    pub api_secret: SecretString,
    /// Sender addresses the account may use; empty: any (`send-0008` otherwise).
    pub allowed_senders: Vec<String>,
    /// How long after it was accepted a message starts to appear in `/message`.
    pub visibility_lag: Duration,
    /// How long the [`Fault::Delay`] fault holds its answer; longer than any client timeout.
    pub delay: Duration,
}

impl FakeConfig {
    /// Any sender, no lag, a 30 s hold for `Delay`.
    pub fn new(api_key: impl Into<String>, api_secret: SecretString) -> Self {
        FakeConfig {
            api_key: api_key.into(),
            api_secret,
            allowed_senders: Vec::new(),
            visibility_lag: Duration::ZERO,
            delay: Duration::from_secs(30),
        }
    }
}

/// One injected misbehaviour, applied to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Process the request (a send delivers), then close the connection without answering.
    AcceptThenDrop,
    /// Process, then hold the answer for [`FakeConfig::delay`].
    Delay,
    /// Process, then answer 500 with an `ErrorIdentifier`, as Mailjet documents its 500s.
    ErrorAfterProcessing,
    /// Answer 503 without processing.
    UnavailableBeforeProcessing,
    /// Answer 429 with `Retry-After: 1` without processing. Mailjet documents no rate-limit
    /// header; the fake sends `Retry-After` so that the adapter's use of it is exercised.
    RateLimited,
}

impl Fault {
    fn is_before_processing(self) -> bool {
        matches!(
            self,
            Fault::UnavailableBeforeProcessing | Fault::RateLimited
        )
    }
}

/// Ground truth: every message the fake really delivered, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    pub deliveries: Vec<Delivery>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// `MessageID`, as answered and as listed under `ID`.
    pub message_id: u64,
    pub message_uuid: String,
    /// Herald's provider key; empty when the request carried none.
    pub custom_id: String,
    pub from: String,
    pub to: String,
    pub subject: Option<String>,
    /// Its attachments, decoded: their size and SHA-256 are those of the bytes that arrived.
    pub attachments: Vec<Attachment>,
}

impl Ledger {
    /// How many times a message with this `CustomID` (herald's provider key) was delivered.
    pub fn deliveries_of(&self, custom_id: &str) -> u64 {
        self.deliveries
            .iter()
            .filter(|d| d.custom_id == custom_id)
            .count() as u64
    }

    pub fn total(&self) -> u64 {
        self.deliveries.len() as u64
    }
}

/// A request as the fake received it, for tests that check the wire shape. The Basic auth
/// password is checked and never kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// The Basic auth user name, if the request had a readable Basic `Authorization`.
    pub basic_user: Option<String>,
    pub content_type: Option<String>,
    pub body: String,
}

/// The fake Mailjet, running in a background task on 127.0.0.1; [`Vendor`]'s methods are its
/// own. Dropping it stops the server and closes every connection, answered or not.
pub type FakeHandle = harness::FakeHandle<Vendor>;

/// Binds 127.0.0.1 on a free port and serves the fake there.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    FakeHandle::spawn(Vendor::new(config), routes::router).await
}

impl Vendor {
    pub fn ledger(&self) -> Ledger {
        self.lock().ledger.clone()
    }

    /// Faults for the next sends, in order, one per request; after them, sends are served
    /// normally. Replaces any faults still pending.
    pub fn set_faults(&self, faults: impl IntoIterator<Item = Fault>) {
        self.lock().send_faults = faults.into_iter().collect();
    }

    /// The same for the next `/message` look-ups.
    pub fn set_lookup_faults(&self, faults: impl IntoIterator<Item = Fault>) {
        self.lock().lookup_faults = faults.into_iter().collect();
    }

    /// Every request received so far, oldest first.
    pub fn received(&self) -> Vec<Received> {
        self.lock().received.clone()
    }
}

/// What the routes share; behind one lock so that taking a fault and processing is one step.
#[derive(Default)]
struct State {
    ledger: Ledger,
    records: routes::Records,
    send_faults: VecDeque<Fault>,
    lookup_faults: VecDeque<Fault>,
    received: Vec<Received>,
}
