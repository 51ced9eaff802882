//! The conformance kit every HTTP adapter passes.
//!
//! herald acts on what an adapter says: an `Accepted` is recorded as delivered, a `Rejected` is
//! retried or failed, an `Ambiguous` is settled by a look-up, a replay or a person. An adapter
//! that says more than it knows — a reset called a refusal, a 500 called a rejection, a retry
//! under a new key — turns a possible delivery into a silent duplicate or a lost message. Each
//! vendor crate used to prove this with its own copies of the same tests, and copies drift; the
//! kit proves it the same way for every adapter, from what its vendor documents.
//!
//! Given how to build the adapter against a base URL ([`Subject`]), the route's secrets and the
//! vendor's documented answers (to a send, and to a look-up where the adapter declares one)
//! with the result each must give, the kit plays every answer from its own scripted HTTP/1.1
//! server on 127.0.0.1, adds the cases every vendor shares ([`Derived`]), and checks that:
//! 1. every answer is classified as the table says: `Accepted`, `Rejected` (permanent or
//!    transient, with its `retry_after`), `Ambiguous` or `KeyReused`, with the vendor's status
//!    in its evidence (herald tells a refused credential from a refused message by it);
//! 2. every transport fault is classified by when it happened (see [`Derived`]), its evidence
//!    at stage `connect` (refused) or `awaiting_response` (reset, no answer), without a status;
//! 3. a retry of one notification sends the very same request; and where the adapter declares
//!    an idempotency window, the key is in the request and another notification's key changes
//!    it;
//! 4. `query` agrees with the declared capabilities: no look-up declared, no request and
//!    `Unsupported`; a look-up answered with a 500 or with nonsense proves nothing; and each of
//!    the look-up's documented answers ([`Kit::lookup_case`]) gives the result the table says
//!    ([`ExpectQuery`]), down to the vendor's ids;
//! 5. no evidence outgrows the excerpt bound, and no result, stored evidence or adapter `Debug`
//!    holds a configured secret, even when the vendor echoes the request, `Authorization` and
//!    all;
//! 6. `Retry-After` is read in both its forms, seconds and HTTP date.
//!
//! The server is the kit's own rather than a vendor's fake: a fake answers as its vendor does,
//! while the kit must misbehave precisely (close before reading, cut a body short, trickle it).
//! Every answer says `Connection: close`, so each request has a connection of its own.
//!
//! [`Kit::run`] plays the cases concurrently and reports each failed check by case name;
//! [`Report::assert_honest`] panics with all of them.
//!
//! What a vendor proves against its own fake rather than the kit's server is shared here too,
//! so that no vendor crate keeps a copy: [`ledger`] holds the checks the fake's ledger judges
//! (an ambiguity settled by a resend or by a look-up, a repeat inside and after the window),
//! [`support`] the set-up and the readers of results every vendor's tests use.
//!
//! # Modules
//! - `derived`: the cases the kit adds to every table, and how each is played.
//! - `play`: one case against a fresh server and adapter, and the checks every result meets.
//! - `server`: the scripted HTTP/1.1 server.
//! - `report`: what a run found.
//! - `ledger` (public): the checks played against a vendor's own fake.
//! - `support` (public): a fake with its adapter, keys, messages, the crypto provider, the
//!   readers of results, and a `python3` runner (a vendor's SDK, skipped loudly where it is
//!   missing, a failure without `HERALD_ALLOW_SKIP=1`), for the vendors' tests.
//!
//! ```no_run
//! # use std::time::Duration;
//! # use herald_provider_testkit::{Expect, Kit, Reply, Subject};
//! # fn build(base_url: &str, timeout: Duration) -> Subject { unimplemented!() }
//! # async fn example() {
//! Kit::new("acme", build)
//!     .secret("canary-key")
//!     .success(Reply::json(200, r#"{"id": "msg_1"}"#))
//!     .rate_limited(Reply::json(429, r#"{"error": "slow down"}"#))
//!     .case("invalid key", Reply::json(401, r#"{"error": "bad key"}"#), Expect::Permanent)
//!     .run()
//!     .await
//!     .assert_honest();
//! # }
//! ```
#![forbid(unsafe_code)]

mod derived;
pub mod ledger;
mod play;
mod report;
mod server;
pub mod support;

pub use derived::Derived;
pub use report::{Failure, Report};

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use herald_provider::{Adapter, Message, QueryResult, SendResult};

