//! A timeout that keeps evidence. A process that stood still (frozen, swapped out, starved)
//! past a call's limit wakes with its timer due and, often, the vendor's answer waiting on the
//! socket: an ordinary timeout may fire first and throw that answer away, though it is the only
//! word on what the vendor did. [`within`] gives such a call a moment more.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How late a timer must fire to count as having slept through its limit rather than as busy.
const OVERSLEPT: Duration = Duration::from_millis(250);
/// How long a call that slept through its limit may go on to read what came meanwhile.
pub const GRACE: Duration = Duration::from_millis(500);
/// A client's own timeout for a call that [`within`] cuts: a client timer (reqwest's) is looked
/// at before the answer, so on waking it would throw the answer away; a day never fires first.
pub const OUT_OF_THE_WAY: Duration = Duration::from_secs(24 * 3600);

/// Awaits `call` for at most `limit`, polling it before its timer; `None` when it did not end
/// in time. Where the timer fired more than [`OVERSLEPT`] late, the call gets [`GRACE`] more.
pub async fn within<F: Future>(limit: Duration, call: F) -> Option<F::Output> {
    let started = Instant::now();
    let mut call = std::pin::pin!(call);
    match tokio::time::timeout(limit, call.as_mut()).await {
        Ok(done) => Some(done),
        Err(_) if started.elapsed() > limit + OVERSLEPT => {
            tokio::time::timeout(GRACE, call).await.ok()
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_that_ends_in_time_is_answered_and_one_that_does_not_is_cut() {
        assert_eq!(within(Duration::from_secs(1), async { 7 }).await, Some(7));
        let slow = within(
            Duration::from_millis(20),
            tokio::time::sleep(Duration::from_secs(5)),
        );
        assert_eq!(slow.await, None);
    }

    /// An answer that comes `after` the call starts, through another task (as a connection
    /// task hands a response to its request).
    fn answer_after(after: Duration) -> tokio::sync::oneshot::Receiver<&'static str> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = tx.send("accepted");
        });
        rx
    }

    #[tokio::test]
    async fn a_call_that_slept_through_its_limit_reads_what_comes_just_after() {
        // The process stands still for 400 ms (a blocking sleep on the runtime's only thread)
        // with a 10 ms limit; the answer comes 100 ms after it wakes.
        let answer = answer_after(Duration::from_millis(500));
        let frozen = async {
            tokio::task::yield_now().await;
            std::thread::sleep(Duration::from_millis(400));
        };
        let (read, ()) = tokio::join!(within(Duration::from_millis(10), answer), frozen);
        assert_eq!(read.map(Result::unwrap), Some("accepted"));
    }

    #[tokio::test]
    async fn a_call_whose_timer_fired_on_time_gets_no_grace() {
        let answer = answer_after(Duration::from_millis(100));
        assert_eq!(within(Duration::from_millis(10), answer).await, None);
    }
}
