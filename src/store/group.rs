//! Group commit for single enqueues: requests that arrive while a commit is under way share the
//! next transaction, so that one commit — one fsync on SQLite, one WAL flush on PostgreSQL —
//! accepts them all. Nobody waits for a group to fill: a committer takes whatever is queued when
//! it is free, so a lone request still commits at once. Each request is answered only after the
//! commit that holds it, with its own outcome, exactly as if it had committed alone.

use std::sync::Arc;

use tokio::sync::{Mutex, mpsc, oneshot};

use super::{AcceptOutcome, NewAccept, Store, StoreError, StoreResult};

/// The most single enqueues one transaction takes.
const MAX_GROUP: usize = 256;

type Waiting = (NewAccept, oneshot::Sender<StoreResult<AcceptOutcome>>);

/// The queue in front of the store's `accept`; cheap to clone.
#[derive(Clone)]
pub struct GroupCommit {
    queue: mpsc::Sender<Waiting>,
}

impl GroupCommit {
    /// Starts as many committers as the store commits in parallel ([`Store::writers`]).
    pub fn start(store: Arc<dyn Store>) -> Self {
        let (queue, received) = mpsc::channel(4 * MAX_GROUP);
        let received = Arc::new(Mutex::new(received));
        for _ in 0..store.writers().max(1) {
            tokio::spawn(commit_groups(store.clone(), received.clone()));
        }
        GroupCommit { queue }
    }

    /// Accepts one notification in the next group's transaction.
    pub async fn accept(&self, item: NewAccept) -> StoreResult<AcceptOutcome> {
        let (answer, outcome) = oneshot::channel();
        let gone = || StoreError::Internal(anyhow::anyhow!("the group committer has stopped"));
        self.queue.send((item, answer)).await.map_err(|_| gone())?;
        outcome.await.map_err(|_| gone())?
    }
}

/// One committer: takes the first waiting request and every other one queued behind it, commits
/// them together, answers each, and starts over. Stops when every sender is gone.
async fn commit_groups(store: Arc<dyn Store>, received: Arc<Mutex<mpsc::Receiver<Waiting>>>) {
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
        // Keys in one order in every transaction: two groups that share keys on PostgreSQL
        // wait for each other rather than deadlock.
        group.sort_by(|(a, _), (b, _)| {
            (&a.notification.tenant, a.key.as_str()).cmp(&(&b.notification.tenant, b.key.as_str()))
        });
        let (items, answers): (Vec<NewAccept>, Vec<_>) = group.into_iter().unzip();
        match store.accept(&items).await {
            Ok(outcomes) => {
                for (answer, outcome) in answers.into_iter().zip(outcomes) {
                    let _ = answer.send(Ok(outcome));
                }
            }
            // The database refuses work: every request in the group hears why.
            Err(StoreError::Unavailable(outage, why)) => {
                for answer in answers {
                    let _ = answer.send(Err(StoreError::Unavailable(outage, why.clone())));
                }
            }
            // Anything else may be one request's fault: each commits alone, so that it fails
            // only itself.
            Err(err) if items.len() == 1 => {
                if let Some(answer) = answers.into_iter().next() {
                    let _ = answer.send(Err(err));
                }
            }
            Err(_) => {
                for (item, answer) in items.into_iter().zip(answers) {
                    let outcome = store.accept(std::slice::from_ref(&item)).await;
                    let _ = answer.send(outcome.and_then(|mut o| {
                        o.pop().ok_or_else(|| {
                            StoreError::Internal(anyhow::anyhow!("accept answered nothing"))
                        })
                    }));
                }
            }
        }
    }
}
