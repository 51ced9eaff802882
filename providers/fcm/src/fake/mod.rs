//! A local stand-in for FCM HTTP v1, for herald's tests (feature `fake`): its token endpoint
//! and `POST /v1/projects/{project}/messages:send`.
//!
//! The token endpoint takes what Google's does (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`
//! and an `assertion`) and checks the assertion as Google would: RS256, signed by the test
//! service account's key (its `kid`, verified against its public key), `iss` the account,
//! `aud` the token endpoint's own URL or `https://oauth2.googleapis.com/token` (which Google's
//! docs say it "always" is, and google-auth sends whatever the key's `token_uri`), the
//! messaging scope, `iat` and `exp` at most an hour apart and not expired. It answers
//! `{access_token, expires_in, token_type}` with a token that lives
//! [`FakeConfig::token_lifetime`], or 400 `invalid_grant`. [`Vendor::revoke_key`] makes it
//! refuse every assertion (a key deleted in the console); [`Vendor::exchanges`] counts the
//! assertions it took, and [`Vendor::last_assertion`] hands the last one to a test.
//!
//! `messages:send` checks `Authorization: Bearer <token>` (401 `UNAUTHENTICATED` for a token it
//! did not issue, one past its lifetime, or one issued before [`Vendor::expire_tokens`]), the
//! project, and the message (400 `INVALID_ARGUMENT` without a token, with a data value that is
//! not a string, or over 4096 bytes of notification and data), and answers 404 `UNREGISTERED`
//! for a token of [`FakeConfig::unregistered`]. Every message that passes is a delivery: the
//! [`Ledger`] counts it at once under its `data.herald_key`, also when a fault then loses,
//! delays or spoils the answer. The documented answers come from `fixtures/fcm/`.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use herald_fcm::fake::{self, FakeConfig, Fault, Faults};
//! let vendor = fake::spawn(FakeConfig::default()).await?;
//! // A key file whose token_uri is the fake's: the route's `service_account`.
//! let key_json = vendor.service_account();
//! vendor.set_faults(Faults::next([Fault::AcceptThenDrop]));
//! // … point an FcmRoute at vendor.base_url() with that key, send under key "ntf-1" …
//! assert_eq!(vendor.ledger().deliveries_of("ntf-1"), 1);
//! # Ok(()) }
//! ```

mod api;

use std::io;
use std::time::Duration;

use herald_provider::fake as harness;

pub use api::{ReceivedRequest, Vendor};
pub use harness::{Delivery, Ledger};

use crate::wire::ServiceAccountKey;

/// The test service account's private key. **Test-only**: generated for herald's tests, public
/// in this repository, and trusted by nothing but this fake.
pub const TEST_PRIVATE_KEY: &str =
    include_str!("../../../../fixtures/fcm/test-only-private-key.pem");

/// The public half of [`TEST_PRIVATE_KEY`], which the fake's token endpoint verifies with.
pub const TEST_PUBLIC_KEY: &str = include_str!("../../../../fixtures/fcm/test-only-public-key.pem");

/// How the fake behaves. Only the faults, the tokens' and the key's standing can change while
/// it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeConfig {
    /// The one Firebase project it serves.
    pub project_id: String,
    /// The service account it knows: `iss` of the assertions it takes.
    pub client_email: String,
    /// The key's id: the `kid` of the assertions it takes.
    pub private_key_id: String,
    /// The key a test's key file carries ([`FakeConfig::service_account`]).
    pub private_key: String,
    /// What the token endpoint verifies assertions with.
    pub public_key: String,
    /// How long an access token it issues lives (its `expires_in`). Google's live an hour.
    pub token_lifetime: Duration,
    /// Registration tokens that are no longer registered: a send to one is answered 404
    /// `UNREGISTERED`. Any other token is a registered device.
    pub unregistered: Vec<String>,
    /// How long the `delay` fault holds its answer: longer than the client waits.
    pub delay: Duration,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            project_id: "herald-test".to_owned(),
            client_email: "herald-push@herald-test.iam.gserviceaccount.com".to_owned(),
            private_key_id: "0123456789abcdef0123456789abcdef01234567".to_owned(),
            private_key: TEST_PRIVATE_KEY.to_owned(),
            public_key: TEST_PUBLIC_KEY.to_owned(),
            token_lifetime: Duration::from_secs(3599),
            unregistered: Vec::new(),
            delay: Duration::from_secs(30),
        }
    }
}

impl FakeConfig {
    /// A service account key file (JSON) of this account whose `token_uri` is `token_uri`: what
    /// a route's `service_account` holds. [`Vendor::service_account`] names the fake's own
    /// token endpoint.
    pub fn service_account(&self, token_uri: &str) -> String {
        let key = ServiceAccountKey {
            kind: "service_account".to_owned(),
            project_id: self.project_id.clone(),
            private_key_id: self.private_key_id.clone(),
            private_key: self.private_key.clone(),
            client_email: self.client_email.clone(),
            token_uri: token_uri.to_owned(),
        };
        serde_json::to_string_pretty(&key).unwrap_or_default()
    }
}

/// One injectable misbehaviour of a send: herald-provider's five, each on one side of
/// processing. `RateLimited` answers FCM's documented 429 `QUOTA_EXCEEDED` (with
/// `retry-after: 1`, which the adapter stretches to FCM's minimum of a minute), and
/// `ErrorAfterProcessing` its 500 `INTERNAL`.
pub type Fault = harness::Fault;

/// Which sends misbehave: the next take `next` in order, one fault each; after that every send
/// takes `then`. Sends refused for their token or project, and token exchanges, do not use up
/// a fault.
pub type Faults = harness::Faults<Fault>;

/// The fake FCM, running in a background task on 127.0.0.1; [`Vendor`]'s methods are its own.
/// Dropping it stops the server and closes every connection, answered or not.
pub type FakeHandle = harness::FakeHandle<Vendor>;

/// Binds 127.0.0.1 on a free port and serves the fake there in a background task.
pub async fn spawn(config: FakeConfig) -> io::Result<FakeHandle> {
    let handle = FakeHandle::spawn(Vendor::new(config), api::router).await?;
    handle.bound_at(&handle.base_url());
    Ok(handle)
}
