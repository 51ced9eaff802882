//! Classification of an SMTP exchange by where it ended.
//!
//! The rule: until the final `.` of DATA has left, the server cannot have taken the message, so
//! every failure is `Rejected` (a 5xx reply permanent, anything else transient). After the dot,
//! a 2xx reply is `Accepted`, a 4xx/5xx reply a rejection, and silence, a closed connection or
//! an unreadable reply `Ambiguous`: the server may have queued the message and failed to say so
//! (the RFC 1047 window). [`crate::wire`] tells which side of the dot a failure is on.

use std::time::Duration;

use herald_provider::{Evidence, Redactor, SendResult};
use lettre::transport::smtp::Error as SmtpError;
use lettre::transport::smtp::response::{Response, Severity};

use crate::wire::Watch;

/// The step the adapter was taking when the exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// DNS and the TCP connection.
    Connect,
    /// The implicit-TLS handshake (SMTPS).
    Tls,
    /// The greeting and EHLO; lettre reads both in one call, [`Watch::wrote`] tells them apart.
    Hello,
    /// STARTTLS, the handshake, and the second EHLO.
    StartTls,
    Auth,
    MailFrom,
    RcptTo,
    /// The DATA command, up to its 354.
    Data,
    /// The message content, the final dot, and the reply to it.
    Content,
}

impl Stage {
    /// The name stored in [`Evidence::stage`].
    fn label(self, watch: &Watch) -> &'static str {
        match self {
            Stage::Connect => "connect",
            Stage::Tls => "tls",
            Stage::Hello if watch.wrote() => "ehlo",
            Stage::Hello => "greeting",
            Stage::StartTls => "starttls",
            Stage::Auth => "auth",
            Stage::MailFrom => "mail_from",
            Stage::RcptTo => "rcpt_to",
            Stage::Data => "data",
            Stage::Content if watch.dot_sent() => "after_data",
            Stage::Content => "data_content",
        }
    }
}

/// Builds the evidence of one send: every detail names the Message-ID (so that a person can
/// find the message in the server's logs) and never holds the route's password, even if a
/// server echoed it.
pub(crate) struct Report<'a> {
    pub(crate) message_id: &'a str,
    pub(crate) redactor: &'a Redactor,
}

impl Report<'_> {
    pub(crate) fn evidence(&self, stage: &str, detail: impl AsRef<str>) -> Evidence {
        let detail = format!("Message-ID {}: {}", self.message_id, detail.as_ref());
        Evidence::new(stage, self.redactor.scrub(&detail))
    }

    pub(crate) fn rejected(
        &self,
        permanent: bool,
        stage: &str,
        detail: impl AsRef<str>,
    ) -> SendResult {
        SendResult::Rejected {
            permanent,
            retry_after: None,
            evidence: self.evidence(stage, detail),
        }
    }

    /// An error lettre returned at `stage`.
    pub(crate) fn error(&self, stage: Stage, watch: &Watch, err: &SmtpError) -> SendResult {
        let label = stage.label(watch);
        if let Some(code) = err.status() {
            // A negative reply: the server refused this step, whichever step it was.
            let text = reply_text(err);
            let evidence = self.reply_evidence(label, u16::from(code), &text);
            return SendResult::Rejected {
                permanent: code.severity == Severity::PermanentNegativeCompletion,
                retry_after: None,
                evidence,
            };
        }
        let detail = herald_provider::http::error_chain(err);
        if stage == Stage::Content && watch.dot_sent() {
            return SendResult::Ambiguous {
                evidence: self.evidence(
                    label,
                    format!(
                        "the final dot was sent, then: {detail}; the server may have taken the \
                         message (RFC 1047)"
                    ),
                ),
            };
        }
        // lettre's own refusals (no common AUTH mechanism, STARTTLS not offered, an address
        // that needs SMTPUTF8) come before anything is sent and recur on every attempt.
        self.rejected(err.is_client(), label, detail)
    }

    /// The reply to the final dot.
    pub(crate) fn reply_to_dot(&self, reply: &Response) -> SendResult {
        let text = reply.message().collect::<Vec<_>>().join(" ");
        let status = u16::from(reply.code());
        let evidence = self.reply_evidence("after_data", status, &text);
        match reply.code().severity {
            Severity::PositiveCompletion => SendResult::Accepted {
                provider_ref: (!text.is_empty()).then(|| herald_provider::excerpt(&text)),
                evidence,
            },
            // lettre hands back any positive reply; a 3xx here is not an acceptance, and the
            // dot has gone, so nothing proves either way.
            _ => SendResult::Ambiguous { evidence },
        }
    }

    /// The route timeout ran out at `stage`.
    pub(crate) fn timeout(&self, stage: Stage, watch: &Watch, timeout: Duration) -> SendResult {
        let label = stage.label(watch);
        if stage == Stage::Content && watch.dot_sent() {
            SendResult::Ambiguous {
                evidence: self.evidence(
                    label,
                    format!(
                        "no reply within {timeout:?} after the final dot; the server may have \
                         taken the message (RFC 1047)"
                    ),
                ),
            }
        } else {
            self.rejected(
                false,
                label,
                format!("no progress within {timeout:?}; the final dot was not sent"),
            )
        }
    }

    fn reply_evidence(&self, stage: &str, status: u16, text: &str) -> Evidence {
        let evidence = self
            .evidence(stage, format!("{status} {text}"))
            .with_status(status);
        match enhanced_status_code(status, text) {
            Some(code) => evidence.with_vendor_code(code),
            None => evidence,
        }
    }
}

/// The RFC 3463 enhanced status code a reply starts with (`5.7.8`), if it has one whose class
/// agrees with the reply code (RFC 2034 §4).
fn enhanced_status_code(status: u16, text: &str) -> Option<&str> {
    let word = text.split_whitespace().next()?;
    let mut parts = word.split('.');
    let (class, subject, detail) = (parts.next()?, parts.next()?, parts.next()?);
    let digits =
        |part: &str| (1..=3).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit());
    (parts.next().is_none()
        && class == (status / 100).to_string()
        && matches!(class, "2" | "4" | "5")
        && digits(subject)
        && digits(detail))
    .then_some(word)
}

/// The text of a negative reply, which lettre keeps as the error's source.
fn reply_text(err: &SmtpError) -> String {
    std::error::Error::source(err)
        .map(|source| source.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enhanced_status_codes_must_agree_with_the_reply() {
        assert_eq!(
            enhanced_status_code(535, "5.7.8 Authentication credentials invalid"),
            Some("5.7.8")
        );
        assert_eq!(
            enhanced_status_code(250, "2.0.0 Ok: queued as X"),
            Some("2.0.0")
        );
        assert_eq!(enhanced_status_code(450, "5.7.1 nope"), None);
        assert_eq!(enhanced_status_code(550, "Mailbox unavailable"), None);
        assert_eq!(enhanced_status_code(550, "5.1.1.1 x"), None);
    }
}
