//! The attachment contents this process read last, kept in memory up to a bound (the first read
//! goes first) and shared, never copied, by the sends that carry them: a file sent to 10,000
//! recipients is read from the database about once per process, not once per send. Reads from
//! the database go one at a time, so that sends missing the same file at the same moment wait
//! for the one read and find it kept, rather than each holding a copy. A content is fixed by its
//! SHA-256, so a kept one can never be stale.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;

use crate::store::{Store, StoreResult};

/// What the cache holds at most: a few of the largest attachment sets. Part of the memory a
/// process needs (the README's "Memory"), beside the attachment budget.
pub const CACHE_BYTES: usize = 32 * 1024 * 1024;

#[derive(Default)]
pub struct Files {
    kept: Mutex<Kept>,
    /// Held while the database is read: one read at a time (see the module's doc).
    reading: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Kept {
    by_sha256: HashMap<String, Bytes>,
    /// Oldest first: what goes when the bound is reached.
    order: VecDeque<String>,
    bytes: usize,
}

impl Files {
    /// The contents of `named` (by SHA-256) that are stored; those not stored are absent.
    pub async fn get(
        &self,
        store: &dyn Store,
        named: &[&str],
    ) -> StoreResult<BTreeMap<String, Bytes>> {
        let (mut found, missing) = self.kept(named);
        if missing.is_empty() {
            return Ok(found);
        }
        let _one_reader = self.reading.lock().await;
        // Another send may have read them while this one waited.
        let (again, missing) = self.kept(&missing);
        found.extend(again);
        if missing.is_empty() {
            return Ok(found);
        }
        let read = store.files(&missing).await?;
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        for (sha256, content) in read {
            let content = Bytes::from(content);
            kept.keep(&sha256, &content);
            found.insert(sha256, content);
        }
        Ok(found)
    }

    /// The kept contents of `named`, and the names not kept.
    fn kept<'n>(&self, named: &[&'n str]) -> (BTreeMap<String, Bytes>, Vec<&'n str>) {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let mut found = BTreeMap::new();
        let mut missing = Vec::new();
        for sha256 in named {
            match kept.by_sha256.get(*sha256) {
                Some(content) => {
                    found.insert((*sha256).to_owned(), content.clone());
                }
                None => missing.push(*sha256),
            }
        }
        (found, missing)
    }
}

impl Kept {
    fn keep(&mut self, sha256: &str, content: &Bytes) {
        if content.len() > CACHE_BYTES || self.by_sha256.contains_key(sha256) {
            return;
        }
        while self.bytes + content.len() > CACHE_BYTES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(gone) = self.by_sha256.remove(&oldest) {
                self.bytes -= gone.len();
            }
        }
        self.bytes += content.len();
        self.order.push_back(sha256.to_owned());
        self.by_sha256.insert(sha256.to_owned(), content.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_contents_go_when_the_bound_is_reached() {
        let mut kept = Kept::default();
        let third = Bytes::from(vec![0u8; CACHE_BYTES / 3]);
        for sha256 in ["a", "b", "c"] {
            kept.keep(sha256, &third);
        }
        kept.keep("a", &third);
        assert_eq!(kept.by_sha256.len(), 3, "a content kept twice is kept once");
        kept.keep("d", &third);
        assert!(!kept.by_sha256.contains_key("a"));
        assert!(
            ["b", "c", "d"]
                .iter()
                .all(|s| kept.by_sha256.contains_key(*s))
        );
        assert!(kept.bytes <= CACHE_BYTES);
        kept.keep("huge", &Bytes::from(vec![0u8; CACHE_BYTES + 1]));
        assert!(
            !kept.by_sha256.contains_key("huge"),
            "larger than the bound: not kept"
        );
    }
}
