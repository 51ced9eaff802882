//! The fields only an email has beyond recipient and content: a sender within what the route
//! allows, a reply address, copies, tags and custom headers. Each ends up in a mail header or a
//! vendor's JSON, so each is checked here, before anything is stored; an adapter receives them
//! as [`EmailOptions`] and never needs to check them again.

use std::collections::BTreeMap;

use herald_provider::{EmailOptions, split_mailbox};
use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};

use super::values::header_safe;
use super::{Channel, EmailAddress, FieldError, RouteInfo};

/// Resend's limit, the lowest among the email vendors herald speaks to.
const MAX_RECIPIENTS: usize = 50;
const MAX_TAGS: usize = 20;
const MAX_TAG_CHARS: usize = 256;
const MAX_HEADERS: usize = 20;
/// RFC 5322's line limit, less the room a name and colon take.
const MAX_HEADER_VALUE_BYTES: usize = 900;
const MAX_DISPLAY_NAME_CHARS: usize = 100;

/// Headers that the adapters write from herald's own fields, or that belong to the mail
/// system (routing, authentication results, bounces and receipts): a custom header may not
/// set any of them. (Every `Content-*`, `Resent-*` and `ARC-*` header is reserved too: the
/// adapters write the MIME structure, and the others are the relays'.)
const RESERVED_HEADERS: [&str; 20] = [
    "authentication-results",
    "bcc",
    "cc",
    "date",
    "delivered-to",
    "disposition-notification-to",
    "dkim-signature",
    "errors-to",
    "from",
    "message-id",
    "mime-version",
    "received",
    "received-spf",
    "reply-to",
    "return-path",
    "return-receipt-to",
    "sender",
    "subject",
    "to",
    "x-original-to",
];
const RESERVED_PREFIXES: [&str; 3] = ["content-", "resent-", "arc-"];

/// Characters that reorder how text is shown (bidirectional overrides and isolates): in a
/// display name they make `moc.evil` read as `live.com`, in a filename `fdp.exe` read as
/// `exe.pdf`.
pub(super) const BIDI_CONTROLS: [char; 11] = [
    '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}',
    '\u{2067}', '\u{2068}', '\u{2069}',
];

/// Whether `c` hides or disguises text: a formatting character (zero-width, soft hyphen, the
/// bidirectional controls) or a separator other than the plain space (an em space, U+2028).
pub(super) fn hides_text(c: char) -> bool {
    c.general_category() == GeneralCategory::Format
        || (c.general_category_group() == GeneralCategoryGroup::Separator && c != ' ')
}

/// The email fields of a request, as the client sent them.
pub(super) struct EmailFields<'a> {
    pub from: Option<&'a str>,
    pub reply_to: Option<&'a str>,
    pub cc: &'a [String],
    pub bcc: &'a [String],
    pub tags: Option<&'a Map<String, Value>>,
    pub headers: Option<&'a Map<String, Value>>,
}

impl EmailFields<'_> {
    /// The fields as stored and handed to the adapter, or the first one that is wrong.
    pub(super) fn parse(
        &self,
        channel: Channel,
        route: &str,
        info: &RouteInfo,
    ) -> Result<EmailOptions, FieldError> {
        if channel != Channel::Email {
            let given = [
                ("from", self.from.is_some()),
                ("reply_to", self.reply_to.is_some()),
                ("cc", !self.cc.is_empty()),
                ("bcc", !self.bcc.is_empty()),
                ("tags", self.tags.is_some_and(|t| !t.is_empty())),
                ("headers", self.headers.is_some_and(|h| !h.is_empty())),
            ];
            return match given.iter().find(|(_, set)| *set) {
                Some((field, _)) => Err(FieldError::new(
                    *field,
                    format!("is not used on the {channel} channel"),
                )),
                None => Ok(EmailOptions::default()),
            };
        }
        let from = self
            .from
            .map(|from| {
                let (mailbox, address) = mailbox("from", from)?;
                allowed_sender(&address, route, &info.allowed_from)?;
                Ok(mailbox)
            })
            .transpose()?;
        let reply_to = self
            .reply_to
            .map(|r| mailbox("reply_to", r).map(|(mailbox, _)| mailbox))
            .transpose()?;
        let cc = addresses("cc", self.cc)?;
        let bcc = addresses("bcc", self.bcc)?;
        if 1 + cc.len() + bcc.len() > MAX_RECIPIENTS {
            return Err(FieldError::new(
                if bcc.is_empty() { "cc" } else { "bcc" },
                format!("at most {MAX_RECIPIENTS} recipients in all, `to` included"),
            ));
        }
        let tags = tags(self.tags, route, info)?;
        let headers = headers(self.headers)?;
        Ok(EmailOptions {
            from,
            reply_to,
            cc,
            bcc,
            tags,
            headers,
            attachments: Vec::new(),
        })
    }
}

