//! Classification of HTTP exchanges by when they ended.
//!
//! Before the request was written, nothing can have been processed: `Rejected`. After it was
//! written and before a readable answer came back, anything may have happened: `Ambiguous`.
//! Vendors differ only at the margins (what 409 or 503 mean), which [`StatusRules`] states.
//!
//! [`exchange`] (for a send) and [`look_up`] (for an outcome query) run that classification
//! over one request, so an adapter keeps only what is its vendor's own: the request's shape, its
//! status rules, the parsing of its answers and its error codes.

use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{RequestBuilder, StatusCode};

use crate::timeout::{OUT_OF_THE_WAY, within};
use crate::{Evidence, SendResult};

/// A vendor's answer, read to its end: what is left to classify once the exchange has come
/// back whole. A 2xx's body is the vendor's to parse (an unreadable one is
/// [`unreadable_success`]); anything else goes to the vendor's own rules, which end in
/// [`classify_failure_status`].
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The body as text. After a non-2xx whose body could not be read, a note saying so: the
    /// status alone classifies a failure, and the body only adds detail.
    pub body: String,
}

/// Sends `request` and reads the whole answer, classifying every way the exchange can end
/// before there is an answer to parse:
///
/// - a request that cannot be built (a header value that is not one, say) is a permanent
///   `Rejected` at stage `request`: nothing was sent, and a resend would fail the same way;
/// - a transport error is [`classify_transport_error`]'s;
/// - a 2xx whose body breaks off is [`unreadable_success`]: the vendor probably took it.
///
/// The `Err` is then the send's result as it stands. The request is built before any I/O, so
/// that a failure to build is never mistaken for one after the request was written.
///
/// The exchange is cut after `timeout` by [`within`], which reads an answer that waits for a
/// process woken from a freeze. reqwest's own timer would fire first on waking and lose the
/// answer, so it is set out of the way ([`OUT_OF_THE_WAY`]).
pub async fn exchange(request: RequestBuilder, timeout: Duration) -> Result<Answer, SendResult> {
    exchange_to(request, timeout, UrlOwner::Vendor).await
}

/// [`exchange`] for a request whose URL is `owner`'s: a recipient's URL (a path that holds a
/// device token, say) is shown in no trace ([`record_destination`]) and in no error's text.
pub async fn exchange_to(
    request: RequestBuilder,
    timeout: Duration,
    owner: UrlOwner,
) -> Result<Answer, SendResult> {
    let request = request.timeout(OUT_OF_THE_WAY);
    within(timeout, exchange_whole(request, owner))
        .await
        .unwrap_or_else(|| Err(no_answer_within(timeout)))
}

/// A request written (perhaps) and no answer within `timeout`: anything may have happened.
pub fn no_answer_within(timeout: Duration) -> SendResult {
    SendResult::Ambiguous {
        evidence: Evidence::new(
            "awaiting_response",
            format!("timed out: no answer within {} ms", timeout.as_millis()),
        ),
    }
}

async fn exchange_whole(request: RequestBuilder, owner: UrlOwner) -> Result<Answer, SendResult> {
    // reqwest names the URL in its errors' text.
    let shown = |err: reqwest::Error| match owner {
        UrlOwner::Vendor => err,
        UrlOwner::Recipient => err.without_url(),
    };
    let (client, request) = request.build_split();
    let request = request.map_err(|err| {
        SendResult::permanent(Evidence::new(
            "request",
            format!("cannot build the request: {}", error_chain(&shown(err))),
        ))
    })?;
    record_destination(request.method(), request.url(), owner);
    let response = client
        .execute(request)
        .await
        .map_err(|err| classify_transport_error(&shown(err)))?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = match response.text().await {
        Ok(body) => body,
        Err(err) if status.is_success() => {
            return Err(unreadable_success(
                status,
                format!("the body could not be read: {}", error_chain(&shown(err))),
            ));
        }
        Err(err) => format!("(the body could not be read: {})", error_chain(&shown(err))),
    };
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// Whose URL a request goes to, which decides how much of it a trace may show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlOwner {
    /// A vendor's API: its path names an operation, and may be shown.
    Vendor,
    /// The recipient's own (a webhook): its path may be the credential (a token in it).
    Recipient,
}

