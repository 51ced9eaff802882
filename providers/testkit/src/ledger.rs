//! Checks played against a vendor's own fake, whose ledger of real deliveries is the judge:
//! what settles an ambiguity (a resend under the same key, or a look-up), what an idempotency
//! window does to a repeat, and what a look-up proves.
//!
//! Every vendor's fake can lose an answer in the same few ways, and herald's design says what
//! each must come to, whoever the vendor; so the check is written once here. The vendor's test
//! sets its fake up (the fault it plays next, its window, its lag), hands over its adapter and
//! a way to read the ledger, and states what is its own — the vendor's codes, the shape of its
//! answers — from what the check returns. Each check panics as a failed assertion does.

use std::time::Duration;

use herald_provider::{Adapter, Evidence, Message, ProviderKey, QueryResult, SendResult};

use crate::support::{
    accepted_ref, ambiguous, assert_not_found_yet, found, query_until_found, unique_key,
};

/// How a vendor's fake lost the answer to a request: what the ambiguity must show, and whether
/// the request was processed (delivered) all the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// Processed, then the connection closed before a status line: the client was still
    /// `awaiting_response`, with no status.
    DroppedAfterProcessing,
    /// Processed, then answered with this error status (a 500): the vendor may well have taken
    /// it, so no rejection.
    ErrorAfterProcessing(u16),
    /// Not processed, and answered with this status, which the vendor does not document as
    /// "not processed" (a 503): ambiguous all the same.
    UnavailableBeforeProcessing(u16),
    /// Processed, and its answer held past the adapter's timeout: the evidence says it timed
    /// out.
    HeldPastTheTimeout,
}

impl Loss {
    /// How many deliveries the lost request made.
    fn delivered(self) -> u64 {
        match self {
            Loss::UnavailableBeforeProcessing(_) => 0,
            _ => 1,
        }
    }

    /// The evidence of `result`, which must be the ambiguity this loss comes to.
    #[track_caller]
    fn shown_by(self, result: &SendResult) -> Evidence {
        let evidence = ambiguous(result).clone();
        match self {
            Loss::DroppedAfterProcessing => {
                assert_eq!(evidence.stage, "awaiting_response", "{evidence:?}");
                assert_eq!(evidence.status, None, "no status line may reach the client");
            }
            Loss::ErrorAfterProcessing(status) | Loss::UnavailableBeforeProcessing(status) => {
                assert_eq!(evidence.status, Some(status), "{evidence:?}");
            }
            Loss::HeldPastTheTimeout => {
                assert!(evidence.detail.starts_with("timed out"), "{evidence:?}");
            }
        }
        evidence
    }
}

/// A resend settles an ambiguity, for a vendor with an idempotency window. `message` goes out
/// under a fresh key into the `loss` the vendor's fake is set to play: the result is the
/// ambiguity the loss comes to, and the fake delivered it once if it processed it, else not at
/// all. The resend under the same key is accepted with an id, and the fake has delivered it
/// exactly once. `deliveries` reads the fake's deliveries under a key. Returns the ambiguity's
/// evidence, for the vendor's own codes.
pub async fn settled_by_resend(
    adapter: &dyn Adapter,
    message: &Message,
    loss: Loss,
    deliveries: impl Fn(&str) -> u64,
) -> Evidence {
    let key = unique_key();
    let evidence = loss.shown_by(&adapter.send(message, &key).await);
    assert_eq!(deliveries(key.as_str()), loss.delivered(), "after {loss:?}");

    let id = accepted_ref(&adapter.send(message, &key).await);
    assert!(
        !id.is_empty(),
        "the resend is answered with the vendor's id"
    );
    assert_eq!(
        deliveries(key.as_str()),
        1,
        "the resend delivers nothing twice"
    );
    evidence
}

