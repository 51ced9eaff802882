//! Each documented Resend answer, as the adapter classifies it and as the ledger records it.

use std::time::Duration;

use herald_provider::{Adapter, Encoding, SendResult};
use herald_provider_testkit::ledger;
use herald_provider_testkit::support::{
    accepted_as_documented, accepted_ref, ambiguous, field_names, install_crypto_provider, json,
    rejection, unique_key,
};
use herald_resend::fake::{FakeConfig, Fault, Faults};
use herald_resend::{IDEMPOTENCY_WINDOW, MAX_EMAIL_BYTES, ResendAdapter, ResendError, ResendRoute};
use secrecy::SecretString;
use serde_json::json;

use crate::support::{
    CLIENT_TIMEOUT, SENDER, SHORT_TIMEOUT, adapter, documented_message, expanded, invoice, message,
    vendor, vendor_with,
};

const REQUEST: &str = include_str!("../../../../fixtures/resend/send-email.request.json");
const RESPONSE: &str = include_str!("../../../../fixtures/resend/send-email.response.json");
const INVALID_IDEMPOTENCY_KEY: &str =
    include_str!("../../../../fixtures/resend/errors/invalid_idempotency_key.json");
const MISSING_API_KEY: &str =
    include_str!("../../../../fixtures/resend/errors/missing_api_key.json");
const INVALID_IDEMPOTENT_REQUEST: &str =
    include_str!("../../../../fixtures/resend/errors/invalid_idempotent_request.json");
const CONCURRENT_IDEMPOTENT_REQUESTS: &str =
    include_str!("../../../../fixtures/resend/errors/concurrent_idempotent_requests.json");
const MISSING_REQUIRED_FIELD: &str =
    include_str!("../../../../fixtures/resend/errors/missing_required_field.json");

#[tokio::test]
async fn a_sent_email_is_accepted_with_resends_id_and_the_request_has_the_documented_shape() {
    let vendor = vendor(FakeConfig::default()).await;
    let (message, key) = (message(), unique_key());

    // The answer is kept whole, and has exactly the documented fields.
    accepted_as_documented(&vendor.adapter.send(&message, &key).await, 200, RESPONSE);

    let request = vendor
        .fake
        .last_request()
        .expect("the fake saw the request");
    assert_eq!(request.auth_scheme.as_deref(), Some("Bearer"));
    assert_eq!(request.idempotency_key.as_deref(), Some(key.as_str()));
    assert_eq!(request.content_type.as_deref(), Some("application/json"));
    assert!(
        request
            .user_agent
            .as_deref()
            .is_some_and(|ua| ua.starts_with("herald-resend/")),
        "{request:?}"
    );
    // Every field of the documented example is there, with herald's values.
    for field in field_names(&json(REQUEST)) {
        assert!(request.body.get(&field).is_some(), "missing `{field}`");
    }
    assert_eq!(
        request.body,
        json!({
            "from": SENDER,
            "to": ["ada@example.com"],
            "subject": "Your code",
            "html": "<p>123456</p>",
            "text": "123456",
            "tags": [
                {"name": "herald_notification_id", "value": message.notification_id},
                // Resend echoes it in every webhook about the email.
                {"name": "herald_key", "value": key.as_str()},
            ],
        })
    );
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn an_attachment_arrives_intact_from_a_stored_request_that_only_names_it() {
    let vendor = vendor(FakeConfig::default()).await;
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
            "filename": "invoice.pdf",
            "content": invoice.placeholder(Encoding::Base64),
            "content_type": "application/pdf",
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

#[test]
fn an_email_without_attachments_sends_no_attachments_field() {
    let adapter = adapter(herald_resend::DEFAULT_BASE_URL, "re_123", CLIENT_TIMEOUT);

    let stored = adapter.prepare(&message(), &unique_key()).unwrap();

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

    // The placeholder is not base64: Resend refuses the field rather than send a broken file.
    let (permanent, _, evidence) = rejection(sent);
    assert!(permanent);
    assert_eq!(evidence.status, Some(400));
    assert_eq!(evidence.vendor_code.as_deref(), Some("validation_error"));
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
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
    assert_eq!(
        evidence.vendor_code.as_deref(),
        Some("invalid_idempotent_request")
    );
    assert!(
        evidence
            .detail
            .contains(&documented_message(INVALID_IDEMPOTENT_REQUEST))
    );
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
    assert_eq!(
        evidence.vendor_code.as_deref(),
        Some("concurrent_idempotent_requests")
    );
    assert!(
        evidence
            .detail
            .contains(&documented_message(CONCURRENT_IDEMPOTENT_REQUESTS))
    );
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn an_idempotency_key_longer_than_256_characters_is_a_permanent_rejection() {
    let vendor = vendor(FakeConfig::default()).await;
    let long = herald_provider::ProviderKey::new("k".repeat(257));

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&message(), &long).await);

    assert!(permanent);
    assert_eq!(evidence.status, Some(400));
    assert_eq!(
        evidence.vendor_code.as_deref(),
        Some("invalid_idempotency_key")
    );
    assert!(
        evidence
            .detail
            .contains(&documented_message(INVALID_IDEMPOTENCY_KEY))
    );
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
}

#[tokio::test]
async fn a_key_that_cannot_be_a_header_is_refused_before_anything_is_sent() {
    let vendor = vendor(FakeConfig::default()).await;
    let bad = herald_provider::ProviderKey::new("line\nbreak");

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&message(), &bad).await);

    assert!(permanent);
    assert_eq!(evidence.stage, "request");
    assert_eq!(vendor.fake.ledger().requests, 0);
}

