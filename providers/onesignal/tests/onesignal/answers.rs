//! Each documented OneSignal answer, as the adapter classifies it and as the ledger records it.

use std::time::Duration;

use herald_onesignal::fake::FakeConfig;
use herald_onesignal::{
    IDEMPOTENCY_WINDOW, OneSignalAdapter, OneSignalError, OneSignalRoute, idempotency_key_for,
};
use herald_provider::{Adapter, ProviderKey};
use herald_provider_testkit::ledger;
use herald_provider_testkit::support::{
    accepted_as_documented, accepted_ref, field_names, install_crypto_provider, json, rejection,
    unique_key,
};
use secrecy::SecretString;
use serde_json::json;

use crate::support::{
    CLIENT_TIMEOUT, SUBSCRIPTION, adapter, documented_error, message, vendor, vendor_with,
};

const REQUEST: &str = include_str!("../../../../fixtures/onesignal/create-message.request.json");
const RESPONSE: &str = include_str!("../../../../fixtures/onesignal/create-message.response.json");
const NO_SUBSCRIBERS: &str =
    include_str!("../../../../fixtures/onesignal/create-message.no-subscribers.json");
const NO_TARGETING: &str =
    include_str!("../../../../fixtures/onesignal/errors/no-targeting.400.json");
const ACCESS_DENIED: &str =
    include_str!("../../../../fixtures/onesignal/errors/access-denied.403.json");

#[tokio::test]
async fn a_sent_push_is_accepted_with_onesignals_id_and_the_request_has_the_documented_shape() {
    let config = FakeConfig::default();
    let app_id = config.app_id.clone();
    let vendor = vendor(config).await;
    let key = unique_key();

    accepted_as_documented(&vendor.adapter.send(&message(), &key).await, 200, RESPONSE);

    let request = vendor
        .fake
        .last_request()
        .expect("the fake saw the request");
    assert_eq!(request.auth_scheme.as_deref(), Some("Key"));
    assert_eq!(request.content_type.as_deref(), Some("application/json"));
    assert!(
        request
            .user_agent
            .as_deref()
            .is_some_and(|ua| ua.starts_with("herald-onesignal/")),
        "{request:?}"
    );
    // Exactly the fields of the documented example, with herald's values; herald's key is a
    // UUID and is the idempotency_key as it is.
    assert_eq!(field_names(&request.body), field_names(&json(REQUEST)));
    assert_eq!(
        request.body,
        json!({
            "app_id": app_id,
            "idempotency_key": key.as_str(),
            "include_subscription_ids": [SUBSCRIPTION],
            "contents": {"en": "123456"},
            "headings": {"en": "Your code"},
        })
    );
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn a_message_without_a_subject_has_no_headings() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut untitled = message();
    untitled.subject = None;

    accepted_ref(&vendor.adapter.send(&untitled, &unique_key()).await);

    let body = vendor.fake.last_request().unwrap().body;
    assert!(body.get("headings").is_none(), "{body}");
}

#[tokio::test]
async fn a_repeat_inside_the_window_answers_the_first_result_and_delivers_nothing() {
    let vendor = vendor(FakeConfig::default()).await;
    let requests = || vendor.fake.ledger().requests;
    let deliveries = |key: &str| vendor.fake.ledger().deliveries_of(key);

    let again =
        ledger::replayed_inside_the_window(&vendor.adapter, &message(), requests, deliveries).await;

    let evidence = again.evidence();
    assert!(
        evidence.detail.starts_with("idempotent replay"),
        "{evidence:?}"
    );
}

#[tokio::test]
async fn after_the_window_a_repeat_is_delivered_again() {
    let window = Duration::from_millis(300);
    let config = FakeConfig {
        idempotency_window: window,
        ..FakeConfig::default()
    };
    let vendor = vendor(config).await;
    let deliveries = |key: &str| vendor.fake.ledger().deliveries_of(key);

    ledger::sent_again_after_the_window(&vendor.adapter, &message(), window, deliveries).await;
}