use crate::derived::Documented;
use crate::play::{Case, Play, Setup};
use crate::server::Act;
use crate::support::install_crypto_provider;

/// The key of the notification every case sends. A vendor whose answer repeats the request's
/// key (the sandbox's `reference`) puts this one in its documented success. A UUID, as
/// herald's keys are, so that vendors that take only UUIDs send it as it is.
pub const KEY: &str = "01970000-0000-7000-8000-00000000c0de";

/// What the kit tests: an adapter pointed at the kit's server, and the message it sends there.
pub struct Subject {
    adapter: Box<dyn DebugAdapter>,
    message: Message,
}

/// An adapter whose `Debug` can be checked for secrets too.
trait DebugAdapter: Adapter + fmt::Debug {}

impl<A: Adapter + fmt::Debug> DebugAdapter for A {}

impl Subject {
    pub fn new(adapter: impl Adapter + fmt::Debug + 'static, message: Message) -> Subject {
        Subject {
            adapter: Box::new(adapter),
            message,
        }
    }

    fn declares_a_look_up(&self) -> bool {
        self.adapter.capabilities().query_visibility_lag.is_some()
    }
}

/// How to build a [`Subject`] for a base URL (`http://127.0.0.1:<port>`, no trailing slash)
/// and the adapter's whole-exchange timeout.
type Build = dyn Fn(&str, Duration) -> Subject + Send + Sync;

/// A scripted answer: a status, headers and a body. The kit adds `Content-Length` and
/// `Connection: close` itself.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    /// Lower-case names, each once.
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    pub fn json(status: u16, body: impl Into<String>) -> Reply {
        Reply::with_type(status, "application/json", body)
    }

    pub fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply::with_type(status, "text/plain; charset=utf-8", body)
    }

    fn with_type(status: u16, content_type: &str, body: impl Into<String>) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
        .header("content-type", content_type)
    }

    /// This reply with header `name` set to `value`, in place of any it had.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Reply {
        let name = name.to_ascii_lowercase();
        self.headers.retain(|(known, _)| *known != name);
        self.headers.push((name, value.into()));
        self
    }

    /// This reply with the vendor's every-answer headers added, where it has none of its own.
    fn dressed(mut self, every_answer: &[(String, String)]) -> Reply {
        for (name, value) in every_answer {
            if !self.headers.iter().any(|(known, _)| known == name) {
                self.headers.push((name.clone(), value.clone()));
            }
        }
        self
    }
}

/// The result a case must give.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expect {
    Accepted,
    /// `Rejected { permanent: true, .. }`.
    Permanent,
    /// `Rejected { permanent: false, .. }`, whatever its `retry_after`.
    Transient,
    /// `Rejected { permanent: false, .. }` with a `retry_after` at most `slack` from `wait`.
    RetryAfter {
        wait: Duration,
        slack: Duration,
    },
    Ambiguous,
    KeyReused,
}

impl Expect {
    fn holds(self, result: &SendResult) -> bool {
        match (self, result) {
            (Expect::Accepted, SendResult::Accepted { .. })
            | (Expect::Ambiguous, SendResult::Ambiguous { .. })
            | (Expect::KeyReused, SendResult::KeyReused { .. }) => true,
            (Expect::Permanent, SendResult::Rejected { permanent, .. }) => *permanent,
            (Expect::Transient, SendResult::Rejected { permanent, .. }) => !permanent,
            (
                Expect::RetryAfter { wait, slack },
                SendResult::Rejected {
                    permanent: false,
                    retry_after: Some(got),
                    ..
                },
            ) => got.abs_diff(wait) <= slack,
            _ => false,
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Accepted => f.write_str("Accepted"),
            Expect::Permanent => f.write_str("a permanent Rejected"),
            Expect::Transient => f.write_str("a transient Rejected"),
            Expect::RetryAfter { wait, slack } if slack.is_zero() => {
                write!(f, "a transient Rejected with retry_after {wait:?}")
            }
            Expect::RetryAfter { wait, slack } => {
                write!(
                    f,
                    "a transient Rejected with retry_after {wait:?} (± {slack:?})"
                )
            }
            Expect::Ambiguous => f.write_str("Ambiguous"),
            Expect::KeyReused => f.write_str("KeyReused"),
        }
    }
}

