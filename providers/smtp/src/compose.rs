//! Turning herald's [`Message`] into an RFC 5322 message with a Message-ID that never changes.
//!
//! SMTP has no idempotency key, so the Message-ID is the only handle a resend carries: the same
//! notification always gets `<{notification_id}@herald.invalid>`, which lets receiving systems
//! drop a duplicate and lets a person search mail logs for it. The `.invalid` domain (RFC 2606)
//! is used rather than the sender's domain so that a change of `from` between two attempts
//! cannot change the id.

use herald_provider::{Attachment, Channel, Encoding, Message};
use lettre::message::header::{ContentTransferEncoding, ContentType, HeaderName, HeaderValue};
use lettre::message::{Attachment as LettreAttachment, Mailbox, MultiPart, SinglePart};
use lettre::{Address, Message as Email};

/// The right-hand side of every Message-ID herald sends.
pub const MESSAGE_ID_DOMAIN: &str = "herald.invalid";

/// The Message-ID header value (angle brackets included) of a notification, identical on every
/// attempt. The scripted peer's ledger is keyed by this value.
pub fn message_id(notification_id: &str) -> String {
    format!("<{notification_id}@{MESSAGE_ID_DOMAIN}>")
}

/// The message ready for the wire, or the reason it can never be sent.
pub(crate) fn compose(from: &Mailbox, message: &Message) -> Result<Email, String> {
    if message.channel != Channel::Email {
        return Err(format!(
            "the SMTP adapter sends email, not {}",
            message.channel
        ));
    }
    check_id_left(&message.notification_id)?;
    // Herald's API refuses these already; checking again here keeps a header injection out even
    // if a caller skips the API (lettre would encode rather than refuse them).
    if [&message.to, message.subject.as_deref().unwrap_or("")]
        .iter()
        .any(|field| field.contains(['\r', '\n']))
    {
        return Err("a line break in the recipient or subject".to_owned());
    }
    let to: Address = message
        .to
        .parse()
        .map_err(|err| format!("the recipient is not an email address: {err}"))?;
    let options = &message.email;
    if !options.tags.is_empty() {
        // herald refuses tags at enqueue on an SMTP route (`Capabilities::tags`); a message
        // that skipped the API must not lose them silently.
        return Err("SMTP has no per-message tags: send them as headers".to_owned());
    }
    // lettre refuses a line break in a mailbox (tested below).
    let mailbox = |field: &str, text: &str| {
        text.parse::<Mailbox>()
            .map_err(|err| format!("{field} `{text}` is not a mailbox: {err}"))
    };
    let from = match &options.from {
        Some(own) => mailbox("from", own)?,
        None => from.clone(),
    };
    let mut builder = Email::builder()
        .from(from)
        .to(Mailbox::new(None, to))
        .message_id(Some(message_id(&message.notification_id)));
    if let Some(reply_to) = &options.reply_to {
        builder = builder.reply_to(mailbox("reply_to", reply_to)?);
    }
    for cc in &options.cc {
        builder = builder.cc(mailbox("cc", cc)?);
    }
    // lettre leaves Bcc out of the formatted message: those recipients are in the envelope only.
    for bcc in &options.bcc {
        builder = builder.bcc(mailbox("bcc", bcc)?);
    }
    for (name, value) in &options.headers {
        if value.contains(['\r', '\n']) {
            return Err(format!("a line break in header {name}"));
        }
        let name = HeaderName::new_from_ascii(name.clone())
            .map_err(|err| format!("`{name}` is not a header name: {err}"))?;
        builder = builder.raw_header(HeaderValue::new(name, value.clone()));
    }
    if let Some(subject) = &message.subject {
        builder = builder.subject(subject);
    }
    let body = match (&message.text, &message.html) {
        (Some(text), Some(html)) => Body::Alternative(MultiPart::alternative_plain_html(
            text.clone(),
            html.clone(),
        )),
        (Some(text), None) => Body::Single(SinglePart::plain(text.clone())),
        (None, Some(html)) => Body::Single(SinglePart::html(html.clone())),
        (None, None) => return Err("an email needs a text or an html body".to_owned()),
    };
    let built = if options.attachments.is_empty() {
        match body {
            Body::Alternative(parts) => builder.multipart(parts),
            Body::Single(part) => builder.singlepart(part),
        }
    } else {
        let mixed = match body {
            Body::Alternative(parts) => MultiPart::mixed().multipart(parts),
            Body::Single(part) => MultiPart::mixed().singlepart(part),
        };
        let mixed = options.attachments.iter().try_fold(mixed, |mixed, a| {
            Ok::<_, String>(mixed.singlepart(attachment(a)?))
        })?;
        builder.multipart(mixed)
    };
    built.map_err(|err| format!("cannot build the message: {err}"))
}

/// The message's text, before any attachments.
enum Body {
    Alternative(MultiPart),
    Single(SinglePart),
}

/// An attachment's MIME part. Its content is herald's placeholder, written as the part's
/// base64 body: the stored message stays small, and herald puts the content in its place,
/// in lines of 76, before each send.
fn attachment(a: &Attachment) -> Result<SinglePart, String> {
    let content_type = ContentType::parse(&a.content_type)
        .map_err(|err| format!("attachment `{}`: {}: {err}", a.filename, a.content_type))?;
    let placeholder = a.placeholder(Encoding::Mime).into_bytes();
    Ok(LettreAttachment::new(a.filename.clone()).body(
        lettre::message::Body::dangerous_pre_encoded(placeholder, ContentTransferEncoding::Base64),
        content_type,
    ))
}