/// A look-up settles an ambiguity, for a vendor with a look-up. `message` goes out under `key`
/// into the `loss` the vendor's fake is set to play: the result is the ambiguity the loss
/// comes to, and `deliveries` (the fake's count of what could be this send) is one if the fake
/// processed it, else none. Then the look-up finds exactly one delivery if there was one, and
/// nothing yet if not. Returns the ambiguity's evidence and the look-up, for the vendor's own
/// codes and the form of its answer.
pub async fn settled_by_lookup(
    adapter: &dyn Adapter,
    message: &Message,
    key: &ProviderKey,
    loss: Loss,
    deliveries: impl Fn() -> u64,
) -> (Evidence, QueryResult) {
    let evidence = loss.shown_by(&adapter.send(message, key).await);
    assert_eq!(deliveries(), loss.delivered(), "after {loss:?}");

    let lookup = adapter.query(message, key).await;
    match loss.delivered() {
        0 => assert_not_found_yet(&lookup),
        _ => assert_eq!(found(&lookup).len(), 1, "{lookup:?}"),
    }
    (evidence, lookup)
}

/// Inside the vendor's idempotency window, a repeat under the same key is answered with the
/// first id: the fake received both requests (`requests`, all it received) and delivered once
/// (`deliveries`, under a key). Returns the repeat's result.
pub async fn replayed_inside_the_window(
    adapter: &dyn Adapter,
    message: &Message,
    requests: impl Fn() -> u64,
    deliveries: impl Fn(&str) -> u64,
) -> SendResult {
    let key = unique_key();
    let first = accepted_ref(&adapter.send(message, &key).await);
    let again = adapter.send(message, &key).await;

    assert_eq!(
        accepted_ref(&again),
        first,
        "the repeat is answered with the first id"
    );
    assert_eq!(requests(), 2, "the fake received both requests");
    assert_eq!(deliveries(key.as_str()), 1, "the repeat delivers nothing");
    again
}

/// Once the vendor's idempotency `window` (as its fake is set) has passed, a repeat under the
/// same key is a new send: another id, a second delivery (`deliveries`, under a key).
pub async fn sent_again_after_the_window(
    adapter: &dyn Adapter,
    message: &Message,
    window: Duration,
    deliveries: impl Fn(&str) -> u64,
) {
    let key = unique_key();
    let first = accepted_ref(&adapter.send(message, &key).await);
    // A bounded wait for the window to pass, not for a condition.
    tokio::time::sleep(window + Duration::from_millis(50)).await;
    let after = accepted_ref(&adapter.send(message, &key).await);

    assert_ne!(first, after, "a send after the window is another message");
    assert_eq!(deliveries(key.as_str()), 2);
}

/// A send is visible to the look-up only after the vendor's `lag` (as its fake is set): the
/// send is accepted with an id, a look-up at once finds nothing yet, and looking up until the
/// lag and a busy machine's slack have passed finds that id alone. Returns the late look-up,
/// for the form of the vendor's answer.
pub async fn visible_only_after_the_lag(
    adapter: &dyn Adapter,
    message: &Message,
    key: &ProviderKey,
    lag: Duration,
) -> QueryResult {
    let id = accepted_ref(&adapter.send(message, key).await);

    assert_not_found_yet(&adapter.query(message, key).await);
    let late = query_until_found(adapter, message, key, lag + LAG_SLACK).await;
    assert_eq!(found(&late), [id], "{late:?}");
    late
}

/// How long past a vendor's lag a look-up may still find nothing, on a busy machine.
const LAG_SLACK: Duration = Duration::from_secs(4);

/// A look-up that fails proves nothing: after an accepted send, each of the next `failing`
/// look-ups, which the vendor's fake is set to fail, is `Unsupported`; the look-up after them
/// finds the send. Returns that last look-up, for the form of the vendor's answer.
pub async fn failed_lookups_prove_nothing(
    adapter: &dyn Adapter,
    message: &Message,
    key: &ProviderKey,
    failing: usize,
) -> QueryResult {
    accepted_ref(&adapter.send(message, key).await);

    for nth in 1..=failing {
        let lookup = adapter.query(message, key).await;
        assert!(
            matches!(lookup, QueryResult::Unsupported { .. }),
            "failed look-up {nth} of {failing}: {lookup:?}"
        );
    }
    // Without a fault the same look-up finds it.
    let lookup = adapter.query(message, key).await;
    found(&lookup);
    lookup
}