/// The result a look-up case must give: what `adapter.query(message, KEY)` answers when the
/// vendor's look-up answers with the case's reply.
#[derive(Debug, Clone, PartialEq)]
pub enum ExpectQuery {
    /// `Accepted` naming exactly this `provider_ref`: the vendor's id of our message, not of
    /// another one listed beside it.
    Accepted {
        provider_ref: Option<String>,
    },
    /// `LookAlikes` with exactly these `refs`, in this order (oldest first), whatever its
    /// `since`.
    LookAlikes {
        refs: Vec<String>,
    },
    NotAccepted,
    NotFoundYet,
    Unsupported,
}

impl ExpectQuery {
    fn holds(&self, result: &QueryResult) -> bool {
        match (self, result) {
            (
                ExpectQuery::Accepted { provider_ref },
                QueryResult::Accepted {
                    provider_ref: got, ..
                },
            ) => provider_ref == got,
            (ExpectQuery::LookAlikes { refs }, QueryResult::LookAlikes { refs: got, .. }) => {
                refs == got
            }
            (ExpectQuery::NotAccepted, QueryResult::NotAccepted { .. })
            | (ExpectQuery::NotFoundYet, QueryResult::NotFoundYet { .. })
            | (ExpectQuery::Unsupported, QueryResult::Unsupported { .. }) => true,
            _ => false,
        }
    }
}

impl fmt::Display for ExpectQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpectQuery::Accepted {
                provider_ref: Some(id),
            } => write!(f, "Accepted with provider_ref `{id}`"),
            ExpectQuery::Accepted { provider_ref: None } => {
                f.write_str("Accepted without a provider_ref")
            }
            ExpectQuery::LookAlikes { refs } => {
                write!(
                    f,
                    "LookAlikes with refs [{}], oldest first",
                    refs.join(", ")
                )
            }
            ExpectQuery::NotAccepted => f.write_str("NotAccepted"),
            ExpectQuery::NotFoundYet => f.write_str("NotFoundYet"),
            ExpectQuery::Unsupported => f.write_str("Unsupported"),
        }
    }
}

/// The adapter's timeout where the answer comes at once: generous, so that a busy machine
/// cannot turn an answer into a timeout.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

/// The adapter's timeout in the cases that outlast it: short, so that the kit stays fast, and
/// long enough for the kit's server to answer first on a busy machine.
const FAULT_TIMEOUT: Duration = Duration::from_millis(500);

/// One vendor's table, and what the kit adds to it.
pub struct Kit {
    vendor: String,
    build: Arc<Build>,
    secrets: Vec<String>,
    every_answer: Vec<(String, String)>,
    success: Option<Reply>,
    rate_limited: Option<Reply>,
    /// The vendor's own cases: name, answer, expected result.
    cases: Vec<(String, Reply, Expect)>,
    /// The documented answers to the look-up: name, answer, expected result.
    lookups: Vec<(String, Reply, ExpectQuery)>,
    /// Derived cases the vendor expects otherwise, and its reason.
    instead: Vec<(Derived, Expect, String)>,
    /// Headers that differ between attempts by design, and why.
    per_attempt: Vec<(String, String)>,
    /// The vendor's own error code a case's evidence must carry: case name, code.
    codes: Vec<(String, String)>,
}

impl Kit {
    /// A table for `vendor` (the name heads the report); `build` makes a fresh adapter and
    /// message for each case, against that case's server.
    pub fn new(
        vendor: &str,
        build: impl Fn(&str, Duration) -> Subject + Send + Sync + 'static,
    ) -> Kit {
        Kit {
            vendor: vendor.to_owned(),
            build: Arc::new(build),
            secrets: Vec::new(),
            every_answer: Vec::new(),
            success: None,
            rate_limited: None,
            cases: Vec::new(),
            lookups: Vec::new(),
            instead: Vec::new(),
            per_attempt: Vec::new(),
            codes: Vec::new(),
        }
    }

    /// A configured secret of the route, which must appear in no result, evidence or adapter
    /// `Debug`. Whatever credential the adapter sends in `Authorization` is held to the same.
    pub fn secret(mut self, secret: &str) -> Kit {
        self.secrets.push(secret.to_owned());
        self
    }

    /// A header the vendor sends on every answer; every reply the kit plays carries it.
    pub fn on_every_answer(mut self, name: &str, value: &str) -> Kit {
        self.every_answer
            .push((name.to_ascii_lowercase(), value.to_owned()));
        self
    }

