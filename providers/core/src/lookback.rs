//! How far back a vendor's look-up must search for a notification's sends.
//!
//! Nothing about a notification can have been sent before the notification existed. herald's
//! notification ids are UUIDv7, whose first 48 bits are the creation time in milliseconds, so
//! the id itself bounds the search, however late herald reconciles (after an outage, say).

use std::time::Duration;

use time::OffsetDateTime;
use uuid::{Uuid, Version};

/// The earliest moment a send of `notification_id` can have reached a vendor whose clock may
/// disagree with herald's (which stamped the id) by `skew`: the id's time less the skew.
/// `None` where the id is not a UUIDv7, or is stamped past `now` and the skew (not a time to
/// trust).
pub fn earliest_send(
    notification_id: &str,
    now: OffsetDateTime,
    skew: Duration,
) -> Option<OffsetDateTime> {
    let id = Uuid::parse_str(notification_id).ok()?;
    if id.get_version() != Some(Version::SortRand) {
        return None;
    }
    let (secs, nanos) = id.get_timestamp()?.to_unix();
    let created = OffsetDateTime::from_unix_timestamp(i64::try_from(secs).ok()?).ok()?
        + time::Duration::nanoseconds(i64::from(nanos));
    (created <= now + skew).then(|| created - skew)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKEW: Duration = Duration::from_secs(600);

    #[test]
    fn a_uuid_v7_bounds_the_search_at_its_own_creation_less_the_skew() {
        let id = Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            1_780_000_000,
            0,
        ));
        let now = OffsetDateTime::from_unix_timestamp(1_780_000_000 + 86_400).unwrap();
        let start = earliest_send(&id.to_string(), now, SKEW).unwrap();
        assert_eq!(start.unix_timestamp(), 1_780_000_000 - 600);
    }

    #[test]
    fn other_ids_and_ids_from_the_future_give_no_bound() {
        let now = OffsetDateTime::from_unix_timestamp(1_780_000_000).unwrap();
        let future = Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            1_780_000_601,
            0,
        ));
        for id in ["ntf-1", &Uuid::new_v4().to_string(), &future.to_string()] {
            assert_eq!(earliest_send(id, now, SKEW), None, "{id}");
        }
    }
}