#[tokio::test]
async fn a_key_that_is_not_a_uuid_is_sent_as_the_same_uuid_v5_on_every_resend() {
    let vendor = vendor(FakeConfig::default()).await;
    let key = ProviderKey::new("welcome-user/123456789");

    let first = accepted_ref(&vendor.adapter.send(&message(), &key).await);
    let sent_as = vendor.fake.last_request().unwrap().body["idempotency_key"].clone();
    let again = accepted_ref(&vendor.adapter.send(&message(), &key).await);

    assert_eq!(first, again);
    assert_eq!(sent_as, json!(idempotency_key_for(&key)));
    let uuid = uuid::Uuid::parse_str(sent_as.as_str().unwrap()).unwrap();
    assert_eq!(uuid.get_version_num(), 5);
    assert_eq!(
        vendor
            .fake
            .ledger()
            .deliveries_of(&idempotency_key_for(&key)),
        1
    );
}

#[tokio::test]
async fn a_subscription_that_is_not_subscribed_is_a_permanent_rejection_from_a_200() {
    let vendor = vendor(FakeConfig {
        unsubscribed: vec![SUBSCRIPTION.to_owned()],
        ..FakeConfig::default()
    })
    .await;
    let key = unique_key();

    for _ in 0..2 {
        let (permanent, retry_after, evidence) =
            rejection(vendor.adapter.send(&message(), &key).await);
        assert!(permanent);
        assert_eq!(retry_after, None);
        assert_eq!(evidence.status, Some(200));
        assert_eq!(
            evidence.vendor_code,
            Some(documented_error(NO_SUBSCRIBERS)),
            "{evidence:?}"
        );
    }
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.requests, 2);
    assert_eq!(ledger.total_deliveries(), 0);
}

#[tokio::test]
async fn a_message_without_a_target_is_a_permanent_rejection() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut nobody = message();
    nobody.to = String::new();

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&nobody, &unique_key()).await);

    assert!(permanent);
    assert_eq!(evidence.status, Some(400));
    assert_eq!(evidence.vendor_code, Some(documented_error(NO_TARGETING)));
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
}

#[tokio::test]
async fn a_message_without_text_is_a_permanent_rejection() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut empty = message();
    empty.text = None;

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&empty, &unique_key()).await);

    assert!(permanent);
    assert_eq!(evidence.status, Some(400));
    assert!(evidence.vendor_code.is_some(), "{evidence:?}");
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
}

#[tokio::test]
async fn another_apps_id_is_refused_like_a_wrong_key() {
    let config = FakeConfig::default();
    let api_key = config.api_key.clone();
    let vendor = vendor_with(
        config,
        "00000000-0000-4000-8000-000000000000",
        &api_key,
        CLIENT_TIMEOUT,
    )
    .await;

    let (permanent, _, evidence) = rejection(vendor.adapter.send(&message(), &unique_key()).await);

    assert!(permanent);
    assert_eq!(evidence.status, Some(403));
    assert_eq!(evidence.vendor_code, Some(documented_error(ACCESS_DENIED)));
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
}

#[test]
fn a_base_url_that_is_not_http_is_refused_when_the_adapter_is_built() {
    install_crypto_provider();
    let built = OneSignalAdapter::new(OneSignalRoute {
        base_url: "onesignal.com".to_owned(),
        app_id: "8250eaf6-1a58-489e-b136-7c74a864b434".to_owned(),
        api_key: SecretString::from("key"),
        timeout: CLIENT_TIMEOUT,
    });
    assert!(
        matches!(built, Err(OneSignalError::BaseUrl { .. })),
        "{built:?}"
    );
}

#[test]
fn capabilities_state_the_30_day_window_and_no_query() {
    let adapter = adapter(
        herald_onesignal::DEFAULT_BASE_URL,
        "8250eaf6-1a58-489e-b136-7c74a864b434",
        "key",
        CLIENT_TIMEOUT,
    );
    let capabilities = adapter.capabilities();
    assert_eq!(
        capabilities.idempotency_window,
        Some(Duration::from_secs(30 * 24 * 60 * 60))
    );
    assert_eq!(capabilities.idempotency_window, Some(IDEMPOTENCY_WINDOW));
    assert_eq!(capabilities.query_visibility_lag, None);
    assert_eq!(capabilities.max_payload_bytes, None);
}

#[tokio::test]
async fn the_fake_refuses_a_request_without_authorization_with_the_documented_400() {
    const MISSING_AUTHORIZATION: &str =
        include_str!("../../../../fixtures/onesignal/errors/missing-authorization.400.json");
    install_crypto_provider();
    let vendor = vendor(FakeConfig::default()).await;

    let response = reqwest::Client::new()
        .post(format!("{}/notifications", vendor.fake.base_url()))
        .json(&json(REQUEST))
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 400);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body, json(MISSING_AUTHORIZATION));
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
}
