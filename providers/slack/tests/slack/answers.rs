//! Each documented Slack answer the fake gives, as the adapter classifies it and as the ledger
//! records it; and what `prepare` refuses before anything is sent.

use std::time::Duration;

use herald_provider::{Adapter, Channel, Evidence, Message};
use herald_provider_testkit::support::{
    self, accepted_ref, field_names, json, permanent_rejection, rejection, unique_key,
};
use herald_slack::fake::{CHANNEL, FakeConfig, Fault, Faults};
use herald_slack::{SlackAdapter, provider_ref};
use serde_json::json;

use crate::support::{adapter, message, route, vendor};

const REQUEST: &str = include_str!("../../../../fixtures/slack/chat.postMessage.request.json");

/// A refusal before anything was sent: its evidence, at stage `request`.
#[track_caller]
fn refused_locally(adapter: &SlackAdapter, message: &Message) -> Evidence {
    let evidence = adapter
        .prepare(message, &unique_key())
        .expect_err("a refusal");
    assert_eq!(evidence.stage, "request", "{evidence:?}");
    evidence
}

#[tokio::test]
async fn a_post_is_accepted_as_channel_and_ts_with_heralds_key_in_its_metadata() {
    let vendor = vendor(FakeConfig::default()).await;
    let (message, key) = (message(), unique_key());

    let id = accepted_ref(&vendor.adapter.send(&message, &key).await);

    let request = vendor
        .fake
        .last_request()
        .expect("the fake saw the request");
    assert!(request.bearer_sent);
    assert_eq!(
        request.content_type.as_deref(),
        Some("application/json; charset=utf-8")
    );
    // Only documented arguments, with herald's values.
    let documented = field_names(&json(REQUEST));
    for field in field_names(&request.body) {
        assert!(documented.contains(&field), "undocumented `{field}`");
    }
    assert_eq!(
        request.body,
        json!({
            "channel": CHANNEL,
            "text": "Your code is 123456",
            // The look-up finds the message by it.
            "metadata": {
                "event_type": "herald_notification",
                "event_payload": {"herald_key": key.as_str()},
            },
        })
    );
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);
    let delivery = &ledger.deliveries[0];
    assert_eq!(id, provider_ref(CHANNEL, &delivery.message_id));
    let posted = vendor.fake.posted(CHANNEL, &delivery.message_id).unwrap();
    assert_eq!(posted.text, "Your code is 123456");
}

#[tokio::test]
async fn blocks_are_sent_as_given_with_the_text_as_their_fallback() {
    let vendor = vendor(FakeConfig::default()).await;
    let blocks = json!([
        {"type": "header", "text": {"type": "plain_text", "text": "Your code"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "*123456*"}},
        {"type": "divider"},
    ]);
    let mut message = message();
    message.blocks = Some(blocks.clone());

    accepted_ref(&vendor.adapter.send(&message, &unique_key()).await);

    let body = vendor.fake.last_request().unwrap().body;
    assert_eq!(body["blocks"], blocks);
    let ts = &vendor.fake.ledger().deliveries[0].message_id;
    let posted = vendor.fake.posted(CHANNEL, ts).unwrap();
    assert_eq!(posted.blocks, Some(blocks));
    assert_eq!(posted.text, "Your code is 123456");
}

#[test]
fn prepare_refuses_what_slack_would_refuse_or_lose() {
    let slack = adapter(&route("https://slack.com/api", "xoxb-token"));
    let with = |change: &dyn Fn(&mut Message)| {
        let mut message = message();
        change(&mut message);
        message
    };
    let cases: [(&str, Message); 12] = [
        (
            "blocks that are not an array",
            with(&|m| m.blocks = Some(json!({"type": "divider"}))),
        ),
        (
            "51 blocks",
            with(&|m| m.blocks = Some(json!(vec![json!({"type": "divider"}); 51]))),
        ),
        (
            "a text over 40,000 characters",
            with(&|m| m.text = Some("a".repeat(40_001))),
        ),
        // 20,001 characters, but 40,002 UTF-16 units: each emoji is a surrogate pair. Counted
        // by characters it would pass; the larger count refuses it.
        (
            "a text over 40,000 UTF-16 units",
            with(&|m| m.text = Some("😀".repeat(20_001))),
        ),
        ("no text", with(&|m| m.text = None)),
        ("a blank text", with(&|m| m.text = Some("  ".to_owned()))),
        (
            "a subject",
            with(&|m| m.subject = Some("Your code".to_owned())),
        ),
        ("a channel name", with(&|m| m.to = "#general".to_owned())),
        // Slack would post to the direct message, whose `D…` id the look-up needs.
        ("a user id", with(&|m| m.to = "U0123456789".to_owned())),
        (
            "an Enterprise user id",
            with(&|m| m.to = "W0123456789".to_owned()),
        ),
        (
            "an email",
            support::message(Channel::Email, "ada@example.com"),
        ),
        (
            "a webhook",
            support::message(Channel::Webhook, "https://example.com/hook"),
        ),
    ];
    for (what, message) in cases {
        let evidence = refused_locally(&slack, &message);
        assert!(!evidence.detail.is_empty(), "{what}");
    }
    let user = refused_locally(&slack, &with(&|m| m.to = "U0123456789".to_owned()));
    assert!(user.detail.contains("`D…` id"), "{}", user.detail);
    // At the limits, it is taken: 40,000 UTF-16 units, whether one character each or two.
    for text in ["a".repeat(40_000), "😀".repeat(20_000)] {
        let at_limits = with(&|m| {
            m.text = Some(text.clone());
            m.blocks = Some(json!(vec![json!({"type": "divider"}); 50]));
        });
        assert!(slack.prepare(&at_limits, &unique_key()).is_ok());
    }
    // A direct message, a private channel or group DM by their conversation ids are taken.
    for to in ["D024BE91L", "G012AB3CD", "C0123456789"] {
        assert!(
            slack
                .prepare(&with(&|m| m.to = to.to_owned()), &unique_key())
                .is_ok(),
            "{to}"
        );
    }
}

