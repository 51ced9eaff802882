//! Sending: the request Mailjet receives, and how each documented answer is classified.

use std::time::Duration;

use herald_mailjet::fake::FakeConfig;
use herald_mailjet::{MAX_PAYLOAD_BYTES, MailjetAdapter, MailjetError};
use herald_provider::{Adapter, Channel, EmailOptions, Encoding, SendResult};
use herald_provider_testkit::support::{
    accepted_ref, field_names, install_crypto_provider, json, json_answer, permanent_rejection,
};
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::support::{
    API_KEY, FROM, SECRET, TO, email, expanded, fake_config, invoice, key, route, vendor,
    vendor_with,
};

#[tokio::test]
async fn an_accepted_email_carries_its_message_id_and_the_request_has_the_documented_shape() {
    let vendor = vendor().await;
    let message = email();
    let key = key(&message);

    let result = vendor.adapter.send(&message, &key).await;

    let id = accepted_ref(&result);
    assert_eq!(result.evidence().status, Some(200));
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);
    assert_eq!(id, ledger.deliveries[0].message_id.to_string());

    let received = vendor.fake.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v3.1/send");
    assert_eq!(request.basic_user.as_deref(), Some(API_KEY));
    assert_eq!(request.content_type.as_deref(), Some("application/json"));
    let body = json(&request.body);
    let sent = &body["Messages"][0];
    assert_eq!(body["Messages"].as_array().unwrap().len(), 1);
    assert_eq!(sent["From"]["Email"], FROM);
    assert_eq!(sent["From"]["Name"], "Mailjet Pilot");
    assert_eq!(sent["To"][0]["Email"], TO);
    assert_eq!(sent["Subject"], "Your email flight plan!");
    assert_eq!(sent["TextPart"], "Dear passenger 1, welcome to Mailjet!");
    assert_eq!(
        sent["HTMLPart"],
        "<h3>Dear passenger 1, welcome to Mailjet!</h3>"
    );
    assert_eq!(sent["CustomID"], key.as_str());
}

#[tokio::test]
async fn an_invalid_recipient_is_rejected_permanently_with_mj_0013() {
    let vendor = vendor().await;
    let mut message = email();
    message.to = "not-an-address".to_owned();

    let result = vendor.adapter.send(&message, &key(&message)).await;

    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.status, Some(400));
    assert_eq!(evidence.vendor_code.as_deref(), Some("mj-0013"));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn an_unauthorised_sender_is_rejected_permanently_with_send_0008() {
    let config = FakeConfig {
        allowed_senders: vec!["someone-else@mailjet.com".to_owned()],
        ..fake_config()
    };
    let vendor = vendor_with(config, |_| {}).await;
    let message = email();

    let result = vendor.adapter.send(&message, &key(&message)).await;

    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.status, Some(403));
    assert_eq!(evidence.vendor_code.as_deref(), Some("send-0008"));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn wrong_credentials_are_rejected_permanently_with_the_documented_401() {
    let vendor = vendor_with(
        FakeConfig::new(API_KEY, SecretString::from("another")),
        |_| {},
    )
    .await;
    let message = email();

    let result = vendor.adapter.send(&message, &key(&message)).await;

    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.status, Some(401));
    assert_eq!(evidence.vendor_code.as_deref(), Some("mj-0015"));
    let documented = json(include_str!("../../../../fixtures/mailjet/error_401.json"));
    assert_eq!(json(&evidence.detail), documented);
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn what_cannot_be_an_email_is_rejected_before_any_request() {
    let vendor = vendor().await;
    let mut sms = email();
    sms.channel = Channel::Sms;
    let mut empty = email();
    empty.text = None;
    empty.html = Some(String::new());
    let mut tagged = email();
    tagged.email.tags = [("kind".to_owned(), "invoice".to_owned())].into();

    for message in [sms, empty, tagged] {
        let result = vendor.adapter.send(&message, &key(&message)).await;
        assert_eq!(permanent_rejection(&result).stage, "request");
    }
    assert!(vendor.fake.received().is_empty());
}

#[tokio::test]
async fn an_emails_own_sender_copies_and_headers_are_sent_as_documented() {
    let vendor = vendor().await;
    let mut message = email();
    message.email = EmailOptions {
        from: Some(format!("Mailjet Billing <{FROM}>")),
        reply_to: Some("help@mailjet.com".to_owned()),
        cc: vec!["passenger2@mailjet.com".to_owned()],
        bcc: vec!["Audit <audit@mailjet.com>".to_owned()],
        headers: [("X-Flight".to_owned(), "MJ-42".to_owned())].into(),
        ..EmailOptions::default()
    };

    let result = vendor.adapter.send(&message, &key(&message)).await;

    assert!(matches!(result, SendResult::Accepted { .. }), "{result:?}");
    let body = json(&vendor.fake.received()[0].body);
    let sent = &body["Messages"][0];
    assert_eq!(
        sent["From"],
        json!({"Email": FROM, "Name": "Mailjet Billing"})
    );
    assert_eq!(sent["ReplyTo"], json!({"Email": "help@mailjet.com"}));
    assert_eq!(sent["Cc"], json!([{"Email": "passenger2@mailjet.com"}]));
    assert_eq!(
        sent["Bcc"],
        json!([{"Email": "audit@mailjet.com", "Name": "Audit"}])
    );
    assert_eq!(sent["Headers"], json!({"X-Flight": "MJ-42"}));
}

