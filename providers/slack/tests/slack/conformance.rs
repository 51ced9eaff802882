//! Slack against herald's conformance kit: each documented answer of `chat.postMessage` and of
//! `conversations.history`, as the crate docs classify them, with the kit's transport faults and
//! its key, look-up and secret checks.
//!
//! The tables below are written from Slack's pages, not from the adapter's own lists, so that a
//! code the adapter files under the wrong heading fails here.
//!
//! The history pages the kit plays are dated as Slack would list them: the fixtures' messages
//! keep their content and order, but their `ts` are rewritten to now, when the kit is built, and
//! the seconds before. The kit creates its message (a UUIDv7 id of now) as it plays each case,
//! a moment later, and the adapter asks for the messages from ten minutes (`CLOCK_SKEW`)
//! before that: the pages lie inside the window it asks for as long as the kit takes less
//! than ten minutes, where the fixtures' own `ts` (2017, 2022) would lie before it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use herald_provider_testkit::{Expect, ExpectQuery, KEY, Kit, Reply, Subject};
use herald_slack::fake::CHANNEL;
use serde_json::{Value, json};

use herald_provider::Adapter;
use herald_provider_testkit::support::{permanent_rejection, unique_key};
use herald_slack::fake::FakeConfig;

use crate::support::{adapter, message, route, vendor};

/// A documented answer from `fixtures/slack/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/slack/", $file))
    };
}

const CANARY: &str = "xoxb-canary-secret-7f3a";

/// Slack's refusal envelope with `code`, HTTP 200, as every method page documents it.
fn refusal(code: &str) -> Reply {
    Reply::json(200, json!({"ok": false, "error": code}).to_string())
}

/// The token is refused (the crate docs: 401).
const CREDENTIAL: [&str; 5] = [
    "not_authed",
    "invalid_auth",
    "account_inactive",
    "token_revoked",
    "token_expired",
];

/// The route may not post anywhere (403).
const ROUTE: [&str; 10] = [
    "missing_scope",
    "not_allowed_token_type",
    "accesslimited",
    "ekm_access_denied",
    "two_factor_setup_required",
    "enterprise_is_restricted",
    "app_access_restricted",
    "metadata_must_be_sent_from_app",
    "deprecated_endpoint",
    "method_deprecated",
];

/// This message to this conversation is refused (the HTTP status, 200): other conversations may
/// still take the route's messages. `no_permission`: "Make sure your app is a member of the
/// conversation it's attempting to post a message to"; `access_denied`: "Access to a resource
/// specified in the request is denied"; `team_access_not_granted`: no access to the workspace
/// the request names.
const MESSAGE: [&str; 24] = [
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "no_permission",
    "access_denied",
    "team_access_not_granted",
    "msg_too_long",
    "no_text",
    "invalid_blocks",
    "invalid_blocks_format",
    "msg_blocks_too_long",
    "attachment_payload_limit_exceeded",
    "invalid_metadata_format",
    "invalid_metadata_schema",
    "metadata_too_large",
    "restricted_action",
    "restricted_action_read_only_channel",
    "restricted_action_thread_only_channel",
    "cannot_reply_to_message",
    "team_not_found",
    "invalid_arguments",
    "invalid_arg_name",
    "invalid_charset",
    "missing_post_type",
];

/// Not posted this time: a rate or usage limit (429), a workspace in migration (503).
const NOT_THIS_TIME: [&str; 5] = [
    "ratelimited",
    "rate_limited",
    "message_limit_exceeded",
    "org_login_required",
    "team_added_to_org",
];

/// Slack's own failures: the message may be posted.
const MAYBE_POSTED: [&str; 4] = [
    "fatal_error",
    "internal_error",
    "service_unavailable",
    "request_timeout",
];

/// Microseconds since the epoch, now: the time the kit's history pages are dated by.
fn now_micros() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    u64::try_from(since.as_micros()).unwrap()
}

/// The `ts` of a message posted `seconds` before `now` (microseconds since the epoch).
fn ts_before(now: u64, seconds: u64) -> String {
    let at = now - seconds * 1_000_000;
    format!("{}.{:06}", at / 1_000_000, at % 1_000_000)
}

/// A documented page with its messages dated inside the look-up's window: newest first, the
/// first at `now`, each next one a second earlier.
fn dated(fixture: &str, now: u64) -> Value {
    let mut page: Value = serde_json::from_str(fixture).expect("the fixture is JSON");
    redate(&mut page, now);
    page
}