/// Records where a request goes on the current span, after OpenTelemetry's HTTP client
/// conventions: `http.request.method`, `server.address`, `server.port` and `url.full`. herald's
/// vendor call span declares these fields; any other span ignores them. `url.full` leaves out
/// whatever may be a credential: a user and password, the query and fragment (some vendors
/// take a key or a signature there) and, for a [`UrlOwner::Recipient`], the path, in whose
/// place it says `REDACTED`.
pub fn record_destination(method: &reqwest::Method, url: &reqwest::Url, owner: UrlOwner) {
    let span = tracing::Span::current();
    span.record("http.request.method", method.as_str());
    span.record("server.address", url.host_str().unwrap_or_default());
    if let Some(port) = url.port_or_known_default() {
        span.record("server.port", port);
    }
    span.record("url.full", shown_url(url, owner).as_str());
}

/// `url` as a trace may show it: scheme, host, port and (a vendor's) path.
fn shown_url(url: &reqwest::Url, owner: UrlOwner) -> String {
    let host = url.host_str().unwrap_or_default();
    let port = url
        .port()
        .map(|port| format!(":{port}"))
        .unwrap_or_default();
    let path = match owner {
        UrlOwner::Vendor => url.path(),
        UrlOwner::Recipient => "/REDACTED",
    };
    format!("{}://{host}{port}{path}", url.scheme())
}

/// [`exchange`] for an outcome query, where every failure to get a readable answer proves the
/// same thing — nothing — and becomes the evidence (stage `query`) of a
/// `QueryResult::Unsupported`. Whether the status is the one the look-up expects, and what its
/// body says, is the vendor adapter's to judge.
pub async fn look_up(request: RequestBuilder) -> Result<Answer, Evidence> {
    let (client, request) = request.build_split();
    let request = request.map_err(|err| Evidence::new("query", error_chain(&err)))?;
    let response = client
        .execute(request)
        .await
        .map_err(|err| Evidence::new("query", error_chain(&err)))?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .text()
        .await
        .map_err(|err| Evidence::new("query", error_chain(&err)).with_status(status.as_u16()))?;
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// `path` below a vendor's `base_url` (the route's setting, or the vendor's default): a
/// trailing `/` of the base is dropped, and only http(s) is taken. `Err` says what is wrong.
pub fn endpoint(base_url: &str, path: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(&format!("{}{path}", base_url.trim_end_matches('/')))
        .map_err(|err| err.to_string())?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!("the scheme `{other}` is not http or https")),
    }
}

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
        // A name that does not resolve never reached a vendor: say so, apart from a vendor
        // that refused the connection. hyper's connector names it in its error ("dns error").
        let stage = if detail.contains("dns error") {
            "dns"
        } else {
            "connect"
        };
        SendResult::transient(Evidence::new(stage, detail), None)
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
    let transient = |evidence| SendResult::transient(evidence, retry_after(headers));
    match status.as_u16() {
        409 if rules.conflict_means_in_progress => transient(evidence),
        503 if rules.unavailable_means_not_processed => transient(evidence),
        408 | 425 | 429 => transient(evidence),
        400..=499 => SendResult::permanent(evidence),
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

/// `Retry-After` in either of its forms (RFC 9110 §10.2.3): seconds, or an HTTP-date, read as
/// the time left until then (none if it has passed). Anything else is ignored.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    match value.parse::<u64>() {
        Ok(seconds) => Some(Duration::from_secs(seconds)),
        Err(_) => httpdate::parse_http_date(value)
            .ok()?
            .duration_since(std::time::SystemTime::now())
            .ok(),
    }
}

