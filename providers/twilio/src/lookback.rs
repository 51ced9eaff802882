//! How far back a send of a notification can lie, for the outcome query: from the id's own
//! time (see [`herald_provider::lookback`]), else a fixed look-back from now, counted in the
//! whole UTC days that Twilio's `DateSent` filter takes.

use std::time::Duration;

use time::OffsetDateTime;

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
    match herald_provider::lookback::earliest_send(notification_id, now, CLOCK_SKEW) {
        Some(start) => (start, true),
        None => (now - FALLBACK_LOOKBACK, false),
    }
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
    use uuid::Uuid;

    #[test]
    fn a_uuid_v7_bounds_the_window_at_its_own_creation_less_ten_minutes() {
        let id = Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            1_780_000_000,
            0,
        ));
        let now = OffsetDateTime::from_unix_timestamp(1_780_000_000 + 3 * 86_400).unwrap();
        assert_eq!(
            window_start(&id.to_string(), now),
            (
                OffsetDateTime::from_unix_timestamp(1_780_000_000 - 600).unwrap(),
                true
            )
        );
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
