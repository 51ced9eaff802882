//! Each documented SparkPost answer, as the adapter classifies it and as the ledger records it.

use std::time::Duration;

use herald_provider::{Adapter, Encoding, ProviderKey, SendResult};
use herald_provider_testkit::ledger;
use herald_provider_testkit::support::{
    accepted_ref, ambiguous, field_names, json, rejection, unique_key,
};
use herald_sparkpost::fake::{FakeConfig, Fault, Faults};
use serde_json::json;

use crate::support::{SHORT_TIMEOUT, expanded, invoice, message, vendor, vendor_with};

const REQUEST: &str = include_str!("../../../../fixtures/sparkpost/transmission.request.json");
const RESPONSE: &str = include_str!("../../../../fixtures/sparkpost/transmission.response.json");

#[tokio::test]
async fn a_sent_email_is_accepted_with_the_transmission_id_and_the_request_has_the_documented_shape()
 {
    let vendor = vendor(FakeConfig::default()).await;
    let (message, key) = (message(), unique_key());

    // The answer is kept whole, and has exactly the documented fields.
    let result = vendor.adapter.send(&message, &key).await;
    let id = accepted_ref(&result);
    let evidence = result.evidence();
    assert_eq!(evidence.status, Some(200));
    let answer = json(&evidence.detail);
    assert_eq!(
        field_names(&answer["results"]),
        field_names(&json(RESPONSE)["results"])
    );
    assert_eq!(answer["results"]["id"], id);

    let request = vendor
        .fake
        .last_request()
        .expect("the fake saw the request");
    assert!(request.authorized);
    assert_eq!(request.idempotency_key.as_deref(), Some(key.as_str()));
    assert_eq!(request.content_type.as_deref(), Some("application/json"));
    assert!(
        request
            .user_agent
            .as_deref()
            .is_some_and(|ua| ua.starts_with("herald-sparkpost/")),
        "{request:?}"
    );
    // Every top-level field of the documented example is there, with herald's values.
    for field in field_names(&json(REQUEST)) {
        assert!(request.body.get(&field).is_some(), "missing `{field}`");
    }
    assert_eq!(
        request.body,
        json!({
            "recipients": [{"address": {"email": "ada@example.com"}}],
            "content": {
                "from": {"name": "Herald", "email": "notify@herald.example"},
                "subject": "Your code",
                "html": "<p>123456</p>",
                "text": "123456",
            },
            // SparkPost echoes it in every event about the transmission's messages.
            "metadata": {
                "herald_key": key.as_str(),
                "herald_notification_id": message.notification_id,
            },
        })
    );
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn copies_go_to_their_own_recipients_under_the_notifications_to_header() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut message = message();
    message.email.cc = vec!["cc@example.com".to_owned()];
    message.email.bcc = vec!["bcc@example.com".to_owned()];
    message.email.reply_to = Some("Support <help@herald.example>".to_owned());
    message.email.from = Some("billing@herald.example".to_owned());
    message
        .email
        .tags
        .insert("flow".to_owned(), "signup".to_owned());
    message
        .email
        .headers
        .insert("X-Campaign".to_owned(), "welcome".to_owned());

    accepted_ref(&vendor.adapter.send(&message, &unique_key()).await);

    let body = vendor.fake.last_request().unwrap().body;
    assert_eq!(
        body["recipients"],
        json!([
            {"address": {"email": "ada@example.com"}},
            {"address": {"email": "cc@example.com", "header_to": "ada@example.com"}},
            {"address": {"email": "bcc@example.com", "header_to": "ada@example.com"}},
        ])
    );
    assert_eq!(
        body["content"]["headers"],
        json!({"CC": "cc@example.com", "X-Campaign": "welcome"})
    );
    assert_eq!(
        body["content"]["from"],
        json!({"email": "billing@herald.example"})
    );
    assert_eq!(body["content"]["reply_to"], "Support <help@herald.example>");
    assert_eq!(body["metadata"]["flow"], "signup");
}

#[tokio::test]
async fn an_attachment_arrives_intact_from_a_stored_request_that_only_names_it() {
    let vendor = vendor(FakeConfig::default()).await;
    assert!(vendor.adapter.capabilities().attachments);
    let (invoice, content) = invoice();
    let (mut message, key) = (message(), unique_key());
    message.email.attachments = vec![invoice.clone()];

    let stored = vendor
        .adapter
        .prepare(&message, &key)
        .expect("a valid email");
    assert_eq!(
        json(&stored.body)["content"]["attachments"],
        json!([{
            "name": "invoice.pdf",
            "type": "application/pdf",
            "data": invoice.placeholder(Encoding::Base64),
        }])
    );
    let sent = vendor
        .adapter
        .send_prepared(&expanded(&stored, &invoice, &content), &message, &key)
        .await;

    accepted_ref(&sent);
    // Named, typed, sized and hashed as herald describes the file: the bytes came through.
    assert_eq!(vendor.fake.ledger().attachments[key.as_str()], [invoice]);
}

#[tokio::test]
async fn an_email_without_attachments_sends_no_attachments_field() {
    let vendor = vendor(FakeConfig::default()).await;

    let stored = vendor.adapter.prepare(&message(), &unique_key()).unwrap();

    assert_eq!(json(&stored.body)["content"].get("attachments"), None);
}

