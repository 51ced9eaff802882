//! The kit against a tiny JSON adapter written here: honest, it passes every check; with one
//! deliberate flaw each, it fails, and the report names the case that shows the flaw. The
//! adapter declares a look-up only where a test asks for one.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herald_provider::http::{
    StatusRules, classify_failure_status, exchange, look_up, unreadable_success, with_vendor_code,
};
use herald_provider::{
    Adapter, Capabilities, Channel, Evidence, Message, ProviderKey, QueryResult, Redactor, Request,
    SendResult,
};
use herald_provider_testkit::{
    Derived, Expect, ExpectQuery, Failure, KEY, Kit, Reply, Report, Subject,
};
use reqwest::header::CONTENT_TYPE;

const API_KEY: &str = "tiny-canary-9d2e";

/// What is wrong with the adapter, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    None,
    /// Calls a 500 a transient rejection, although the vendor may have processed the request.
    RejectsA500,
    /// Appends its API key to every result's evidence, after redaction.
    KeyInEvidence,
    /// Sends `<key>-<attempt>` as the idempotency key, so no retry repeats a request.
    KeyPerAttempt,
    /// Takes the first message its look-up lists for ours, whatever its reference.
    TakesAnyListedMessage,
    /// Leaves the vendor's status out of its evidence, so herald cannot tell a refused
    /// credential (a reason to fail over) from a refused message.
    DropsTheStatus,
    /// Says a connection was refused when it was reset after the request was written.
    MislabelsTheStage,
}

/// `POST {base}/send` with `Authorization: Bearer <key>` and the notification's key as
/// `Idempotency-Key`; the vendor answers `{"id"}`, or an error `{"code"}`. Where the vendor
/// offers a look-up, `GET {base}/messages?reference=<key>` answers `{"data": [{"id",
/// "reference"}]}`: a message listed under our key is `Accepted`, none is `NotFoundYet`, and
/// one under another key means the filter did not hold (`Unsupported`).
struct Tiny {
    timeout: Duration,
    http: reqwest::Client,
    url: String,
    messages_url: String,
    redactor: Redactor,
    capabilities: Capabilities,
    flaw: Flaw,
    attempts: AtomicU64,
}

impl fmt::Debug for Tiny {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tiny")
            .field("url", &self.url)
            .field("api_key", &"[REDACTED]")
            .finish_non_exhaustive()
    }
}

impl Tiny {
    /// `queryable`: the vendor offers the look-up, and the adapter declares it.
    fn new(base_url: &str, timeout: Duration, flaw: Flaw, queryable: bool) -> Tiny {
        Tiny {
            timeout,
            http: reqwest::Client::builder()
                .timeout(timeout)
                .build()
                .expect("a client"),
            url: format!("{base_url}/send"),
            messages_url: format!("{base_url}/messages"),
            redactor: Redactor::secret(API_KEY),
            capabilities: Capabilities {
                idempotency_window: Some(Duration::from_secs(24 * 60 * 60)),
                query_visibility_lag: queryable.then_some(Duration::from_secs(1)),
                ..Capabilities::default()
            },
            flaw,
            attempts: AtomicU64::new(0),
        }
    }

    async fn post(&self, request: &Request, key: &str) -> SendResult {
        let request = self
            .http
            .post(&self.url)
            .bearer_auth(API_KEY)
            .header("idempotency-key", key)
            .header(CONTENT_TYPE, "application/json")
            .body(request.body.clone());
        let answer = match exchange(request, self.timeout).await {
            Ok(answer) => answer,
            Err(result) => return result,
        };
        let field = |name: &str| {
            let body: serde_json::Value = serde_json::from_str(&answer.body).ok()?;
            body.get(name)?.as_str().map(str::to_owned)
        };
        if answer.status.is_success() {
            return match field("id") {
                Some(id) => SendResult::Accepted {
                    provider_ref: Some(id),
                    evidence: Evidence::new("response", &answer.body)
                        .with_status(answer.status.as_u16()),
                },
                None => unreadable_success(answer.status, &answer.body),
            };
        }
        if self.flaw == Flaw::RejectsA500 && answer.status == 500 {
            return SendResult::Rejected {
                permanent: false,
                retry_after: None,
                evidence: Evidence::new("response", &answer.body),
            };
        }
        let rules = StatusRules::default();
        let result = classify_failure_status(answer.status, &answer.headers, &answer.body, rules);
        with_vendor_code(result, field("code"))
    }