#[tokio::test]
async fn nothing_refused_in_prepare_reaches_slack() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut message = message();
    message.blocks = Some(json!("not blocks"));

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&message, &unique_key()).await);

    assert!(permanent);
    assert_eq!(evidence.stage, "request");
    assert_eq!(vendor.fake.ledger().requests, 0);
}

#[tokio::test]
async fn a_conversation_slack_does_not_know_or_will_not_take_is_a_permanent_refusal() {
    let vendor = vendor(FakeConfig {
        outside: vec!["C0OUTSIDE00".to_owned()],
        archived: vec!["C0ARCHIVED0".to_owned()],
        ..FakeConfig::default()
    })
    .await;
    for (to, code) in [
        ("C9999999999", "channel_not_found"),
        ("C0OUTSIDE00", "not_in_channel"),
        ("C0ARCHIVED0", "is_archived"),
    ] {
        let mut message = message();
        message.to = to.to_owned();

        let result = vendor.adapter.send(&message, &unique_key()).await;

        let evidence = permanent_rejection(&result);
        // A refusal of the message, not of the route: the status is the HTTP one.
        assert_eq!(evidence.status, Some(200), "{to}");
        assert_eq!(evidence.vendor_code.as_deref(), Some(code));
    }
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn a_conversation_the_app_may_not_post_to_refuses_the_message_not_the_route() {
    let refusing = [
        ("C0NOPERMIT0", "no_permission"),
        ("C0DENIED000", "access_denied"),
        ("C0OTHERTEAM", "team_access_not_granted"),
    ];
    let vendor = vendor(FakeConfig {
        refusing: refusing
            .iter()
            .map(|(to, code)| ((*to).to_owned(), (*code).to_owned()))
            .collect(),
        ..FakeConfig::default()
    })
    .await;
    for (to, code) in refusing {
        let mut message = message();
        message.to = to.to_owned();

        let result = vendor.adapter.send(&message, &unique_key()).await;

        let evidence = permanent_rejection(&result);
        // Not 401–403: herald neither fails the route over nor counts it against its circuit.
        assert_eq!(evidence.status, Some(200), "{code}");
        assert_eq!(evidence.vendor_code.as_deref(), Some(code));
    }
    // The route's other conversations still take its messages.
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    assert_eq!(vendor.fake.ledger().total(), 1);
}

#[tokio::test]
async fn a_wrong_token_refuses_the_route() {
    let vendor = vendor(FakeConfig::default()).await;
    let adapter = adapter(&route(&vendor.fake.base_url(), "xoxb-not-the-token"));

    let result = adapter.send(&message(), &unique_key()).await;

    let evidence = permanent_rejection(&result);
    // Read as 401: herald fails the route over and counts it against the route.
    assert_eq!(evidence.status, Some(401));
    assert_eq!(evidence.vendor_code.as_deref(), Some("invalid_auth"));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn a_rate_limit_is_transient_and_says_when_to_retry() {
    let vendor = vendor(FakeConfig::default()).await;
    vendor.fake.set_faults(Faults::next([Fault::RateLimited]));

    let (permanent, retry_after, evidence) =
        rejection(vendor.adapter.send(&message(), &unique_key()).await);

    assert!(!permanent);
    assert_eq!(retry_after, Some(Duration::from_secs(1)));
    assert_eq!(evidence.status, Some(429));
    assert_eq!(evidence.vendor_code.as_deref(), Some("ratelimited"));
    assert_eq!(vendor.fake.ledger().total(), 0);
    // The next one goes through.
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
}

#[tokio::test]
async fn the_look_up_reads_the_history_with_all_metadata_from_the_notifications_creation() {
    let vendor = vendor(FakeConfig::default()).await;
    let (message, key) = (message(), unique_key());
    let id = accepted_ref(&vendor.adapter.send(&message, &key).await);

    let found = vendor.adapter.query(&message, &key).await;

    assert_eq!(support::found(&found), [id]);
    let asked = vendor.fake.lookups();
    assert_eq!(asked.len(), 1);
    let args = &asked[0];
    assert_eq!(args["channel"], CHANNEL);
    assert_eq!(args["include_all_metadata"], "true");
    assert_eq!(args["limit"], "200");
    // Ten minutes (the clock skew allowed) before the notification id's time.
    let oldest: f64 = args["oldest"].parse().unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp() as f64;
    assert!(
        (now - 600.0 - oldest).abs() < 30.0,
        "oldest {oldest}, now {now}"
    );
}
