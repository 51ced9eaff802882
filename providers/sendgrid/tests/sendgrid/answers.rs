//! Each documented SendGrid answer, as the adapter classifies it and as the ledger records it,
//! and the Email Activity look-up that settles an ambiguous send.

use std::time::Duration;

use herald_provider::{Adapter, Encoding, QueryResult};
use herald_provider_testkit::ledger;
use herald_provider_testkit::support::{
    accepted_ref, field_names, json, permanent_rejection, rejection, unique_key,
};
use herald_sendgrid::fake::{FakeConfig, Fault, Faults};
use serde_json::json;

use crate::support::{adapter, expanded, invoice, message, route, vendor};

const REQUEST: &str = include_str!("../../../../fixtures/sendgrid/mail-send.request.json");

#[tokio::test]
async fn a_sent_email_is_accepted_with_its_message_id_and_the_request_has_the_documented_shape() {
    let vendor = vendor(FakeConfig::default()).await;
    let (message, key) = (message(), unique_key());

    let id = accepted_ref(&vendor.adapter.send(&message, &key).await);

    let request = vendor
        .fake
        .last_request()
        .expect("the fake saw the request");
    assert_eq!(request.auth_scheme.as_deref(), Some("Bearer"));
    assert_eq!(request.content_type.as_deref(), Some("application/json"));
    let documented = field_names(&json(REQUEST));
    for field in field_names(&request.body) {
        assert!(documented.contains(&field), "undocumented `{field}`");
    }
    assert_eq!(
        request.body,
        json!({
            "personalizations": [{
                "to": [{"email": "ada@example.com"}],
                // Every event about the email carries it, and Email Activity finds it by it.
                "custom_args": {"herald_key": key.as_str()},
            }],
            "from": {"email": "notify@herald.example", "name": "Herald"},
            "subject": "Your code",
            "content": [
                {"type": "text/plain", "value": "123456"},
                {"type": "text/html", "value": "<p>123456</p>"},
            ],
        })
    );
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);
    assert_eq!(ledger.deliveries[0].message_id, id);
}

#[tokio::test]
async fn copies_reply_to_headers_and_tags_go_in_sendgrids_fields() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut message = message();
    message.email.cc = vec!["Grace <grace@example.com>".to_owned()];
    message.email.bcc = vec!["audit@example.com".to_owned()];
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
    let personalization = &body["personalizations"][0];
    assert_eq!(
        personalization["cc"],
        json!([{"email": "grace@example.com", "name": "Grace"}])
    );
    assert_eq!(
        personalization["bcc"],
        json!([{"email": "audit@example.com"}])
    );
    assert_eq!(personalization["custom_args"]["flow"], "signup");
    assert_eq!(body["reply_to"], json!({"email": "help@herald.example"}));
    assert_eq!(body["headers"], json!({"X-Campaign": "welcome"}));
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
        json(&stored.body)["attachments"],
        json!([{
            "content": invoice.placeholder(Encoding::Base64),
            "type": "application/pdf",
            "filename": "invoice.pdf",
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

    assert_eq!(json(&stored.body).get("attachments"), None);
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

    // The placeholder is not base64: SendGrid refuses the request rather than send a broken file.
    assert_eq!(permanent_rejection(&sent).status, Some(400));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn a_tag_named_like_heralds_key_is_refused_before_anything_is_sent() {
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
async fn a_message_without_a_subject_is_a_permanent_rejection() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut no_subject = message();
    no_subject.subject = None;

    let result = vendor.adapter.send(&no_subject, &unique_key()).await;

    assert_eq!(permanent_rejection(&result).status, Some(400));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn a_send_is_listed_by_email_activity_only_after_the_visibility_lag() {
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
    let vendor = vendor(FakeConfig::default()).await;
    vendor.fake.set_lookup_faults(Faults::next([
        Fault::ErrorAfterProcessing,
        Fault::RateLimited,
        Fault::UnavailableBeforeProcessing,
    ]));

    ledger::failed_lookups_prove_nothing(&vendor.adapter, &message(), &unique_key(), 3).await;
}

#[tokio::test]
async fn without_email_activity_no_look_up_is_declared_or_made() {
    let vendor = vendor(FakeConfig {
        activity: false,
        ..FakeConfig::default()
    })
    .await;
    let plain = adapter(&route(
        &vendor.fake.base_url(),
        &FakeConfig::default().api_key,
    ));
    let key = unique_key();
    accepted_ref(&plain.send(&message(), &key).await);

    assert_eq!(plain.capabilities().query_visibility_lag, None);
    assert!(matches!(
        plain.query(&message(), &key).await,
        QueryResult::Unsupported { .. }
    ));
    // And an account without the add-on refuses the look-up a route wrongly turned on.
    assert!(matches!(
        vendor.adapter.query(&message(), &key).await,
        QueryResult::Unsupported { .. }
    ));
}
