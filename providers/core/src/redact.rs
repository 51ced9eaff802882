//! Keeping credentials out of evidence. A vendor, a proxy or a misbehaving endpoint may echo
//! what it was sent, and evidence is stored and shown to anyone with `read`: so every answer
//! an adapter turns into evidence is scrubbed of each credential in every form it travelled in
//! — as it is, and base64-encoded alone, as HTTP Basic `user:secret`, and as SMTP `AUTH PLAIN`
//! `\0user\0secret`, in both base64 alphabets, with and without padding.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use secrecy::{ExposeSecret, SecretString};

use crate::{Evidence, QueryResult, SendResult};

/// The shortest start of a credential that [`Redactor::scrub`] recognises at an excerpt's cut.
const CUT_FORM_MIN: usize = 4;

/// What an adapter must never let into evidence.
#[derive(Clone, Default)]
pub struct Redactor(Vec<SecretString>);

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor([REDACTED; {}])", self.0.len())
    }
}

impl Redactor {
    /// A secret sent as it is (an API key in a header).
    pub fn secret(secret: &str) -> Self {
        Redactor::default().with_secret(secret)
    }

    /// A user and secret sent as HTTP Basic or SMTP `AUTH PLAIN`/`LOGIN`.
    pub fn credentials(user: &str, secret: &str) -> Self {
        Redactor::default().with_credentials(user, secret)
    }

    pub fn with_secret(mut self, secret: &str) -> Self {
        if secret.is_empty() {
            return self;
        }
        self.add(secret.to_owned());
        self.encoded(secret.as_bytes());
        self
    }

    pub fn with_credentials(mut self, user: &str, secret: &str) -> Self {
        if secret.is_empty() {
            return self;
        }
        self = self.with_secret(secret);
        self.encoded(format!("{user}:{secret}").as_bytes());
        self.encoded(format!("\0{user}\0{secret}").as_bytes());
        self
    }

    fn encoded(&mut self, bytes: &[u8]) {
        for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
            self.add(engine.encode(bytes));
        }
    }

    fn add(&mut self, form: String) {
        if !self.0.iter().any(|known| known.expose_secret() == form) {
            self.0.push(SecretString::from(form));
        }
        // Longest first, so that a form containing another is replaced whole.
        self.0
            .sort_by_key(|s| std::cmp::Reverse(s.expose_secret().len()));
    }

    /// `text` with every form replaced by `[REDACTED]`; where `text` is an excerpt cut at the
    /// evidence limit (it ends in `…`) inside a form, what is left of that form too.
    pub fn scrub(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for form in &self.0 {
            let form = form.expose_secret();
            if text.contains(form) {
                text = text.replace(form, "[REDACTED]");
            }
        }
        match text.strip_suffix('…').and_then(|kept| self.cut_form(kept)) {
            Some(start) => format!("{}[REDACTED]…", &text[..start]),
            None => text,
        }
    }

    /// Where the start of a form that `kept` ends with begins, if one does: the cut of an
    /// excerpt went through a credential. Fewer than [`CUT_FORM_MIN`] characters are left
    /// alone, as any text may end with them and they give nothing away.
    fn cut_form(&self, kept: &str) -> Option<usize> {
        self.0
            .iter()
            .filter_map(|form| {
                let form = form.expose_secret();
                (CUT_FORM_MIN..form.len())
                    .rev()
                    .filter(|&n| form.is_char_boundary(n))
                    .find(|&n| kept.ends_with(&form[..n]))
                    .map(|n| kept.len() - n)
            })
            .min()
    }

    pub fn evidence(&self, mut evidence: Evidence) -> Evidence {
        evidence.detail = self.scrub(&evidence.detail);
        evidence.vendor_code = evidence.vendor_code.map(|code| self.scrub(&code));
        evidence
    }

    /// A send's result with its evidence scrubbed.
    pub fn send(&self, result: SendResult) -> SendResult {
        result.map_evidence(|e| self.evidence(e))
    }

    /// A look-up's result with its evidence scrubbed.
    pub fn query(&self, result: QueryResult) -> QueryResult {
        result.map_evidence(|e| self.evidence(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_that_an_excerpt_cut_through_is_scrubbed_too() {
        let secret = "s3cr3t-token-0123456789";
        let redactor = Redactor::secret(secret);
        for left in [4, 10, secret.len() - 1] {
            let padding = "x".repeat(crate::EVIDENCE_EXCERPT_BYTES - left);
            let cut = crate::excerpt(&format!("{padding}{secret} and more"));
            assert!(cut.contains(&secret[..left]), "the cut left {left}: {cut}");
            let scrubbed = redactor.scrub(&cut);
            assert_eq!(scrubbed, format!("{padding}[REDACTED]…"), "{left} left");
        }
        // An excerpt that merely ends like the start of one is not a credential's cut unless
        // it was cut.
        assert_eq!(redactor.scrub("ends with s3cr"), "ends with s3cr");
        assert_eq!(redactor.scrub("ends with s3c…"), "ends with s3c…");
    }

    #[test]
    fn every_form_of_a_credential_is_scrubbed() {
        let redactor = Redactor::credentials("AC123", "s3cr3t-token");
        let forms = [
            "s3cr3t-token".to_owned(),
            STANDARD.encode("AC123:s3cr3t-token"),
            URL_SAFE_NO_PAD.encode("AC123:s3cr3t-token"),
            STANDARD.encode("\0AC123\0s3cr3t-token"),
            STANDARD.encode("s3cr3t-token"),
        ];
        for form in forms {
            let scrubbed = redactor.scrub(&format!("echo: Authorization: Basic {form} end"));
            assert!(!scrubbed.contains(&form), "{form}: {scrubbed}");
            assert!(scrubbed.contains("[REDACTED]"), "{scrubbed}");
        }
        assert_eq!(redactor.scrub("nothing here"), "nothing here");
        assert!(!format!("{redactor:?}").contains("s3cr3t"));
    }

    #[test]
    fn an_empty_secret_scrubs_nothing() {
        assert_eq!(Redactor::secret("").scrub("text"), "text");
        let result = SendResult::Ambiguous {
            evidence: Evidence::new("response", "key=abc"),
        };
        assert_eq!(
            Redactor::secret("abc").send(result).evidence().detail,
            "key=[REDACTED]"
        );
    }
}
