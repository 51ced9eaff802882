//! Slack's own Python SDK (`slack_sdk.WebClient`) against the fake Slack, beside herald's
//! adapter: the SDK's post is recorded under its metadata's key and found by herald's look-up,
//! herald's post is read back by the SDK with its key, the SDK pages the history by its own
//! cursor handling, and the fake refuses what Slack refuses as the SDK expects. A client nobody
//! here wrote agreeing with the fake is what makes the fake's word worth something.
//!
//! Skipped loudly where `python3` cannot import `slack_sdk`; without `HERALD_ALLOW_SKIP=1`, a failure.

use herald_provider::Adapter;
use herald_provider_testkit::support::{accepted_ref, found, python_with, run_python, unique_key};
use herald_slack::fake::{CHANNEL, FakeConfig};
use herald_slack::provider_ref;
use serde_json::{Value, json};

use crate::support::{message, vendor};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/slack/sdk.py");

/// The listed message with `ts`.
fn listed<'a>(messages: &'a Value, ts: &str) -> &'a Value {
    messages
        .as_array()
        .expect("a list of messages")
        .iter()
        .find(|m| m["ts"] == ts)
        .unwrap_or_else(|| panic!("no message {ts} in {messages}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slacks_own_sdk_and_herald_agree_on_the_fake() {
    if !python_with(
        &["slack_sdk"],
        "pip install slack_sdk, the version .ci/run pins",
    ) {
        return;
    }
    let config = FakeConfig::default();
    let vendor = vendor(config.clone()).await;
    let (ours, theirs) = (unique_key(), unique_key());
    let our_ref = accepted_ref(&vendor.adapter.send(&message(), &ours).await);
    let input = json!({
        "base_url": vendor.fake.base_url(),
        "token": config.bot_token,
        "channel": CHANNEL,
        "key": theirs.as_str(),
    });

    // The script blocks on the fake, which runs on this runtime's other worker.
    let seen = tokio::task::spawn_blocking(move || run_python(SCRIPT, &input))
        .await
        .expect("the script ran");

    // The SDK's post: answered as Slack answers, recorded under its metadata's key.
    let ts = seen["posted"]["ts"].as_str().expect("a ts").to_owned();
    assert_eq!(seen["posted"]["channel"], CHANNEL);
    assert_eq!(vendor.fake.ledger().deliveries_of(theirs.as_str()), 1);
    let posted = vendor.fake.posted(CHANNEL, &ts).expect("the SDK's message");
    assert_eq!(
        posted.blocks,
        Some(json!([{"type": "section", "text": {"type": "mrkdwn", "text": "*From the SDK*"}}]))
    );
    // The SDK read the history one message per page, by its own cursor handling, with every
    // message's metadata whole: herald's key on herald's message, the SDK's on its own.
    assert_eq!(seen["pages"], 2, "{seen}");
    let our_ts = our_ref.rsplit('/').next().unwrap();
    assert_eq!(
        listed(&seen["listed"], our_ts)["metadata"],
        json!({"event_type": "herald_notification", "event_payload": {"herald_key": ours.as_str()}})
    );
    assert_eq!(
        listed(&seen["listed"], &ts)["metadata"]["event_payload"]["herald_key"],
        theirs.as_str()
    );
    // Without `include_all_metadata`, the payload is left out.
    assert_eq!(
        listed(&seen["stripped"], &ts)["metadata"],
        json!({"event_type": "herald_notification"})
    );
    assert_eq!(seen["wrong_token"], "invalid_auth");
    assert_eq!(seen["unknown_channel"], "channel_not_found");

    // herald's look-up finds the message the SDK posted, by the key the SDK stamped.
    let lookup = vendor.adapter.query(&message(), &theirs).await;
    assert_eq!(found(&lookup), [provider_ref(CHANNEL, &ts)]);
}
