//! A local stand-in for Twilio's Message resource, for herald's tests (feature `fake`).
//!
//! It speaks the two operations the adapter uses — create (`POST`) and list (`GET`) on
//! `/2010-04-01/Accounts/{AccountSid}/Messages.json` — with Twilio's Basic auth (the documented
//! 401 body on wrong credentials), Twilio's validation errors, and Twilio's "magic" test
//! numbers: `To=+15005550001` is invalid (21211) and `To=+15005550004` has replied STOP
//! (21610), as with Twilio's test credentials.
//!
//! Every create that passes validation is a delivery: the [`Ledger`] counts it at once, and the
//! list shows it as sent once [`FakeConfig::visibility_lag`] has passed — also when a fault
//! then loses, delays or spoils the answer. That is what lets a test reconcile an ambiguous
//! send through the adapter's query and compare with the ground truth.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use herald_twilio::fake::{self, Fault, FakeConfig};
//! let twilio = fake::spawn(FakeConfig::new("ACtest", "token".into())).await?;
//! twilio.set_faults([Fault::AcceptThenDrop]); // the next create is delivered, then dropped
//! // … point a TwilioRoute at twilio.base_url() and send …
//! assert_eq!(twilio.ledger().deliveries_of("Your code is 123456"), 1);
//! # Ok(()) }
//! ```

mod routes;

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use herald_provider::fake as harness;
use secrecy::SecretString;

pub use routes::Vendor;

/// How the fake Twilio behaves. Fixed for the server's lifetime; faults are set on the handle.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// The account in every URL, and the Basic auth user with `auth_token`.
    pub account_sid: String,
    pub auth_token: SecretString,
    /// Also accepted: an API key's SID and secret as the Basic auth pair.
    pub api_key: Option<(String, SecretString)>,
    /// How long after it was created a message starts to appear in the list.
    pub visibility_lag: Duration,
    /// How long the [`Fault::Delay`] fault holds its answer; longer than any client timeout.
    pub delay: Duration,
    /// How long every create that it processed waits before it answers: a slow vendor, whose
    /// answers still come inside a client's timeout.
    pub answer_after: Duration,
    /// The largest page the list serves (Twilio: 1000); a test lowers it to exercise paging.
    pub max_page_size: usize,
}

impl FakeConfig {
    /// Twilio's defaults: no lag, pages of up to 1000, a 30 s hold for `Delay`.
    pub fn new(account_sid: impl Into<String>, auth_token: SecretString) -> Self {
        FakeConfig {
            account_sid: account_sid.into(),
            auth_token,
            api_key: None,
            visibility_lag: Duration::ZERO,
            delay: Duration::from_secs(30),
            answer_after: Duration::ZERO,
            max_page_size: 1000,
        }
    }
}

/// One injected misbehaviour, applied to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Process the request (a create delivers), then close the connection without answering.
    AcceptThenDrop,
    /// Process, then hold the answer for [`FakeConfig::delay`].
    Delay,
    /// Process, then answer 500 (Twilio error 20500).
    ErrorAfterProcessing,
    /// Answer 503 without processing.
    UnavailableBeforeProcessing,
    /// Answer 429 (Twilio error 20429) with `Retry-After: 1` without processing.
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
    pub sid: String,
    pub to: String,
    /// The `From` of the request; `None` when a Messaging Service picked the sender.
    pub from: Option<String>,
    pub messaging_service_sid: Option<String>,
    pub body: String,
    /// When the request that made it arrived, by the fake's own clock: the witness of when a
    /// send reached the vendor, whatever the sender recorded.
    pub arrived_at: time::OffsetDateTime,
}

impl Ledger {
    /// How many times a message with this exact text was delivered. Twilio has no client
    /// reference, so the text is the key: tests give each notification its own text.
    pub fn deliveries_of(&self, body: &str) -> u64 {
        self.deliveries.iter().filter(|d| d.body == body).count() as u64
    }

    pub fn total(&self) -> u64 {
        self.deliveries.len() as u64
    }

    /// When the messages with this exact text arrived, oldest first.
    pub fn arrivals_of(&self, body: &str) -> Vec<time::OffsetDateTime> {
        self.deliveries
            .iter()
            .filter(|d| d.body == body)
            .map(|d| d.arrived_at)
            .collect()
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

/// The fake Twilio, running in a background task on 127.0.0.1; [`Vendor`]'s methods are its
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

    /// Faults for the next creates, in order, one per request; after them, creates are served
    /// normally. Replaces any faults still pending.
    pub fn set_faults(&self, faults: impl IntoIterator<Item = Fault>) {
        self.lock().send_faults = faults.into_iter().collect();
    }

    /// The same for the next list requests (the adapter's look-ups).
    pub fn set_lookup_faults(&self, faults: impl IntoIterator<Item = Fault>) {
        self.lock().lookup_faults = faults.into_iter().collect();
    }

    /// Every request received so far, oldest first.
    pub fn received(&self) -> Vec<Received> {
        self.lock().received.clone()
    }

    /// The most creates the fake was handling at one time (from receipt to answer): what a
    /// client's concurrency limit is held to.
    pub fn most_creates_at_once(&self) -> usize {
        self.lock().most_creates_at_once
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
    /// Creates being handled now, and the most there ever were at once.
    creates_now: usize,
    most_creates_at_once: usize,
}
