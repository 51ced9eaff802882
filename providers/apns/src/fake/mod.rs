//! A local stand-in for APNs' provider API, for herald's tests (feature `fake`).
//!
//! It speaks `POST /3/device/<device_token>` as Apple documents it, as far as the adapter uses
//! it, over HTTP/2 and TLS only (its server refuses any other protocol), with a
//! certificate from a test CA it makes when it starts ([`FakeHandle::ca_pem`]: a test writes it
//! to a file and names it as the route's `root_certificate`, as an SMTP route trusts a relay's
//! CA). It checks the provider token as APNs does: an ES256 JWT that verifies with the
//! configured public key, whose `kid` is the configured key id and `iss` the team id, and whose
//! `iat` is less than an hour old (`403 ExpiredProviderToken` otherwise); and a new token on a
//! connection less than 20 minutes after the last one is refused with
//! `429 TooManyProviderTokenUpdates`. It answers with the documented error bodies of
//! `fixtures/apns/`, and every answer carries the request's `apns-id`.
//!
//! Every push that passes is a delivery: the [`Ledger`] counts it at once under its `apns-id`,
//! also when a fault then loses, delays or spoils the answer, and [`Vendor::shown_on`] keeps
//! what each device shows, where a push with the `apns-collapse-id` of one shown before takes
//! its place, as APNs merges them. The tokens it saw are counted ([`Vendor::tokens_seen`]).
//!
//! **What it shares with herald-provider's `fake` harness.** The other vendors' fakes are
//! served over HTTP/1.1 on plain TCP (`herald_provider::fake::serve`). APNs speaks HTTP/2 over
//! TLS only, and the adapter's client insists on it (ALPN `h2` alone), so this fake runs each
//! connection itself (`server`: hyper's HTTP/2 connection over `tokio_rustls`, with a test CA)
//! on the harness's server (`serve_with`: accepting, counting and stopping connections) and
//! closes one unanswered with the harness's `Kill`, which here takes every other stream on it
//! down too. Its [`Fault`] is its own: beside the harness's five, on one side of processing or
//! the other, APNs has refusals of its own that a test must play (`ExpiredProviderToken`,
//! which also marks the token refused, `TooManyProviderTokenUpdates`, `Unregistered`,
//! `BadDeviceToken`), and the harness's fault answers are fixed to one rate-limit and one
//! server-error body. What does fit is shared: the harness's fault queue ([`Faults`]) and
//! [`Ledger`].
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use herald_apns::fake::{self, FakeConfig, Fault, Faults};
//! let config = FakeConfig::default();
//! let key = config.key.private_pem.clone(); // the route's `.p8`
//! let vendor = fake::spawn(config).await?;
//! std::fs::write("/tmp/fake-apns-ca.pem", vendor.ca_pem())?; // the route's root_certificate
//! vendor.set_faults(Faults::next([Fault::ExpiredProviderToken]));
//! // … point an ApnsRoute at vendor.base_url() with the config's team_id, key_id and key …
//! assert_eq!(vendor.ledger().total(), 0);
//! # Ok(()) }
//! ```

mod api;
mod server;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use herald_provider::fake as harness;

pub use api::{ReceivedRequest, Shown, Vendor};
pub use harness::{Delivery, Ledger};
pub use server::ConnectionId;

use crate::token::{MAX_TOKEN_AGE, MIN_UPDATE_INTERVAL};

/// A P-256 key pair made for a test: the private key as Apple's `.p8` file holds it (PKCS#8
/// PEM), and the public key (SubjectPublicKeyInfo PEM) that APNs would verify tokens with.
#[derive(Clone, PartialEq, Eq)]
pub struct TestKey {
    pub private_pem: String,
    pub public_pem: String,
}

impl TestKey {
    /// A fresh key pair, from rcgen (ring).
    pub fn generate() -> TestKey {
        let pair = rcgen::KeyPair::generate().expect("ring makes a P-256 key pair");
        TestKey {
            private_pem: pair.serialize_pem(),
            public_pem: pair.public_key_pem(),
        }
    }
}

impl std::fmt::Debug for TestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestKey")
            .field("private_pem", &"[REDACTED]")
            .field("public_pem", &self.public_pem)
            .finish()
    }
}

