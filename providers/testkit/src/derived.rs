//! The cases the kit adds to every table, what each expects, and how the kit's server plays
//! it from the vendor's documented answers.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::server::Act;
use crate::{ANSWER_TIMEOUT, Expect, FAULT_TIMEOUT, Reply};

/// An error body that echoes the request (see [`Act::Echo`]) under the names vendors' error
/// bodies use most, so that the echo may reach a vendor code as well as the detail.
const ECHO_ERROR: &str = r#"{"message": "you sent: {request}", "errors": ["you sent: {request}"]}"#;

/// A body no JSON parser reads: a proxy's or a load balancer's page.
const NOT_JSON: &str = "<html><body><h1>OK</h1></body></html>";

/// How far ahead the HTTP-date `Retry-After` points.
const RETRY_DATE_AHEAD: Duration = Duration::from_secs(30);

/// The cases the kit adds to every table. Each expects what herald's design says of it (a
/// failure before the request was written is a transient rejection; anything after it, without
/// a readable answer, is ambiguous); a vendor may expect otherwise only with a written reason
/// ([`Kit::expect_instead`](crate::Kit::expect_instead)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Derived {
    /// Nothing listens at the address: nothing was sent. Transient.
    RefusedConnection,
    /// The connection is accepted and reset before the request is read: the client cannot
    /// tell how far the request got. Ambiguous.
    ResetBeforeRequest,
    /// Reset after the whole request was read. Ambiguous.
    ResetAfterRequest,
    /// The request is read and never answered, past the adapter's timeout. Ambiguous.
    NoAnswer,
    /// The documented success's status and headers, then half its body and a close. Ambiguous:
    /// the vendor probably took it, nothing proves it. Not played where the success has no body.
    TruncatedSuccess,
    /// The documented success's status with an HTML body. Ambiguous.
    NonJsonSuccess,
    /// The documented success's status and headers, then its body a byte at a time, until
    /// past the adapter's timeout. Ambiguous. Not played where the success has no body.
    SlowSuccess,
    /// A 400 with a 200 KB body: a permanent rejection whose evidence is still an excerpt.
    HugeError,
    /// A 400 whose body echoes the request as received, `Authorization` and all. Permanent,
    /// and no secret in the evidence.
    EchoInError,
    /// The documented success with the request as received added under `echo`. Accepted, and
    /// no secret in the evidence.
    EchoInSuccess,
    /// The documented rate limit with `Retry-After: 7`. Transient, `retry_after` 7 s.
    RetryAfterSeconds,
    /// The documented rate limit with `Retry-After` an IMF-fixdate 30 s ahead. Transient,
    /// `retry_after` about 30 s.
    RetryAfterDate,
}

impl Derived {
    pub const ALL: [Derived; 12] = [
        Derived::RefusedConnection,
        Derived::ResetBeforeRequest,
        Derived::ResetAfterRequest,
        Derived::NoAnswer,
        Derived::TruncatedSuccess,
        Derived::NonJsonSuccess,
        Derived::SlowSuccess,
        Derived::HugeError,
        Derived::EchoInError,
        Derived::EchoInSuccess,
        Derived::RetryAfterSeconds,
        Derived::RetryAfterDate,
    ];

