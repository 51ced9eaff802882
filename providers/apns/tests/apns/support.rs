//! Shared set-up: a fake APNs per test with its CA written to a file, an adapter pointed at it,
//! and the push it sends. Keys, result readers and the crypto provider are the conformance
//! kit's (`support`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herald_apns::fake::{self, FakeConfig, FakeHandle};
use herald_apns::{ApnsAdapter, ApnsRoute, CollapseId, PushType};
use herald_provider::{Channel, Message};
use herald_provider_testkit::support;
use secrecy::SecretString;

pub use herald_provider_testkit::support::install_crypto_provider;

/// A running fake with the adapter a test needs.
pub type Vendor = support::Vendor<FakeHandle, ApnsAdapter>;

/// Long enough for any answer the fake gives at once on a busy machine, and far below the
/// `delay` fault's hold.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client timeout short enough that a test waiting for it stays quick.
pub const SHORT_TIMEOUT: Duration = Duration::from_millis(500);

/// The device token of Apple's sample request.
pub const DEVICE: &str = "00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0";

/// A fake with `config`, and an adapter with the route `route` makes for it.
pub async fn vendor(config: FakeConfig) -> Vendor {
    vendor_with(config, |_| {}).await
}

/// A fake with `config`, and an adapter for it whose route `tweak` changes first.
pub async fn vendor_with(config: FakeConfig, tweak: impl FnOnce(&mut ApnsRoute)) -> Vendor {
    let mut route = route_for(&config, "");
    let fake = fake::spawn(config)
        .await
        .expect("the fake binds a loopback port");
    route.base_url = fake.base_url();
    route.extra_root_certificate_pem = Some(fake.ca_pem().to_owned());
    tweak(&mut route);
    let adapter = adapter(route);
    Vendor { fake, adapter }
}

/// The route the fake with `config` takes: its team, key id, key and topic, at `base_url`.
pub fn route_for(config: &FakeConfig, base_url: &str) -> ApnsRoute {
    ApnsRoute {
        base_url: base_url.to_owned(),
        team_id: config.team_id.clone(),
        key_id: config.key_id.clone(),
        signing_key: SecretString::from(config.key.private_pem.clone()),
        topic: config.topic.clone(),
        push_type: PushType::Alert,
        priority: None,
        collapse_id: CollapseId::None,
        extra_root_certificate_pem: None,
        timeout: CLIENT_TIMEOUT,
    }
}

pub fn adapter(route: ApnsRoute) -> ApnsAdapter {
    install_crypto_provider();
    ApnsAdapter::new(route).expect("a valid route")
}

/// A push to Apple's sample device: `Your code`, `123456` (the kit's push).
pub fn message() -> Message {
    support::message(Channel::Push, DEVICE)
}

/// A file of its own in the temp dir with `content`, removed when the value drops.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn with(name: &str, content: &str) -> TempFile {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "herald-apns-{}-{}-{name}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, content).expect("the temp dir is writable");
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
