//! Each documented Postmark answer, as the adapter classifies it and as the ledger records it,
//! and the look-up that settles an ambiguous send.

use std::time::Duration;

use herald_postmark::fake::{FakeConfig, Faults};
use herald_provider::{Adapter, Encoding};
use herald_provider_testkit::ledger;
use herald_provider_testkit::support::{
    accepted_ref, field_names, json, permanent_rejection, rejection, unique_key,
};
use serde_json::json;

use crate::support::{expanded, invoice, message, vendor};

const REQUEST: &str = include_str!("../../../../fixtures/postmark/send-email.request.json");

#[tokio::test]
async fn a_sent_email_is_accepted_with_the_message_id_and_the_request_has_the_documented_shape() {
    let vendor = vendor(FakeConfig::default()).await;
    let (message, key) = (message(), unique_key());

    let id = accepted_ref(&vendor.adapter.send(&message, &key).await);

    let request = vendor
        .fake
        .last_request()
        .expect("the fake saw the request");
    assert!(request.token_sent);
    assert_eq!(request.content_type.as_deref(), Some("application/json"));
    assert_eq!(request.accept.as_deref(), Some("application/json"));
    // Only documented fields, with herald's values.
    let documented = field_names(&json(REQUEST));
    for field in field_names(&request.body) {
        assert!(documented.contains(&field), "undocumented `{field}`");
    }
    assert_eq!(
        request.body,
        json!({
            "From": "Herald <notify@herald.example>",
            "To": "ada@example.com",
            "Subject": "Your code",
            "HtmlBody": "<p>123456</p>",
            "TextBody": "123456",
            // The look-up finds the message by it, and every webhook names it.
            "Metadata": {"herald_key": key.as_str()},
            "MessageStream": "outbound",
        })
    );
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);
    assert_eq!(ledger.deliveries[0].message_id, id);
}

#[tokio::test]
async fn copies_headers_and_tags_go_in_postmarks_fields() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut message = message();
    message.email.cc = vec!["cc@example.com".to_owned(), "cc2@example.com".to_owned()];
    message.email.bcc = vec!["bcc@example.com".to_owned()];
    message.email.reply_to = Some("help@herald.example".to_owned());
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
    assert_eq!(body["Cc"], "cc@example.com, cc2@example.com");
    assert_eq!(body["Bcc"], "bcc@example.com");
    assert_eq!(body["ReplyTo"], "help@herald.example");
    assert_eq!(
        body["Headers"],
        json!([{"Name": "X-Campaign", "Value": "welcome"}])
    );
    assert_eq!(body["Metadata"]["flow"], "signup");
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
        json(&stored.body)["Attachments"],
        json!([{
            "Name": "invoice.pdf",
            "Content": invoice.placeholder(Encoding::Base64),
            "ContentType": "application/pdf",
        }])
    );
    let sent = vendor
        .adapter
        .send_prepared(&expanded(&stored, &invoice, &content), &message, &key)
        .await;

    let id = accepted_ref(&sent);
    // Named, typed, sized and hashed as herald describes the file: the bytes came through.
    assert_eq!(vendor.fake.attachments_of(&id), [invoice]);
}

#[tokio::test]
async fn an_email_without_attachments_sends_no_attachments_field() {
    let vendor = vendor(FakeConfig::default()).await;

    let stored = vendor.adapter.prepare(&message(), &unique_key()).unwrap();

    assert_eq!(json(&stored.body).get("Attachments"), None);
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

    // The placeholder is not base64: Postmark refuses the request rather than send a broken file.
    let evidence = permanent_rejection(&sent);
    assert_eq!(evidence.status, Some(422));
    assert_eq!(evidence.vendor_code.as_deref(), Some("300"));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn a_tag_named_like_heralds_key_in_any_case_is_refused_before_anything_is_sent() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut message = message();
    message
        .email
        .tags
        .insert("Herald_Key".to_owned(), "spoofed".to_owned());

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&message, &unique_key()).await);

    assert!(permanent);
    assert_eq!(evidence.stage, "request");
    assert_eq!(vendor.fake.ledger().requests, 0);
}

#[tokio::test]
async fn an_inactive_recipient_is_refused_and_tells_herald_to_suppress_it() {
    let vendor = vendor(FakeConfig {
        inactive: vec!["ada@example.com".to_owned()],
        ..FakeConfig::default()
    })
    .await;

    let result = vendor.adapter.send(&message(), &unique_key()).await;
    let evidence = permanent_rejection(&result);

    assert_eq!(evidence.status, Some(422));
    assert_eq!(evidence.vendor_code.as_deref(), Some("406"));
    assert!(vendor.adapter.unsubscribed(evidence));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn an_invalid_request_is_refused_and_does_not_suppress() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut empty = message();
    empty.text = None;
    empty.html = None;

    let result = vendor.adapter.send(&empty, &unique_key()).await;
    let evidence = permanent_rejection(&result);

    assert_eq!(evidence.vendor_code.as_deref(), Some("300"));
    assert!(!vendor.adapter.unsubscribed(evidence));
}

#[tokio::test]
async fn a_wrong_token_is_a_permanent_rejection() {
    let vendor = vendor(FakeConfig {
        server_token: "another-token".to_owned(),
        ..FakeConfig::default()
    })
    .await;
    // The adapter sends the fake's own token; a fresh adapter with another one is refused.
    let route = crate::support::route(&vendor.fake.base_url(), "not-the-token");
    let adapter = crate::support::adapter(&route);

    let result = adapter.send(&message(), &unique_key()).await;
    let evidence = permanent_rejection(&result);

    assert_eq!(evidence.status, Some(401));
    assert_eq!(evidence.vendor_code.as_deref(), Some("10"));
}

#[tokio::test]
async fn a_send_is_listed_only_after_the_visibility_lag() {
    let lag = Duration::from_millis(400);
    let vendor = vendor(FakeConfig {
        visibility_lag: lag,
        ..FakeConfig::default()
    })
    .await;

    ledger::visible_only_after_the_lag(&vendor.adapter, &message(), &unique_key(), lag).await;
}

#[tokio::test]
async fn a_look_up_that_fails_proves_nothing() {
    use herald_postmark::fake::Fault;
    let vendor = vendor(FakeConfig::default()).await;
    vendor.fake.set_lookup_faults(Faults::next([
        Fault::ErrorAfterProcessing,
        Fault::RateLimited,
        Fault::UnavailableBeforeProcessing,
    ]));

    ledger::failed_lookups_prove_nothing(&vendor.adapter, &message(), &unique_key(), 3).await;
}
