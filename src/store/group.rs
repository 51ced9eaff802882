//! Group commit: writes that arrive while a commit is under way share the next transaction, so
//! that one commit — one fsync on SQLite, one WAL flush on PostgreSQL — holds them all. Nobody
//! waits for a group to fill: a committer takes whatever is queued when it is free, so a lone
//! write still commits at once. Each caller is answered only after the commit that holds its
//! write, with its own outcome, exactly as if it had committed alone.
//!
//! Two kinds of write go through it: single enqueues ([`Accepts`]) and the dispatcher's records
//! of what a send did ([`Records`]).

use std::cmp::Ordering;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt;
use time::OffsetDateTime;
use tokio::sync::{Mutex, mpsc, oneshot};
use tracing::Instrument;

use super::{AcceptOutcome, Claim, NewAccept, Recorded, Store, StoreError, StoreResult};
use crate::domain::Decision;

/// The most writes one transaction takes.
const MAX_GROUP: usize = 256;

/// One kind of write that can share a transaction with others of its kind.
#[async_trait]
pub trait Batch: Send + Sync + 'static {
    type Item: Send + Sync + 'static;
    type Outcome: Send + 'static;

    /// The order of a group's items in its transaction: two groups on PostgreSQL that touch the
    /// same rows then lock them in one order, and wait for each other rather than deadlock.
    fn order(a: &Self::Item, b: &Self::Item) -> Ordering;

    /// Commits `items` in one transaction, answering each in order.
    async fn commit(store: &dyn Store, items: &[Self::Item]) -> StoreResult<Vec<Self::Outcome>>;
}

/// Single enqueues: [`Notifications::accept`](super::Notifications::accept).
pub struct Accepts;

#[async_trait]
impl Batch for Accepts {
    type Item = NewAccept;
    type Outcome = AcceptOutcome;

    fn order(a: &NewAccept, b: &NewAccept) -> Ordering {
        (&a.notification.tenant, a.key.as_str()).cmp(&(&b.notification.tenant, b.key.as_str()))
    }

    async fn commit(store: &dyn Store, items: &[NewAccept]) -> StoreResult<Vec<AcceptOutcome>> {
        store.accept(items).await
    }
}

/// The dispatcher's records: [`Recording::record_all`](super::Recording::record_all), at the
/// time of the commit.
pub struct Records;

#[async_trait]
impl Batch for Records {
    type Item = (Claim, Decision);
    type Outcome = Recorded;

    fn order(a: &Self::Item, b: &Self::Item) -> Ordering {
        a.0.notification.id.cmp(&b.0.notification.id)
    }

    async fn commit(store: &dyn Store, items: &[Self::Item]) -> StoreResult<Vec<Recorded>> {
        store.record_all(items, OffsetDateTime::now_utc()).await
    }
}

/// A write waiting for its group: the item, where to answer, and the span of the caller, which
/// the group's span follows from (in a trace, a link from the commit to each write it holds).
type Waiting<B> = (
    <B as Batch>::Item,
    oneshot::Sender<StoreResult<<B as Batch>::Outcome>>,
    tracing::Span,
);

/// The queue in front of one kind of write; cheap to clone.
pub struct GroupCommit<B: Batch> {
    queue: mpsc::Sender<Waiting<B>>,
}

impl<B: Batch> Clone for GroupCommit<B> {
    fn clone(&self) -> Self {
        GroupCommit {
            queue: self.queue.clone(),
        }
    }
}

impl<B: Batch> GroupCommit<B> {
    /// Starts as many committers as the store commits in parallel ([`Store::writers`]).
    pub fn start(store: Arc<dyn Store>) -> Self {
        let (queue, received) = mpsc::channel(4 * MAX_GROUP);
        let received = Arc::new(Mutex::new(received));
        for _ in 0..store.writers().max(1) {
            tokio::spawn(commit_groups::<B>(store.clone(), received.clone()));
        }
        GroupCommit { queue }
    }

    /// Commits `item` in the next group's transaction.
    pub async fn submit(&self, item: B::Item) -> StoreResult<B::Outcome> {
        let (answer, outcome) = oneshot::channel();
        let gone = || StoreError::Internal(anyhow::anyhow!("the group committer has stopped"));
        let caller = tracing::Span::current();
        self.queue
            .send((item, answer, caller))
            .await
            .map_err(|_| gone())?;
        outcome.await.map_err(|_| gone())?
    }
}

