//! Slack against herald's conformance kit: each documented answer of `chat.postMessage` and of
//! `conversations.history`, as the crate docs classify them, with the kit's transport faults and
//! its key, look-up and secret checks.
//!
//! The tables below are written from Slack's pages, not from the adapter's own lists, so that a
//! code the adapter files under the wrong heading fails here.

use std::time::Duration;

use herald_provider_testkit::{Expect, ExpectQuery, KEY, Kit, Reply, Subject};
use herald_slack::fake::CHANNEL;
use serde_json::{Value, json};

use crate::support::{adapter, message, route};

/// A documented answer from `fixtures/slack/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/slack/", $file))
    };
}

const CANARY: &str = "xoxb-canary-secret-7f3a";

/// The `ts` of herald's message in `conversations.history.metadata.json`.
const LISTED_TS: &str = "1658903885.673769";

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
const ROUTE: [&str; 13] = [
    "missing_scope",
    "no_permission",
    "not_allowed_token_type",
    "access_denied",
    "accesslimited",
    "ekm_access_denied",
    "team_access_not_granted",
    "two_factor_setup_required",
    "enterprise_is_restricted",
    "app_access_restricted",
    "metadata_must_be_sent_from_app",
    "deprecated_endpoint",
    "method_deprecated",
];

/// This message to this conversation is refused.
const MESSAGE: [&str; 21] = [
    "channel_not_found",
    "not_in_channel",
    "is_archived",
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

/// The documented page with herald's message, each of `keys` on a copy of that message in turn
/// (the first with the documented `ts`, each next one a second earlier), `has_more` as given.
fn listing(keys: &[&str], has_more: bool) -> Reply {
    let mut page: Value = serde_json::from_str(fixture!("conversations.history.metadata.json"))
        .expect("the fixture is JSON");
    let other = page["messages"][0].clone();
    let herald = page["messages"][1].clone();
    let mut messages = vec![other];
    for (nth, key) in keys.iter().enumerate() {
        let mut message = herald.clone();
        message["metadata"]["event_payload"]["herald_key"] = (*key).into();
        message["ts"] = format!("{}.673769", 1_658_903_885 - nth).into();
        messages.push(message);
    }
    page["messages"] = Value::Array(messages);
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
    let provider_ref = |ts: &str| Some(format!("{CHANNEL}/{ts}"));
    kit
        // The look-up: `conversations.history?channel=<to>&include_all_metadata=true&…`.
        .lookup_case(
            "our message listed (200)",
            listing(&[KEY], false),
            ExpectQuery::Accepted {
                provider_ref: provider_ref(LISTED_TS),
            },
        )
        .lookup_case(
            "our key on two messages: the oldest (200)",
            listing(&[KEY, KEY], false),
            ExpectQuery::Accepted {
                provider_ref: provider_ref("1658903884.673769"),
            },
        )
        .lookup_case(
            "our message listed, more to come on every page (200)",
            listing(&[KEY], true),
            ExpectQuery::Accepted {
                provider_ref: provider_ref(LISTED_TS),
            },
        )
        .lookup_case(
            "no message listed (200)",
            Reply::json(200, r#"{"ok": true, "messages": [], "has_more": false}"#),
            ExpectQuery::NotFoundYet,
        )
        .lookup_case(
            "a sibling notification's message only (200)",
            listing(&["0190f3a5-7c1e-7a4b-9d2e-3f5a6b7c8d9e"], false),
            ExpectQuery::NotFoundYet,
        )
        .lookup_case(
            "the documented page, the last one (200)",
            {
                let mut page: Value =
                    serde_json::from_str(fixture!("conversations.history.response.json")).unwrap();
                page["has_more"] = false.into();
                Reply::json(200, page.to_string())
            },
            ExpectQuery::NotFoundYet,
        )
        .lookup_case(
            "the documented page, more to come on every page (200)",
            Reply::json(200, fixture!("conversations.history.response.json")),
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
                let mut page: Value =
                    serde_json::from_str(fixture!("conversations.history.metadata.json")).unwrap();
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
