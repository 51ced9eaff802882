//! Parsed values: each type can only hold a valid value, so a check done here is never repeated.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::macros::datetime;
use time::{OffsetDateTime, UtcOffset};
use uuid::Uuid;

/// A request field that failed to parse, named as the client spelled it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// A notification's id: a UUIDv7, so ids sort by creation time and serve as the list cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NotificationId(Uuid);

impl NotificationId {
    pub fn new() -> Self {
        NotificationId(Uuid::now_v7())
    }

    pub fn from_uuid(id: Uuid) -> Self {
        NotificationId(id)
    }

    pub fn parse(s: &str) -> Option<Self> {
        Uuid::parse_str(s).ok().map(NotificationId)
    }

    pub fn as_uuid(&self) -> Uuid {
        self.0
    }

    /// The notification a provider key belongs to: every key starts with its notification's id
    /// (see `Notification::provider_key`).
    pub fn of_provider_key(key: &str) -> Option<NotificationId> {
        let id = key.get(..36)?;
        match key.as_bytes().get(36) {
            None | Some(b'-') => Uuid::try_parse(id).ok().map(NotificationId),
            Some(_) => None,
        }
    }
}

impl Default for NotificationId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for NotificationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An upstream's `Idempotency-Key`: 1–255 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub const MAX_LEN: usize = 255;

    pub fn parse(field: &str, s: &str) -> Result<Self, FieldError> {
        if s.is_empty() || s.len() > Self::MAX_LEN {
            return Err(FieldError::new(field, "must be 1 to 255 characters"));
        }
        if !s.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err(FieldError::new(field, "must be printable ASCII"));
        }
        Ok(IdempotencyKey(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn reject_control_chars(field: &str, s: &str) -> Result<(), FieldError> {
    if s.chars().any(|c| c == '\r' || c == '\n') {
        return Err(FieldError::new(field, "must not contain CR or LF"));
    }
    if s.chars().any(char::is_control) {
        return Err(FieldError::new(
            field,
            "must not contain control characters",
        ));
    }
    Ok(())
}

/// The times herald takes from outside, in UTC: from the Unix epoch to the end of year 9999.
/// RFC 3339 allows an offset that moves a four-digit year out of that range (`0000-01-01T00:00:00
/// +23:59` is year −1 in UTC), and such a time could be stored but not read back: every claim
/// of a queue that held one failed.
const EARLIEST: OffsetDateTime = datetime!(1970-01-01 00:00:00 UTC);
const LATEST: OffsetDateTime = datetime!(9999-12-31 23:59:59.999999999 UTC);

/// An RFC 3339 time from outside (a body, a query, a vendor's report), in UTC and in range.
pub fn parse_time(field: &str, s: &str) -> Result<OffsetDateTime, FieldError> {
    let t = OffsetDateTime::parse(s, &Rfc3339).map_err(|_| {
        FieldError::new(
            field,
            format!(
                "`{}` is not an RFC 3339 date-time: use e.g. 2026-12-01T09:30:00Z or \
                 2026-12-01T10:30:00+01:00 (a `T`, seconds, and a zone)",
                s.chars().take(64).collect::<String>()
            ),
        )
    })?;
    in_range(t).ok_or_else(|| {
        FieldError::new(
            field,
            "must be between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z in UTC",
        )
    })
}

/// `t` in UTC, if it is in the range of times herald takes from outside.
pub fn in_range(t: OffsetDateTime) -> Option<OffsetDateTime> {
    t.checked_to_offset(UtcOffset::UTC)
        .filter(|t| (EARLIEST..=LATEST).contains(t))
}

/// `s` as given, unless it holds U+0000 (see [`without_nul`]).
pub fn text_without_nul(field: &str, s: &str) -> Result<String, FieldError> {
    if s.contains('\0') {
        Err(FieldError::new(
            field,
            "must not contain the NUL character (U+0000)",
        ))
    } else {
        Ok(s.to_owned())
    }
}

/// PostgreSQL cannot store U+0000 in text or JSON, and SQLite would: refused in every body, at
/// its path, so that both backends answer the same.
pub fn without_nul(value: &Value, path: &str) -> Result<(), FieldError> {
    let at = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    let refuse = |field: String| {
        Err(FieldError::new(
            field,
            "must not contain the NUL character (U+0000)",
        ))
    };
    match value {
        Value::String(s) if s.contains('\0') => refuse(if path.is_empty() {
            "body".to_owned()
        } else {
            path.to_owned()
        }),
        Value::Object(map) => {
            for (key, item) in map {
                if key.contains('\0') {
                    return refuse(at(&key.replace('\0', "\\u0000")));
                }
                without_nul(item, &at(key))?;
            }
            Ok(())
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                without_nul(item, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Checks a value that ends up in a protocol header (a mail header, an HTTP header line):
/// CR or LF there would let a client inject headers of its own.
pub(crate) fn header_safe(field: &str, s: &str, max_len: usize) -> Result<(), FieldError> {
    reject_control_chars(field, s)?;
    if s.len() > max_len {
        return Err(FieldError::new(
            field,
            format!("must be at most {max_len} bytes"),
        ));
    }
    Ok(())
}

/// An email address as a mail server will take it: `local@domain`, no display name, no
/// whitespace, a domain of dot-separated letters, digits and hyphens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailAddress(String);

impl EmailAddress {
    pub fn parse(field: &str, s: &str) -> Result<Self, FieldError> {
        header_safe(field, s, 254)?;
        let invalid = || FieldError::new(field, "must be an email address like ada@example.com");
        let (local, domain) = s.rsplit_once('@').ok_or_else(invalid)?;
        let local_ok = !local.is_empty()
            && local.len() <= 64
            && !local.starts_with('.')
            && !local.ends_with('.')
            && !local.contains("..")
            && local
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c));
        let domain_ok = domain.contains('.')
            && domain.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
        if local_ok && domain_ok {
            Ok(EmailAddress(s.to_owned()))
        } else {
            Err(invalid())
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A phone number in E.164: `+`, then 8 to 15 digits, the first not zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhoneNumber(String);

impl PhoneNumber {
    pub fn parse(field: &str, s: &str) -> Result<Self, FieldError> {
        let digits = s.strip_prefix('+').unwrap_or("");
        let valid = (8..=15).contains(&digits.len())
            && digits.bytes().all(|b| b.is_ascii_digit())
            && !digits.starts_with('0');
        if valid {
            Ok(PhoneNumber(s.to_owned()))
        } else {
            Err(FieldError::new(
                field,
                "must be an E.164 phone number like +14155550100",
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A push target: a device token or subscription id, opaque to herald but bounded and clean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushTarget(String);

impl PushTarget {
    pub fn parse(field: &str, s: &str) -> Result<Self, FieldError> {
        header_safe(field, s, 4096)?;
        if s.is_empty() || s.chars().any(char::is_whitespace) {
            return Err(FieldError::new(
                field,
                "must be a device token without whitespace",
            ));
        }
        Ok(PushTarget(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A chat destination: the id of a team's chat channel (Slack's `C0123456789`), 2 to 64
/// uppercase ASCII letters and digits. Not its name: a name can be given to another channel,
/// and a look-up of what was posted reads one channel's history by its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatTarget(String);

impl ChatTarget {
    pub fn parse(field: &str, s: &str) -> Result<Self, FieldError> {
        let id = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit();
        if !(2..=64).contains(&s.len()) || !s.chars().all(id) {
            return Err(FieldError::new(
                field,
                "must be a chat channel's id like C0123456789",
            ));
        }
        Ok(ChatTarget(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A webhook endpoint: an absolute `http` or `https` URL with a host and no credentials.
/// Where it may point (loopback, private ranges) is the webhook route's decision, after DNS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl(String);

impl WebhookUrl {
    pub fn parse(field: &str, s: &str) -> Result<Self, FieldError> {
        // The URL parser silently strips tabs and newlines, so check the raw text first.
        header_safe(field, s, 2048)?;
        let url = url::Url::parse(s)
            .map_err(|e| FieldError::new(field, format!("must be an absolute URL ({e})")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FieldError::new(field, "must be an http or https URL"));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(FieldError::new(field, "must name a host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(FieldError::new(field, "must not carry credentials"));
        }
        Ok(WebhookUrl(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_keys_are_1_to_255_printable_ascii() {
        assert!(IdempotencyKey::parse("k", "order-42/attempt 1").is_ok());
        assert!(IdempotencyKey::parse("k", &"x".repeat(255)).is_ok());
        assert!(IdempotencyKey::parse("k", "").is_err());
        assert!(IdempotencyKey::parse("k", &"x".repeat(256)).is_err());
        assert!(IdempotencyKey::parse("k", "tab\there").is_err());
        assert!(IdempotencyKey::parse("k", "ключ").is_err());
    }

    #[test]
    fn email_addresses_are_plain_addr_specs() {
        for ok in [
            "ada@example.com",
            "a.b+tag@mail.example.co.uk",
            "x_y@a-b.io",
        ] {
            assert!(EmailAddress::parse("to", ok).is_ok(), "{ok}");
        }
        for bad in [
            "ada",
            "@example.com",
            "ada@",
            "ada@localhost",
            "Ada <ada@example.com>",
            "ada@example.com\r\nBcc: eve@example.com",
            "a..b@example.com",
            "ada@-example.com",
            "ada @example.com",
        ] {
            assert!(EmailAddress::parse("to", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn phone_numbers_are_e164() {
        assert!(PhoneNumber::parse("to", "+14155550100").is_ok());
        for bad in [
            "14155550100",
            "+0415555010",
            "+1415",
            "+1415555010012345",
            "+1 415 555",
        ] {
            assert!(PhoneNumber::parse("to", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn webhook_urls_are_http_or_https_without_credentials() {
        assert!(WebhookUrl::parse("to", "https://hooks.example.com/h?x=1").is_ok());
        assert!(WebhookUrl::parse("to", "http://127.0.0.1:9000/h").is_ok());
        for bad in [
            "ftp://example.com/",
            "https://user:pw@example.com/",
            "/relative",
            "https://example.com/\nx",
            "javascript:alert(1)",
        ] {
            assert!(WebhookUrl::parse("to", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_field_error_names_its_field() {
        let err = header_safe("subject", "Hi\r\nBcc: x", 100).unwrap_err();
        assert_eq!(err.field, "subject");
        assert!(err.message.contains("CR or LF"));
    }
}