/// How the fake behaves. Only the faults can change while it runs ([`Vendor::set_faults`]).
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// The Team ID a token's `iss` must name.
    pub team_id: String,
    /// The Key ID a token's `kid` must name.
    pub key_id: String,
    /// The key pair: tokens must verify with its public half.
    pub key: TestKey,
    /// The one `apns-topic` it serves; another is `400 DeviceTokenNotForTopic`.
    pub topic: String,
    /// Device tokens that are no longer active for the topic: `410 Unregistered`.
    pub unregistered: Vec<String>,
    /// A token older than this is `403 ExpiredProviderToken`; APNs' is one hour.
    pub token_lifetime: Duration,
    /// A new token on a connection sooner than this after the last one is
    /// `429 TooManyProviderTokenUpdates`; APNs' is 20 minutes.
    pub min_token_update_interval: Duration,
    /// How long the `delay` fault holds its answer: longer than the client waits.
    pub delay: Duration,
    pub faults: Faults,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            // The shape of Apple's examples: 10 characters each.
            team_id: "DEF123GHIJ".to_owned(),
            key_id: "ABC123DEFG".to_owned(),
            key: TestKey::generate(),
            topic: "com.example.herald".to_owned(),
            unregistered: Vec::new(),
            token_lifetime: MAX_TOKEN_AGE,
            min_token_update_interval: MIN_UPDATE_INTERVAL,
            delay: Duration::from_secs(30),
            faults: Faults::none(),
        }
    }
}

/// One injectable misbehaviour, drawn by each request whose provider token passed. The first
/// five sit on one side of processing, which is what decides whether the client may conclude
/// anything; the others are APNs' own refusals, none of which delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Deliver, then close the connection without answering.
    AcceptThenDrop,
    /// Deliver, then hold the answer for [`FakeConfig::delay`].
    Delay,
    /// Deliver, then answer `500 InternalServerError`.
    ErrorAfterProcessing,
    /// Answer `503 ServiceUnavailable` without delivering.
    UnavailableBeforeProcessing,
    /// Answer `429 TooManyRequests` (this device token's limit) without delivering.
    RateLimited,
    /// Answer `410 Unregistered` with a `timestamp`, as for a device token no longer active.
    Unregistered,
    /// Answer `400 BadDeviceToken`.
    BadDeviceToken,
    /// Answer `403 ExpiredProviderToken`, and refuse that token from then on, as APNs refuses
    /// a stale one: only a new token gets through.
    ExpiredProviderToken,
    /// Answer `429 TooManyProviderTokenUpdates`.
    TooManyProviderTokenUpdates,
}

/// Which requests misbehave: the next take `next` in order, one fault each; after that every
/// request takes `then`. Requests refused for their provider token do not use up a fault.
pub type Faults = harness::Faults<Fault>;

/// The fake APNs, running in background tasks on 127.0.0.1; [`Vendor`]'s methods are its own.
/// Dropping it stops the server and closes every connection, answered or not.
pub struct FakeHandle {
    server: herald_provider::fake::FakeServer,
    vendor: Arc<Vendor>,
    ca_pem: String,
}

impl FakeHandle {
    /// `https://127.0.0.1:<port>`: the route's `base_url` (the certificate names `127.0.0.1`
    /// and `localhost`).
    pub fn base_url(&self) -> String {
        format!("https://{}", self.server.addr())
    }

    /// The test CA's certificate, PEM: the route's `root_certificate`.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// TCP connections accepted so far, whether or not they spoke TLS and HTTP/2.
    pub fn connections(&self) -> u64 {
        self.server.connections()
    }

    /// Stops the server, closes its connections and waits until it has.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}

impl std::ops::Deref for FakeHandle {
    type Target = Vendor;

    fn deref(&self) -> &Vendor {
        &self.vendor
    }
}

/// Makes a test CA and its server certificate, binds 127.0.0.1 on a free port and serves the
/// fake there in background tasks.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    let ca = server::TestCa::generate()?;
    let tls = ca.server_config()?;
    let vendor = Arc::new(Vendor::new(config)?);
    let server = server::start(api::router(Arc::clone(&vendor)), tls).await?;
    Ok(FakeHandle {
        server,
        vendor,
        ca_pem: ca.ca_pem,
    })
}