fn redate(page: &mut Value, now: u64) {
    let messages = page["messages"]
        .as_array_mut()
        .expect("a page lists messages");
    for (nth, message) in (0..).zip(messages.iter_mut()) {
        message["ts"] = ts_before(now, nth).into();
    }
}

/// The documented page with herald's message, each of `keys` on a copy of that message in turn
/// (the first `ts_before(now, 1)`, each next one a second earlier), `has_more` as given.
fn listing(now: u64, keys: &[&str], has_more: bool) -> Reply {
    let mut page: Value = serde_json::from_str(fixture!("conversations.history.metadata.json"))
        .expect("the fixture is JSON");
    let other = page["messages"][0].clone();
    let herald = page["messages"][1].clone();
    let mut messages = vec![other];
    for key in keys {
        let mut message = herald.clone();
        message["metadata"]["event_payload"]["herald_key"] = (*key).into();
        messages.push(message);
    }
    page["messages"] = Value::Array(messages);
    redate(&mut page, now);
    page["has_more"] = has_more.into();
    page["response_metadata"]["next_cursor"] =
        if has_more { "bmV4dF90czoxNTEy" } else { "" }.into();
    Reply::json(200, page.to_string())
}

#[tokio::test]
async fn slack_passes_the_conformance_kit() {
    let mut kit = Kit::new("slack", |base_url, timeout| {
        let mut route = route(base_url, CANARY);
        route.timeout = timeout;
        Subject::new(adapter(&route), message())
    })
    .secret(CANARY)
    .success(Reply::json(200, fixture!("chat.postMessage.response.json")))
    .rate_limited(Reply::json(429, fixture!("errors/ratelimited.json")).header("retry-after", "1"))
    .case(
        "ok without a ts (200)",
        Reply::json(200, r#"{"ok": true, "channel": "C1H9RESGL"}"#),
        Expect::Ambiguous,
    )
    .case(
        "ok: false without an error (200)",
        Reply::json(200, r#"{"ok": false}"#),
        Expect::Ambiguous,
    )
    .case(
        "an error not documented (200)",
        refusal("some_future_error"),
        Expect::Ambiguous,
    )
    .case(
        "invalid_auth, documented example (200)",
        Reply::json(200, fixture!("errors/invalid_auth.json")),
        Expect::Permanent,
    )
    .case(
        "channel_not_found, documented example (200)",
        Reply::json(200, fixture!("errors/channel_not_found.json")),
        Expect::Permanent,
    )
    .case(
        "too_many_attachments, documented example (200)",
        Reply::json(200, fixture!("errors/too_many_attachments.json")),
        Expect::Permanent,
    )
    .case(
        "ratelimited in a 200 with Retry-After",
        refusal("ratelimited").header("retry-after", "3"),
        Expect::RetryAfter {
            wait: Duration::from_secs(3),
            slack: Duration::ZERO,
        },
    )
    .case(
        "fatal_error with a 500",
        Reply::json(500, fixture!("errors/fatal_error.json")),
        Expect::Ambiguous,
    )
    .case(
        "503",
        Reply::text(503, "Service Unavailable"),
        Expect::Ambiguous,
    )
    .vendor_code("invalid_auth, documented example (200)", "invalid_auth")
    .vendor_code(
        "channel_not_found, documented example (200)",
        "channel_not_found",
    )
    .vendor_code("fatal_error with a 500", "fatal_error");
    let groups: [(&[&str], Expect); 5] = [
        (&CREDENTIAL, Expect::Permanent),
        (&ROUTE, Expect::Permanent),
        (&MESSAGE, Expect::Permanent),
        (&NOT_THIS_TIME, Expect::Transient),
        (&MAYBE_POSTED, Expect::Ambiguous),
    ];
    for (codes, expect) in groups {
        for code in codes {
            let case = format!("{code} (200)");
            kit = kit
                .case(&case, refusal(code), expect)
                .vendor_code(&case, code);
        }
    }
    let now = now_micros();
    let provider_ref = |ts: String| Some(format!("{CHANNEL}/{ts}"));
    kit
        // The look-up: `conversations.history?channel=<to>&include_all_metadata=true&…`.
        .lookup_case(
            "our message listed (200)",
            listing(now, &[KEY], false),
            ExpectQuery::Accepted {
                provider_ref: provider_ref(ts_before(now, 1)),
            },
        )
        .lookup_case(
            "our key on two messages: the oldest (200)",
            listing(now, &[KEY, KEY], false),
            ExpectQuery::Accepted {
                provider_ref: provider_ref(ts_before(now, 2)),
            },
        )
        .lookup_case(
            "our message listed, more to come on every page (200)",
            listing(now, &[KEY], true),
            ExpectQuery::Accepted {
                provider_ref: provider_ref(ts_before(now, 1)),
            },
        )
        .lookup_case(
            "no message listed (200)",
            Reply::json(200, r#"{"ok": true, "messages": [], "has_more": false}"#),
            ExpectQuery::NotFoundYet,
        )
        .lookup_case(
            "a sibling notification's message only (200)",
            listing(now, &["0190f3a5-7c1e-7a4b-9d2e-3f5a6b7c8d9e"], false),
            ExpectQuery::NotFoundYet,
        )
        .lookup_case(
            "the documented page, the last one (200)",
            {
                let mut page = dated(fixture!("conversations.history.response.json"), now);
                page["has_more"] = false.into();
                Reply::json(200, page.to_string())
            },
            ExpectQuery::NotFoundYet,
        )
        .lookup_case(
            "the documented page, more to come on every page (200)",
            Reply::json(
                200,
                dated(fixture!("conversations.history.response.json"), now).to_string(),
            ),
            ExpectQuery::Unsupported,
        )
        .lookup_case(
            "has_more without a next_cursor (200)",
            Reply::json(
                200,
                r#"{"ok": true, "messages": [], "has_more": true, "response_metadata": {"next_cursor": ""}}"#,
            ),
            ExpectQuery::Unsupported,
        )
        .lookup_case(
            "herald's message without its payload (200)",
            {
                let mut page = dated(fixture!("conversations.history.metadata.json"), now);
                page["messages"][1]["metadata"] = json!({"event_type": "herald_notification"});
                Reply::json(200, page.to_string())
            },
            ExpectQuery::Unsupported,
        )
        .lookup_case(
            "missing_scope: no history scope (200)",
            Reply::json(200, fixture!("errors/missing_scope.json")),
            ExpectQuery::Unsupported,
        )
        .lookup_case(
            "not_in_channel (200), look-up",
            refusal("not_in_channel"),
            ExpectQuery::Unsupported,
        )
        .lookup_case(
            "channel_not_found, documented example (200), look-up",
            Reply::json(200, fixture!("errors/channel_not_found.json")),
            ExpectQuery::Unsupported,
        )
        .lookup_case(
            "invalid_auth (200), look-up",
            Reply::json(200, fixture!("errors/invalid_auth.json")),
            ExpectQuery::Unsupported,
        )
        .lookup_case(
            "ratelimited (429), look-up",
            Reply::json(429, fixture!("errors/ratelimited.json")).header("retry-after", "30"),
            ExpectQuery::Unsupported,
        )
        .run()
        .await
        .assert_honest();
}

/// The kit proves each refusal permanent and with its code, but inside a 200 it takes any
/// status: here each code of the tables above, answered by the fake to a post, must carry the
/// status herald acts on: 401 or 403 where the route itself is refused (herald fails over and
/// opens the route's circuit), and Slack's own 200 where only this message to this conversation
/// is.
#[tokio::test]
async fn each_refusal_says_whether_the_route_or_only_the_message_is_refused() {
    let groups: [(&[&str], u16); 3] = [(&CREDENTIAL, 401), (&ROUTE, 403), (&MESSAGE, 200)];
    let refusals: Vec<(String, &str, u16)> = groups
        .iter()
        .flat_map(|(codes, status)| codes.iter().map(move |code| (*code, *status)))
        .enumerate()
        .map(|(nth, (code, status))| (format!("C{nth:010}"), code, status))
        .collect();
    let vendor = vendor(FakeConfig {
        refusing: refusals
            .iter()
            .map(|(to, code, _)| (to.clone(), (*code).to_owned()))
            .collect(),
        ..FakeConfig::default()
    })
    .await;

    for (to, code, status) in &refusals {
        let mut message = message();
        message.to.clone_from(to);

        let result = vendor.adapter.send(&message, &unique_key()).await;

        let evidence = permanent_rejection(&result);
        assert_eq!(evidence.status, Some(*status), "{code}");
        assert_eq!(evidence.vendor_code.as_deref(), Some(*code));
    }
    assert_eq!(vendor.fake.ledger().total(), 0);
}
