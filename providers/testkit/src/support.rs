//! What the vendor crates' own tests share, whatever the vendor: a fake with an adapter pointed
//! at it, the crypto provider every adapter's HTTP client needs, keys and messages shaped like
//! herald's, a look-up that waits out a visibility lag, and the reading of a result as a test
//! expects it.
//!
//! The readers (`accepted_ref`, `ambiguous`, `permanent_rejection`, …) panic with what came
//! instead, as a failed assertion does, so that a test can state its expectation in one line
//! and go on to the vendor's own details.

use std::collections::BTreeSet;
use std::future::Future;
use std::io::{self, Write};
use std::process::{Command, Stdio};
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herald_provider::callback::{CallbackError, CallbackEvent, CallbackRequest};
use herald_provider::{
    Adapter, Attachment, Channel, EmailOptions, Encoding, Evidence, Message, ProviderKey,
    QueryResult, Request, SendResult,
};

/// A vendor's fake, running, and an adapter pointed at it: what a test against the fake holds.
pub struct Vendor<Fake, A> {
    pub fake: Fake,
    pub adapter: A,
}

impl<Fake, A> Vendor<Fake, A> {
    /// Waits for the fake `spawned` to bind its port, then builds the adapter for the fake's
    /// base URL (as `base_url` reads it) with `adapter`, the crypto provider installed first.
    pub async fn start(
        spawned: impl Future<Output = io::Result<Fake>>,
        base_url: impl FnOnce(&Fake) -> String,
        adapter: impl FnOnce(String) -> A,
    ) -> Vendor<Fake, A> {
        let fake = spawned.await.expect("the fake binds a loopback port");
        install_crypto_provider();
        let adapter = adapter(base_url(&fake));
        Vendor { fake, adapter }
    }
}

