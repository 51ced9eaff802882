//! What both test binaries share: a message, a route, result assertions, and a temp dir.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herald_provider::{Channel, Evidence, Message, SendResult};
use herald_smtp::{SmtpRoute, Tls};

/// A password that must never surface in evidence, errors or Debug output.
pub const CANARY: &str = "canary-secret-7f3a";

pub const FROM: &str = "Herald <herald@example.com>";
pub const TO: &str = "ada@example.com";

pub fn email(notification_id: &str) -> Message {
    Message {
        notification_id: notification_id.to_owned(),
        channel: Channel::Email,
        to: TO.to_owned(),
        subject: Some("Your export is ready".to_owned()),
        text: Some("Export 42 is ready.".to_owned()),
        html: Some("<p>Export <b>42</b> is ready.</p>".to_owned()),
        payload: None,
        blocks: None,
        email: Default::default(),
        expires_at: None,
        trace_parent: None,
    }
}

pub fn route(host: &str, port: u16) -> SmtpRoute {
    SmtpRoute {
        host: host.to_owned(),
        port,
        tls: Tls::None,
        username: None,
        password: None,
        from: FROM.to_owned(),
        timeout: Duration::from_secs(5),
        hello_name: Some("client.herald.test".to_owned()),
        extra_root_certificate_pem: None,
    }
}

/// The evidence of a result whatever its variant.
/// Asserts a rejection and returns its evidence.
#[track_caller]
pub fn assert_rejected(result: &SendResult, permanent: bool, stage: &str) -> Evidence {
    match result {
        SendResult::Rejected {
            permanent: p,
            retry_after,
            evidence,
        } => {
            assert_eq!(*p, permanent, "permanent? {evidence:?}");
            assert_eq!(*retry_after, None, "SMTP has no Retry-After");
            assert_eq!(evidence.stage, stage, "{evidence:?}");
            evidence.clone()
        }
        other => panic!("expected a rejection at {stage}, got {other:?}"),
    }
}

#[track_caller]
pub fn assert_ambiguous(result: &SendResult, stage: &str) -> Evidence {
    match result {
        SendResult::Ambiguous { evidence } => {
            assert_eq!(evidence.stage, stage, "{evidence:?}");
            evidence.clone()
        }
        other => panic!("expected an ambiguity at {stage}, got {other:?}"),
    }
}

/// Asserts an acceptance and returns its provider_ref and evidence.
#[track_caller]
pub fn assert_accepted(result: &SendResult) -> (String, Evidence) {
    match result {
        SendResult::Accepted {
            provider_ref,
            evidence,
        } => {
            assert_eq!(evidence.stage, "after_data", "{evidence:?}");
            assert_eq!(evidence.status, Some(250), "{evidence:?}");
            (provider_ref.clone().expect("a queue id"), evidence.clone())
        }
        other => panic!("expected an acceptance, got {other:?}"),
    }
}

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "herald-smtp-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create a temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
