//! How far back a send of a notification can lie, for the outcome query.
//!
//! Nothing about a notification can have been sent before the notification existed. Herald's
//! notification ids are UUIDv7, whose first 48 bits are the creation time in milliseconds, so
//! the id itself bounds the search — however late herald reconciles (after an outage, say).
//! Where an id is not a UUIDv7, the search falls back to a fixed look-back from now.

use std::time::Duration;

use time::OffsetDateTime;
use uuid::{Uuid, Version};

/// Allowed disagreement between herald's clock (which stamped the id) and Twilio's (which
/// stamps `date_created`). Hosts on NTP agree to well under a second; ten minutes also covers
/// a badly drifting one, at the price of a slightly wider window for identical texts.
pub(crate) const CLOCK_SKEW: Duration = Duration::from_secs(10 * 60);

/// Used when the notification id carries no time: "today and yesterday" in UTC, as Twilio's
/// `DateSent` filter counts in whole UTC days.
pub(crate) const FALLBACK_LOOKBACK: Duration = Duration::from_secs(24 * 60 * 60);

/// The earliest moment a send of `notification_id` can have been created at the vendor, and
/// whether that came from the id (`true`) or from the fallback (`false`).
pub(crate) fn window_start(notification_id: &str, now: OffsetDateTime) -> (OffsetDateTime, bool) {
    match created_at(notification_id) {
        // An id stamped in the future is not a timestamp to trust.
        Some(created) if created <= now + CLOCK_SKEW => (created - CLOCK_SKEW, true),
        _ => (now - FALLBACK_LOOKBACK, false),
    }
}

fn created_at(notification_id: &str) -> Option<OffsetDateTime> {
    let id = Uuid::parse_str(notification_id).ok()?;
    if id.get_version() != Some(Version::SortRand) {
        return None;
    }
    let (secs, nanos) = id.get_timestamp()?.to_unix();
    let secs = i64::try_from(secs).ok()?;
    OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .map(|t| t + time::Duration::nanoseconds(i64::from(nanos)))
}

/// `YYYY-MM-DD` of `at` in UTC, as Twilio's `DateSent` filter takes it.
pub(crate) fn utc_date(at: OffsetDateTime) -> String {
    let date = at.to_offset(time::UtcOffset::UTC).date();
    format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn a_uuid_v7_bounds_the_window_at_its_own_creation_less_the_skew() {
        let id = Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            1_780_000_000,
            0,
        ));
        let now = OffsetDateTime::from_unix_timestamp(1_780_000_000 + 3 * 86_400).unwrap();
        let (start, from_id) = window_start(&id.to_string(), now);
        assert!(from_id);
        assert_eq!(start.unix_timestamp(), 1_780_000_000 - 600);
    }

    #[test]
    fn other_ids_fall_back_to_a_day() {
        let now = datetime!(2026-11-29 00:30:00 UTC);
        for id in ["ntf-1", &Uuid::new_v4().to_string()] {
            let (start, from_id) = window_start(id, now);
            assert!(!from_id);
            assert_eq!(utc_date(start), "2026-11-28", "yesterday, for {id}");
        }
    }

    #[test]
    fn dates_are_utc_days() {
        assert_eq!(
            utc_date(datetime!(2026-01-02 23:59:59 -02:00)),
            "2026-01-03"
        );
    }
}
