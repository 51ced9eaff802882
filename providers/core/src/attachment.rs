//! Email attachments, which herald stores once by their SHA-256 however many notifications carry
//! them, and which a prepared [`Request`] names rather than holds.
//!
//! An adapter writes [`Attachment::placeholder`] where the vendor expects the content; herald
//! stores the request so, and replaces each placeholder with the content just before a send
//! ([`Request::expand`]). The stored request of 10,000 notifications sharing one file stays
//! small, and every attempt still sends the same bytes: the content is fixed by its hash.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::Request;

// The field docs below are also the API document's descriptions (feature `openapi`).
/// An email attachment as herald keeps it: what it is, not its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Attachment {
    /// The name the recipient sees: no path separators, line breaks or NUL.
    pub filename: String,
    /// The MIME type, one of the configured `[attachments] content_types`.
    pub content_type: String,
    /// The decoded size in bytes.
    pub size: u64,
    /// The lowercase hex SHA-256 of the content: herald stores each content once by it.
    pub sha256: String,
}

/// How a vendor wants an attachment's content written into its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Base64 on one line, as JSON APIs take it.
    Base64,
    /// Base64 in lines of 76 characters ended by CRLF (RFC 2045), as a MIME part holds it.
    Mime,
}

/// How every placeholder begins: herald refuses it in a message's own text, so that only the
/// adapter's placeholders are expanded.
pub const PLACEHOLDER_OPEN: &str = "{{herald-attachment:";
const OPEN: &str = PLACEHOLDER_OPEN;
const CLOSE: &str = "}}";
/// RFC 2045 §6.8: encoded lines are at most 76 characters.
const MIME_LINE: usize = 76;

impl Attachment {
    /// The description of `content` under this name and type: its size and SHA-256, as herald
    /// names a file it stores (and as a fake vendor names one it received).
    pub fn describe(filename: &str, content_type: &str, content: &[u8]) -> Attachment {
        use sha2::Digest;
        Attachment {
            filename: filename.to_owned(),
            content_type: content_type.to_owned(),
            size: content.len() as u64,
            sha256: sha2::Sha256::digest(content)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        }
    }

    /// What arrived at a vendor that takes content in base64 (a fake's ledger): `None` when the
    /// content is not base64.
    pub fn received(filename: &str, content_type: &str, base64: &str) -> Option<Attachment> {
        let content = STANDARD.decode(base64).ok()?;
        Some(Attachment::describe(filename, content_type, &content))
    }

    /// What an adapter writes into a prepared request in place of the content, in the
    /// encoding its vendor expects.
    pub fn placeholder(&self, encoding: Encoding) -> String {
        let encoding = match encoding {
            Encoding::Base64 => "base64",
            Encoding::Mime => "mime",
        };
        format!("{OPEN}{}:{encoding}{CLOSE}", self.sha256)
    }
}

impl Request {
    /// The request as the vendor receives it: each placeholder of a content in `contents`
    /// (keyed by SHA-256) replaced by that content, encoded as the placeholder says. herald
    /// hands `contents` exactly the attachments of the message, so a placeholder of anything
    /// else is text and stays as written. Each content is encoded straight into the body,
    /// which is sized once ([`Request::expanded_len`]): a send holds the content and its
    /// encoded form, never a copy of either.
    pub fn expand<C: AsRef<[u8]>>(&self, contents: &BTreeMap<String, C>) -> Request {
        if contents.is_empty() || !self.body.contains(OPEN) {
            return self.clone();
        }
        let mut body = String::with_capacity(self.expanded_len(contents));
        walk(
            &self.body,
            contents,
            |text, body: &mut String| body.push_str(text),
            encode_into,
            &mut body,
        );
        Request {
            body,
            parts: self.parts.clone(),
        }
    }

    /// The length of [`Request::expand`]'s body, in bytes: what a send of it holds.
    pub fn expanded_len<C: AsRef<[u8]>>(&self, contents: &BTreeMap<String, C>) -> usize {
        let mut len = 0;
        walk(
            &self.body,
            contents,
            |text, len: &mut usize| *len += text.len(),
            |content, encoding, len| *len += encoded_len(content.len(), encoding),
            &mut len,
        );
        len
    }
}

/// Walks `body` in order, handing `text` what stays as written and `content` each placeholder
/// of `contents` with its encoding, both writing into `out`.
fn walk<'b, C: AsRef<[u8]>, O>(
    body: &'b str,
    contents: &BTreeMap<String, C>,
    text: impl Fn(&'b str, &mut O),
    content: impl Fn(&[u8], Encoding, &mut O),
    out: &mut O,
) {
    let mut rest = body;
    while let Some(at) = rest.find(OPEN) {
        text(&rest[..at], out);
        let after = &rest[at + OPEN.len()..];
        let placeholder = after
            .find(CLOSE)
            .and_then(|end| Some((end, named(&after[..end], contents)?)));
        match placeholder {
            Some((end, (bytes, encoding))) => {
                content(bytes, encoding, out);
                rest = &after[end + CLOSE.len()..];
            }
            None => {
                text(OPEN, out);
                rest = after;
            }
        }
    }
    text(rest, out);
}