    async fn list(&self, key: &str) -> QueryResult {
        let request = self
            .http
            .get(&self.messages_url)
            .query(&[("reference", key)])
            .bearer_auth(API_KEY);
        let answer = match look_up(request).await {
            Ok(answer) => answer,
            Err(evidence) => return QueryResult::Unsupported { evidence },
        };
        let evidence = Evidence::new("query", &answer.body).with_status(answer.status.as_u16());
        let listed = (answer.status == 200).then(|| listing(&answer.body));
        let Some(Some(listed)) = listed else {
            return QueryResult::Unsupported { evidence };
        };
        let another = listed.iter().any(|(_, reference)| reference != key);
        if another && self.flaw != Flaw::TakesAnyListedMessage {
            // The filter did not hold: the list proves nothing about our key.
            return QueryResult::Unsupported { evidence };
        }
        match listed.into_iter().next() {
            Some((id, _)) => QueryResult::Accepted {
                provider_ref: Some(id),
                evidence,
            },
            None => QueryResult::NotFoundYet { evidence },
        }
    }
}

/// Each listed message's `(id, reference)`; `None` unless `body` is such a list.
fn listing(body: &str) -> Option<Vec<(String, String)>> {
    let body: serde_json::Value = serde_json::from_str(body).ok()?;
    let text =
        |message: &serde_json::Value, name: &str| Some(message.get(name)?.as_str()?.to_owned());
    let data = body.get("data")?.as_array()?;
    data.iter()
        .map(|message| Some((text(message, "id")?, text(message, "reference")?)))
        .collect()
}

#[async_trait::async_trait]
impl Adapter for Tiny {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn prepare(&self, message: &Message, _key: &ProviderKey) -> Result<Request, Evidence> {
        Request::json(&serde_json::json!({ "to": message.to, "text": message.text }))
    }

    async fn send_prepared(
        &self,
        request: &Request,
        _message: &Message,
        key: &ProviderKey,
    ) -> SendResult {
        let key = match self.flaw {
            Flaw::KeyPerAttempt => {
                let attempt = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
                format!("{key}-{attempt}")
            }
            _ => key.to_string(),
        };
        let result = self.redactor.send(self.post(request, &key).await);
        match self.flaw {
            Flaw::KeyInEvidence => result.map_evidence(|evidence| Evidence {
                detail: format!("{} (sent with {API_KEY})", evidence.detail),
                ..evidence
            }),
            Flaw::DropsTheStatus => result.map_evidence(|evidence| Evidence {
                status: None,
                ..evidence
            }),
            Flaw::MislabelsTheStage => result.map_evidence(|evidence| Evidence {
                stage: "connect".to_owned(),
                ..evidence
            }),
            _ => result,
        }
    }

    async fn query_prepared(
        &self,
        _request: &Request,
        _message: &Message,
        key: &ProviderKey,
    ) -> QueryResult {
        if self.capabilities.query_visibility_lag.is_none() {
            return QueryResult::Unsupported {
                evidence: Evidence::new("query", "no look-up"),
            };
        }
        self.redactor.query(self.list(key.as_str()).await)
    }
}

fn message() -> Message {
    Message {
        notification_id: "01970000-0000-7000-8000-000000000001".to_owned(),
        channel: Channel::Email,
        to: "ada@example.com".to_owned(),
        subject: None,
        text: Some("123456".to_owned()),
        html: None,
        payload: None,
        blocks: None,
        email: Default::default(),
        expires_at: None,
        trace_parent: None,
    }
}

async fn run(flaw: Flaw) -> Report {
    kit(flaw, false).run().await
}