/// The notification id becomes the left part of the Message-ID, so it must be a dot-atom
/// (RFC 5322 §3.6.4); herald's ids are UUIDs, which are.
fn check_id_left(id: &str) -> Result<(), String> {
    let atom_ok = |atom: &str| {
        !atom.is_empty()
            && atom
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_+=".contains(&b))
    };
    if id.len() <= 200 && id.split('.').all(atom_ok) {
        Ok(())
    } else {
        Err(format!(
            "the notification id `{}` cannot form a Message-ID",
            id.escape_debug()
        ))
    }
}

#[cfg(test)]
mod tests {
    use herald_provider::EmailOptions;

    use super::*;

    fn email(subject: &str) -> Message {
        Message {
            notification_id: "0190f0d4-7e2a-7c3b-9d7e-2b4f1a6c8e90".into(),
            channel: Channel::Email,
            to: "ada@example.com".into(),
            subject: Some(subject.into()),
            text: Some("hello".into()),
            html: None,
            payload: None,
            blocks: None,
            email: EmailOptions::default(),
            expires_at: None,
            trace_parent: None,
        }
    }

    fn from() -> Mailbox {
        "Herald <herald@example.com>".parse().unwrap()
    }

    #[test]
    fn the_message_id_is_derived_from_the_notification_id_alone() {
        let composed = compose(&from(), &email("Hi")).unwrap();
        let text = String::from_utf8(composed.formatted()).unwrap();
        assert!(
            text.contains("Message-ID: <0190f0d4-7e2a-7c3b-9d7e-2b4f1a6c8e90@herald.invalid>\r\n"),
            "{text}"
        );
    }

    #[test]
    fn a_messages_own_sender_copies_and_headers_are_written_and_bcc_is_envelope_only() {
        let mut message = email("Hi");
        message.email = EmailOptions {
            from: Some("Acme Billing <billing@acme.example>".into()),
            reply_to: Some("help@acme.example".into()),
            cc: vec!["grace@example.com".into()],
            bcc: vec!["audit@acme.example".into()],
            headers: [("List-Unsubscribe".into(), "<mailto:u@acme.example>".into())].into(),
            ..EmailOptions::default()
        };
        let composed = compose(&from(), &message).unwrap();
        let text = String::from_utf8(composed.formatted()).unwrap();
        for line in [
            "From: \"Acme Billing\" <billing@acme.example>\r\n",
            "Reply-To: help@acme.example\r\n",
            "Cc: grace@example.com\r\n",
            "List-Unsubscribe: <mailto:u@acme.example>\r\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from {text}");
        }
        assert!(!text.contains("audit@acme.example"), "{text}");
        let envelope = composed.envelope();
        assert_eq!(envelope.from().unwrap().to_string(), "billing@acme.example");
        let rcpt: Vec<String> = envelope.to().iter().map(ToString::to_string).collect();
        assert_eq!(
            rcpt,
            ["ada@example.com", "grace@example.com", "audit@acme.example"]
        );
    }

    #[test]
    fn tags_and_a_header_value_with_a_line_break_are_refused() {
        let mut tagged = email("Hi");
        tagged.email.tags = [("kind".into(), "invoice".into())].into();
        assert!(compose(&from(), &tagged).is_err());
        let mut injected = email("Hi");
        injected.email.headers = [("X-Kind".into(), "a\r\nBcc: eve@example.com".into())].into();
        assert!(compose(&from(), &injected).is_err());
    }

    #[test]
    fn a_line_break_in_the_subject_is_refused_before_lettre_sees_it() {
        assert!(compose(&from(), &email("Hi\r\nBcc: eve@example.com")).is_err());
        assert!(compose(&from(), &email("Hi\nBcc: eve@example.com")).is_err());
    }

    #[test]
    fn lettre_encodes_a_line_break_in_the_subject_instead_of_writing_a_header() {
        // The second line of defence, should the check above ever be removed.
        let email = Email::builder()
            .from(from())
            .to("ada@example.com".parse().unwrap())
            .subject("Hi\r\nBcc: eve@example.com")
            .body(String::from("x"))
            .unwrap();
        let text = String::from_utf8(email.formatted()).unwrap();
        assert!(!text.contains("\r\nBcc:"), "{text}");
    }

    #[test]
    fn lettre_refuses_a_line_break_in_an_address() {
        assert!(
            "ada@example.com\r\nBcc: eve@example.com"
                .parse::<Address>()
                .is_err()
        );
        assert!(
            "Ada <ada@example.com>\r\nBcc: eve@example.com"
                .parse::<Mailbox>()
                .is_err()
        );
    }

    #[test]
    fn ids_that_cannot_form_a_message_id_are_refused() {
        for id in ["", "a b", "a>b", "a..b", ".a", "a\r\nb", "a@b"] {
            let mut message = email("Hi");
            message.notification_id = id.into();
            assert!(compose(&from(), &message).is_err(), "{id:?}");
        }
    }

    #[test]
    fn other_channels_and_empty_bodies_are_refused() {
        let mut sms = email("Hi");
        sms.channel = Channel::Sms;
        assert!(compose(&from(), &sms).is_err());
        let mut empty = email("Hi");
        empty.text = None;
        assert!(compose(&from(), &empty).is_err());
    }
}
