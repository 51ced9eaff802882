//! Looking a send up by `CustomID`: what the adapter asks Mailjet, and what each answer proves.

use std::time::Duration;

use herald_mailjet::fake::{FakeConfig, Fault};
use herald_provider::{Adapter, ProviderKey, QueryResult, SendResult};
use herald_provider_testkit::ledger;
use herald_provider_testkit::support::{Form, accepted_ref, assert_not_found_yet, unsupported};
use secrecy::SecretString;

use crate::support::{API_KEY, email, fake_config, key, vendor, vendor_with};

#[tokio::test]
async fn the_query_asks_for_the_custom_id_since_the_notification_existed() {
    let vendor = vendor().await;
    let message = email();
    let key = key(&message);
    assert_not_found_yet(&vendor.adapter.query(&message, &key).await);

    let received = vendor.fake.received();
    let request = &received[0];
    assert_eq!(request.method, "GET");
    assert_eq!(request.path, "/v3/REST/message");
    assert_eq!(request.basic_user.as_deref(), Some(API_KEY));
    let query = Form::parse(request.query.as_deref().unwrap_or_default());
    assert_eq!(query.get("CustomID"), Some(key.as_str()));
    assert_eq!(query.get("ShowCustomID"), Some("true"));
    // The notification was created just now; the window opens an hour earlier.
    let from_ts: i64 = query.get("FromTS").unwrap().parse().unwrap();
    let expected = time::OffsetDateTime::now_utc().unix_timestamp() - 3600;
    assert!(
        (expected - 60..=expected).contains(&from_ts),
        "FromTS = {from_ts}"
    );
}

#[tokio::test]
async fn an_id_without_a_time_asks_without_from_ts_and_still_finds_the_send() {
    let vendor = vendor().await;
    let mut message = email();
    message.notification_id = "not-a-uuid".to_owned();
    let key = ProviderKey::new("ntf-not-a-uuid");
    let sent = vendor.adapter.send(&message, &key).await;
    assert!(matches!(sent, SendResult::Accepted { .. }), "{sent:?}");

    let lookup = vendor.adapter.query(&message, &key).await;
    assert!(matches!(lookup, QueryResult::Accepted { .. }), "{lookup:?}");
    let received = vendor.fake.received();
    let query = received.last().unwrap().query.as_deref();
    assert_eq!(Form::parse(query.unwrap_or_default()).get("FromTS"), None);
}

#[tokio::test]
async fn a_send_is_found_by_its_custom_id_only_after_the_vendors_lag() {
    let lag = Duration::from_secs(1);
    let config = FakeConfig {
        visibility_lag: lag,
        ..fake_config()
    };
    let vendor = vendor_with(config, |_| {}).await;
    let message = email();
    let key = key(&message);

    let late = ledger::visible_only_after_the_lag(&vendor.adapter, &message, &key, lag).await;
    assert!(matches!(late, QueryResult::Accepted { .. }), "{late:?}");
}

#[tokio::test]
async fn two_sends_under_one_key_are_accepted_and_counted() {
    let vendor = vendor().await;
    let message = email();
    let key = key(&message);
    let first = accepted_ref(&vendor.adapter.send(&message, &key).await);
    vendor.adapter.send(&message, &key).await;
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 2);

    match vendor.adapter.query(&message, &key).await {
        QueryResult::Accepted {
            provider_ref,
            evidence,
        } => {
            assert_eq!(provider_ref, Some(first));
            assert!(
                evidence
                    .detail
                    .starts_with("2 messages carry this CustomID"),
                "{evidence:?}"
            );
        }
        other => panic!("expected an acceptance with a count, got {other:?}"),
    }
}

#[tokio::test]
async fn another_notifications_key_is_not_this_send() {
    let vendor = vendor().await;
    let sent = email();
    vendor.adapter.send(&sent, &key(&sent)).await;

    let other = email();
    assert_not_found_yet(&vendor.adapter.query(&other, &key(&other)).await);
}

#[tokio::test]
async fn a_failed_lookup_proves_nothing() {
    let vendor = vendor().await;
    let message = email();
    let key = key(&message);
    vendor.fake.set_lookup_faults([
        Fault::ErrorAfterProcessing,
        Fault::UnavailableBeforeProcessing,
        Fault::RateLimited,
        Fault::AcceptThenDrop,
    ]);

    let found = ledger::failed_lookups_prove_nothing(&vendor.adapter, &message, &key, 4).await;
    assert!(matches!(found, QueryResult::Accepted { .. }), "{found:?}");
}

#[tokio::test]
async fn a_lookup_with_wrong_credentials_proves_nothing() {
    let vendor = vendor_with(
        FakeConfig::new(API_KEY, SecretString::from("another")),
        |_| {},
    )
    .await;
    let message = email();
    let lookup = vendor.adapter.query(&message, &key(&message)).await;

    let evidence = unsupported(&lookup);
    assert_eq!(evidence.status, Some(401));
    assert_eq!(evidence.vendor_code.as_deref(), Some("mj-0015"));
}
