//! Looking a send up: what the adapter asks Twilio, and what each answer proves.

use std::time::Duration;

use herald_provider::{Adapter, QueryResult};
use herald_provider_testkit::ledger;
use herald_provider_testkit::support::{
    Form, accepted_ref, ambiguous, assert_not_found_yet, unsupported,
};
use herald_twilio::fake::{FakeConfig, Fault};
use secrecy::SecretString;

use crate::support::{
    ACCOUNT, FROM, SERVICE, TO, fake_config, key, sms, unique_text, vendor, vendor_with,
};

#[tokio::test]
async fn the_query_asks_twilio_for_this_number_sender_and_days() {
    let vendor = vendor().await;
    let message = sms(&unique_text());
    assert_not_found_yet(&vendor.adapter.query(&message, &key(&message)).await);

    let received = vendor.fake.received();
    let request = &received[0];
    assert_eq!(request.method, "GET");
    assert_eq!(
        request.path,
        format!("/2010-04-01/Accounts/{ACCOUNT}/Messages.json")
    );
    assert_eq!(request.basic_user.as_deref(), Some(ACCOUNT));
    let query = Form::parse(request.query.as_deref().expect("a query"));
    assert_eq!(query.get("To"), Some(TO));
    assert_eq!(query.get("From"), Some(FROM));
    assert_eq!(query.get("PageSize"), Some("1000"));
    // The notification was created just now: its window starts ten minutes earlier, which is
    // today or (just after midnight UTC) yesterday.
    let day = query.get("DateSent>").expect("a DateSent> filter");
    let today = time::OffsetDateTime::now_utc().date();
    let earlier = (time::OffsetDateTime::now_utc() - Duration::from_secs(600)).date();
    assert!(
        [today, earlier].iter().any(|d| d.to_string() == day),
        "DateSent> = {day}"
    );
}

#[tokio::test]
async fn a_send_is_listed_among_look_alikes_only_after_the_vendors_lag() {
    let lag = Duration::from_secs(1);
    let config = FakeConfig {
        visibility_lag: lag,
        ..fake_config()
    };
    let vendor = vendor_with(config, |_| {}).await;
    let message = sms(&unique_text());
    let key = key(&message);

    match ledger::visible_only_after_the_lag(&vendor.adapter, &message, &key, lag).await {
        QueryResult::LookAlikes { evidence, .. } => {
            assert!(evidence.detail.starts_with("1 message(s)"), "{evidence:?}");
        }
        other => panic!("expected the delivery to be found, got {other:?}"),
    }
}

#[tokio::test]
async fn two_identical_texts_are_both_listed_as_look_alikes_oldest_first() {
    let vendor = vendor().await;
    let text = unique_text();
    let first = sms(&text);
    let second = sms(&text);
    let first_sid = accepted_ref(&vendor.adapter.send(&first, &key(&first)).await);
    let second_sid = accepted_ref(&vendor.adapter.send(&second, &key(&second)).await);
    assert_eq!(vendor.fake.ledger().deliveries_of(&text), 2);

    // Nothing in Twilio's records says whose each is: the look-up of either finds both.
    for message in [&first, &second] {
        match vendor.adapter.query(message, &key(message)).await {
            QueryResult::LookAlikes { refs, evidence, .. } => {
                assert_eq!(refs, [first_sid.clone(), second_sid.clone()]);
                assert!(evidence.detail.starts_with("2 message(s)"), "{evidence:?}");
            }
            other => panic!("expected both look-alikes, got {other:?}"),
        }
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
        assert_not_found_yet(&vendor.adapter.query(&message, &key(&message)).await);
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
    assert!(
        matches!(lookup, QueryResult::LookAlikes { .. }),
        "{lookup:?}"
    );
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
    ambiguous(&vendor.adapter.send(&message, &key(&message)).await);

    let lookup = vendor.adapter.query(&message, &key(&message)).await;
    assert!(
        matches!(lookup, QueryResult::LookAlikes { .. }),
        "{lookup:?}"
    );
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
    vendor.fake.set_lookup_faults([
        Fault::ErrorAfterProcessing,
        Fault::UnavailableBeforeProcessing,
        Fault::RateLimited,
        Fault::AcceptThenDrop,
    ]);

    let found =
        ledger::failed_lookups_prove_nothing(&vendor.adapter, &message, &key(&message), 4).await;
    assert!(matches!(found, QueryResult::LookAlikes { .. }), "{found:?}");
}

#[tokio::test]
async fn the_lookup_searches_for_the_stored_request_whatever_the_route_says_now() {
    let vendor = vendor().await;
    let message = sms(&unique_text());
    let request = vendor
        .adapter
        .prepare(&message, &key(&message))
        .expect("an SMS is prepared");
    vendor.fake.set_faults([Fault::AcceptThenDrop]);
    let sent = vendor
        .adapter
        .send_prepared(&request, &message, &key(&message))
        .await;
    ambiguous(&sent);

    // The operator changes the route's sender after the send: the look-up must still ask for
    // the sender the message went out from, or it would take the send for one never made.
    let changed = herald_twilio::TwilioAdapter::new(herald_twilio::TwilioRoute {
        from: Some("+15005550001".to_owned()),
        ..crate::support::route(vendor.fake.base_url())
    })
    .unwrap();
    let lookup = changed
        .query_prepared(&request, &message, &key(&message))
        .await;
    assert!(
        matches!(&lookup, QueryResult::LookAlikes { refs, .. } if refs.len() == 1),
        "{lookup:?}"
    );
}

#[tokio::test]
async fn a_lookup_with_wrong_credentials_proves_nothing() {
    let vendor = vendor_with(
        FakeConfig::new(ACCOUNT, SecretString::from("another")),
        |_| {},
    )
    .await;
    let message = sms(&unique_text());
    let lookup = vendor.adapter.query(&message, &key(&message)).await;

    let evidence = unsupported(&lookup);
    assert_eq!(evidence.status, Some(401));
    assert_eq!(evidence.vendor_code.as_deref(), Some("20003"));
}