/// reqwest is built with `rustls-no-provider` and panics when it builds a client without an
/// installed crypto provider, even for plain http; herald's main installs ring, so every test
/// that builds an adapter calls this first (an error means one is installed already).
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A key no other call in this test binary gets, shaped like herald's (a notification's UUID),
/// so that vendors that take only UUIDs send it as it is.
pub fn unique_key() -> ProviderKey {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    ProviderKey::new(format!(
        "01970000-0000-7000-8000-{:012}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A notification created now (its id a UUIDv7, as herald's are) for `to` on `channel`, with
/// what that channel carries: an email has the subject `Your code`, the text `123456` and the
/// HTML `<p>123456</p>`; a push the same title and text; an SMS and a chat message the text
/// `Your code is 123456`; a webhook the payload `{"type": "code.sent", "code": "123456"}`.
/// Send one message twice to send one notification twice: each call is another notification.
pub fn message(channel: Channel, to: &str) -> Message {
    let (subject, text, html) = match channel {
        Channel::Email => (Some("Your code"), Some("123456"), Some("<p>123456</p>")),
        Channel::Push => (Some("Your code"), Some("123456"), None),
        Channel::Sms => (None, Some("Your code is 123456"), None),
        Channel::Webhook => (None, None, None),
        Channel::Chat => (None, Some("Your code is 123456"), None),
    };
    let payload = (channel == Channel::Webhook)
        .then(|| serde_json::json!({"type": "code.sent", "code": "123456"}));
    Message {
        notification_id: uuid::Uuid::now_v7().to_string(),
        channel,
        to: to.to_owned(),
        subject: subject.map(str::to_owned),
        text: text.map(str::to_owned),
        html: html.map(str::to_owned),
        payload,
        blocks: None,
        email: EmailOptions::default(),
        expires_at: None,
        trace_parent: None,
    }
}

/// The vendor's id of an acceptance; panics unless `result` is an acceptance with an id.
#[track_caller]
pub fn accepted_ref(result: &SendResult) -> String {
    match result {
        SendResult::Accepted {
            provider_ref: Some(id),
            ..
        } => id.clone(),
        other => panic!("expected an acceptance with an id, got {other:?}"),
    }
}

/// The vendor's id of an acceptance that kept the vendor's answer whole as its evidence: with
/// `status`, in exactly the fields of the `documented` answer (JSON), the id in its `id`;
/// panics unless it is so.
#[track_caller]
pub fn accepted_as_documented(result: &SendResult, status: u16, documented: &str) -> String {
    let id = accepted_ref(result);
    let evidence = result.evidence();
    assert_eq!(evidence.status, Some(status), "{evidence:?}");
    let answer = json(&evidence.detail);
    assert_eq!(field_names(&answer), field_names(&json(documented)));
    assert_eq!(answer["id"], serde_json::json!(id));
    id
}

/// The evidence of an ambiguity; panics unless `result` is `Ambiguous`.
#[track_caller]
pub fn ambiguous(result: &SendResult) -> &Evidence {
    match result {
        SendResult::Ambiguous { evidence } => evidence,
        other => panic!("expected an ambiguity, got {other:?}"),
    }
}

/// A rejection's parts: whether it is permanent, its `retry_after` and its evidence; panics
/// unless `result` is a rejection.
#[track_caller]
pub fn rejection(result: SendResult) -> (bool, Option<Duration>, Evidence) {
    match result {
        SendResult::Rejected {
            permanent,
            retry_after,
            evidence,
        } => (permanent, retry_after, evidence),
        other => panic!("expected a rejection, got {other:?}"),
    }
}

/// The evidence of a permanent rejection; panics unless `result` is a rejection that is
/// permanent and, as nothing will retry it, names no `retry_after`.
#[track_caller]
pub fn permanent_rejection(result: &SendResult) -> &Evidence {
    match result {
        SendResult::Rejected {
            permanent: true,
            retry_after: None,
            evidence,
        } => evidence,
        other => panic!("expected a permanent rejection, got {other:?}"),
    }
}

/// What a look-up found of the vendor's ids: an acceptance's id, or the look-alikes; panics on
/// a look-up that found nothing, proves nothing, or found an acceptance without an id.
#[track_caller]
pub fn found(result: &QueryResult) -> Vec<String> {
    match result {
        QueryResult::Accepted {
            provider_ref: Some(id),
            ..
        } => vec![id.clone()],
        QueryResult::LookAlikes { refs, .. } if !refs.is_empty() => refs.clone(),
        other => panic!("expected the delivery to be found, got {other:?}"),
    }
}

/// The evidence of a look-up that proves nothing; panics unless `result` is `Unsupported`.
#[track_caller]
pub fn unsupported(result: &QueryResult) -> &Evidence {
    match result {
        QueryResult::Unsupported { evidence } => evidence,
        other => panic!("expected a look-up that proves nothing, got {other:?}"),
    }
}

/// Panics unless the look-up did not find the send (yet).
#[track_caller]
pub fn assert_not_found_yet(result: &QueryResult) {
    assert!(
        matches!(result, QueryResult::NotFoundYet { .. }),
        "expected nothing found yet, got {result:?}"
    );
}

/// Asks until the answer is not `NotFoundYet`, for at most `within`: only to let a vendor's
/// visibility lag pass, in short steps.
pub async fn query_until_found(
    adapter: &dyn Adapter,
    message: &Message,
    key: &ProviderKey,
    within: Duration,
) -> QueryResult {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let result = adapter.query(message, key).await;
        if !matches!(result, QueryResult::NotFoundYet { .. })
            || tokio::time::Instant::now() >= deadline
        {
            return result;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a vendor's fake answers `request` with, as JSON: for the tests that hold the fake
/// itself to the vendor's documented answers.
pub async fn json_answer(request: reqwest::RequestBuilder) -> serde_json::Value {
    let answer = request.send().await.expect("the fake answers");
    answer.json().await.expect("the fake answers with JSON")
}

/// JSON text a test holds (a fixture, an evidence detail), parsed; panics if it is not JSON.
#[track_caller]
pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("expected JSON ({err}): {text}"))
}

/// The names of a JSON object's fields, to compare an answer or a request with the vendor's
/// documented one; panics unless `value` is an object.
#[track_caller]
pub fn field_names(value: &serde_json::Value) -> BTreeSet<String> {
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("expected a JSON object, got {value}"));
    object.keys().cloned().collect()
}

/// An `application/x-www-form-urlencoded` text, decoded: a form body, or a URL's query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Form(Vec<(String, String)>);

impl Form {
    pub fn parse(text: &str) -> Form {
        Form(
            url::form_urlencoded::parse(text.as_bytes())
                .into_owned()
                .collect(),
        )
    }

    /// The first value named `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        let mut pairs = self.0.iter();
        pairs.find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Whether a test that cannot run here (a service or tool it needs is missing) must fail rather
/// than skip: always, unless `HERALD_ALLOW_SKIP=1` says skipping is wanted — and never under
/// `CI=true`. A skip that passes silently would hide half the suite on a laptop.
pub fn must_run() -> bool {
    let set = |name: &str, values: &[&str]| {
        std::env::var(name).is_ok_and(|v| values.contains(&v.as_str()))
    };
    set("CI", &["true", "1"]) || !set("HERALD_ALLOW_SKIP", &["1"])
}

/// Whether `python3` runs and can import every module of `modules` (none: whether it runs at
/// all), for a test that checks the adapter against a vendor's own SDK. Where it cannot, the
/// test says loudly that it was skipped, with `install_hint` (`pip install svix, the version
/// .ci/run pins`), and returns; without `HERALD_ALLOW_SKIP=1` it fails instead.
#[track_caller]
pub fn python_with(modules: &[&str], install_hint: &str) -> bool {
    let imports = modules
        .iter()
        .map(|module| format!("import {module}\n"))
        .collect::<String>();
    let found = Command::new("python3")
        .args(["-c", &imports])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        let missing = if modules.is_empty() {
            "python3 does not run".to_owned()
        } else {
            format!("python3 cannot import {}", modules.join(", "))
        };
        assert!(
            !must_run(),
            "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips) and {missing} ({install_hint})"
        );
        let test = std::thread::current()
            .name()
            .unwrap_or("a python test")
            .to_owned();
        eprintln!(
            "\n*** TEST SKIPPED: {test}: {missing} ({install_hint}); without HERALD_ALLOW_SKIP=1 this fails\n"
        );
    }
    found
}

/// What `python3 script` prints as JSON on its stdout, given `input` as JSON on its stdin: a
/// vendor's SDK signing what a test posts, or an independent check of what the adapter signed.
/// Panics, with the script's stderr, if it fails or prints anything but JSON. Ask
/// [`python_with`] first where the script imports more than Python's standard library.
#[track_caller]
pub fn run_python(script: &str, input: &serde_json::Value) -> serde_json::Value {
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("python3 runs {script}: {err}"));
    child
        .stdin
        .take()
        .expect("the script's stdin")
        .write_all(input.to_string().as_bytes())
        .unwrap_or_else(|err| panic!("{script} reads its input: {err}"));
    let output = child
        .wait_with_output()
        .unwrap_or_else(|err| panic!("{script} finishes: {err}"));
    assert!(
        output.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "{script} prints JSON ({err}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// The `Authorization` header a client sends for `https://user:password@…`, for each
/// `(user, password)`, built by Python's own `base64` (`scripts/basic_auth.py`): for the vendors
/// that sign nothing, HTTP Basic is all there is to check. Ask `python_with(&[], …)` first.
pub fn python_basic_auth(credentials: &[(&str, &str)]) -> Vec<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/basic_auth.py");
    let input: Vec<serde_json::Value> = credentials
        .iter()
        .map(|(user, password)| serde_json::json!({"user": user, "password": password}))
        .collect();
    serde_json::from_value(run_python(script, &input.into()))
        .expect("the script prints a JSON list")
}

/// What `adapter`'s callback reader makes of `body` posted now with `Authorization:
/// authorization` (`None`: without the header), for a vendor that signs nothing and sends HTTP
/// Basic credentials. Panics if the adapter reads no callbacks.
pub fn read_basic_callback(
    adapter: &dyn Adapter,
    authorization: Option<&str>,
    body: &str,
) -> Result<Vec<CallbackEvent>, CallbackError> {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::CONTENT_TYPE,
        reqwest::header::HeaderValue::from_static("application/json"),
    );
    if let Some(value) = authorization {
        let value = value.parse().expect("an Authorization header value");
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    let request = CallbackRequest {
        query: "",
        headers: &headers,
        body: body.as_bytes(),
        now: time::OffsetDateTime::now_utc(),
    };
    adapter
        .callbacks()
        .expect("the route reads callbacks")
        .read(&request)
}

/// The reason a callback reader refused a request as not the vendor's; panics on anything else.
pub fn unauthenticated(result: Result<Vec<CallbackEvent>, CallbackError>) -> String {
    match result {
        Err(CallbackError::Unauthenticated(why)) => why,
        other => panic!("expected a refusal as unauthenticated, got {other:?}"),
    }
}

/// The reason a callback reader refused a signed request it cannot read; panics on anything
/// else.
pub fn malformed(result: Result<Vec<CallbackEvent>, CallbackError>) -> String {
    match result {
        Err(CallbackError::Malformed(why)) => why,
        other => panic!("expected a refusal as malformed, got {other:?}"),
    }
}

/// A file an email may carry: 4 KiB that are not UTF-8, as a PDF's are, and herald's
/// description of it (what a message names in `email.attachments`).
pub fn invoice() -> (Attachment, Vec<u8>) {
    let content: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
    assert!(
        std::str::from_utf8(&content).is_err(),
        "the content must be binary"
    );
    (
        Attachment::describe("invoice.pdf", "application/pdf", &content),
        content,
    )
}

/// What the vendor receives for `stored`, the request herald keeps: `stored` must name the file
/// by its placeholder and not hold it (herald keeps one copy of a file however many requests
/// name it), and the content takes the placeholder's place.
pub fn expanded(stored: &Request, attachment: &Attachment, content: &[u8]) -> Request {
    use base64::Engine;
    assert!(
        stored
            .body
            .contains(&attachment.placeholder(Encoding::Base64)),
        "the stored request does not name the file: {}",
        stored.body
    );
    let encoded = base64::engine::general_purpose::STANDARD.encode(content);
    assert!(
        !stored.body.contains(&encoded),
        "the stored request holds the file itself"
    );
    stored.expand(&std::collections::BTreeMap::from([(
        attachment.sha256.clone(),
        content.to_vec(),
    )]))
}
