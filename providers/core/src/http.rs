//! Classification of HTTP exchanges by when they ended (DESIGN.md, "The adapter boundary").
//!
//! Before the request was written, nothing can have been processed: `Rejected`. After it was
//! written and before a readable answer came back, anything may have happened: `Ambiguous`.
//! Vendors differ only at the margins (what 409 or 503 mean), which [`StatusRules`] states.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};

use crate::{Evidence, SendResult};

/// How a vendor's documentation reads on the statuses that are not the same everywhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct StatusRules {
    /// The vendor documents 503 as "not processed, try again" rather than as a crash mid-way.
    pub unavailable_means_not_processed: bool,
    /// The vendor answers 409 to a concurrent request with the same idempotency key: the first
    /// one is still being processed, so this one was not.
    pub conflict_means_in_progress: bool,
}

/// A transport error from reqwest: a failure to connect (or to set up TLS) happened before a
/// byte of the request reached the vendor; anything else may have happened after.
pub fn classify_transport_error(err: &reqwest::Error) -> SendResult {
    let detail = error_chain(err);
    if err.is_connect() {
        SendResult::Rejected {
            permanent: false,
            retry_after: None,
            evidence: Evidence::new("connect", detail),
        }
    } else if err.is_timeout() {
        SendResult::Ambiguous {
            evidence: Evidence::new("awaiting_response", format!("timed out: {detail}")),
        }
    } else {
        SendResult::Ambiguous {
            evidence: Evidence::new("awaiting_response", detail),
        }
    }
}

/// A non-2xx status. 2xx answers are the vendor adapter's to parse: an unreadable 2xx body is
/// `Ambiguous` (see [`unreadable_success`]).
pub fn classify_failure_status(
    status: StatusCode,
    headers: &HeaderMap,
    body: &str,
    rules: StatusRules,
) -> SendResult {
    let evidence = Evidence::new("response", body).with_status(status.as_u16());
    let transient = |evidence| SendResult::Rejected {
        permanent: false,
        retry_after: retry_after(headers),
        evidence,
    };
    match status.as_u16() {
        409 if rules.conflict_means_in_progress => transient(evidence),
        503 if rules.unavailable_means_not_processed => transient(evidence),
        408 | 425 | 429 => transient(evidence),
        400..=499 => SendResult::Rejected {
            permanent: true,
            retry_after: None,
            evidence,
        },
        _ => SendResult::Ambiguous { evidence },
    }
}

/// A 2xx whose body could not be read or understood: the vendor probably took the message,
/// but nothing proves it.
pub fn unreadable_success(status: StatusCode, detail: impl AsRef<str>) -> SendResult {
    SendResult::Ambiguous {
        evidence: Evidence::new("response", detail).with_status(status.as_u16()),
    }
}

/// `Retry-After` in seconds (the HTTP-date form is rare among these vendors and is ignored).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// reqwest's top-level message hides the cause ("error sending request"); the chain names it.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(code: u16, rules: StatusRules) -> SendResult {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, "7".parse().unwrap());
        classify_failure_status(StatusCode::from_u16(code).unwrap(), &headers, "{}", rules)
    }

    fn kind(result: &SendResult) -> &'static str {
        match result {
            SendResult::Accepted { .. } => "accepted",
            SendResult::Rejected {
                permanent: true, ..
            } => "rejected_permanent",
            SendResult::Rejected {
                permanent: false, ..
            } => "rejected_transient",
            SendResult::Ambiguous { .. } => "ambiguous",
        }
    }

    #[test]
    fn statuses_are_classified_as_design_md_says() {
        let plain = StatusRules::default();
        let cases = [
            (400, "rejected_permanent"),
            (401, "rejected_permanent"),
            (403, "rejected_permanent"),
            (404, "rejected_permanent"),
            (409, "rejected_permanent"),
            (422, "rejected_permanent"),
            (429, "rejected_transient"),
            (500, "ambiguous"),
            (502, "ambiguous"),
            (503, "ambiguous"),
            (504, "ambiguous"),
        ];
        for (code, expected) in cases {
            assert_eq!(kind(&classify(code, plain)), expected, "status {code}");
        }
    }

    #[test]
    fn vendor_rules_change_only_409_and_503() {
        let rules = StatusRules {
            unavailable_means_not_processed: true,
            conflict_means_in_progress: true,
        };
        assert_eq!(kind(&classify(503, rules)), "rejected_transient");
        assert_eq!(kind(&classify(409, rules)), "rejected_transient");
        assert_eq!(kind(&classify(500, rules)), "ambiguous");
    }

    #[test]
    fn a_429_carries_its_retry_after() {
        match classify(429, StatusRules::default()) {
            SendResult::Rejected { retry_after, .. } => {
                assert_eq!(retry_after, Some(Duration::from_secs(7)))
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn excerpts_are_bounded_on_a_char_boundary() {
        let long = "é".repeat(1000);
        let cut = crate::excerpt(&long);
        assert!(cut.len() <= crate::EVIDENCE_EXCERPT_BYTES + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }
}