/// The vendor's table; `queryable`: the vendor offers its look-up.
fn kit(flaw: Flaw, queryable: bool) -> Kit {
    Kit::new("tiny", move |base_url, timeout| {
        Subject::new(Tiny::new(base_url, timeout, flaw, queryable), message())
    })
    .secret(API_KEY)
    .success(Reply::json(200, r#"{"id": "msg_1"}"#))
    .rate_limited(Reply::json(429, r#"{"code": "rate_limited"}"#))
    .case(
        "invalid key",
        Reply::json(401, r#"{"code": "invalid_key"}"#),
        Expect::Permanent,
    )
    .case(
        "server error",
        Reply::json(500, r#"{"code": "internal"}"#),
        Expect::Ambiguous,
    )
    .case(
        "unavailable",
        Reply::json(503, r#"{"code": "unavailable"}"#),
        Expect::Ambiguous,
    )
}

/// A list of the vendor's look-up, one message per `(id, reference)`.
fn listed(messages: &[(&str, &str)]) -> Reply {
    let data: Vec<serde_json::Value> = messages
        .iter()
        .map(|(id, reference)| serde_json::json!({"id": id, "reference": reference}))
        .collect();
    Reply::json(200, serde_json::json!({ "data": data }).to_string())
}

/// The report's failures of `case`; it fails at least once.
fn failures_of<'r>(report: &'r Report, case: &str) -> Vec<&'r Failure> {
    let failures: Vec<&Failure> = report
        .failures()
        .iter()
        .filter(|failure| failure.case == case)
        .collect();
    assert!(!failures.is_empty(), "no failure of `{case}` in: {report}");
    failures
}

#[tokio::test]
async fn an_honest_adapter_passes_every_check_of_every_case() {
    let report = run(Flaw::None).await;

    report.assert_honest();
    let played = report.played();
    for case in Derived::ALL.map(Derived::name).into_iter().chain([
        "documented success",
        "documented rate limit",
        "invalid key",
        "a retry repeats the request",
        "the key travels in the request",
        "another notification's key changes the request",
        "query without a declared look-up",
    ]) {
        assert!(
            played.iter().any(|p| p == case),
            "`{case}` not played: {played:?}"
        );
    }
}

#[tokio::test]
async fn a_success_without_a_body_is_a_table_and_has_no_truncated_or_slow_body_to_play() {
    let report = kit(Flaw::None, false)
        .success(Reply::text(200, ""))
        .run()
        .await;

    let played = report.played();
    for skipped in [Derived::TruncatedSuccess, Derived::SlowSuccess] {
        assert!(
            !played.iter().any(|p| p == skipped.name()),
            "{} played: {played:?}",
            skipped.name()
        );
    }
    assert!(played.iter().any(|p| p == Derived::NonJsonSuccess.name()));
    // The tiny adapter reads its id from a JSON body, so an empty success is unreadable to it:
    // the case says so; the table itself is complete.
    assert!(
        !failures_of(&report, "documented success")
            .iter()
            .any(|failure| failure.expected.contains("whose body is a JSON object"))
    );
}

#[tokio::test]
async fn an_adapter_that_calls_a_500_a_rejection_fails_the_500_case() {
    let report = run(Flaw::RejectsA500).await;

    let failures = failures_of(&report, "server error");
    assert_eq!(failures[0].expected, "Ambiguous");
    assert!(failures[0].got.starts_with("Rejected"), "{report}");
    assert!(!report.failed("unavailable"), "{report}");
    assert!(!report.failed("invalid key"), "{report}");
}

#[tokio::test]
async fn a_vendor_code_the_evidence_lacks_fails_its_case_and_an_unknown_case_fails_the_table() {
    let report = kit(Flaw::None, false)
        .vendor_code("invalid key", "invalid_key")
        .vendor_code("documented rate limit", "slow_down")
        .vendor_code("no such case", "x")
        .run()
        .await;

    assert!(!report.failed("invalid key"), "{report}");
    let failures = failures_of(&report, "documented rate limit");
    assert_eq!(failures[0].expected, "vendor code `slow_down`");
    assert_eq!(failures[0].got, "Some(\"rate_limited\")");
    failures_of(&report, "no such case");
}

#[tokio::test]
async fn an_adapter_that_drops_the_vendors_status_fails_the_answered_cases() {
    let report = run(Flaw::DropsTheStatus).await;

    for case in [
        "documented success",
        "invalid key",
        "server error",
        "unavailable",
    ] {
        let failures = failures_of(&report, case);
        assert!(
            failures[0]
                .expected
                .starts_with("evidence with the vendor's status"),
            "{report}"
        );
    }
    assert!(
        !report.failed("refused connection"),
        "no status to drop where nothing answered: {report}"
    );
}

#[tokio::test]
async fn an_adapter_that_calls_a_reset_a_refused_connection_fails_the_reset_cases() {
    let report = run(Flaw::MislabelsTheStage).await;

    let failures = failures_of(&report, "reset after the request was read");
    assert_eq!(
        failures[0].expected,
        "evidence at stage `awaiting_response`, without a status"
    );
    assert!(!report.failed("refused connection"), "{report}");
}

#[tokio::test]
async fn an_adapter_that_puts_its_key_in_evidence_fails_every_case_that_sends() {
    let report = run(Flaw::KeyInEvidence).await;

    for case in [
        "documented success",
        "invalid key",
        Derived::RefusedConnection.name(),
        Derived::EchoInError.name(),
        "a retry repeats the request",
    ] {
        let leaked = failures_of(&report, case).iter().any(|failure| {
            failure
                .got
                .starts_with("a secret in the evidence as stored")
        });
        assert!(leaked, "{report}");
    }
    assert!(
        !report.failed("query without a declared look-up"),
        "{report}"
    );
}

#[tokio::test]
async fn an_adapter_that_changes_the_key_between_attempts_fails_the_retry_case() {
    let report = run(Flaw::KeyPerAttempt).await;

    let failures = failures_of(&report, "a retry repeats the request");
    assert!(failures[0].got.contains("idempotency-key"), "{report}");
    assert!(!report.failed("documented success"), "{report}");
    // The key is still in the request, only never the same one twice.
    assert!(!report.failed("the key travels in the request"), "{report}");
}

#[tokio::test]
async fn an_adapter_that_takes_any_listed_message_for_ours_fails_the_look_up_case_that_shows_it() {
    const ANOTHER: &str = "a message under another reference listed";
    let report = kit(Flaw::TakesAnyListedMessage, true)
        .lookup_case(
            "our message listed",
            listed(&[("msg_1", KEY)]),
            ExpectQuery::Accepted {
                provider_ref: Some("msg_1".to_owned()),
            },
        )
        .lookup_case("nothing listed", listed(&[]), ExpectQuery::NotFoundYet)
        .lookup_case(
            ANOTHER,
            listed(&[("msg_2", "ntf-other")]),
            ExpectQuery::Unsupported,
        )
        .run()
        .await;

    let failures = failures_of(&report, ANOTHER);
    assert_eq!(failures[0].expected, "Unsupported");
    assert!(failures[0].got.starts_with("Accepted"), "{report}");
    // The flaw shows in that case alone: the adapter passes every other, look-ups included.
    let others: Vec<&Failure> = report
        .failures()
        .iter()
        .filter(|failure| failure.case != ANOTHER)
        .collect();
    assert!(others.is_empty(), "{report}");
    let played = report.played();
    for case in [
        "our message listed",
        "nothing listed",
        "query answered 500",
        "query answered with JSON of another shape",
    ] {
        assert!(
            played.iter().any(|p| p == case),
            "`{case}` not played: {played:?}"
        );
    }
}

#[tokio::test]
async fn a_look_up_case_for_an_adapter_that_declares_none_fails_the_table() {
    const CASE: &str = "our message listed";
    let report = kit(Flaw::None, false)
        .lookup_case(
            CASE,
            listed(&[("msg_1", KEY)]),
            ExpectQuery::Accepted {
                provider_ref: Some("msg_1".to_owned()),
            },
        )
        .run()
        .await;

    let failures = failures_of(&report, CASE);
    assert_eq!(
        failures[0].got,
        "a look-up case for an adapter that declares none"
    );
    assert!(!report.played().iter().any(|p| p == CASE), "{report}");
    assert!(
        !report.failed("query without a declared look-up"),
        "{report}"
    );
}
