//! Playing one case: a fresh server and a fresh adapter, the exchange, and the checks. Every
//! result the kit sees, whatever its case, is held to [`inspect`].

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use herald_provider::{
    EVIDENCE_EXCERPT_BYTES, Evidence, ProviderKey, QueryResult, SendResult, excerpt,
};

use crate::server::{Act, Recorded, Server};
use crate::{
    ANSWER_TIMEOUT, Build, Expect, ExpectQuery, FAULT_TIMEOUT, Failure, KEY, Reply, Subject,
};

/// Another notification's key, to show that the key is what tells two requests apart.
const OTHER_KEY: &str = "01970000-0000-7000-8000-00000000beef";

/// How long past its own timeout an adapter may take before the kit calls it stuck: an
/// adapter must return within its timeout, but a busy machine may be slow to wake it.
const GRACE: Duration = Duration::from_secs(5);

/// Between a first attempt and its retry. A retry comes later, and a second boundary between
/// the two makes anything an adapter derives from the clock show every time, never only when
/// two sends happen to straddle one.
const RETRY_PAUSE: Duration = Duration::from_millis(1100);

/// What every case shares.
pub(crate) struct Setup {
    pub build: Arc<Build>,
    pub secrets: Vec<String>,
    /// Headers left out when a retry is compared with its first attempt.
    pub per_attempt: Vec<String>,
}