#[tokio::test]
async fn an_attachment_sent_as_its_placeholder_is_refused_and_nothing_is_delivered() {
    let vendor = vendor(FakeConfig::default()).await;
    let (mut message, key) = (message(), unique_key());
    message.email.attachments = vec![invoice().0];
    let unexpanded = vendor.adapter.prepare(&message, &key).unwrap();

    let sent = vendor
        .adapter
        .send_prepared(&unexpanded, &message, &key)
        .await;

    // The placeholder is not base64: SparkPost refuses the data rather than send a broken file.
    let (permanent, _, evidence) = rejection(sent);
    assert!(permanent);
    assert_eq!(evidence.status, Some(422));
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
}

#[tokio::test]
async fn a_tag_named_like_heralds_own_metadata_is_refused_before_anything_is_sent() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut message = message();
    message
        .email
        .tags
        .insert("herald_key".to_owned(), "spoofed".to_owned());

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&message, &unique_key()).await);

    assert!(permanent);
    assert_eq!(evidence.stage, "request");
    assert_eq!(vendor.fake.ledger().requests, 0);
}

#[tokio::test]
async fn a_repeat_inside_the_window_is_answered_with_the_first_id_and_nothing_is_sent_again() {
    let vendor = vendor(FakeConfig::default()).await;
    let requests = || vendor.fake.ledger().requests;
    let deliveries = |key: &str| vendor.fake.ledger().deliveries_of(key);

    ledger::replayed_inside_the_window(&vendor.adapter, &message(), requests, deliveries).await;
}

#[tokio::test]
async fn after_the_window_a_repeat_is_sent_again() {
    let window = Duration::from_millis(300);
    let vendor = vendor(FakeConfig {
        idempotency_window: window,
        ..FakeConfig::default()
    })
    .await;
    let deliveries = |key: &str| vendor.fake.ledger().deliveries_of(key);

    ledger::sent_again_after_the_window(&vendor.adapter, &message(), window, deliveries).await;
}

#[tokio::test]
async fn the_same_key_with_another_payload_proves_the_earlier_request_was_processed() {
    let vendor = vendor(FakeConfig::default()).await;
    let (message, key) = (message(), unique_key());
    accepted_ref(&vendor.adapter.send(&message, &key).await);

    let mut other = message.clone();
    other.text = Some("654321".to_owned());
    let SendResult::KeyReused { evidence } = vendor.adapter.send(&other, &key).await else {
        panic!("a reused key must be read as proof of an earlier processing");
    };

    assert_eq!(evidence.status, Some(409));
    assert_eq!(evidence.vendor_code.as_deref(), Some("1600"));
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn a_repeat_while_the_first_request_is_in_progress_is_a_transient_rejection() {
    // The first request is processed and then held for a minute; its client gives up first.
    let config = FakeConfig {
        delay: Duration::from_secs(60),
        faults: Faults::next([Fault::Delay]),
        ..FakeConfig::default()
    };
    let api_key = config.api_key.clone();
    let vendor = vendor_with(config, &api_key, SHORT_TIMEOUT).await;
    let (message, key) = (message(), unique_key());

    let first = vendor.adapter.send(&message, &key).await;
    let repeat = vendor.adapter.send(&message, &key).await;

    let timed_out = ambiguous(&first);
    assert!(timed_out.detail.starts_with("timed out"), "{timed_out:?}");
    let (permanent, _, evidence) = rejection(repeat);
    assert!(!permanent);
    assert_eq!(evidence.status, Some(409));
    assert_eq!(evidence.vendor_code.as_deref(), Some("1601"));
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn a_key_sparkpost_would_refuse_is_refused_before_anything_is_sent() {
    let vendor = vendor(FakeConfig::default()).await;
    for bad in ["has space", "line\nbreak", &"k".repeat(256)] {
        let key = ProviderKey::new(bad);
        let (permanent, _, evidence) = rejection(vendor.adapter.send(&message(), &key).await);
        assert!(permanent);
        assert_eq!(evidence.stage, "request");
    }
    assert_eq!(vendor.fake.ledger().requests, 0);
}

#[tokio::test]
async fn a_suppressed_recipient_is_a_permanent_rejection_and_nothing_goes_out() {
    let vendor = vendor(FakeConfig {
        suppressed: vec!["ada@example.com".to_owned()],
        ..FakeConfig::default()
    })
    .await;

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&message(), &unique_key()).await);

    assert!(permanent);
    assert_eq!(evidence.status, Some(200));
    assert!(
        evidence.detail.contains("\"total_accepted_recipients\":0"),
        "{evidence:?}"
    );
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
}

#[tokio::test]
async fn a_message_without_a_subject_is_refused_as_missing_a_required_field() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut no_subject = message();
    no_subject.subject = None;

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&no_subject, &unique_key()).await);

    assert!(permanent);
    assert_eq!(evidence.status, Some(422));
    assert_eq!(evidence.vendor_code.as_deref(), Some("1400"));
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
}

#[tokio::test]
async fn a_wrong_api_key_is_a_permanent_rejection() {
    let vendor = vendor_with(FakeConfig::default(), "not-the-key", SHORT_TIMEOUT).await;

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&message(), &unique_key()).await);

    assert!(permanent);
    assert_eq!(evidence.status, Some(401));
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
}
