//! An email's attachments as a request carries them (base64), checked and split into what
//! herald keeps with the notification ([`Attachment`]) and the content it stores once by its
//! SHA-256 ([`File`]).

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use herald_provider::Attachment;
use serde::Deserialize;
use utoipa::ToSchema;

use super::FieldError;
use super::email::BIDI_CONTROLS;

/// At most this many attachments on one email.
pub const MAX_ATTACHMENTS: usize = 10;
const MAX_FILENAME_BYTES: usize = 255;

/// One attachment as the client sends it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAttachment {
    /// The name the recipient sees: 1 to 255 bytes, no `/`, `\`, control characters or NUL.
    #[schema(example = "invoice-2026-12.pdf")]
    pub filename: String,
    /// One of the configured `[attachments] content_types`.
    #[schema(example = "application/pdf")]
    pub content_type: String,
    /// The content, base64 (RFC 4648, padded).
    pub content: String,
}

/// An attachment's content, stored once however many notifications carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Lowercase hex SHA-256 of `bytes`.
    pub sha256: String,
    pub bytes: Vec<u8>,
}

/// What attachments herald takes (`[attachments]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentRules {
    /// The most the attachments of one email may hold together, decoded.
    pub max_total_bytes: usize,
    /// MIME types, lowercase.
    pub content_types: BTreeSet<String>,
}

/// 10 MiB: what most email vendors take for a whole message (Postmark 10 MB, SendGrid and
/// SES more), so a default-sized attachment goes through every route.
pub const DEFAULT_MAX_TOTAL_BYTES: usize = 10 * 1024 * 1024;

/// Documents, images, calendar invitations and plain data: what notifications attach. Anything
/// a mail filter would hold back (executables, scripts, archives) needs a deliberate choice.
pub const DEFAULT_CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/pdf",
    "image/gif",
    "image/jpeg",
    "image/png",
    "image/webp",
    "text/calendar",
    "text/csv",
    "text/plain",
];

impl Default for AttachmentRules {
    fn default() -> Self {
        AttachmentRules {
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            content_types: DEFAULT_CONTENT_TYPES
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
        }
    }
}

