//! Shared set-up: a sandbox per test, an adapter pointed at it, and distinct keys.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herald_provider::{Channel, Message, ProviderKey};
use herald_sandbox::{
    Profile, SandboxAdapter, SandboxClient, SandboxConfig, SandboxHandle, SandboxRoute, spawn,
};

pub use herald_provider_testkit::support::install_crypto_provider;

/// A running sandbox with the adapter and the ledger client a test needs.
pub struct Vendor {
    pub handle: SandboxHandle,
    pub ledger: SandboxClient,
    pub adapter: SandboxAdapter,
}

/// Long enough for any answer the sandbox gives at once on a busy machine, and far below the
/// `delay` fault's hold.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

pub async fn vendor(config: SandboxConfig) -> Vendor {
    vendor_with_timeout(config, CLIENT_TIMEOUT).await
}

pub async fn vendor_with_timeout(config: SandboxConfig, timeout: Duration) -> Vendor {
    install_crypto_provider();
    let route = SandboxRoute {
        base_url: String::new(),
        from: None,
        profile: config.profile,
        idempotency_window: config.idempotency_window,
        visibility_lag: config.visibility_lag,
        timeout,
        callback_secret: None,
    };
    let handle = spawn(config)
        .await
        .expect("the sandbox binds a loopback port");
    let adapter = SandboxAdapter::new(SandboxRoute {
        base_url: handle.base_url(),
        ..route
    });
    let ledger = handle.client().expect("a ledger client");
    Vendor {
        handle,
        ledger,
        adapter,
    }
}

pub fn config(profile: Profile) -> SandboxConfig {
    SandboxConfig {
        profile,
        ..SandboxConfig::default()
    }
}

/// A key no other test uses, as herald derives one per notification.
pub fn key() -> ProviderKey {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    ProviderKey::new(format!("ntf-{}", NEXT.fetch_add(1, Ordering::Relaxed)))
}

pub fn message() -> Message {
    Message {
        notification_id: "01970000-0000-7000-8000-000000000001".to_owned(),
        channel: Channel::Email,
        to: "ada@example.com".to_owned(),
        subject: Some("Your code".to_owned()),
        text: Some("123456".to_owned()),
        html: None,
        payload: None,
        blocks: None,
        email: Default::default(),
        expires_at: None,
        trace_parent: None,
    }
}
