//! The process's budget for attachment bytes in memory: what the enqueues that carry attachments
//! and the sends that carry them may hold at once. An enqueue holds its request body whole (and
//! its parsed and decoded forms), a send its expanded request; without a bound, twenty 10 MiB
//! attachments arriving or leaving together hold well over a gigabyte, and a container's memory
//! limit kills the process mid-send. Work that finds the budget spent waits for room: an enqueue
//! for a few seconds, then a 503 that asks the client to try again; a send until its deadline,
//! then a hold (no attempt is spent). Memory stays bounded, and nothing is lost.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget's grain: reservations are rounded up to it.
const UNIT: usize = 64 * 1024;

pub struct Budget {
    room: Arc<Semaphore>,
    units: u32,
}

/// Room reserved in the budget, given back when dropped.
pub struct Reserved {
    _room: OwnedSemaphorePermit,
}

impl Budget {
    /// A budget of `bytes` (at least one unit).
    pub fn new(bytes: usize) -> Budget {
        let units = u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .max(1);
        Budget {
            room: Arc::new(Semaphore::new(units as usize)),
            units,
        }
    }

    /// Room for `bytes`, waiting for it until `until`; `None` if it did not come by then. A
    /// reservation larger than the whole budget takes the whole budget: it waits until nothing
    /// else holds any, and then goes alone.
    pub async fn reserve(&self, bytes: usize, until: Instant) -> Option<Reserved> {
        let units = u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .clamp(1, self.units);
        let room = self.room.clone().acquire_many_owned(units);
        match tokio::time::timeout_at(until.into(), room).await {
            Ok(Ok(permit)) => Some(Reserved { _room: permit }),
            // Never closed; a timeout is the only way not to get room.
            Ok(Err(_)) | Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn room_is_waited_for_until_a_deadline_and_given_back() {
        let budget = Budget::new(4 * UNIT);
        let soon = || Instant::now() + Duration::from_millis(50);
        let first = budget.reserve(3 * UNIT, soon()).await.expect("room");
        assert!(
            budget.reserve(2 * UNIT, soon()).await.is_none(),
            "only one unit is left"
        );
        let small = budget
            .reserve(1, soon())
            .await
            .expect("a byte takes a unit");
        drop((first, small));
        let whole = budget
            .reserve(100 * UNIT, soon())
            .await
            .expect("more than the budget takes all of it, alone");
        assert!(budget.reserve(1, soon()).await.is_none());
        drop(whole);
        assert!(budget.reserve(4 * UNIT, soon()).await.is_some());
    }
}
