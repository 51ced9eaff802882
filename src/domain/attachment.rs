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
use super::email::{BIDI_CONTROLS, hides_text};

/// At most this many attachments on one email.
pub const MAX_ATTACHMENTS: usize = 10;
const MAX_FILENAME_BYTES: usize = 255;

/// One attachment as the client sends it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAttachment {
    /// The name the recipient sees: 1 to 255 bytes, no `/`, `\`, control, invisible or
    /// bidirectional characters, no encoded word, not ending in a dot or a space; an extension,
    /// where it has one, of the declared type.
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
            check_opens_as(&attachment.filename, &content_type, &bytes)
                .map_err(|(name, m)| FieldError::new(field(name), m))?;
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
    // Invisible characters and look-alike spaces hide what a name ends in
    // (`invoice.pdf\u{2003}.exe`); an encoded word would be decoded by the mail client past
    // every check here.
    if name.chars().any(hides_text) {
        return Err(
            "must not hold invisible characters or spaces other than the plain one".to_owned(),
        );
    }
    if name.contains("=?") {
        return Err(
            "must not hold an encoded word (=?…?=): give the name as it should read".to_owned(),
        );
    }
    if name == "." || name == ".." {
        return Err("must name a file".to_owned());
    }
    if name.ends_with(['.', ' ']) {
        return Err(
            "must not end in a dot or a space, which Windows drops to leave another extension"
                .to_owned(),
        );
    }
    Ok(())
}

/// A recipient's machine opens a file by its name's extension, and a mail filter judges it by
/// its first bytes: both must say the declared type, so that `run.exe` cannot travel as a PDF,
/// nor a page of HTML as plain text. A name without an extension says nothing; content whose
/// type cannot be told from its bytes (plain text, CSV, JSON) is taken as declared. The field
/// at fault (`filename` or `content`), and why.
fn check_opens_as(
    filename: &str,
    content_type: &str,
    bytes: &[u8],
) -> Result<(), (&'static str, String)> {
    let usual = || {
        mime_guess::get_mime_extensions_str(content_type)
            .and_then(|extensions| extensions.first())
            .map_or_else(String::new, |e| format!(" (name it `….{e}`)"))
    };
    if let Some((_, extension)) = filename.rsplit_once('.') {
        let opens_as = mime_guess::from_ext(extension);
        if opens_as.is_empty() {
            return Err((
                "filename",
                format!(
                    "ends in `.{extension}`, which herald cannot tell the type of{}",
                    usual()
                ),
            ));
        }
        if !opens_as.iter().any(|m| m.essence_str() == content_type) {
            return Err((
                "filename",
                format!(
                    "ends in `.{extension}`, which opens as {}, not {content_type}{}",
                    opens_as.first_raw().unwrap_or("another type"),
                    usual()
                ),
            ));
        }
    }
    match infer::get(bytes) {
        Some(found) if found.mime_type() != content_type => Err((
            "content",
            format!("its bytes are {}, not {content_type}", found.mime_type()),
        )),
        None if infer::is_mime_supported(content_type) => {
            Err(("content", format!("its bytes are not {content_type}")))
        }
        _ => Ok(()),
    }
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
    fn a_file_goes_only_under_a_name_and_bytes_of_its_declared_type() {
        let rules = AttachmentRules::default();
        let pdf = b"%PDF-1.7\n%\xe2\xe3";
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        let exe = b"MZ\x90\0\x03\0\0\0\x04\0\0\0\xff\xff";
        let fine = [
            attachment("invoice.pdf", "application/pdf", pdf),
            attachment("INVOICE.PDF", "application/pdf", pdf),
            attachment("invoice", "application/pdf", pdf),
            attachment("logo.png", "image/png", png),
            attachment("notes.log", "text/plain", b"shipped"),
            attachment("rows.csv", "text/csv", b"a,b\n1,2\n"),
            attachment("invite.ics", "text/calendar", b"BEGIN:VCALENDAR\r\n"),
            attachment("data.json", "application/json", b"{}"),
            attachment("conditions g\u{e9}n\u{e9}rales.txt", "text/plain", b"ok"),
        ];
        for ok in &fine {
            assert!(
                rules.parse(std::slice::from_ref(ok)).is_ok(),
                "{}",
                ok.filename
            );
        }
        for (bad, field, says) in [
            (
                attachment("run.exe", "application/pdf", exe),
                "filename",
                "opens as",
            ),
            (
                attachment("run.pdf", "application/pdf", exe),
                "content",
                "not application/pdf",
            ),
            (
                attachment("run", "text/plain", exe),
                "content",
                "its bytes are",
            ),
            (
                attachment("login.html", "text/plain", b"<html>"),
                "filename",
                "text/html",
            ),
            (
                attachment("logo.svg", "image/png", b"<svg onload=x>"),
                "filename",
                "opens as",
            ),
            (
                attachment("logo.png", "image/png", b"<svg onload=x>"),
                "content",
                "not image/png",
            ),
            (
                attachment("page.txt", "text/plain", b"<!DOCTYPE html><html>"),
                "content",
                "text/html",
            ),
            (
                attachment("a.pdf\u{2003}.exe", "application/pdf", pdf),
                "filename",
                "invisible",
            ),
            (
                attachment("a\u{200B}.pdf", "application/pdf", pdf),
                "filename",
                "invisible",
            ),
            (
                attachment("a\u{2028}.pdf", "application/pdf", pdf),
                "filename",
                "invisible",
            ),
            (
                attachment("=?utf-8?b?ZXhl?=.pdf", "application/pdf", pdf),
                "filename",
                "encoded word",
            ),
            (
                attachment("run.exe.", "application/pdf", pdf),
                "filename",
                "dot or a space",
            ),
            (
                attachment("invoice.q3", "application/pdf", pdf),
                "filename",
                "name it `….pdf`",
            ),
        ] {
            let (f, message) = refused(&rules, &[bad]);
            assert_eq!(f, format!("attachments[0].{field}"), "{message}");
            assert!(message.contains(says), "{says:?} not in {message:?}");
        }
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
