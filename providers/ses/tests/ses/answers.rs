//! What SES's fake, which checks every request's Signature Version 4, makes of what the
//! adapter sends, and what the adapter makes of each answer, with the ledger as the judge.

use herald_provider::{Adapter, Encoding};
use herald_provider_testkit::support::{
    accepted_ref, ambiguous, json, permanent_rejection, rejection, unique_key,
};
use herald_ses::SesAdapter;
use herald_ses::fake::{FakeConfig, Fault, Faults};
use secrecy::SecretString;
use serde_json::json;

use crate::support::{FROM, TO, adapter, expanded, invoice, message, route, vendor};

#[tokio::test]
async fn a_send_is_signed_for_ses_and_carries_the_key_in_its_tags() {
    let vendor = vendor(FakeConfig::default()).await;
    let key = unique_key();
    let mut message = message();
    message
        .email
        .tags
        .insert("campaign".into(), "welcome".into());
    message.email.cc.push("bob@example.com".into());
    message
        .email
        .headers
        .insert("X-Entity-Ref-ID".into(), "42".into());
    let result = vendor.adapter.send(&message, &key).await;
    let message_id = accepted_ref(&result);

    let received = vendor.fake.last_request().expect("a request");
    assert!(received.signed, "the fake recomputed the same signature");
    assert_eq!(
        received.signed_headers,
        ["content-type", "host", "x-amz-date"]
    );
    assert_eq!(received.content_type.as_deref(), Some("application/json"));
    assert_eq!(
        received.body,
        json!({
            "FromEmailAddress": FROM,
            "Destination": {"ToAddresses": [TO], "CcAddresses": ["bob@example.com"]},
            "Content": {"Simple": {
                "Subject": {"Data": "Your code", "Charset": "UTF-8"},
                "Body": {
                    "Text": {"Data": "123456", "Charset": "UTF-8"},
                    "Html": {"Data": "<p>123456</p>", "Charset": "UTF-8"},
                },
                "Headers": [{"Name": "X-Entity-Ref-ID", "Value": "42"}],
            }},
            "EmailTags": [
                {"Name": "campaign", "Value": "welcome"},
                {"Name": "herald_key", "Value": key.as_str()},
            ],
            "ConfigurationSetName": "herald-events",
        })
    );
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);
    assert_eq!(ledger.deliveries[0].message_id, message_id);
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
        json(&stored.body)["Content"]["Simple"]["Attachments"],
        json!([{
            "FileName": "invoice.pdf",
            "RawContent": invoice.placeholder(Encoding::Base64),
            "ContentType": "application/pdf",
            "ContentTransferEncoding": "BASE64",
        }])
    );
    let sent = vendor
        .adapter
        .send_prepared(&expanded(&stored, &invoice, &content), &message, &key)
        .await;

    // Accepted: the signature, made over the expanded body, held where the fake recomputed it.
    let message_id = accepted_ref(&sent);
    // Named, typed, sized and hashed as herald describes the file: the bytes came through.
    assert_eq!(vendor.fake.attachments_of(&message_id), [invoice]);
}