/// How a placeholder's inside (`sha256:encoding`) names a content of `contents`, if it does.
fn named<'c, C: AsRef<[u8]>>(
    inside: &str,
    contents: &'c BTreeMap<String, C>,
) -> Option<(&'c [u8], Encoding)> {
    let (sha256, encoding) = inside.split_once(':')?;
    let encoding = match encoding {
        "base64" => Encoding::Base64,
        "mime" => Encoding::Mime,
        _ => return None,
    };
    Some((contents.get(sha256)?.as_ref(), encoding))
}

/// Base64 input bytes that make one MIME line of [`MIME_LINE`] characters.
const MIME_LINE_BYTES: usize = MIME_LINE / 4 * 3;

fn encoded_len(len: usize, encoding: Encoding) -> usize {
    let base64 = len.div_ceil(3) * 4;
    match encoding {
        Encoding::Base64 => base64,
        // A CRLF between lines, none after the last.
        Encoding::Mime => base64 + len.div_ceil(MIME_LINE_BYTES).saturating_sub(1) * 2,
    }
}

fn encode_into(content: &[u8], encoding: Encoding, body: &mut String) {
    match encoding {
        Encoding::Base64 => STANDARD.encode_string(content, body),
        Encoding::Mime => {
            for (i, line) in content.chunks(MIME_LINE_BYTES).enumerate() {
                if i > 0 {
                    body.push_str("\r\n");
                }
                STANDARD.encode_string(line, body);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> (Attachment, Vec<u8>) {
        let content: Vec<u8> = (0..=255u8).cycle().take(200).collect();
        let attachment = Attachment {
            filename: "report.pdf".into(),
            content_type: "application/pdf".into(),
            size: content.len() as u64,
            sha256: "ab".repeat(32),
        };
        (attachment, content)
    }

    #[test]
    fn a_placeholder_expands_to_its_content_in_the_encoding_it_names() {
        let (attachment, content) = report();
        let request = Request::new(format!(
            r#"{{"a":"{}"}}|{}|"#,
            attachment.placeholder(Encoding::Base64),
            attachment.placeholder(Encoding::Mime)
        ));
        let contents = BTreeMap::from([(attachment.sha256.clone(), content.clone())]);
        let expanded = request.expand(&contents).body;
        let one_line = STANDARD.encode(&content);
        let (json, mime) = expanded.split_once('|').unwrap();
        assert_eq!(json, format!(r#"{{"a":"{one_line}"}}"#));
        let mime = mime.strip_suffix('|').unwrap();
        assert!(mime.split("\r\n").all(|line| line.len() <= MIME_LINE));
        assert_eq!(
            mime.split("\r\n").count(),
            one_line.len().div_ceil(MIME_LINE)
        );
        assert_eq!(mime.replace("\r\n", ""), one_line);
    }

    /// A send holds the expanded body once: it is sized exactly before anything is encoded.
    #[test]
    fn the_expanded_length_is_known_before_the_body_is_written() {
        for size in [0, 1, 2, 3, 56, 57, 58, 114, 200, 10_000] {
            let content = vec![7u8; size];
            let attachment = Attachment::describe("a.bin", "application/pdf", &content);
            let request = Request::new(format!(
                "<{}> and <{}> and {OPEN}unclosed",
                attachment.placeholder(Encoding::Base64),
                attachment.placeholder(Encoding::Mime)
            ));
            let contents = BTreeMap::from([(attachment.sha256.clone(), content)]);
            let expanded = request.expand(&contents).body;
            assert_eq!(
                request.expanded_len(&contents),
                expanded.len(),
                "{size} bytes"
            );
            assert_eq!(
                expanded.capacity(),
                expanded.len(),
                "{size} bytes: one allocation"
            );
        }
    }

    #[test]
    fn expanding_twice_sends_the_same_bytes() {
        let (attachment, content) = report();
        let request = Request::new(attachment.placeholder(Encoding::Mime));
        let contents = BTreeMap::from([(attachment.sha256.clone(), content)]);
        assert_eq!(request.expand(&contents), request.expand(&contents));
    }

    #[test]
    fn text_that_only_looks_like_a_placeholder_stays_as_written() {
        let (attachment, content) = report();
        let other = "cd".repeat(32);
        let body = format!(
            "{OPEN}{other}:base64{CLOSE} {OPEN}{}:gzip{CLOSE} {OPEN}unclosed",
            attachment.sha256
        );
        let contents = BTreeMap::from([(attachment.sha256.clone(), content)]);
        assert_eq!(Request::new(body.clone()).expand(&contents).body, body);
    }
}
