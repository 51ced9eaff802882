//! Time in the database. PostgreSQL stores `timestamptz`. SQLite has no time type, and sqlx
//! writes RFC 3339 with a variable number of fractional digits, whose text order is not time
//! order ("…:00Z" sorts after "…:00.5Z"). Herald compares and sorts times in SQL (due work,
//! leases), so on SQLite it writes UTC with exactly six fractional digits instead.

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgTypeInfo, PgValueFormat, PgValueRef};
use sqlx::sqlite::{SqliteArgumentsBuffer, SqliteTypeInfo, SqliteValueRef};
use sqlx::{Decode, Encode, Postgres, Sqlite, Type};
use time::format_description::BorrowedFormatItem;
use time::format_description::well_known::Rfc3339;
use time::macros::{datetime, format_description};
use time::{OffsetDateTime, UtcOffset};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(OffsetDateTime);

const SQLITE_FORMAT: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");

impl Timestamp {
    pub fn into_inner(self) -> OffsetDateTime {
        self.0
    }
}

impl From<OffsetDateTime> for Timestamp {
    fn from(t: OffsetDateTime) -> Self {
        Timestamp(t)
    }
}

/// In a JSON document handed to a statement (the attempts a claim starts): the text SQLite
/// stores, which PostgreSQL reads as a `timestamptz` too.
impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = self
            .0
            .to_offset(UtcOffset::UTC)
            .format(SQLITE_FORMAT)
            .map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(&text)
    }
}

impl Type<Postgres> for Timestamp {
    fn type_info() -> PgTypeInfo {
        <OffsetDateTime as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for Timestamp {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        Encode::<Postgres>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> Decode<'r, Postgres> for Timestamp {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        match value.format() {
            // Microseconds since 2000-01-01 UTC, added with a check: PostgreSQL holds years up
            // to 294276, and sqlx's own decoding panics on one past 9999 (a row this build
            // cannot read must be an error the store can set aside, never a panic).
            PgValueFormat::Binary => {
                let micros = <i64 as Decode<Postgres>>::decode(value)?;
                datetime!(2000-01-01 0:00 UTC)
                    .checked_add(time::Duration::microseconds(micros))
                    .map(Timestamp)
                    .ok_or_else(|| format!("a time {micros} µs after 2000 is out of range").into())
            }
            PgValueFormat::Text => {
                <OffsetDateTime as Decode<Postgres>>::decode(value).map(Timestamp)
            }
        }
    }
}

impl Type<Sqlite> for Timestamp {
    fn type_info() -> SqliteTypeInfo {
        <String as Type<Sqlite>>::type_info()
    }
}

impl Encode<'_, Sqlite> for Timestamp {
    fn encode_by_ref(&self, buf: &mut SqliteArgumentsBuffer) -> Result<IsNull, BoxDynError> {
        let text = self.0.to_offset(UtcOffset::UTC).format(SQLITE_FORMAT)?;
        Encode::<Sqlite>::encode(text, buf)
    }
}

impl<'r> Decode<'r, Sqlite> for Timestamp {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        let text = <&str as Decode<Sqlite>>::decode(value)?;
        Ok(Timestamp(OffsetDateTime::parse(text, &Rfc3339)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_text_sorts_like_time() {
        let times = [
            datetime!(2026-01-01 00:00:00 UTC),
            datetime!(2026-01-01 00:00:00.5 UTC),
            datetime!(2026-01-01 00:00:01 +01:00),
            datetime!(2026-01-01 00:00:01 UTC),
        ];
        let text: Vec<String> = times
            .iter()
            .map(|t| t.to_offset(UtcOffset::UTC).format(SQLITE_FORMAT).unwrap())
            .collect();
        let mut sorted = text.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            vec![
                text[2].clone(),
                text[0].clone(),
                text[1].clone(),
                text[3].clone()
            ]
        );
        assert_eq!(text[0], "2026-01-01T00:00:00.000000Z");
        assert_eq!(OffsetDateTime::parse(&text[1], &Rfc3339).unwrap(), times[1]);
    }
}
