//! Sending: the request Twilio receives, and how each documented answer is classified.

use std::time::Duration;

use herald_provider::{Adapter, Channel, SendResult};
use herald_provider_testkit::support::{
    Form, accepted_ref, field_names, install_crypto_provider, json, json_answer,
    permanent_rejection,
};
use herald_twilio::fake::FakeConfig;
use herald_twilio::{
    DEFAULT_BASE_URL, DEFAULT_VALIDITY_PERIOD, DEFAULT_VISIBILITY_LAG, LIST_ALLOWANCE,
    MIN_VALIDITY_PERIOD, TwilioAdapter, TwilioError,
};
use secrecy::SecretString;
use serde_json::Value;

use crate::support::{
    ACCOUNT, FROM, SERVICE, TO, TOKEN, fake_config, key, route, sms, unique_text, vendor,
    vendor_with,
};

#[tokio::test]
async fn a_created_message_is_accepted_with_its_sid_and_the_request_has_the_documented_shape() {
    let vendor = vendor_with(fake_config(), |route| {
        route.status_callback = Some("https://herald.example/twilio/status".to_owned());
    })
    .await;
    let text = unique_text();
    let message = sms(&text);

    let result = vendor.adapter.send(&message, &key(&message)).await;

    let sid = accepted_ref(&result);
    let evidence = result.evidence();
    assert_eq!(evidence.status, Some(201));
    assert!(evidence.detail.contains("status queued"), "{evidence:?}");

    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.deliveries_of(&text), 1);
    assert_eq!(ledger.deliveries[0].sid, sid);

    let received = vendor.fake.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!(request.method, "POST");
    assert_eq!(
        request.path,
        format!("/2010-04-01/Accounts/{ACCOUNT}/Messages.json")
    );
    assert_eq!(request.basic_user.as_deref(), Some(ACCOUNT));
    assert_eq!(
        request.content_type.as_deref(),
        Some("application/x-www-form-urlencoded")
    );
    let form = Form::parse(&request.body);
    assert_eq!(form.get("To"), Some(TO));
    assert_eq!(form.get("From"), Some(FROM));
    assert_eq!(form.get("Body"), Some(text.as_str()));
    assert_eq!(form.get("MessagingServiceSid"), None);
    // The route's URL, stamped with the key so that every status callback names it.
    assert_eq!(
        form.get("StatusCallback"),
        Some(
            format!(
                "https://herald.example/twilio/status?herald_key={}",
                key(&message)
            )
            .as_str()
        )
    );
    // Twilio drops what it has not sent within the route's period, which the default lag covers.
    assert_eq!(
        form.get("ValidityPeriod"),
        Some(DEFAULT_VALIDITY_PERIOD.as_secs().to_string().as_str())
    );
    assert!(DEFAULT_VALIDITY_PERIOD + LIST_ALLOWANCE <= DEFAULT_VISIBILITY_LAG);
    assert_eq!(form.get("SmartEncoded"), Some("false"));
}

#[tokio::test]
async fn a_messaging_service_route_names_the_service_instead_of_a_sender() {
    let vendor = vendor_with(fake_config(), |route| {
        route.from = None;
        route.messaging_service_sid = Some(SERVICE.to_owned());
    })
    .await;
    let message = sms(&unique_text());

    let result = vendor.adapter.send(&message, &key(&message)).await;
    assert!(matches!(result, SendResult::Accepted { .. }), "{result:?}");
    let form = Form::parse(&vendor.fake.received()[0].body);
    assert_eq!(form.get("MessagingServiceSid"), Some(SERVICE));
    assert_eq!(form.get("From"), None);
}

