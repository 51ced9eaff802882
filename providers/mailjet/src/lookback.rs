//! Since when a send of a notification can exist, for the outcome query.
//!
//! Nothing about a notification can have been sent before the notification existed. Herald's
//! notification ids are UUIDv7, whose first 48 bits are the creation time in milliseconds, so
//! the id bounds the look-up however late herald reconciles. The `CustomID` already singles the
//! notification out; the bound only keeps the look-up from depending on whatever default time
//! range Mailjet may apply when none is given (the docs name none).

use std::time::Duration;

use time::OffsetDateTime;
use uuid::{Uuid, Version};

/// Allowed disagreement between herald's clock (which stamped the id) and Mailjet's. Generous,
/// because a wider window costs nothing here: the `CustomID` decides what matches.
pub(crate) const CLOCK_SKEW: Duration = Duration::from_secs(60 * 60);

/// The earliest moment a send of `notification_id` can have reached Mailjet, if the id says.
pub(crate) fn window_start(notification_id: &str, now: OffsetDateTime) -> Option<OffsetDateTime> {
    let id = Uuid::parse_str(notification_id).ok()?;
    if id.get_version() != Some(Version::SortRand) {
        return None;
    }
    let (secs, _) = id.get_timestamp()?.to_unix();
    let created = OffsetDateTime::from_unix_timestamp(i64::try_from(secs).ok()?).ok()?;
    // An id stamped in the future is not a timestamp to trust.
    (created <= now + CLOCK_SKEW).then(|| created - CLOCK_SKEW)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_v7_bounds_the_window_at_its_own_creation_less_the_skew() {
        let id = Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            1_780_000_000,
            0,
        ));
        let now = OffsetDateTime::from_unix_timestamp(1_780_000_000 + 86_400).unwrap();
        let start = window_start(&id.to_string(), now).unwrap();
        assert_eq!(start.unix_timestamp(), 1_780_000_000 - 3600);
    }

    #[test]
    fn other_ids_give_no_bound() {
        let now = OffsetDateTime::now_utc();
        assert_eq!(window_start("ntf-1", now), None);
        assert_eq!(window_start(&Uuid::new_v4().to_string(), now), None);
    }
}
