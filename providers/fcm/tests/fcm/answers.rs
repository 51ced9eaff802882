//! Each documented FCM answer, as the adapter classifies it and as the fake's ledger records
//! it; and what `prepare` refuses before anything is sent.

use herald_fcm::fake::FakeConfig;
use herald_fcm::{FcmAdapter, FcmError, KEY_DATA, MAX_PAYLOAD_BYTES};
use herald_provider::{Adapter, Channel, Evidence, ProviderKey};
use herald_provider_testkit::support::{
    self, accepted_ref, field_names, install_crypto_provider, json, permanent_rejection, unique_key,
};
use serde_json::json;

use crate::support::{CLIENT_TIMEOUT, DEVICE, adapter, message, route, vendor};

const REQUEST: &str = include_str!("../../../../fixtures/fcm/send.request.json");
const INVALID_ARGUMENT: &str =
    include_str!("../../../../fixtures/fcm/errors/invalid-argument.400.json");
const UNAUTHENTICATED: &str =
    include_str!("../../../../fixtures/fcm/errors/unauthenticated.401.json");

#[tokio::test]
async fn a_sent_push_is_accepted_with_fcms_name_and_the_request_has_the_documented_shape() {
    let vendor = vendor(FakeConfig::default()).await;
    let key = unique_key();

    let result = vendor.adapter.send(&message(), &key).await;

    let name = accepted_ref(&result);
    assert!(name.starts_with("projects/herald-test/messages/"), "{name}");
    assert_eq!(result.evidence().status, Some(200));
    let request = vendor.fake.last_request().expect("the fake saw the send");
    assert_eq!(request.project, "herald-test", "the key's project_id");
    assert_eq!(request.auth_scheme.as_deref(), Some("Bearer"));
    assert_eq!(request.content_type.as_deref(), Some("application/json"));
    assert!(
        request
            .user_agent
            .as_deref()
            .is_some_and(|ua| ua.starts_with("herald-fcm/")),
        "{request:?}"
    );
    // The documented example's fields, with herald's values and herald's key in `data`.
    let documented = json(REQUEST);
    assert_eq!(
        field_names(&request.body["message"]),
        field_names(&documented["message"])
    );
    assert_eq!(
        request.body,
        json!({"message": {
            "token": DEVICE,
            "notification": {"title": "Your code", "body": "123456"},
            "data": {KEY_DATA: key.as_str()},
        }})
    );
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);
    assert_eq!(ledger.deliveries[0].message_id, name);
}

#[tokio::test]
async fn a_resend_is_a_second_message_that_the_app_can_tell_by_its_key() {
    // No idempotency key: FCM delivers every send. Both carry herald's key in `data`.
    let vendor = vendor(FakeConfig::default()).await;
    let key = unique_key();

    let first = accepted_ref(&vendor.adapter.send(&message(), &key).await);
    let again = accepted_ref(&vendor.adapter.send(&message(), &key).await);

    assert_ne!(first, again);
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 2);
    assert_eq!(vendor.adapter.capabilities().idempotency_window, None);
}

#[tokio::test]
async fn an_unregistered_token_is_refused_for_good_and_suppressed() {
    let vendor = vendor(FakeConfig {
        unregistered: vec![DEVICE.to_owned()],
        ..FakeConfig::default()
    })
    .await;

    let result = vendor.adapter.send(&message(), &unique_key()).await;

    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.status, Some(404));
    assert_eq!(evidence.vendor_code.as_deref(), Some("UNREGISTERED"));
    assert!(vendor.adapter.unsubscribed(evidence));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn other_refusals_suppress_nothing() {
    let vendor = vendor(FakeConfig::default()).await;
    let refusal = |status: u16, code: &str| {
        Evidence::new("response", INVALID_ARGUMENT)
            .with_status(status)
            .with_vendor_code(code)
    };
    // FCM's refusal of a malformed token, and a 404 that names no token (a wrong path).
    assert!(
        !vendor
            .adapter
            .unsubscribed(&refusal(400, "INVALID_ARGUMENT"))
    );
    assert!(!vendor.adapter.unsubscribed(&refusal(404, "NOT_FOUND")));
    // herald's own refusal of a push without a token.
    let mut blank = message();
    blank.to = " ".to_owned();
    let refused = vendor.adapter.send(&blank, &unique_key()).await;
    assert!(!vendor.adapter.unsubscribed(permanent_rejection(&refused)));
    assert_eq!(vendor.fake.ledger().requests, 0);
}

#[tokio::test]
async fn the_fake_refuses_a_token_it_did_not_issue_with_the_documented_401() {
    install_crypto_provider();
    let vendor = vendor(FakeConfig::default()).await;

    let answer = reqwest::Client::new()
        .post(format!(
            "{}/v1/projects/herald-test/messages:send",
            vendor.fake.base_url()
        ))
        .bearer_auth("ya29.not-issued-here")
        .json(&json(REQUEST))
        .send()
        .await
        .unwrap();

    assert_eq!(answer.status(), 401);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body, json(UNAUTHENTICATED));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn a_payload_of_4096_bytes_is_sent_and_one_byte_more_is_refused_before_any_io() {
    let vendor = vendor(FakeConfig::default()).await;
    let key = unique_key();
    // The notification and data as JSON, the text left out: what the text may fill.
    let frame = json!({"title": "Your code", "body": ""}).to_string().len()
        + json!({KEY_DATA: key.as_str()}).to_string().len();
    let mut fits = message();
    fits.text = Some("x".repeat(MAX_PAYLOAD_BYTES - frame));
    let mut too_big = fits.clone();
    too_big.text = Some("x".repeat(MAX_PAYLOAD_BYTES - frame + 1));

    accepted_ref(&vendor.adapter.send(&fits, &key).await);
    let refused = vendor.adapter.send(&too_big, &unique_key()).await;

    let evidence = permanent_rejection(&refused);
    assert_eq!(evidence.stage, "request");
    assert!(evidence.detail.contains("4096"), "{evidence:?}");
    assert_eq!(vendor.fake.ledger().requests, 1, "only the one that fits");
}