#[tokio::test]
async fn an_attachment_arrives_intact_from_a_stored_request_that_only_names_it() {
    let vendor = vendor().await;
    let (invoice, content) = invoice();
    let mut message = email();
    message.email.attachments = vec![invoice.clone()];
    let key = key(&message);

    let stored = vendor
        .adapter
        .prepare(&message, &key)
        .expect("a valid email");
    assert_eq!(
        json(&stored.body)["Messages"][0]["Attachments"],
        json!([{
            "ContentType": "application/pdf",
            "Filename": "invoice.pdf",
            "Base64Content": invoice.placeholder(Encoding::Base64),
        }])
    );
    let result = vendor
        .adapter
        .send_prepared(&expanded(&stored, &invoice, &content), &message, &key)
        .await;

    accepted_ref(&result);
    // Named, typed, sized and hashed as herald describes the file: the bytes came through.
    assert_eq!(vendor.fake.ledger().deliveries[0].attachments, [invoice]);
}

#[tokio::test]
async fn an_email_without_attachments_sends_no_attachments_property() {
    let vendor = vendor().await;
    let message = email();

    let stored = vendor.adapter.prepare(&message, &key(&message)).unwrap();

    assert_eq!(json(&stored.body)["Messages"][0].get("Attachments"), None);
}

#[tokio::test]
async fn an_attachment_sent_as_its_placeholder_is_refused_and_nothing_is_delivered() {
    let vendor = vendor().await;
    let mut message = email();
    message.email.attachments = vec![invoice().0];
    let key = key(&message);
    let unexpanded = vendor.adapter.prepare(&message, &key).unwrap();

    let result = vendor
        .adapter
        .send_prepared(&unexpanded, &message, &key)
        .await;

    // The placeholder is not base64: Mailjet refuses the message rather than send a broken file.
    assert_eq!(permanent_rejection(&result).status, Some(400));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn a_text_only_email_sends_no_html_part() {
    let vendor = vendor().await;
    let mut message = email();
    message.html = None;
    let result = vendor.adapter.send(&message, &key(&message)).await;
    assert!(matches!(result, SendResult::Accepted { .. }), "{result:?}");
    let body = json(&vendor.fake.received()[0].body);
    assert!(body["Messages"][0].get("HTMLPart").is_none(), "{body}");
}

#[tokio::test]
async fn a_route_needs_a_key_a_sender_a_lag_and_a_usable_base_url() {
    install_crypto_provider();
    let mut no_key = route("http://127.0.0.1:9".to_owned());
    no_key.api_key = String::new();
    assert!(matches!(
        MailjetAdapter::new(no_key),
        Err(MailjetError::ApiKey)
    ));
    let mut no_from = route("http://127.0.0.1:9".to_owned());
    no_from.from = " ".to_owned();
    assert!(matches!(
        MailjetAdapter::new(no_from),
        Err(MailjetError::From)
    ));
    let mut no_lag = route("http://127.0.0.1:9".to_owned());
    no_lag.visibility_lag = Duration::ZERO;
    assert!(matches!(
        MailjetAdapter::new(no_lag),
        Err(MailjetError::VisibilityLag)
    ));
    for url in ["not a url", "mailto:someone@example.com"] {
        assert!(matches!(
            MailjetAdapter::new(route(url.to_owned())),
            Err(MailjetError::BaseUrl { .. })
        ));
    }
}

#[tokio::test]
async fn capabilities_declare_the_query_lag_no_idempotency_and_attachments() {
    let vendor = vendor_with(fake_config(), |route| {
        route.visibility_lag = Duration::from_secs(120);
    })
    .await;
    let capabilities = vendor.adapter.capabilities();
    assert_eq!(capabilities.idempotency_window, None);
    assert_eq!(
        capabilities.query_visibility_lag,
        Some(Duration::from_secs(120))
    );
    assert_eq!(capabilities.max_payload_bytes, Some(MAX_PAYLOAD_BYTES));
    assert!(capabilities.attachments);
}

/// The fake is checked against the docs too: it takes the documented request and answers with
/// every field of the documented answers.
#[tokio::test]
async fn the_fake_takes_the_documented_request_and_answers_in_the_documented_shape() {
    let vendor = vendor().await;
    let http = reqwest::Client::new();
    let sent = http
        .post(format!("{}/v3.1/send", vendor.fake.base_url()))
        .basic_auth(API_KEY, Some(SECRET))
        .header("content-type", "application/json")
        .body(include_str!(
            "../../../../fixtures/mailjet/send_request.json"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    let sent: Value = sent.json().await.unwrap();
    let documented = json(include_str!(
        "../../../../fixtures/mailjet/send_response_partial_error.json"
    ));
    assert_eq!(field_names(&sent), field_names(&documented));
    assert_eq!(
        field_names(&sent["Messages"][0]),
        field_names(&documented["Messages"][1]),
        "a sent message answers like the documented sent one"
    );
    assert_eq!(
        field_names(&sent["Messages"][0]["To"][0]),
        field_names(&documented["Messages"][1]["To"][0])
    );
    assert_eq!(
        vendor.fake.ledger().deliveries_of("PassengerEticket1234"),
        1
    );

    let listed = json_answer(
        http.get(format!("{}/v3/REST/message", vendor.fake.base_url()))
            .basic_auth(API_KEY, Some(SECRET))
            .query(&[
                ("CustomID", "PassengerEticket1234"),
                ("ShowCustomID", "true"),
            ]),
    )
    .await;
    let documented = json(include_str!(
        "../../../../fixtures/mailjet/message_list_response.json"
    ));
    assert_eq!(field_names(&listed), field_names(&documented));
    assert_eq!(
        field_names(&listed["Data"][0]),
        field_names(&documented["Data"][0])
    );
    assert_eq!(listed["Data"][0]["CustomID"], "PassengerEticket1234");
}