impl AttachmentRules {
    /// The attachments as kept with the notification and their contents, one file per distinct
    /// content; or the first field that is wrong, by its path (`attachments[2].filename`).
    pub fn parse(
        &self,
        given: &[NewAttachment],
    ) -> Result<(Vec<Attachment>, Vec<File>), FieldError> {
        if given.len() > MAX_ATTACHMENTS {
            return Err(FieldError::new(
                "attachments",
                format!("at most {MAX_ATTACHMENTS} on one email"),
            ));
        }
        let mut kept = Vec::with_capacity(given.len());
        let mut files = BTreeMap::new();
        let mut total = 0usize;
        for (i, attachment) in given.iter().enumerate() {
            let field = |name: &str| format!("attachments[{i}].{name}");
            check_filename(&attachment.filename)
                .map_err(|m| FieldError::new(field("filename"), m))?;
            let content_type = attachment.content_type.to_ascii_lowercase();
            if !self.content_types.contains(&content_type) {
                return Err(FieldError::new(
                    field("content_type"),
                    format!(
                        "must be one of the configured types: {}",
                        self.content_types
                            .iter()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            let bytes = STANDARD
                .decode(&attachment.content)
                .map_err(|e| FieldError::new(field("content"), format!("is not base64: {e}")))?;
            if bytes.is_empty() {
                return Err(FieldError::new(field("content"), "must not be empty"));
            }
            total += bytes.len();
            if total > self.max_total_bytes {
                return Err(FieldError::new(
                    field("content"),
                    format!(
                        "the attachments hold more than {} bytes together (attachments.max_total_bytes)",
                        self.max_total_bytes
                    ),
                ));
            }
            let described = Attachment::describe(&attachment.filename, &content_type, &bytes);
            let sha256 = described.sha256.clone();
            kept.push(described);
            files
                .entry(sha256.clone())
                .or_insert(File { sha256, bytes });
        }
        Ok((kept, files.into_values().collect()))
    }

    /// How much larger than a plain request an enqueue with the most attachments is: their
    /// base64 (4 bytes for each 3) and the JSON around each.
    pub fn body_allowance(&self) -> usize {
        self.max_total_bytes.div_ceil(3) * 4 + MAX_ATTACHMENTS * 1024
    }
}

/// A filename becomes a MIME parameter and, on the recipient's machine, a file: a path
/// separator could climb out of a download folder, and a line break forge a header.
fn check_filename(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_FILENAME_BYTES {
        return Err(format!("must be 1 to {MAX_FILENAME_BYTES} bytes"));
    }
    if name.contains(['/', '\\']) {
        return Err("must not hold a path separator".to_owned());
    }
    if name.chars().any(char::is_control) {
        return Err("must not hold a line break, NUL or other control character".to_owned());
    }
    if name.contains(BIDI_CONTROLS) {
        return Err(
            "must not hold bidirectional controls, which make one name read as another".to_owned(),
        );
    }
    if name == "." || name == ".." {
        return Err("must name a file".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attachment(filename: &str, content_type: &str, content: &[u8]) -> NewAttachment {
        NewAttachment {
            filename: filename.into(),
            content_type: content_type.into(),
            content: STANDARD.encode(content),
        }
    }

    fn refused(rules: &AttachmentRules, given: &[NewAttachment]) -> (String, String) {
        let err = rules.parse(given).unwrap_err();
        (err.field, err.message)
    }

    #[test]
    fn the_same_content_twice_is_one_file_and_each_attachment_keeps_its_name() {
        let pdf = [0x25, 0x50, 0x44, 0x46, 0xff, 0x00];
        let (kept, files) = AttachmentRules::default()
            .parse(&[
                attachment("a.pdf", "application/PDF", &pdf),
                attachment("b.pdf", "application/pdf", &pdf),
            ])
            .unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].bytes, pdf);
        assert_eq!(
            files[0].sha256,
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(pdf))
        );
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].filename, "a.pdf");
        assert_eq!(kept[1].filename, "b.pdf");
        assert_eq!(kept[0].content_type, "application/pdf");
        assert_eq!(kept[0].size, 6);
        assert!(kept.iter().all(|a| a.sha256 == files[0].sha256));
    }

    #[test]
    fn each_bad_attachment_is_named_by_its_place_and_field() {
        let rules = AttachmentRules::default();
        let ok = attachment("ok.txt", "text/plain", b"hi");
        for (bad, field, says) in [
            (
                attachment("../etc/passwd", "text/plain", b"x"),
                "filename",
                "path separator",
            ),
            (
                attachment("a\\b.txt", "text/plain", b"x"),
                "filename",
                "path separator",
            ),
            (
                attachment("a\r\nBcc: x.txt", "text/plain", b"x"),
                "filename",
                "line break",
            ),
            (attachment("a\0.txt", "text/plain", b"x"), "filename", "NUL"),
            (attachment("", "text/plain", b"x"), "filename", "1 to 255"),
            (
                attachment(&"a".repeat(256), "text/plain", b"x"),
                "filename",
                "1 to 255",
            ),
            (
                attachment("..", "text/plain", b"x"),
                "filename",
                "name a file",
            ),
            (
                attachment("invoice\u{202E}fdp.exe", "application/pdf", b"x"),
                "filename",
                "bidirectional",
            ),
            (
                attachment("run.exe", "application/x-msdownload", b"MZ"),
                "content_type",
                "configured types",
            ),
            (attachment("e.txt", "text/plain", b""), "content", "empty"),
            (
                NewAttachment {
                    content: "not base64!".into(),
                    ..ok.clone()
                },
                "content",
                "not base64",
            ),
        ] {
            let (got_field, message) = refused(&rules, &[ok.clone(), bad]);
            assert_eq!(got_field, format!("attachments[1].{field}"));
            assert!(message.contains(says), "{field}: {message}");
        }
    }

    #[test]
    fn the_total_and_the_count_are_bounded() {
        let rules = AttachmentRules {
            max_total_bytes: 10,
            ..AttachmentRules::default()
        };
        assert!(
            rules
                .parse(&[attachment("a.txt", "text/plain", &[1; 10])])
                .is_ok()
        );
        let (field, message) = refused(
            &rules,
            &[
                attachment("a.txt", "text/plain", &[1; 6]),
                attachment("b.txt", "text/plain", &[2; 5]),
            ],
        );
        assert_eq!(field, "attachments[1].content");
        assert!(message.contains("more than 10 bytes"), "{message}");
        let eleven = vec![attachment("a.txt", "text/plain", b"x"); MAX_ATTACHMENTS + 1];
        assert_eq!(
            refused(&AttachmentRules::default(), &eleven).0,
            "attachments"
        );
    }

    #[test]
    fn the_body_allowance_covers_the_largest_attachments_in_base64() {
        let rules = AttachmentRules::default();
        let content = vec![7u8; rules.max_total_bytes];
        let json = serde_json::json!({"attachments": [{
            "filename": "a".repeat(MAX_FILENAME_BYTES),
            "content_type": "application/pdf",
            "content": STANDARD.encode(&content),
        }]});
        assert!(serde_json::to_vec(&json).unwrap().len() <= rules.body_allowance());
    }
}