    /// The vendor's documented acceptance, a JSON object, or an empty body where the status and
    /// headers are the whole answer: played as `documented success`, and the answer of the key
    /// checks and of the 2xx faults (with an empty body, not the truncated and slow ones).
    pub fn success(mut self, reply: Reply) -> Kit {
        self.success = Some(reply);
        self
    }

    /// The vendor's documented rate-limit answer: played as `documented rate limit`, and with
    /// each form of `Retry-After`.
    pub fn rate_limited(mut self, reply: Reply) -> Kit {
        self.rate_limited = Some(reply);
        self
    }

    /// A documented answer and the result it must give.
    pub fn case(mut self, name: &str, reply: Reply, expect: Expect) -> Kit {
        self.cases.push((name.to_owned(), reply, expect));
        self
    }

    /// A documented answer to the adapter's look-up and the result it must give: played from a
    /// fresh server that answers every request with `reply` (and the vendor's every-answer
    /// headers), to `adapter.query(message, KEY)` with the [`Subject`]'s message. The adapter
    /// must ask, and its result meets the checks every result meets. A vendor that pages sees
    /// the same reply on every page. A look-up case for an adapter that declares no look-up is
    /// a failure of the table.
    pub fn lookup_case(mut self, name: &str, reply: Reply, expect: ExpectQuery) -> Kit {
        self.lookups.push((name.to_owned(), reply, expect));
        self
    }

    /// The vendor's own error code (`invalid_api_key`, `20429`) that the evidence of `case` must
    /// carry: an operator tells a bad key from a bad address by it. `case` is a table case's
    /// name or a derived one's (`Derived::name`).
    pub fn vendor_code(mut self, case: &str, code: &str) -> Kit {
        self.codes.push((case.to_owned(), code.to_owned()));
        self
    }

    /// Expects `expect` of a derived case instead of the kit's own expectation, for `reason`
    /// (e.g. a webhook receiver's 2xx is its verdict, whatever its body).
    pub fn expect_instead(mut self, case: Derived, expect: Expect, reason: &str) -> Kit {
        self.instead.push((case, expect, reason.to_owned()));
        self
    }

    /// A header that must change between attempts (a signed timestamp), left out when a retry
    /// is compared with the first attempt, for `reason`.
    pub fn varies_per_attempt(mut self, header: &str, reason: &str) -> Kit {
        self.per_attempt
            .push((header.to_ascii_lowercase(), reason.to_owned()));
        self
    }

    /// Plays every case, concurrently but for those that outlast the adapter's timer, and
    /// reports each failed check.
    pub async fn run(self) -> Report {
        install_crypto_provider();
        let mut report = Report {
            vendor: self.vendor.clone(),
            played: Vec::new(),
            failures: Vec::new(),
        };
        let cases = self.cases_to_play(&mut report);
        let setup = Arc::new(Setup {
            build: self.build,
            secrets: self.secrets,
            per_attempt: self.per_attempt.into_iter().map(|(name, _)| name).collect(),
        });
        // The cases that race the adapter's timer run after the rest, by themselves: building
        // an adapter (its HTTP client) blocks the runtime's thread for tens of milliseconds, and
        // a wave of builds could outlast a short timer before the kit's server had its turn.
        let (timed, at_once): (Vec<Case>, Vec<Case>) =
            cases.into_iter().partition(Case::races_the_timer);
        for wave in [at_once, timed] {
            let running: Vec<_> = wave
                .into_iter()
                .map(|case| {
                    let name = case.name.clone();
                    (name, tokio::spawn(case.play(Arc::clone(&setup))))
                })
                .collect();
            for (name, task) in running {
                match task.await {
                    Ok(log) => {
                        report.played.extend(log.played);
                        report.failures.extend(log.failures);
                    }
                    Err(err) => report.failures.push(Failure {
                        case: name,
                        expected: "a result".to_owned(),
                        got: format!("the case panicked: {}", panic_text(err)),
                    }),
                }
            }
        }
        report
    }