/// One committer: takes the first waiting write and every other one queued behind it, commits
/// them together, answers each, and starts over. Stops when every sender is gone.
async fn commit_groups<B: Batch>(
    store: Arc<dyn Store>,
    received: Arc<Mutex<mpsc::Receiver<Waiting<B>>>>,
) {
    loop {
        let mut group = Vec::new();
        {
            let mut received = received.lock().await;
            match received.recv().await {
                Some(first) => group.push(first),
                None => return,
            }
            while group.len() < MAX_GROUP {
                match received.try_recv() {
                    Ok(next) => group.push(next),
                    Err(_) => break,
                }
            }
        }
        group.sort_by(|(a, ..), (b, ..)| B::order(a, b));
        let span = tracing::info_span!(parent: None, "group commit", items = group.len());
        let mut items = Vec::with_capacity(group.len());
        let mut answers = Vec::with_capacity(group.len());
        for (item, answer, caller) in group {
            span.follows_from(&caller);
            items.push(item);
            answers.push(answer);
        }
        match commit::<B>(&*store, &items).instrument(span.clone()).await {
            Ok(outcomes) => {
                for (answer, outcome) in answers.into_iter().zip(outcomes) {
                    let _ = answer.send(Ok(outcome));
                }
            }
            // The database refuses work: every caller in the group hears why.
            Err(StoreError::Unavailable(outage, why)) => {
                for answer in answers {
                    let _ = answer.send(Err(StoreError::Unavailable(outage, why.clone())));
                }
            }
            // Anything else may be one write's fault: each commits alone, so that it fails
            // only itself.
            Err(err) if items.len() == 1 => {
                if let Some(answer) = answers.into_iter().next() {
                    let _ = answer.send(Err(err));
                }
            }
            Err(_) => {
                for (item, answer) in items.into_iter().zip(answers) {
                    let outcome = commit::<B>(&*store, std::slice::from_ref(&item)).await;
                    let _ = answer.send(outcome.and_then(|mut o| {
                        o.pop().ok_or_else(|| {
                            StoreError::Internal(anyhow::anyhow!("a commit answered nothing"))
                        })
                    }));
                }
            }
        }
    }
}

/// [`Batch::commit`], with a panic turned into an error: the committer must outlive it, or every
/// later write of its kind would hear only that the committer has stopped. The transaction the
/// panic left is dropped, and so rolled back.
async fn commit<B: Batch>(store: &dyn Store, items: &[B::Item]) -> StoreResult<Vec<B::Outcome>> {
    AssertUnwindSafe(B::commit(store, items))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(StoreError::Internal(anyhow::anyhow!(
                "a commit panicked: {why}"
            )))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A committer of `B` on a new SQLite store, in the directory returned.
    async fn committer<B: Batch>() -> (GroupCommit<B>, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("herald-group-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("group.db").display());
        let store = crate::store::connect(&url, 1).await.unwrap();
        (GroupCommit::start(store), dir)
    }

    /// Doubles numbers; a group holding a negative one fails as a whole. Keeps every group it
    /// was asked to commit.
    struct Doubling;

    static GROUPS: std::sync::Mutex<Vec<Vec<i32>>> = std::sync::Mutex::new(Vec::new());

    #[async_trait]
    impl Batch for Doubling {
        type Item = i32;
        type Outcome = i32;

        fn order(a: &i32, b: &i32) -> Ordering {
            a.cmp(b)
        }

        async fn commit(_: &dyn Store, items: &[i32]) -> StoreResult<Vec<i32>> {
            GROUPS.lock().unwrap().push(items.to_vec());
            if items.iter().any(|i| *i < 0) {
                return Err(StoreError::Conflict("negative".into()));
            }
            Ok(items.iter().map(|i| i * 2).collect())
        }
    }

    // One thread: every submit below is queued before the committer first runs.
    #[tokio::test(flavor = "current_thread")]
    async fn writes_queued_together_commit_together_and_a_bad_one_fails_only_itself() {
        let (group, dir) = committer::<Doubling>().await;
        let (a, b, c) = tokio::join!(group.submit(3), group.submit(-1), group.submit(1));
        assert_eq!(a.unwrap(), 6);
        assert!(matches!(b, Err(StoreError::Conflict(_))));
        assert_eq!(c.unwrap(), 2);
        assert_eq!(
            *GROUPS.lock().unwrap(),
            [vec![-1, 1, 3], vec![-1], vec![1], vec![3]],
            "one ordered group, then each write alone"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Commits anything but zero, at which it panics.
    struct Panicking;

    #[async_trait]
    impl Batch for Panicking {
        type Item = i32;
        type Outcome = i32;

        fn order(a: &i32, b: &i32) -> Ordering {
            a.cmp(b)
        }

        async fn commit(_: &dyn Store, items: &[i32]) -> StoreResult<Vec<i32>> {
            assert!(!items.contains(&0), "zero");
            Ok(items.to_vec())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_panicking_write_fails_only_itself_and_the_committer_goes_on() {
        let (group, dir) = committer::<Panicking>().await;
        let (zero, five) = tokio::join!(group.submit(0), group.submit(5));
        match zero {
            Err(StoreError::Internal(why)) => assert!(why.to_string().contains("panicked: zero")),
            other => panic!("the panicking write should fail, got {other:?}"),
        }
        assert_eq!(five.unwrap(), 5, "its group-mate commits alone");
        assert_eq!(
            group.submit(7).await.unwrap(),
            7,
            "later writes still commit"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
