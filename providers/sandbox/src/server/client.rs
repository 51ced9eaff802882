//! A typed client for the sandbox's test-facing routes: the ledger and the fault rules.
//!
//! Herald's own tests and benchmarks read the ledger as ground truth; this keeps them from each
//! re-deriving the URLs and JSON shapes.

use std::collections::BTreeMap;

use herald_provider::Attachment;
use serde::{Deserialize, Serialize};

use super::callbacks::CallbackTarget;
use super::faults::FaultRule;

/// Ground truth: what the sandbox really received and delivered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// `POST /messages` requests received, whatever became of them.
    pub requests: u64,
    /// Per reference (the idempotency key herald sent), how many times the message was really
    /// delivered, including deliveries whose answer a fault lost: the most recent deliveries,
    /// up to the sandbox's `history`.
    pub deliveries: BTreeMap<String, u64>,
    /// Deliveries older than the `history` the sandbox keeps: no longer listed by reference,
    /// still counted in [`Ledger::total_deliveries`]. Zero in any test that reads references.
    #[serde(default)]
    pub forgotten_deliveries: u64,
    /// Idempotency keys forgotten before their window ended, to keep to `history`: a repeat
    /// of one is delivered again.
    #[serde(default)]
    pub forgotten_keys: u64,
    /// Per reference, the attachments of its latest delivery that had any, as decoded: their
    /// size and SHA-256 are those of the bytes that arrived.
    #[serde(default)]
    pub attachments: BTreeMap<String, Vec<Attachment>>,
    /// Every `POST /messages` as it arrived, oldest first, stamped by the sandbox's own clock:
    /// the witness of when a request reached the vendor, whatever herald recorded. The most
    /// recent ones, up to the sandbox's `history`.
    #[serde(default)]
    pub arrivals: Vec<Arrival>,
}

/// One request to `POST /messages`, as the vendor saw it arrive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arrival {
    /// The message's reference (herald's idempotency key), where its body named one.
    pub reference: Option<String>,
    /// When it arrived, by the vendor's clock.
    #[serde(with = "time::serde::rfc3339")]
    pub at: time::OffsetDateTime,
    /// Whether it was processed into a new delivery (not refused, replayed or invalid).
    pub delivered: bool,
}

impl Ledger {
    /// How many times the message with this reference was delivered; 0 if never (or if its
    /// deliveries were forgotten: see [`Ledger::forgotten_deliveries`]).
    pub fn deliveries_of(&self, reference: &str) -> u64 {
        self.deliveries.get(reference).copied().unwrap_or(0)
    }

    pub fn total_deliveries(&self) -> u64 {
        self.deliveries.values().sum::<u64>() + self.forgotten_deliveries
    }

    /// When the requests with this reference arrived, oldest first.
    pub fn arrivals_of(&self, reference: &str) -> Vec<time::OffsetDateTime> {
        self.arrivals
            .iter()
            .filter(|a| a.reference.as_deref() == Some(reference))
            .map(|a| a.at)
            .collect()
    }
}

#[derive(Debug, Clone)]
pub struct SandboxClient {
    http: reqwest::Client,
    base_url: String,
}

impl SandboxClient {
    /// `base_url` is the sandbox's root, e.g. `http://127.0.0.1:4010`.
    pub fn new(base_url: impl Into<String>) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder().no_proxy().build()?;
        let base_url = base_url.into().trim_end_matches('/').to_owned();
        Ok(SandboxClient { http, base_url })
    }

    pub async fn ledger(&self) -> Result<Ledger, reqwest::Error> {
        self.http
            .get(format!("{}/ledger", self.base_url))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await
    }

    /// Forgets every request and delivery; the fault rules stay.
    pub async fn clear_ledger(&self) -> Result<(), reqwest::Error> {
        self.http
            .delete(format!("{}/ledger", self.base_url))
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }

    /// Replaces where new deliveries are reported; `None` stops the reports.
    pub async fn set_callbacks(
        &self,
        target: Option<&CallbackTarget>,
    ) -> Result<(), reqwest::Error> {
        self.http
            .put(format!("{}/callbacks", self.base_url))
            .json(&target)
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }

    /// Replaces the fault rules; `&[]` removes all faults.
    pub async fn set_faults(&self, faults: &[FaultRule]) -> Result<(), reqwest::Error> {
        self.http
            .put(format!("{}/faults", self.base_url))
            .json(faults)
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }
}