impl Setup {
    /// The configured secrets, and each credential the adapter sent in `Authorization`: an
    /// HTTP Basic pair is the secret in another form.
    fn forbidden(&self, requests: &[Recorded]) -> Vec<String> {
        let sent = requests
            .iter()
            .flat_map(|request| &request.headers)
            .filter(|(name, _)| name == "authorization")
            .map(|(_, value)| value.split_once(' ').map_or(value.as_str(), |(_, c)| c));
        self.secrets
            .iter()
            .map(String::as_str)
            .chain(sent)
            .map(str::trim)
            .filter(|secret| !secret.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

pub(crate) struct Case {
    /// The name a failure to play it at all is reported under.
    pub name: String,
    pub play: Play,
}

pub(crate) enum Play {
    /// One send against a server that does `act` (`None`: nothing listens), held to `expect`,
    /// which `because` explains where a vendor expects otherwise than the kit.
    Send {
        act: Option<Act>,
        expect: Expect,
        because: Option<String>,
        timeout: Duration,
        /// The vendor's own code its evidence must carry.
        code: Option<String>,
    },
    /// The key checks: a send and its retry, and under an idempotency window another
    /// notification's send, all answered with the documented success.
    Retry { success: Reply },
    /// The look-up checks: with no look-up declared, a query answered `unasked` must not be
    /// asked; with one, each of `lookups` must prove nothing.
    Query {
        unasked: Reply,
        lookups: Vec<(&'static str, Act)>,
    },
    /// One documented answer to the look-up: a query against a server that does `act`, held
    /// to `expect`; a failure of the table where the adapter declares no look-up.
    Lookup { act: Act, expect: ExpectQuery },
}

/// What one case found.
#[derive(Default)]
pub(crate) struct Log {
    pub played: Vec<String>,
    pub failures: Vec<Failure>,
}

impl Log {
    fn fail(&mut self, case: &str, expected: impl Into<String>, got: impl Into<String>) {
        self.failures.push(Failure {
            case: case.to_owned(),
            expected: expected.into(),
            got: got.into(),
        });
    }
}

impl Case {
    /// Whether the case outlasts the adapter's timer on purpose, so that what it proves depends
    /// on the kit's server doing its part before the timer expires.
    pub(crate) fn races_the_timer(&self) -> bool {
        matches!(self.play, Play::Send { timeout, .. } if timeout == FAULT_TIMEOUT)
    }

    pub(crate) async fn play(self, setup: Arc<Setup>) -> Log {
        let mut log = Log::default();
        match self.play {
            Play::Send {
                act,
                expect,
                because,
                timeout,
                code,
            } => {
                let expected = match because {
                    Some(reason) => format!("{expect} ({reason})"),
                    None => expect.to_string(),
                };
                let sent = send(
                    &self.name, act, expect, &expected, timeout, &setup, &mut log,
                )
                .await;
                if let (Some(code), Some(result)) = (code, sent)
                    && result.evidence().vendor_code.as_deref() != Some(code.as_str())
                {
                    let got = format!("{:?}", result.evidence().vendor_code);
                    log.fail(&self.name, format!("vendor code `{code}`"), got);
                }
            }
            Play::Retry { success } => retry(success, &setup, &mut log).await,
            Play::Query { unasked, lookups } => query(unasked, lookups, &setup, &mut log).await,
            Play::Lookup { act, expect } => {
                lookup_case(&self.name, act, &expect, &setup, &mut log).await;
            }
        }
        log
    }
}

async fn send(
    case: &str,
    act: Option<Act>,
    expect: Expect,
    expected: &str,
    timeout: Duration,
    setup: &Setup,
    log: &mut Log,
) -> Option<SendResult> {
    log.played.push(case.to_owned());
    let shown = act.as_ref().map_or(Shown::Stage("connect"), Shown::by);
    // Bound but not listening, and held for the case: a connection is refused, and no other
    // case's server can take the port meanwhile.
    let mut closed = None;
    let server = match act {
        Some(act) => match start(case, act, log).await {
            Some(server) => Some(server),
            None => return None,
        },
        None => None,
    };
    let base_url = match &server {
        Some(server) => server.base_url(),
        None => {
            let socket = nothing_listening();
            let url = format!("http://{}", socket.local_addr().expect("a bound address"));
            closed = Some(socket);
            url
        }
    };
    let subject = (setup.build)(&base_url, timeout);
    let result = attempt(case, &subject, server.as_ref(), KEY, timeout, setup, log).await;
    drop(closed);
    let result = result?;
    if !expect.holds(&result) {
        log.fail(case, expected, excerpt(&format!("{result:?}")));
    }
    if let Some(expected) = shown.missing_from(&result) {
        log.fail(case, expected, excerpt(&format!("{:?}", result.evidence())));
    }
    Some(result)
}

/// What a result's evidence must show of where the exchange ended. herald reads the status to
/// tell a refusal of the route itself (401–403, a reason to fail over) from a refusal of the
/// message, and for its metrics; and the stage to tell a vendor that refused the connection.
enum Shown {
    /// The vendor answered with this status line.
    Status(u16),
    /// No status line came back; the exchange ended at this stage.
    Stage(&'static str),
    /// The status, or, when the adapter's timer fired before the head arrived (a busy
    /// machine), this stage without one: a trickled body races the timer on purpose.
    StatusOrStage(u16, &'static str),
}

impl Shown {
    fn by(act: &Act) -> Shown {
        match act {
            Act::Answer(reply)
            | Act::Echo(reply)
            | Act::RetryAt { reply, .. }
            | Act::Truncate(reply) => Shown::Status(reply.status),
            Act::Trickle { reply, .. } => Shown::StatusOrStage(reply.status, "awaiting_response"),
            Act::ResetBeforeReading | Act::ResetAfterReading | Act::Hold => {
                Shown::Stage("awaiting_response")
            }
        }
    }

    /// What the result's evidence should have shown, if it does not.
    fn missing_from(&self, result: &SendResult) -> Option<String> {
        let evidence = result.evidence();
        match *self {
            // A refusal inside a 2xx (Mailjet's per-message errors) carries the status the
            // vendor gave that message.
            Shown::Status(200..=299)
                if matches!(result, SendResult::Rejected { .. }) && evidence.status.is_some() =>
            {
                None
            }
            Shown::Status(status) if evidence.status != Some(status) => {
                Some(format!("evidence with the vendor's status {status}"))
            }
            Shown::Stage(stage) if evidence.stage != stage || evidence.status.is_some() => {
                Some(format!("evidence at stage `{stage}`, without a status"))
            }
            Shown::StatusOrStage(status, stage)
                if evidence.status != Some(status)
                    && (evidence.stage != stage || evidence.status.is_some()) =>
            {
                Some(format!(
                    "evidence with the vendor's status {status}, or at stage `{stage}` without one"
                ))
            }
            _ => None,
        }
    }
}

async fn retry(success: Reply, setup: &Setup, log: &mut Log) {
    const REPEATS: &str = "a retry repeats the request";
    const CARRIES: &str = "the key travels in the request";
    const DIFFERS: &str = "another notification's key changes the request";
    log.played.push(REPEATS.to_owned());
    let Some(server) = start(REPEATS, Act::Answer(success), log).await else {
        return;
    };
    let subject = (setup.build)(&server.base_url(), ANSWER_TIMEOUT);
    let server = Some(&server);
    attempt(REPEATS, &subject, server, KEY, ANSWER_TIMEOUT, setup, log).await;
    tokio::time::sleep(RETRY_PAUSE).await;
    attempt(REPEATS, &subject, server, KEY, ANSWER_TIMEOUT, setup, log).await;
    let requests = server.map(Server::requests).unwrap_or_default();
    let [first, second, ..] = requests.as_slice() else {
        log.fail(
            REPEATS,
            "two requests, one per attempt",
            format!("{} requests", requests.len()),
        );
        return;
    };
    if let Some(difference) = difference(first, second, &setup.per_attempt) {
        log.fail(
            REPEATS,
            "the first attempt's request again: method, path, query, headers but `date`, body",
            difference,
        );
    }

    if subject.adapter.capabilities().idempotency_window.is_none() {
        return;
    }
    log.played.push(CARRIES.to_owned());
    let carried = first.body.contains(KEY) || first.headers.iter().any(|(_, v)| v.contains(KEY));
    if !carried {
        log.fail(
            CARRIES,
            format!(
                "`{KEY}` in a header or the body, as the adapter declares an idempotency window"
            ),
            "in neither",
        );
    }
    log.played.push(DIFFERS.to_owned());
    attempt(
        DIFFERS,
        &subject,
        server,
        OTHER_KEY,
        ANSWER_TIMEOUT,
        setup,
        log,
    )
    .await;
    match server.and_then(|server| server.requests().get(2).cloned()) {
        None => log.fail(DIFFERS, "a third request", "none"),
        Some(other) if difference(first, &other, &setup.per_attempt).is_none() => log.fail(
            DIFFERS,
            "a request unlike the first notification's",
            "the same request",
        ),
        Some(_) => {}
    }
}

/// Sends once under `key`, and observes the result.
async fn attempt(
    case: &str,
    subject: &Subject,
    server: Option<&Server>,
    key: &str,
    timeout: Duration,
    setup: &Setup,
    log: &mut Log,
) -> Option<SendResult> {
    let key = ProviderKey::new(key);
    let sent = subject.adapter.send(&subject.message, &key);
    observe(case, sent, timeout, subject, server, setup, log).await
}

async fn query(unasked: Reply, lookups: Vec<(&'static str, Act)>, setup: &Setup, log: &mut Log) {
    const UNDECLARED: &str = "query without a declared look-up";
    let Some(server) = start(UNDECLARED, Act::Answer(unasked), log).await else {
        return;
    };
    let subject = (setup.build)(&server.base_url(), ANSWER_TIMEOUT);
    // Whether the adapter declares a look-up is known once it is built.
    if !subject.declares_a_look_up() {
        log.played.push(UNDECLARED.to_owned());
        let asked = ask(UNDECLARED, &subject, &server, setup, log).await;
        if let Some(result) = asked
            && !matches!(result, QueryResult::Unsupported { .. })
        {
            log.fail(UNDECLARED, "Unsupported", excerpt(&format!("{result:?}")));
        }
        let requests = server.requests().len();
        if requests > 0 {
            log.fail(UNDECLARED, "no request", format!("{requests} requests"));
        }
        return;
    }
    for (case, act) in lookups {
        log.played.push(case.to_owned());
        let Some(server) = start(case, act, log).await else {
            continue;
        };
        let subject = (setup.build)(&server.base_url(), ANSWER_TIMEOUT);
        // Not NotFoundYet: after the visibility lag, that is herald's proof of absence.
        let expected = "Unsupported: a failed look-up proves nothing";
        let unsupported = &ExpectQuery::Unsupported;
        look_up(case, &subject, &server, unsupported, expected, setup, log).await;
    }
}

/// A documented answer to the look-up, where the adapter declares one; where it declares none,
/// the case is a failure of the table.
async fn lookup_case(case: &str, act: Act, expect: &ExpectQuery, setup: &Setup, log: &mut Log) {
    let Some(server) = start(case, act, log).await else {
        return;
    };
    let subject = (setup.build)(&server.base_url(), ANSWER_TIMEOUT);
    if !subject.declares_a_look_up() {
        log.fail(
            case,
            "an adapter that declares a look-up (`query_visibility_lag`)",
            "a look-up case for an adapter that declares none",
        );
        return;
    }
    log.played.push(case.to_owned());
    let expected = expect.to_string();
    look_up(case, &subject, &server, expect, &expected, setup, log).await;
}

/// Queries once against `server`, which answers the look-up, and holds the result to
/// `expect` (`expected` says it in a failure); the adapter must have asked.
async fn look_up(
    case: &str,
    subject: &Subject,
    server: &Server,
    expect: &ExpectQuery,
    expected: &str,
    setup: &Setup,
    log: &mut Log,
) {
    if let Some(result) = ask(case, subject, server, setup, log).await
        && !expect.holds(&result)
    {
        log.fail(case, expected, excerpt(&format!("{result:?}")));
    }
    if server.requests().is_empty() {
        log.fail(
            case,
            "a request, as the adapter declares a look-up",
            "no request",
        );
    }
}

/// Queries once, and observes the result.
async fn ask(
    case: &str,
    subject: &Subject,
    server: &Server,
    setup: &Setup,
    log: &mut Log,
) -> Option<QueryResult> {
    let key = ProviderKey::new(KEY);
    let asked = subject.adapter.query(&subject.message, &key);
    observe(
        case,
        asked,
        ANSWER_TIMEOUT,
        subject,
        Some(server),
        setup,
        log,
    )
    .await
}

/// A send's or a query's result, with the evidence herald would store.
trait Outcome: fmt::Debug {
    fn evidence(&self) -> &Evidence;
}

impl Outcome for SendResult {
    fn evidence(&self) -> &Evidence {
        SendResult::evidence(self)
    }
}

impl Outcome for QueryResult {
    fn evidence(&self) -> &Evidence {
        QueryResult::evidence(self)
    }
}

/// Awaits an adapter's send or query and holds its result to [`inspect`]'s checks; `None` if
/// the adapter did not return.
async fn observe<T: Outcome>(
    case: &str,
    future: impl Future<Output = T>,
    timeout: Duration,
    subject: &Subject,
    server: Option<&Server>,
    setup: &Setup,
    log: &mut Log,
) -> Option<T> {
    let result = within(case, timeout, future, log).await?;
    let requests = server.map(Server::requests).unwrap_or_default();
    inspect(case, &result, subject, &setup.forbidden(&requests), log);
    Some(result)
}

/// What every result meets, whatever its case: its evidence is an excerpt, and no secret is in
/// the result, in its evidence as herald stores it, or in the adapter.
fn inspect(
    case: &str,
    result: &impl Outcome,
    subject: &Subject,
    forbidden: &[String],
    log: &mut Log,
) {
    let bound = EVIDENCE_EXCERPT_BYTES + '…'.len_utf8();
    let evidence = result.evidence();
    if evidence.detail.len() > bound {
        log.fail(
            case,
            format!("an evidence detail of at most {bound} bytes"),
            format!("{} bytes", evidence.detail.len()),
        );
    }
    let stored = serde_json::to_string(evidence).expect("evidence serializes");
    let result = format!("{result:?}");
    let adapter = format!("{:?}", subject.adapter);
    for (what, text) in [
        ("the result's Debug", &result),
        ("the evidence as stored", &stored),
        ("the adapter's Debug", &adapter),
    ] {
        if forbidden.iter().any(|secret| text.contains(secret)) {
            log.fail(
                case,
                "no configured secret in the result, its evidence or the adapter",
                format!("a secret in {what}: {}", excerpt(text)),
            );
        }
    }
}

/// `future`'s output, or a failure if the adapter outlives its own timeout.
async fn within<T>(
    case: &str,
    timeout: Duration,
    future: impl Future<Output = T>,
    log: &mut Log,
) -> Option<T> {
    let output = tokio::time::timeout(timeout + GRACE, future).await.ok();
    if output.is_none() {
        log.fail(
            case,
            format!("a result within the adapter's timeout of {timeout:?}"),
            format!("none after {:?}", timeout + GRACE),
        );
    }
    output
}

async fn start(case: &str, act: Act, log: &mut Log) -> Option<Server> {
    match Server::start(act).await {
        Ok(server) => Some(server),
        Err(err) => {
            log.fail(case, "a local server to play the case", err.to_string());
            None
        }
    }
}

/// A loopback port bound but not listening: a connection to it is refused, and while the
/// caller holds the socket no other case's server can take the port.
fn nothing_listening() -> tokio::net::TcpSocket {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind((std::net::Ipv4Addr::LOCALHOST, 0).into())
        .expect("a free loopback port");
    socket
}

/// Where `later` differs from `first`, leaving out `date` and the headers that vary per
/// attempt by design; `None` when it is the same request.
fn difference(first: &Recorded, later: &Recorded, varying: &[String]) -> Option<String> {
    if first.method != later.method {
        return Some(format!("method {}, then {}", first.method, later.method));
    }
    if first.target != later.target {
        return Some(format!(
            "path and query {}, then {}",
            first.target, later.target
        ));
    }
    let kept = |request: &Recorded| -> Vec<(String, String)> {
        let kept = |name: &String| name != "date" && !varying.contains(name);
        let headers = request.headers.iter().filter(|(name, _)| kept(name));
        headers.cloned().collect()
    };
    let (before, after) = (kept(first), kept(later));
    if before != after {
        let only = |these: &[(String, String)], those: &[(String, String)]| {
            let only: Vec<String> = these
                .iter()
                .filter(|header| !those.contains(header))
                .map(|(name, value)| format!("{name}: {value}"))
                .collect();
            only.join("; ")
        };
        return Some(format!(
            "headers [{}], then [{}] (the rest alike, in order or not)",
            only(&before, &after),
            only(&after, &before)
        ));
    }
    if first.body != later.body {
        return Some(format!(
            "body {}, then {}",
            excerpt(&first.body),
            excerpt(&later.body)
        ));
    }
    None
}