#[tokio::test]
async fn an_invalid_number_is_rejected_permanently_with_twilio_code_21211() {
    let vendor = vendor().await;
    let mut message = sms(&unique_text());
    message.to = "+15005550001".to_owned();

    let result = vendor.adapter.send(&message, &key(&message)).await;

    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.status, Some(400));
    assert_eq!(evidence.vendor_code.as_deref(), Some("21211"));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn a_recipient_who_replied_stop_is_rejected_permanently_with_code_21610() {
    let vendor = vendor().await;
    let mut message = sms(&unique_text());
    message.to = "+15005550004".to_owned();

    let result = vendor.adapter.send(&message, &key(&message)).await;

    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.vendor_code.as_deref(), Some("21610"));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn wrong_credentials_are_rejected_permanently_with_the_documented_401() {
    let vendor = vendor_with(
        FakeConfig::new(ACCOUNT, SecretString::from("another")),
        |_| {},
    )
    .await;
    let message = sms(&unique_text());

    let result = vendor.adapter.send(&message, &key(&message)).await;

    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.status, Some(401));
    assert_eq!(evidence.vendor_code.as_deref(), Some("20003"));
    let documented = json(include_str!("../../../../fixtures/twilio/error_20003.json"));
    assert_eq!(json(&evidence.detail), documented);
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn an_api_key_authenticates_in_place_of_the_account_token() {
    let config = FakeConfig {
        api_key: Some((
            "SK00000000000000000000000000000001".to_owned(),
            SecretString::from("key-secret"),
        )),
        ..fake_config()
    };
    let vendor = vendor_with(config, |route| {
        route.api_key_sid = Some("SK00000000000000000000000000000001".to_owned());
        route.auth_token = SecretString::from("key-secret");
    })
    .await;
    let message = sms(&unique_text());

    let result = vendor.adapter.send(&message, &key(&message)).await;
    assert!(matches!(result, SendResult::Accepted { .. }), "{result:?}");
    let received = vendor.fake.received();
    assert_eq!(
        received[0].basic_user.as_deref(),
        Some("SK00000000000000000000000000000001")
    );
    // The URL still names the account.
    assert!(received[0].path.contains(ACCOUNT));
}

#[tokio::test]
async fn what_cannot_be_an_sms_is_rejected_before_any_request() {
    let vendor = vendor().await;
    let mut email = sms(&unique_text());
    email.channel = Channel::Email;
    let mut empty = sms("");
    empty.text = None;
    let long = sms(&"x".repeat(1601));

    for message in [email, empty, long] {
        let result = vendor.adapter.send(&message, &key(&message)).await;
        assert_eq!(permanent_rejection(&result).stage, "request");
    }
    assert!(vendor.fake.received().is_empty());
}

#[tokio::test]
async fn a_text_of_exactly_1600_characters_is_sent() {
    let vendor = vendor().await;
    let message = sms(&"é".repeat(1600));
    let result = vendor.adapter.send(&message, &key(&message)).await;
    assert!(matches!(result, SendResult::Accepted { .. }), "{result:?}");
}

#[tokio::test]
async fn a_route_needs_an_account_exactly_one_sender_and_a_usable_base_url() {
    install_crypto_provider();
    let both = {
        let mut r = route("http://127.0.0.1:9".to_owned());
        r.messaging_service_sid = Some(SERVICE.to_owned());
        r
    };
    let neither = {
        let mut r = route("http://127.0.0.1:9".to_owned());
        r.from = None;
        r
    };
    assert!(matches!(TwilioAdapter::new(both), Err(TwilioError::Sender)));
    assert!(matches!(
        TwilioAdapter::new(neither),
        Err(TwilioError::Sender)
    ));

    let mut no_account = route("http://127.0.0.1:9".to_owned());
    no_account.account_sid = " ".to_owned();
    assert!(matches!(
        TwilioAdapter::new(no_account),
        Err(TwilioError::AccountSid)
    ));

    for url in ["not a url", "mailto:someone@example.com"] {
        assert!(matches!(
            TwilioAdapter::new(route(url.to_owned())),
            Err(TwilioError::BaseUrl { .. })
        ));
    }
    let mut no_lag = route("http://127.0.0.1:9".to_owned());
    no_lag.visibility_lag = Duration::ZERO;
    assert!(matches!(
        TwilioAdapter::new(no_lag),
        Err(TwilioError::VisibilityLag)
    ));
}

#[tokio::test]
async fn capabilities_declare_the_query_lag_and_no_idempotency() {
    let vendor = vendor_with(fake_config(), |route| {
        route.visibility_lag = Duration::from_secs(90);
        route.validity_period = Duration::from_secs(60);
    })
    .await;
    let capabilities = vendor.adapter.capabilities();
    assert_eq!(capabilities.idempotency_window, None);
    assert_eq!(
        capabilities.query_visibility_lag,
        Some(Duration::from_secs(90))
    );
    assert_eq!(capabilities.max_payload_bytes, Some(1600));
    let message = sms(&unique_text());
    vendor.adapter.send(&message, &key(&message)).await;
    let form = Form::parse(&vendor.fake.received()[0].body);
    assert_eq!(form.get("ValidityPeriod"), Some("60"));
}