    /// The table (its answers to a send, then to the look-up), then the derived cases, the key
    /// checks and the look-up checks. What the table lacks to derive a case from is a failure
    /// of its own.
    fn cases_to_play(&self, report: &mut Report) -> Vec<Case> {
        let mut missing = |case: &str, expected: &str| {
            report.failures.push(Failure {
                case: case.to_owned(),
                expected: expected.to_owned(),
                got: "nothing".to_owned(),
            })
        };
        let dress = |reply: &Reply| reply.clone().dressed(&self.every_answer);
        let success = self.success.as_ref().map(dress);
        let rate_limited = self.rate_limited.as_ref().map(dress);
        // A vendor whose success has no body (the status and a header are its answer, as
        // SendGrid's 202) echoes into an empty object.
        let success_object = success.as_ref().and_then(|reply| {
            if reply.body.is_empty() {
                return Some(serde_json::Map::new());
            }
            serde_json::from_str::<serde_json::Value>(&reply.body)
                .ok()?
                .as_object()
                .cloned()
        });
        if success.is_none() {
            missing("documented success", "a documented success: `.success(..)`");
        } else if success_object.is_none() {
            missing(
                "documented success",
                "a documented success whose body is a JSON object, or empty",
            );
        }
        if rate_limited.is_none() {
            missing(
                "documented rate limit",
                "a documented rate limit: `.rate_limited(..)`",
            );
        }
        for (derived, _, reason) in &self.instead {
            if reason.trim().is_empty() {
                missing(derived.name(), "a reason for expecting otherwise");
            }
        }
        for (header, reason) in &self.per_attempt {
            if reason.trim().is_empty() {
                missing(header, "a reason for the header to vary per attempt");
            }
        }

        let code = |name: &str| {
            let found = self.codes.iter().find(|(case, _)| case == name);
            found.map(|(_, code)| code.clone())
        };
        let send = |name: &str, act: Option<Act>, expect: Expect| Case {
            name: name.to_owned(),
            play: Play::Send {
                act,
                expect,
                because: None,
                timeout: ANSWER_TIMEOUT,
                code: code(name),
            },
        };
        let mut cases = Vec::new();
        if let Some(reply) = &success {
            cases.push(send(
                "documented success",
                Some(Act::Answer(reply.clone())),
                Expect::Accepted,
            ));
        }
        if let Some(reply) = &rate_limited {
            cases.push(send(
                "documented rate limit",
                Some(Act::Answer(reply.clone())),
                Expect::Transient,
            ));
        }
        for (name, reply, expect) in &self.cases {
            cases.push(send(name, Some(Act::Answer(dress(reply))), *expect));
        }
        for (name, reply, expect) in &self.lookups {
            cases.push(Case {
                name: name.clone(),
                play: Play::Lookup {
                    act: Act::Answer(dress(reply)),
                    expect: expect.clone(),
                },
            });
        }
        let documented = Documented {
            success: success.as_ref(),
            success_object: success_object.as_ref(),
            rate_limited: rate_limited.as_ref(),
            every_answer: &self.every_answer,
        };
        for derived in Derived::ALL {
            let Some((act, timeout)) = derived.play(&documented) else {
                continue;
            };
            let (expect, because) = match self.instead.iter().find(|(d, ..)| *d == derived) {
                Some((_, expect, reason)) => (*expect, Some(reason.clone())),
                None => (derived.expect(), None),
            };
            cases.push(Case {
                name: derived.name().to_owned(),
                play: Play::Send {
                    act,
                    expect,
                    because,
                    timeout,
                    code: code(derived.name()),
                },
            });
        }
        if let Some(reply) = success {
            cases.push(Case {
                name: "a retry repeats the request".to_owned(),
                play: Play::Retry {
                    success: reply.clone(),
                },
            });
            cases.push(Case {
                name: "query".to_owned(),
                play: Play::Query {
                    unasked: reply,
                    lookups: derived::failed_lookups(&self.every_answer),
                },
            });
        }
        for (case, _) in &self.codes {
            let sent = |c: &Case| c.name == *case && matches!(c.play, Play::Send { .. });
            if !cases.iter().any(sent) {
                report.failures.push(Failure {
                    case: case.clone(),
                    expected: "a send case of that name, for its vendor code".to_owned(),
                    got: "nothing".to_owned(),
                });
            }
        }
        // A report names its failures by case: two cases of one name could not be told apart.
        let mut names = std::collections::BTreeSet::new();
        for case in &cases {
            if !names.insert(case.name.as_str()) {
                report.failures.push(Failure {
                    case: case.name.clone(),
                    expected: "one case of each name".to_owned(),
                    got: "two".to_owned(),
                });
            }
        }
        cases
    }
}

fn panic_text(err: tokio::task::JoinError) -> String {
    match err.try_into_panic() {
        Ok(panic) => panic
            .downcast_ref::<&str>()
            .map(|text| (*text).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_owned()),
        Err(err) => err.to_string(),
    }
}