/// `address` or `Name <address>`, normalised to one of the two; also returns the address.
fn mailbox(field: &str, s: &str) -> Result<(String, String), FieldError> {
    header_safe(field, s, 254 + MAX_DISPLAY_NAME_CHARS + 3)?;
    let (name, address) = split_mailbox(s);
    let address = EmailAddress::parse(field, address)?.as_str().to_owned();
    let Some(name) = name else {
        return Ok((address.clone(), address));
    };
    // Without these, the name can be written unquoted everywhere (a vendor's `Name <address>`
    // string, a mail header) and never be read as a second address or a comment; their
    // look-alikes (fullwidth `＜ceo＠evil.example＞`) fold to them, and read the same on screen.
    let folded: String = name.nfkc().collect();
    if folded.contains(['"', '\\', '<', '>', ',', ';', ':', '(', ')', '[', ']']) {
        return Err(FieldError::new(
            field,
            "the display name must not contain \" \\ < > , ; : ( ) [ ] or characters that \
             look like them",
        ));
    }
    // A name a reader takes for an address (`support@bank.example <x@evil.example>`), one
    // already encoded (RFC 2047 `=?…?=`, which would decode past these checks) or one whose
    // text is reordered or hidden on screen is a spoof, not a name.
    if folded.contains('@') || folded.contains("=?") || name.contains(BIDI_CONTROLS) {
        return Err(FieldError::new(
            field,
            "the display name must not contain @, an encoded word (=?…?=) or bidirectional \
             controls: write it as plain text, herald encodes it",
        ));
    }
    if name.chars().any(hides_text) {
        return Err(FieldError::new(
            field,
            "the display name must not contain invisible characters or spaces other than the \
             plain one",
        ));
    }
    if name.chars().count() > MAX_DISPLAY_NAME_CHARS {
        return Err(FieldError::new(
            field,
            format!("the display name must be at most {MAX_DISPLAY_NAME_CHARS} characters"),
        ));
    }
    Ok((format!("{name} <{address}>"), address))
}

/// Whether an `allowed_from` list covers `sender`, an address or an `@domain` (which only the
/// same `@domain` covers), ignoring case.
pub fn grants_sender(allowed: &[String], sender: &str) -> bool {
    let sender = sender.to_ascii_lowercase();
    let domain = sender.rsplit_once('@').map_or("", |(_, d)| d);
    allowed.iter().any(|entry| {
        let entry = entry.to_ascii_lowercase();
        match entry.strip_prefix('@') {
            Some(allowed_domain) => allowed_domain == domain,
            None => entry == sender,
        }
    })
}

/// A sender is the route's to grant: an exact address, or any address at an `@domain`.
fn allowed_sender(address: &str, route: &str, allowed: &[String]) -> Result<(), FieldError> {
    if allowed.is_empty() {
        return Err(FieldError::new(
            "from",
            format!(
                "route `{route}` takes no per-message sender: list the addresses or @domains \
                 it may send as in its `allowed_from`"
            ),
        ));
    }
    if grants_sender(allowed, address) {
        Ok(())
    } else {
        Err(FieldError::new(
            "from",
            format!("route `{route}` may send as {} only", allowed.join(", ")),
        ))
    }
}

fn addresses(field: &str, list: &[String]) -> Result<Vec<String>, FieldError> {
    list.iter()
        .enumerate()
        .map(|(i, a)| {
            Ok(EmailAddress::parse(&format!("{field}[{i}]"), a)?
                .as_str()
                .to_owned())
        })
        .collect()
}

/// Tags as vendors take them (Resend's rule): names and values of letters, digits, `_`, `-`.
fn tags(
    tags: Option<&Map<String, Value>>,
    route: &str,
    info: &RouteInfo,
) -> Result<BTreeMap<String, String>, FieldError> {
    let Some(tags) = tags.filter(|t| !t.is_empty()) else {
        return Ok(BTreeMap::new());
    };
    if !info.tags {
        return Err(FieldError::new(
            "tags",
            format!("route `{route}`'s vendor keeps no tags: send them as `headers` instead"),
        ));
    }
    if tags.len() > MAX_TAGS {
        return Err(FieldError::new(
            "tags",
            format!("must have at most {MAX_TAGS} tags"),
        ));
    }
    let tag_text = |s: &str| {
        (1..=MAX_TAG_CHARS).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    tags.iter()
        .map(|(name, value)| {
            let field = format!("tags.{name}");
            let rule = format!(
                "names and values must be 1 to {MAX_TAG_CHARS} ASCII letters, digits, _ or -"
            );
            if !tag_text(name) {
                return Err(FieldError::new(field, rule));
            }
            if name.to_ascii_lowercase().starts_with("herald") {
                return Err(FieldError::new(
                    field,
                    "names starting with herald are herald's own",
                ));
            }
            match value {
                Value::String(v) if tag_text(v) => Ok((name.clone(), v.clone())),
                Value::String(_) => Err(FieldError::new(field, rule)),
                _ => Err(FieldError::new(field, "must be a string")),
            }
        })
        .collect()
}

/// Custom headers: a name of letters, digits and `-` (so nothing else can sneak in before the
/// colon), a value without line breaks, and none of the headers herald writes itself.
fn headers(headers: Option<&Map<String, Value>>) -> Result<BTreeMap<String, String>, FieldError> {
    let Some(headers) = headers else {
        return Ok(BTreeMap::new());
    };
    if headers.len() > MAX_HEADERS {
        return Err(FieldError::new(
            "headers",
            format!("must have at most {MAX_HEADERS} headers"),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    headers
        .iter()
        .map(|(name, value)| {
            let field = format!("headers.{name}");
            let name_ok = name.len() <= 76
                && name.starts_with(|c: char| c.is_ascii_alphabetic())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
            if !name_ok {
                return Err(FieldError::new(
                    field,
                    "a header name is a letter, then up to 75 letters, digits or -",
                ));
            }
            let lower = name.to_ascii_lowercase();
            if RESERVED_HEADERS.contains(&lower.as_str())
                || RESERVED_PREFIXES.iter().any(|p| lower.starts_with(p))
            {
                return Err(FieldError::new(
                    field,
                    "is written by herald from its own fields and cannot be set",
                ));
            }
            if !seen.insert(lower) {
                return Err(FieldError::new(
                    field,
                    "is given twice (header names ignore case)",
                ));
            }
            let Value::String(value) = value else {
                return Err(FieldError::new(field, "must be a string"));
            };
            header_safe(&field, value, MAX_HEADER_VALUE_BYTES)?;
            Ok((name.clone(), value.clone()))
        })
        .collect()
}
