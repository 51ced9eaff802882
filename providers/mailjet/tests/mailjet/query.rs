//! Looking a send up by `CustomID`: what the adapter asks Mailjet, and what each answer proves.

use std::time::Duration;

use herald_mailjet::fake::{FakeConfig, Fault};
use herald_provider::{Adapter, ProviderKey, QueryResult, SendResult};
use secrecy::SecretString;

use crate::support::{
    API_KEY, email, fake_config, key, pair, query_pairs, query_until_found, vendor, vendor_with,
};

#[tokio::test]
async fn the_query_asks_for_the_custom_id_since_the_notification_existed() {
    let vendor = vendor().await;
    let message = email();
    let key = key(&message);
    let lookup = vendor.adapter.query(&message, &key).await;
    assert!(
        matches!(lookup, QueryResult::NotFoundYet { .. }),
        "{lookup:?}"
    );

    let received = vendor.fake.received();
    let request = &received[0];
    assert_eq!(request.method, "GET");
    assert_eq!(request.path, "/v3/REST/message");
    assert_eq!(request.basic_user.as_deref(), Some(API_KEY));
    let pairs = query_pairs(request.query.as_deref());
    assert_eq!(pair(&pairs, "CustomID"), Some(key.as_str()));
    assert_eq!(pair(&pairs, "ShowCustomID"), Some("true"));
    // The notification was created just now; the window opens an hour earlier.
    let from_ts: i64 = pair(&pairs, "FromTS").unwrap().parse().unwrap();
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
    let pairs = query_pairs(received.last().unwrap().query.as_deref());
    assert_eq!(pair(&pairs, "FromTS"), None);
}

#[tokio::test]
async fn a_send_becomes_visible_only_after_the_vendors_lag() {
    let config = FakeConfig {
        visibility_lag: Duration::from_secs(1),
        ..fake_config()
    };
    let vendor = vendor_with(config, |_| {}).await;
    let message = email();
    let sent = vendor.adapter.send(&message, &key(&message)).await;
    let SendResult::Accepted {
        provider_ref: Some(id),
        ..
    } = sent
    else {
        panic!("expected an acceptance, got {sent:?}");
    };

    let early = vendor.adapter.query(&message, &key(&message)).await;
    assert!(
        matches!(early, QueryResult::NotFoundYet { .. }),
        "{early:?}"
    );
    match query_until_found(&vendor.adapter, &message, Duration::from_secs(5)).await {
        QueryResult::Accepted { provider_ref, .. } => assert_eq!(provider_ref, Some(id)),
        other => panic!("expected the delivery to be found, got {other:?}"),
    }
}

#[tokio::test]
async fn two_sends_under_one_key_are_accepted_and_counted() {
    let vendor = vendor().await;
    let message = email();
    let key = key(&message);
    let SendResult::Accepted {
        provider_ref: Some(first),
        ..
    } = vendor.adapter.send(&message, &key).await
    else {
        panic!("the first send is accepted");
    };
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
    let lookup = vendor.adapter.query(&other, &key(&other)).await;
    assert!(
        matches!(lookup, QueryResult::NotFoundYet { .. }),
        "{lookup:?}"
    );
}

#[tokio::test]
async fn a_failed_lookup_proves_nothing() {
    let vendor = vendor().await;
    let message = email();
    vendor.adapter.send(&message, &key(&message)).await;

    for fault in [
        Fault::ErrorAfterProcessing,
        Fault::UnavailableBeforeProcessing,
        Fault::RateLimited,
        Fault::AcceptThenDrop,
    ] {
        vendor.fake.set_lookup_faults([fault]);
        let lookup = vendor.adapter.query(&message, &key(&message)).await;
        assert!(
            matches!(lookup, QueryResult::Unsupported { .. }),
            "{fault:?}: {lookup:?}"
        );
    }
    // Without a fault the same look-up finds it.
    let lookup = vendor.adapter.query(&message, &key(&message)).await;
    assert!(matches!(lookup, QueryResult::Accepted { .. }), "{lookup:?}");
}

#[tokio::test]
async fn a_lookup_with_wrong_credentials_proves_nothing() {
    let vendor = vendor_with(
        FakeConfig::new(API_KEY, SecretString::from("another")),
        |_| {},
    )
    .await;
    let message = email();
    match vendor.adapter.query(&message, &key(&message)).await {
        QueryResult::Unsupported { evidence } => {
            assert_eq!(evidence.status, Some(401));
            assert_eq!(evidence.vendor_code.as_deref(), Some("mj-0015"));
        }
        other => panic!("expected a look-up that proves nothing, got {other:?}"),
    }
}
