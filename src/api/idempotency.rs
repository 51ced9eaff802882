//! Idempotency keys, in one place: reading a key (from the `Idempotency-Key` header, or a batch
//! item's `idempotency_key`), the request hash that tells a replay from a reused key, and what
//! each outcome of the store's accept answers.
//!
//! It follows the IETF draft and Stripe: a key is per tenant; the same key with the same body
//! answers the original status and body again (`Idempotent-Replayed: true`); with another body,
//! 422; no key, 400. A request whose key another request is still storing waits for that one
//! (herald stores a notification in one short transaction) and is answered as its replay,
//! where Stripe and the draft answer 409 and leave the client to retry.

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::problem::Problem;
use crate::domain::{FieldError, IdempotencyKey};
use crate::store::AcceptOutcome;

/// Set to `true` on a replayed answer.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// The key of a single request: exactly one `Idempotency-Key` header.
pub fn key_from_header(headers: &HeaderMap) -> Result<IdempotencyKey, Problem> {
    let mut values = headers.get_all("idempotency-key").iter();
    let value = values.next().ok_or_else(|| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "idempotency-key-missing",
            "Idempotency-Key missing",
            "send an Idempotency-Key header (1–255 printable ASCII characters) so retries are safe",
        )
        .with_field("Idempotency-Key")
    })?;
    let invalid = |detail: &str| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "idempotency-key-invalid",
            "Idempotency-Key invalid",
            detail,
        )
        .with_field("Idempotency-Key")
    };
    if values.next().is_some() {
        return Err(invalid("send exactly one Idempotency-Key header"));
    }
    let text = value
        .to_str()
        .map_err(|_| invalid("Idempotency-Key must be printable ASCII"))?;
    IdempotencyKey::parse("Idempotency-Key", text).map_err(|e| invalid(&e.to_string()))
}

/// The key of a batch item, taken out of it: its `idempotency_key` member.
pub fn key_of_item(item: &mut Map<String, Value>) -> Result<IdempotencyKey, FieldError> {
    match item.remove("idempotency_key") {
        Some(Value::String(key)) => IdempotencyKey::parse("idempotency_key", &key),
        _ => Err(FieldError::new(
            "idempotency_key",
            "is required: 1–255 printable ASCII characters",
        )),
    }
}

/// SHA-256 of the request with object keys sorted, so that key order and whitespace do not make
/// an identical retry look like a different request. The canonical form goes straight into the
/// hash, never into a buffer: a request with attachments is megabytes of text.
pub fn request_hash(value: &Value) -> Vec<u8> {
    /// The hash, written to as the canonical form is.
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.update(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    fn canonical(value: &Value, out: &mut Hashing) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.0.update(b"{");
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.0.update(b",");
                    }
                    scalar(&Value::String(key.clone()), out);
                    out.0.update(b":");
                    canonical(&map[key], out);
                }
                out.0.update(b"}");
            }
            Value::Array(items) => {
                out.0.update(b"[");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.0.update(b",");
                    }
                    canonical(item, out);
                }
                out.0.update(b"]");
            }
            other => scalar(other, out),
        }
    }
    // As `Value::to_string` writes it, byte for byte: hashes stored before stay comparable.
    fn scalar(value: &Value, out: &mut Hashing) {
        serde_json::to_writer(out, value).expect("writing to a hash cannot fail");
    }
    let mut out = Hashing(Sha256::new());
    canonical(value, &mut out);
    out.0.finalize().to_vec()
}

/// What one item answers, by what the store did with its key.
pub enum Answer {
    /// Stored now: the answer prepared for it.
    Created(Value),
    /// The key was used before with the same request: the answer given then.
    Replayed {
        status: u16,
        body: Value,
    },
    Refused(Problem),
}

/// The answer to `outcome`, where `created` is what a new notification answers.
pub fn answer(outcome: AcceptOutcome, created: Value) -> Answer {
    match outcome {
        AcceptOutcome::Created => Answer::Created(created),
        AcceptOutcome::Replayed { status, body } => {
            metrics::counter!("herald_idempotency_replays_total").increment(1);
            Answer::Replayed { status, body }
        }
        AcceptOutcome::KeyReused => Answer::Refused(key_reused()),
    }
}

fn key_reused() -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency-key-reused",
        "Idempotency key reused",
        "this Idempotency-Key was used before with a different request body",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_request_hash_ignores_key_order_but_not_values() {
        let a = json!({"to": "a@b.io", "metadata": {"x": "1", "y": "2"}});
        let b = json!({"metadata": {"y": "2", "x": "1"}, "to": "a@b.io"});
        let c = json!({"to": "a@b.io", "metadata": {"x": "1", "y": "3"}});
        assert_eq!(request_hash(&a), request_hash(&b));
        assert_ne!(request_hash(&a), request_hash(&c));
    }

    /// Hashes are stored with their keys: the streamed form must hash what the canonical text
    /// did, sorted keys and compact JSON, or a retry after an upgrade would look like another
    /// request.
    #[test]
    fn the_request_hash_is_the_hash_of_the_canonical_text() {
        let value = json!({"to": "ä\"b\\\n", "n": [1, 2.5, -3, true, null],
                           "data": {"z": {}, "a": [], "é": "\u{1F600}"}});
        let canonical =
            r#"{"data":{"a":[],"z":{},"é":"😀"},"n":[1,2.5,-3,true,null],"to":"ä\"b\\\n"}"#;
        assert_eq!(request_hash(&value), Sha256::digest(canonical).to_vec());
    }
}