/// Adds the vendor's own error code, if its answer had one, to a classified failure's evidence.
/// An acceptance is returned as it is: its code, if any, is the adapter's to place.
pub fn with_vendor_code(result: SendResult, code: Option<String>) -> SendResult {
    match (code, &result) {
        (None, _) | (_, SendResult::Accepted { .. }) => result,
        (Some(code), _) => result.map_evidence(|evidence| evidence.with_vendor_code(code)),
    }
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

    #[test]
    fn a_trace_shows_no_user_password_query_or_fragment_and_no_recipients_path() {
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        let vendor = url("https://AC123:s3cret@api.example.com:8443/v1/send?key=k3y&sig=abc#frag");
        assert_eq!(
            shown_url(&vendor, UrlOwner::Vendor),
            "https://api.example.com:8443/v1/send"
        );
        let hook = url("https://hooks.example.com/services/T000/B000/tok3n?x=1");
        assert_eq!(
            shown_url(&hook, UrlOwner::Recipient),
            "https://hooks.example.com/REDACTED"
        );
    }

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
            SendResult::KeyReused { .. } => "key_reused",
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
    fn an_endpoint_is_a_path_below_an_http_or_https_base() {
        assert_eq!(
            endpoint("https://api.vendor.example/v1/", "/send")
                .unwrap()
                .as_str(),
            "https://api.vendor.example/v1/send"
        );
        assert!(endpoint("ftp://api.vendor.example", "/send").is_err());
        assert!(endpoint("not a url", "/send").is_err());
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
    fn retry_after_is_read_in_seconds_and_as_an_http_date() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(RETRY_AFTER, value.parse().unwrap());
            retry_after(&headers)
        };
        assert_eq!(with("120"), Some(Duration::from_secs(120)));
        let in_a_minute = std::time::SystemTime::now() + Duration::from_secs(60);
        let left = with(&httpdate::fmt_http_date(in_a_minute)).expect("a future date is a wait");
        assert!(
            left > Duration::from_secs(55) && left <= Duration::from_secs(60),
            "{left:?}"
        );
        assert_eq!(
            with("Wed, 21 Oct 2015 07:28:00 GMT"),
            None,
            "a past date is no wait"
        );
        assert_eq!(with("soon"), None);
    }

    #[test]
    fn a_vendor_code_goes_on_failures_and_leaves_acceptances_alone() {
        let coded = with_vendor_code(classify(400, StatusRules::default()), Some("E1".into()));
        match coded {
            SendResult::Rejected { evidence, .. } => {
                assert_eq!(evidence.vendor_code.as_deref(), Some("E1"))
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
        let accepted = SendResult::Accepted {
            provider_ref: Some("id".into()),
            evidence: Evidence::new("response", "{}"),
        };
        assert_eq!(
            with_vendor_code(accepted.clone(), Some("E1".into())),
            accepted
        );
        let plain = classify(500, StatusRules::default());
        assert_eq!(with_vendor_code(plain.clone(), None), plain);
    }

    #[test]
    fn redaction_removes_the_secret_from_detail_and_code_of_every_result() {
        let evidence = Evidence::new("response", "bad key s3cret").with_vendor_code("s3cret!");
        for result in [
            SendResult::Accepted {
                provider_ref: None,
                evidence: evidence.clone(),
            },
            SendResult::Ambiguous {
                evidence: evidence.clone(),
            },
        ] {
            match crate::Redactor::secret("s3cret").send(result) {
                SendResult::Accepted { evidence, .. } | SendResult::Ambiguous { evidence } => {
                    assert_eq!(evidence.detail, "bad key [REDACTED]");
                    assert_eq!(evidence.vendor_code.as_deref(), Some("[REDACTED]!"));
                }
                other => panic!("the kind changed: {other:?}"),
            }
        }
        let untouched = SendResult::Ambiguous { evidence };
        assert_eq!(
            crate::Redactor::secret("").send(untouched.clone()),
            untouched
        );
    }

    #[test]
    fn excerpts_are_bounded_on_a_char_boundary() {
        let long = "é".repeat(1000);
        let cut = crate::excerpt(&long);
        assert!(cut.len() <= crate::EVIDENCE_EXCERPT_BYTES + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }
}