    /// The case's name in a [`Report`](crate::Report).
    pub fn name(self) -> &'static str {
        match self {
            Derived::RefusedConnection => "refused connection",
            Derived::ResetBeforeRequest => "reset before the request was read",
            Derived::ResetAfterRequest => "reset after the request was read",
            Derived::NoAnswer => "no answer before the timeout",
            Derived::TruncatedSuccess => "2xx with a truncated body",
            Derived::NonJsonSuccess => "2xx with a non-JSON body",
            Derived::SlowSuccess => "2xx with a slow body",
            Derived::HugeError => "400 with a huge body",
            Derived::EchoInError => "request echoed in a 400",
            Derived::EchoInSuccess => "request echoed in a 2xx",
            Derived::RetryAfterSeconds => "Retry-After in seconds",
            Derived::RetryAfterDate => "Retry-After as an HTTP date",
        }
    }

    pub(crate) fn expect(self) -> Expect {
        match self {
            Derived::RefusedConnection => Expect::Transient,
            Derived::ResetBeforeRequest
            | Derived::ResetAfterRequest
            | Derived::NoAnswer
            | Derived::TruncatedSuccess
            | Derived::NonJsonSuccess
            | Derived::SlowSuccess => Expect::Ambiguous,
            Derived::HugeError | Derived::EchoInError => Expect::Permanent,
            Derived::EchoInSuccess => Expect::Accepted,
            Derived::RetryAfterSeconds => Expect::RetryAfter {
                wait: Duration::from_secs(7),
                slack: Duration::ZERO,
            },
            // The date has whole seconds and is read a moment after it was written.
            Derived::RetryAfterDate => Expect::RetryAfter {
                wait: RETRY_DATE_AHEAD,
                slack: Duration::from_secs(3),
            },
        }
    }

    /// How the kit's server plays this case (`None` inside: nothing listens), and the
    /// adapter's timeout for it; `None` when the table lacks the answer it is derived from.
    pub(crate) fn play(self, documented: &Documented) -> Option<(Option<Act>, Duration)> {
        let Documented {
            success,
            success_object,
            rate_limited,
            every_answer,
        } = *documented;
        let at_once = |act| Some((Some(act), ANSWER_TIMEOUT));
        let ours = |reply: Reply| reply.dressed(every_answer);
        match self {
            Derived::RefusedConnection => Some((None, ANSWER_TIMEOUT)),
            Derived::ResetBeforeRequest => at_once(Act::ResetBeforeReading),
            Derived::ResetAfterRequest => at_once(Act::ResetAfterReading),
            Derived::NoAnswer => Some((Some(Act::Hold), FAULT_TIMEOUT)),
            // Half of an empty body is the whole of it: with nothing to cut or to trickle,
            // these two are the documented success itself.
            Derived::TruncatedSuccess | Derived::SlowSuccess if success?.body.is_empty() => None,
            Derived::TruncatedSuccess => at_once(Act::Truncate(success?.clone())),
            Derived::NonJsonSuccess => at_once(Act::Answer(ours(Reply::with_type(
                success?.status,
                "text/html",
                NOT_JSON,
            )))),
            Derived::SlowSuccess => Some((
                Some(Act::Trickle {
                    reply: success?.clone(),
                    over: 2 * FAULT_TIMEOUT,
                }),
                FAULT_TIMEOUT,
            )),
            Derived::HugeError => {
                // Two-byte characters, so that a cut in the middle of one shows.
                let body = serde_json::json!({ "message": "é".repeat(100_000) });
                at_once(Act::Answer(ours(Reply::json(400, body.to_string()))))
            }
            Derived::EchoInError => at_once(Act::Echo(ours(Reply::json(400, ECHO_ERROR)))),
            Derived::EchoInSuccess => {
                let mut body = success_object?.clone();
                body.insert("echo".to_owned(), "{request}".into());
                let reply = success?.clone();
                at_once(Act::Echo(Reply {
                    body: Value::Object(body).to_string(),
                    ..reply
                }))
            }
            Derived::RetryAfterSeconds => at_once(Act::Answer(
                rate_limited?.clone().header("retry-after", "7"),
            )),
            Derived::RetryAfterDate => at_once(Act::RetryAt {
                reply: rate_limited?.clone(),
                ahead: RETRY_DATE_AHEAD,
            }),
        }
    }
}

/// The vendor's documented answers the derived cases are played from, each already carrying
/// the vendor's every-answer headers.
pub(crate) struct Documented<'a> {
    pub success: Option<&'a Reply>,
    /// The success's body, when it is a JSON object.
    pub success_object: Option<&'a Map<String, Value>>,
    pub rate_limited: Option<&'a Reply>,
    pub every_answer: &'a [(String, String)],
}

/// The answers to a look-up that prove nothing, each with its case name.
pub(crate) fn failed_lookups(every_answer: &[(String, String)]) -> Vec<(&'static str, Act)> {
    let ours = |reply: Reply| reply.dressed(every_answer);
    vec![
        (
            "query answered 500",
            Act::Echo(ours(Reply::json(500, ECHO_ERROR))),
        ),
        (
            "query answered with non-JSON",
            Act::Answer(ours(Reply::with_type(200, "text/html", NOT_JSON))),
        ),
        (
            "query answered with JSON of another shape",
            Act::Answer(ours(Reply::json(200, r#"{"unexpected": [1, 2, 3]}"#))),
        ),
    ]
}