#[tokio::test]
async fn an_email_without_attachments_sends_no_attachments_field() {
    let vendor = vendor(FakeConfig::default()).await;

    let stored = vendor.adapter.prepare(&message(), &unique_key()).unwrap();

    assert_eq!(
        json(&stored.body)["Content"]["Simple"].get("Attachments"),
        None
    );
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

    // The placeholder is not base64: SES refuses the request rather than send a broken file.
    let evidence = permanent_rejection(&sent);
    assert_eq!(evidence.status, Some(400));
    assert_eq!(evidence.vendor_code.as_deref(), Some("BadRequestException"));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn temporary_credentials_sign_with_their_session_token() {
    let config = FakeConfig {
        session_token: Some("FQoGZXIvYXdzEXAMPLEtoken".to_owned()),
        ..FakeConfig::default()
    };
    let fake = herald_ses::fake::spawn(config.clone()).await.unwrap();
    let mut route = route(&fake.base_url(), &config);
    route.session_token = Some(SecretString::from("FQoGZXIvYXdzEXAMPLEtoken"));
    accepted_ref(&adapter(&route).send(&message(), &unique_key()).await);
    let received = fake.last_request().unwrap();
    assert!(received.signed);
    assert_eq!(
        received.signed_headers,
        ["content-type", "host", "x-amz-date", "x-amz-security-token"]
    );
    // Without the token, or with another, the account refuses the same keys.
    for token in [None, Some("another-token")] {
        route.session_token = token.map(SecretString::from);
        let result = adapter(&route).send(&message(), &unique_key()).await;
        assert_eq!(permanent_rejection(&result).status, Some(403), "{token:?}");
    }
}

#[tokio::test]
async fn a_wrong_secret_key_is_refused_and_nothing_is_sent() {
    let config = FakeConfig::default();
    let fake = herald_ses::fake::spawn(config.clone()).await.unwrap();
    let mut route = route(&fake.base_url(), &config);
    route.secret_access_key = SecretString::from("not/the/accounts/secret/key/EXAMPLEKEY");
    let result = adapter(&route).send(&message(), &unique_key()).await;
    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.status, Some(403));
    assert_eq!(
        evidence.vendor_code.as_deref(),
        Some("SignatureDoesNotMatch")
    );
    assert_eq!(fake.ledger().total(), 0);
}

#[tokio::test]
async fn an_unverified_sender_is_a_permanent_rejection_named_by_its_type() {
    let vendor = vendor(FakeConfig {
        unverified: vec![FROM.to_owned()],
        ..FakeConfig::default()
    })
    .await;
    let result = vendor.adapter.send(&message(), &unique_key()).await;
    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.vendor_code.as_deref(), Some("MessageRejected"));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn a_tag_named_herald_key_is_refused_before_any_request() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut message = message();
    message
        .email
        .tags
        .insert("herald_key".into(), "mine".into());
    let result = vendor.adapter.send(&message, &unique_key()).await;
    assert!(permanent_rejection(&result).detail.contains("herald_key"));
    assert_eq!(vendor.fake.ledger().requests, 0);
}

#[tokio::test]
async fn each_fault_ends_as_the_ledger_says_it_should() {
    let vendor = vendor(FakeConfig::default()).await;
    let cases = [
        (Fault::AcceptThenDrop, 1),
        (Fault::ErrorAfterProcessing, 1),
        (Fault::UnavailableBeforeProcessing, 0),
        (Fault::RateLimited, 0),
    ];
    for (fault, delivered) in cases {
        vendor.fake.set_faults(Faults::next([fault]));
        let key = unique_key();
        let result = vendor.adapter.send(&message(), &key).await;
        match fault {
            Fault::RateLimited => {
                let (permanent, retry_after, _) = rejection(result);
                assert!(!permanent, "{fault:?}");
                assert_eq!(retry_after, Some(std::time::Duration::from_secs(1)));
            }
            // Neither a drop nor a 5xx tells whether SES took it: both are ambiguous, and
            // SES offers no look-up, so only its event can settle them.
            _ => {
                ambiguous(&result);
            }
        }
        assert_eq!(
            vendor.fake.ledger().deliveries_of(key.as_str()),
            delivered,
            "{fault:?}"
        );
    }
    let query = vendor.adapter.query(&message(), &unique_key()).await;
    assert!(matches!(
        query,
        herald_provider::QueryResult::Unsupported { .. }
    ));
    assert_eq!(vendor.adapter.capabilities().idempotency_window, None);
    assert_eq!(vendor.adapter.capabilities().query_visibility_lag, None);
}

#[test]
fn a_route_that_cannot_sign_or_names_no_topic_arn_does_not_start() {
    crate::support::install_crypto_provider();
    let config = FakeConfig::default();
    let mut bad_region = route("https://email.us-east-1.amazonaws.com", &config);
    bad_region.region = "us east 1".into();
    assert!(matches!(
        SesAdapter::new(bad_region),
        Err(herald_ses::SesError::Region)
    ));
    let mut bad_topic = route("https://email.us-east-1.amazonaws.com", &config);
    bad_topic.sns_topic_arn = Some("herald-ses-events".into());
    assert!(matches!(
        SesAdapter::new(bad_topic),
        Err(herald_ses::SesError::SnsTopic(_))
    ));
}