#[tokio::test]
async fn a_message_without_a_subject_is_refused_as_missing_a_required_field() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut no_subject = message();
    no_subject.subject = None;

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&no_subject, &unique_key()).await);

    assert!(permanent);
    assert_eq!(evidence.status, Some(422));
    assert_eq!(
        evidence.vendor_code.as_deref(),
        Some("missing_required_field")
    );
    assert!(
        evidence
            .detail
            .contains(&documented_message(MISSING_REQUIRED_FIELD))
    );
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
}

#[tokio::test]
async fn a_missing_api_key_is_a_permanent_rejection() {
    let vendor = vendor_with(FakeConfig::default(), "", CLIENT_TIMEOUT).await;

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&message(), &unique_key()).await);

    assert!(permanent);
    assert_eq!(evidence.status, Some(401));
    assert_eq!(evidence.vendor_code.as_deref(), Some("missing_api_key"));
    assert!(
        evidence
            .detail
            .contains(&documented_message(MISSING_API_KEY))
    );
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
}

#[tokio::test]
async fn a_vendor_name_that_does_not_resolve_is_a_dns_rejection_not_a_refused_connection() {
    // `.invalid` never resolves (RFC 6761), so no resolver is asked beyond this machine's.
    let adapter = adapter("http://herald-test.invalid", "re_unused", CLIENT_TIMEOUT);

    let result = adapter.send(&message(), &unique_key()).await;

    assert_eq!(result.reason(), "not_sent_locally");
    let (permanent, _, evidence) = rejection(result);
    assert!(!permanent, "a name may resolve later");
    assert_eq!(evidence.stage, "dns", "{}", evidence.detail);
}

#[test]
fn a_base_url_that_is_not_http_is_refused_when_the_adapter_is_built() {
    install_crypto_provider();
    let built = ResendAdapter::new(ResendRoute {
        base_url: "smtp://api.resend.com".to_owned(),
        api_key: SecretString::from("re_123"),
        from: SENDER.to_owned(),
        timeout: CLIENT_TIMEOUT,
        webhook_secret: None,
    });
    assert!(
        matches!(built, Err(ResendError::BaseUrl { .. })),
        "{built:?}"
    );
}

#[test]
fn capabilities_state_the_24_hour_window_no_query_the_40_mb_limit_and_attachments() {
    let adapter = adapter(herald_resend::DEFAULT_BASE_URL, "re_123", CLIENT_TIMEOUT);
    let capabilities = adapter.capabilities();
    assert_eq!(
        capabilities.idempotency_window,
        Some(Duration::from_secs(24 * 60 * 60))
    );
    assert_eq!(capabilities.idempotency_window, Some(IDEMPOTENCY_WINDOW));
    assert_eq!(capabilities.query_visibility_lag, None);
    assert_eq!(capabilities.max_payload_bytes, Some(MAX_EMAIL_BYTES));
    assert!(capabilities.attachments);
}