#[test]
fn what_fcm_cannot_carry_is_refused_in_prepare() {
    let adapter = adapter(
        "https://fcm.googleapis.com",
        &FakeConfig::default().service_account("https://oauth2.googleapis.com/token"),
        CLIENT_TIMEOUT,
    );
    let key = unique_key();
    let email = support::message(Channel::Email, "ada@example.com");
    let mut tagged = message();
    tagged
        .email
        .tags
        .insert("kind".to_owned(), "otp".to_owned());
    let mut untargeted = message();
    untargeted.to = String::new();
    for refused in [email, tagged, untargeted] {
        let evidence = adapter.prepare(&refused, &key).unwrap_err();
        assert_eq!(evidence.stage, "request");
    }
}

#[tokio::test]
async fn an_expiry_is_told_to_apns_as_a_time_and_to_android_and_web_push_as_the_time_left() {
    let vendor = vendor(FakeConfig::default()).await;
    let key = unique_key();
    let mut expiring = message();
    let expires_at = time::OffsetDateTime::now_utc() + time::Duration::minutes(10);
    expiring.expires_at = Some(expires_at);

    let stored = vendor.adapter.prepare(&expiring, &key).unwrap();
    accepted_ref(&vendor.adapter.send(&expiring, &key).await);

    let stored = json(&stored.body);
    let expiration = expires_at.unix_timestamp().to_string();
    assert_eq!(
        stored["message"]["apns"],
        json!({"headers": {"apns-expiration": expiration}})
    );
    assert!(
        stored["message"].get("android").is_none(),
        "counted per attempt: {stored}"
    );
    let sent = vendor.fake.last_request().unwrap().body;
    assert_eq!(sent["message"]["apns"], stored["message"]["apns"]);
    let ttl = sent["message"]["android"]["ttl"].as_str().unwrap();
    let seconds: i64 = ttl.trim_end_matches('s').parse().unwrap();
    assert!((590..=600).contains(&seconds), "{ttl}");
    assert_eq!(
        sent["message"]["webpush"]["headers"]["TTL"],
        json!(seconds.to_string())
    );
}

#[tokio::test]
async fn a_push_without_a_subject_has_no_title() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut untitled = message();
    untitled.subject = None;

    accepted_ref(&vendor.adapter.send(&untitled, &unique_key()).await);

    let body = vendor.fake.last_request().unwrap().body;
    assert_eq!(body["message"]["notification"], json!({"body": "123456"}));
}

#[tokio::test]
async fn a_route_for_another_project_is_refused_by_fcm() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut other = route(
        &vendor.fake.base_url(),
        &vendor.fake.service_account(),
        CLIENT_TIMEOUT,
    );
    other.project_id = Some("someone-elses".to_owned());
    install_crypto_provider();
    let adapter = FcmAdapter::new(other).unwrap();

    let result = adapter.send(&message(), &unique_key()).await;

    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.status, Some(403));
    assert_eq!(evidence.vendor_code.as_deref(), Some("PERMISSION_DENIED"));
    assert_eq!(vendor.fake.last_request().unwrap().project, "someone-elses");
}

#[test]
fn capabilities_declare_no_window_no_look_up_and_fcms_payload_limit() {
    let adapter = adapter(
        herald_fcm::DEFAULT_BASE_URL,
        &FakeConfig::default().service_account("https://oauth2.googleapis.com/token"),
        CLIENT_TIMEOUT,
    );
    let capabilities = adapter.capabilities();
    assert_eq!(capabilities.idempotency_window, None);
    assert_eq!(capabilities.query_visibility_lag, None);
    assert_eq!(capabilities.max_payload_bytes, Some(4096));
    assert!(!capabilities.tags && !capabilities.attachments);
}

#[test]
fn a_route_that_cannot_work_is_refused_when_it_is_built() {
    install_crypto_provider();
    let key = FakeConfig::default().service_account("https://oauth2.googleapis.com/token");
    let bad_base = route("fcm.googleapis.com", &key, CLIENT_TIMEOUT);
    assert!(matches!(
        FcmAdapter::new(bad_base),
        Err(FcmError::BaseUrl { .. })
    ));
    let mut bad_project = route(herald_fcm::DEFAULT_BASE_URL, &key, CLIENT_TIMEOUT);
    bad_project.project_id = Some("a/b".to_owned());
    assert!(matches!(
        FcmAdapter::new(bad_project),
        Err(FcmError::ProjectId(_))
    ));
    let ftp = FakeConfig::default().service_account("ftp://oauth2.googleapis.com/token");
    assert!(matches!(
        FcmAdapter::new(route(herald_fcm::DEFAULT_BASE_URL, &ftp, CLIENT_TIMEOUT)),
        Err(FcmError::TokenUri { .. })
    ));
}

#[tokio::test]
async fn a_key_that_is_not_a_uuid_travels_as_it_is() {
    let vendor = vendor(FakeConfig::default()).await;
    let key = ProviderKey::new("01970000-0000-7000-8000-000000000001-f1");

    accepted_ref(&vendor.adapter.send(&message(), &key).await);

    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}
