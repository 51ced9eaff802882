//! The sandbox's HTTP contract: header names and JSON bodies, shared by the server and the adapter.
//!
//! One definition serves both sides so that a change to the vendor's API cannot leave the
//! adapter speaking an older dialect; the integration tests still go over real HTTP.

use herald_provider::Channel;
use serde::{Deserialize, Serialize};

/// The request header that carries the caller's idempotency key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Set to `true` on an answer that repeats a stored one instead of delivering again.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// The largest `POST /messages` body the sandbox reads; larger ones get 413, unprocessed.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// `POST /messages` as the adapter writes it: borrowed from herald's message, never copied.
#[derive(Debug, Serialize)]
pub struct SendBody<'a> {
    pub reference: &'a str,
    pub channel: Channel,
    pub to: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub html: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<&'a serde_json::Value>,
}

/// `POST /messages` as the server reads it. Only what the server checks is kept: the rest of
/// the message is "delivered" by being counted, so its content does not matter here.
#[derive(Debug, Deserialize)]
pub struct MessageIn {
    pub reference: String,
    /// Parsed so that an unknown channel is refused, as a vendor would refuse it.
    pub channel: Channel,
    pub to: String,
}

/// The answer to an accepted (or replayed) `POST /messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcceptedBody {
    pub id: String,
    pub reference: String,
    pub status: String,
}

/// The answer to `GET /messages?reference=…`.
#[derive(Debug, Serialize, Deserialize)]
pub struct DeliveryList {
    pub data: Vec<DeliveryItem>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DeliveryItem {
    pub id: String,
    pub reference: String,
    /// RFC 3339.
    pub accepted_at: String,
}