#[tokio::test]
async fn a_notification_that_expires_sooner_is_kept_by_twilio_only_until_then() {
    let vendor = vendor_with(fake_config(), |route| {
        route.visibility_lag = Duration::from_secs(90);
        route.validity_period = Duration::from_secs(60);
    })
    .await;
    let mut soon = sms(&unique_text());
    soon.expires_at = Some(time::OffsetDateTime::now_utc() + Duration::from_secs(20));
    let mut later = sms(&unique_text());
    later.expires_at = Some(time::OffsetDateTime::now_utc() + Duration::from_secs(3600));
    for message in [&soon, &later] {
        vendor.adapter.send(message, &key(message)).await;
    }
    let periods: Vec<u64> = vendor
        .fake
        .received()
        .iter()
        .map(|request| {
            Form::parse(&request.body)
                .get("ValidityPeriod")
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    // The seconds left when each attempt was made, and never more than the route's own period.
    assert!((18..=20).contains(&periods[0]), "{periods:?}");
    assert_eq!(periods[1], 60);
}

/// A lag short enough to settle lost answers quickly against a test double used to cut every
/// SMS's `ValidityPeriod` to a second; the period is its own setting now.
#[tokio::test]
async fn a_short_lag_never_shortens_how_long_twilio_may_keep_a_message() {
    let vendor = vendor_with(fake_config(), |route| {
        route.visibility_lag = Duration::from_secs(5);
    })
    .await;
    let mut message = sms(&unique_text());
    message.expires_at = Some(time::OffsetDateTime::now_utc() + Duration::from_secs(120));
    vendor.adapter.send(&message, &key(&message)).await;
    let form = Form::parse(&vendor.fake.received()[0].body);
    let period: u64 = form.get("ValidityPeriod").unwrap().parse().unwrap();
    // All of the notification's two minutes (less the seconds the send took), not one second.
    assert!((118..=120).contains(&period), "{period}");
}

/// Against Twilio itself a look-up's proof of absence needs the lag to cover the period and the
/// list's catch-up; a route that breaks that, or sets a period Twilio or real traffic cannot
/// live with, is refused before it sends. Nothing here reaches the network.
#[tokio::test]
async fn against_twilio_the_lag_must_cover_the_validity_period_and_the_period_has_a_floor() {
    install_crypto_provider();
    let twilio = |lag: Duration, period: Duration| {
        let mut route = route(DEFAULT_BASE_URL.to_owned());
        route.visibility_lag = lag;
        route.validity_period = period;
        TwilioAdapter::new(route)
    };
    let err = twilio(Duration::from_secs(5), DEFAULT_VALIDITY_PERIOD).unwrap_err();
    assert!(
        matches!(
            err,
            TwilioError::LagUnderValidity {
                lag_ms: 5000,
                validity_s: 570,
                needed_ms: 600_000
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("at least 600000"), "{err}");
    // The shortest lag that covers a period, and the floor's own.
    assert!(
        twilio(
            DEFAULT_VALIDITY_PERIOD + LIST_ALLOWANCE,
            DEFAULT_VALIDITY_PERIOD
        )
        .is_ok()
    );
    assert!(twilio(MIN_VALIDITY_PERIOD + LIST_ALLOWANCE, MIN_VALIDITY_PERIOD).is_ok());
    for seconds in [0, 59, 36_001] {
        let err = twilio(DEFAULT_VISIBILITY_LAG * 100, Duration::from_secs(seconds)).unwrap_err();
        assert!(
            matches!(err, TwilioError::ValidityPeriod(s) if s == seconds),
            "{err}"
        );
    }
}

/// The fake is checked against the docs too: it takes the documented request and answers with
/// every field of the documented answers.
#[tokio::test]
async fn the_fake_takes_the_documented_request_and_answers_in_the_documented_shape() {
    let vendor = vendor().await;
    let documented = json(include_str!(
        "../../../../fixtures/twilio/create_request.json"
    ));
    let mut fields: Vec<(String, String)> = Vec::new();
    for (name, value) in documented.as_object().unwrap() {
        match value {
            Value::Array(items) => {
                for item in items {
                    fields.push((name.clone(), item.as_str().unwrap().to_owned()));
                }
            }
            other => fields.push((name.clone(), other.as_str().unwrap().to_owned())),
        }
    }
    let http = reqwest::Client::new();
    let url = format!(
        "{}/2010-04-01/Accounts/{ACCOUNT}/Messages.json",
        vendor.fake.base_url()
    );
    let created = http
        .post(&url)
        .basic_auth(ACCOUNT, Some(TOKEN))
        .form(&fields)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    let expected = json(include_str!(
        "../../../../fixtures/twilio/create_response.json"
    ));
    assert_eq!(field_names(&created), field_names(&expected));

    let listed = json_answer(
        http.get(&url)
            .basic_auth(ACCOUNT, Some(TOKEN))
            .query(&[("To", "+14155552345"), ("PageSize", "2")]),
    )
    .await;
    let expected = json(include_str!(
        "../../../../fixtures/twilio/list_response.json"
    ));
    assert_eq!(field_names(&listed), field_names(&expected));
    assert_eq!(
        field_names(&listed["messages"][0]),
        field_names(&expected["messages"][0])
    );
}
