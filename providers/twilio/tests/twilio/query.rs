//! Looking a send up: what the adapter asks Twilio, and what each answer proves.

use std::time::Duration;

use herald_provider::{Adapter, QueryResult, SendResult};
use herald_twilio::fake::{FakeConfig, Fault};
use secrecy::SecretString;

use crate::support::{
    ACCOUNT, FROM, SERVICE, TO, fake_config, key, query_until_found, sms, unique_text, vendor,
    vendor_with,
};

#[tokio::test]
async fn the_query_asks_twilio_for_this_number_sender_and_days() {
    let vendor = vendor().await;
    let message = sms(&unique_text());
    let lookup = vendor.adapter.query(&message, &key(&message)).await;
    assert!(
        matches!(lookup, QueryResult::NotFoundYet { .. }),
        "{lookup:?}"
    );

    let received = vendor.fake.received();
    let request = &received[0];
    assert_eq!(request.method, "GET");
    assert_eq!(
        request.path,
        format!("/2010-04-01/Accounts/{ACCOUNT}/Messages.json")
    );
    assert_eq!(request.basic_user.as_deref(), Some(ACCOUNT));
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(request.query.as_deref().unwrap().as_bytes())
            .into_owned()
            .collect();
    let value = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(value("To").as_deref(), Some(TO));
    assert_eq!(value("From").as_deref(), Some(FROM));
    assert_eq!(value("PageSize").as_deref(), Some("1000"));
    // The notification was created just now: its window starts ten minutes earlier, which is
    // today or (just after midnight UTC) yesterday.
    let day = value("DateSent>").expect("a DateSent> filter");
    let today = time::OffsetDateTime::now_utc().date();
    let earlier = (time::OffsetDateTime::now_utc() - Duration::from_secs(600)).date();
    assert!(
        [today, earlier].iter().any(|d| d.to_string() == day),
        "DateSent> = {day}"
    );
}

#[tokio::test]
async fn a_send_becomes_visible_only_after_the_vendors_lag() {
    let config = FakeConfig {
        visibility_lag: Duration::from_secs(1),
        ..fake_config()
    };
    let vendor = vendor_with(config, |_| {}).await;
    let message = sms(&unique_text());
    let sent = vendor.adapter.send(&message, &key(&message)).await;
    let SendResult::Accepted {
        provider_ref: Some(sid),
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
        QueryResult::Accepted {
            provider_ref,
            evidence,
        } => {
            assert_eq!(provider_ref, Some(sid));
            assert!(evidence.detail.starts_with("found SM"), "{evidence:?}");
        }
        other => panic!("expected the delivery to be found, got {other:?}"),
    }
}

#[tokio::test]
async fn two_identical_texts_in_the_window_are_accepted_with_the_count_never_not_found() {
    let vendor = vendor().await;
    let text = unique_text();
    let first = sms(&text);
    let second = sms(&text);
    let SendResult::Accepted {
        provider_ref: Some(first_sid),
        ..
    } = vendor.adapter.send(&first, &key(&first)).await
    else {
        panic!("the first send is accepted");
    };
    vendor.adapter.send(&second, &key(&second)).await;
    assert_eq!(vendor.fake.ledger().deliveries_of(&text), 2);

    match vendor.adapter.query(&first, &key(&first)).await {
        QueryResult::Accepted {
            provider_ref,
            evidence,
        } => {
            assert_eq!(provider_ref, Some(first_sid), "the earliest is named");
            assert!(
                evidence
                    .detail
                    .starts_with("2 messages with this exact text"),
                "{evidence:?}"
            );
        }
        other => panic!("expected an acceptance with a count, got {other:?}"),
    }
}

#[tokio::test]
async fn another_text_or_another_number_is_not_this_send() {
    let vendor = vendor().await;
    let sent = sms(&unique_text());
    vendor.adapter.send(&sent, &key(&sent)).await;

    let other_text = sms(&unique_text());
    let mut other_number = sms(sent.text.as_deref().unwrap());
    other_number.to = "+14155550199".to_owned();
    for message in [other_text, other_number] {
        let lookup = vendor.adapter.query(&message, &key(&message)).await;
        assert!(
            matches!(lookup, QueryResult::NotFoundYet { .. }),
            "{lookup:?}"
        );
    }
}

#[tokio::test]
async fn the_lookup_follows_twilios_paging() {
    let config = FakeConfig {
        max_page_size: 2,
        ..fake_config()
    };
    let vendor = vendor_with(config, |_| {}).await;
    let target = sms(&unique_text());
    vendor.adapter.send(&target, &key(&target)).await;
    // Newer messages to the same number push the target to the third page.
    for _ in 0..5 {
        let other = sms(&unique_text());
        vendor.adapter.send(&other, &key(&other)).await;
    }

    let lookup = vendor.adapter.query(&target, &key(&target)).await;
    assert!(matches!(lookup, QueryResult::Accepted { .. }), "{lookup:?}");
    let pages = vendor
        .fake
        .received()
        .iter()
        .filter(|r| r.method == "GET")
        .count();
    assert_eq!(pages, 3);
}

#[tokio::test]
async fn a_messaging_service_send_is_found_by_its_service() {
    let vendor = vendor_with(fake_config(), |route| {
        route.from = None;
        route.messaging_service_sid = Some(SERVICE.to_owned());
    })
    .await;
    let message = sms(&unique_text());
    vendor.fake.set_faults([Fault::AcceptThenDrop]);
    let sent = vendor.adapter.send(&message, &key(&message)).await;
    assert!(matches!(sent, SendResult::Ambiguous { .. }), "{sent:?}");

    let lookup = vendor.adapter.query(&message, &key(&message)).await;
    assert!(matches!(lookup, QueryResult::Accepted { .. }), "{lookup:?}");
    // The list has no service filter: the adapter does not narrow by a sender it cannot know.
    let query = vendor
        .fake
        .received()
        .last()
        .unwrap()
        .query
        .clone()
        .unwrap();
    assert!(!query.contains("From="), "{query}");
}

#[tokio::test]
async fn a_failed_lookup_proves_nothing() {
    let vendor = vendor().await;
    let message = sms(&unique_text());
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
        FakeConfig::new(ACCOUNT, SecretString::from("another")),
        |_| {},
    )
    .await;
    let message = sms(&unique_text());
    match vendor.adapter.query(&message, &key(&message)).await {
        QueryResult::Unsupported { evidence } => {
            assert_eq!(evidence.status, Some(401));
            assert_eq!(evidence.vendor_code.as_deref(), Some("20003"));
        }
        other => panic!("expected a look-up that proves nothing, got {other:?}"),
    }
}
