//! Each documented APNs answer against the fake over HTTP/2 and TLS, as the adapter classifies
//! it and as the ledger records it: the request's shape, the provider token's life, the device
//! refusals and their suppression, and the protocol itself.

use std::sync::Arc;
use std::time::Duration;

use herald_apns::fake::{FakeConfig, Fault, Faults, TestKey};
use herald_apns::token::MIN_UPDATE_INTERVAL;
use herald_apns::{ApnsAdapter, ApnsError, CollapseId, PushType, Settings, apns_id_for};
use herald_provider::settings::{RouteContext, RouteSettings};
use herald_provider::{Adapter, Attachment, Channel, ProviderKey};
use herald_provider_testkit::support::{
    accepted_ref, install_crypto_provider, json, permanent_rejection, rejection, unique_key,
};
use serde_json::json;

use crate::support::{DEVICE, TempFile, adapter, message, route_for, vendor, vendor_with};

const PUSH: &str = include_str!("../../../../fixtures/apns/push.request.json");

#[tokio::test]
async fn a_push_goes_over_http2_with_herald_key_as_apns_id_and_the_routes_headers() {
    let config = FakeConfig::default();
    let (team_id, key_id, topic) = (
        config.team_id.clone(),
        config.key_id.clone(),
        config.topic.clone(),
    );
    let vendor = vendor_with(config, |route| {
        route.priority = Some(10);
        route.collapse_id = CollapseId::Notification;
    })
    .await;
    let key = unique_key();
    let mut push = message();
    let expires_at = time::OffsetDateTime::now_utc() + time::Duration::hours(2);
    push.expires_at = Some(expires_at);

    let result = vendor.adapter.send(&push, &key).await;

    assert_eq!(
        accepted_ref(&result),
        key.as_str(),
        "the provider_ref is the apns-id"
    );
    assert_eq!(result.evidence().status, Some(200));
    let request = vendor.fake.last_request().expect("the fake saw the push");
    assert_eq!(request.version, reqwest::Version::HTTP_2);
    assert_eq!(request.device_token, DEVICE);
    assert_eq!(request.apns_id.as_deref(), Some(key.as_str()));
    assert_eq!(request.topic.as_deref(), Some(topic.as_str()));
    assert_eq!(request.push_type.as_deref(), Some("alert"));
    assert_eq!(request.priority.as_deref(), Some("10"));
    let expiration = expires_at.unix_timestamp().to_string();
    assert_eq!(request.expiration.as_deref(), Some(expiration.as_str()));
    assert_eq!(
        request.collapse_id.as_deref(),
        Some(push.notification_id.as_str())
    );
    assert_eq!(request.content_type.as_deref(), Some("application/json"));
    assert!(
        request
            .user_agent
            .as_deref()
            .is_some_and(|ua| ua.starts_with("herald-apns/")),
        "{request:?}"
    );
    assert_eq!(request.auth_scheme.as_deref(), Some("bearer"));
    assert_eq!(request.kid.as_deref(), Some(key_id.as_str()));
    let claims = request.claims.expect("the fake verified the token");
    assert_eq!(claims.iss, team_id);
    // Apple's documented alert shape, with herald's title and body only.
    let documented = json(PUSH);
    assert!(documented["aps"]["alert"].get("title").is_some());
    assert!(documented["aps"]["alert"].get("body").is_some());
    assert_eq!(
        request.body,
        json!({"aps": {"alert": {"title": "Your code", "body": "123456"}}})
    );
    assert_eq!(vendor.fake.ledger().deliveries_of(key.as_str()), 1);
    assert!(vendor.adapter.http2_only());
}

#[tokio::test]
async fn a_route_without_priority_or_collapse_id_sends_neither_and_no_expiry_no_expiration() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut untitled = message();
    untitled.subject = None;

    accepted_ref(&vendor.adapter.send(&untitled, &unique_key()).await);

    let request = vendor.fake.last_request().unwrap();
    assert_eq!(request.priority, None);
    assert_eq!(request.collapse_id, None);
    assert_eq!(request.expiration, None);
    assert_eq!(request.push_type.as_deref(), Some("alert"));
    assert_eq!(request.body, json!({"aps": {"alert": {"body": "123456"}}}));
}

#[tokio::test]
async fn one_provider_token_serves_every_send() {
    let vendor = vendor(FakeConfig::default()).await;

    for _ in 0..5 {
        accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    }

    assert_eq!(vendor.fake.tokens_seen(), 1);
    assert_eq!(vendor.adapter.provider_tokens_minted(), 1);
    assert_eq!(vendor.fake.ledger().total(), 5);
}

// Two worker threads, so that sends do race for the first token (on one thread they would take
// turns, and share it whatever the adapter did); the barrier starts them together. The cache's
// own lock is proven under eight threads in `token.rs`; this proves the adapter goes through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_sends_share_one_token() {
    let vendor = Arc::new(vendor(FakeConfig::default()).await);
    let start = Arc::new(tokio::sync::Barrier::new(8));
    let sends: Vec<_> = (0..8)
        .map(|_| {
            let (vendor, start) = (Arc::clone(&vendor), Arc::clone(&start));
            tokio::spawn(async move {
                start.wait().await;
                vendor.adapter.send(&message(), &unique_key()).await
            })
        })
        .collect();
    for send in sends {
        accepted_ref(&send.await.unwrap());
    }
    assert_eq!(vendor.adapter.provider_tokens_minted(), 1);
    assert_eq!(vendor.fake.tokens_seen(), 1);
}

#[tokio::test]
async fn an_expired_provider_token_is_replaced_once_and_the_push_delivered() {
    let vendor = vendor(FakeConfig::default()).await;
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    vendor
        .fake
        .set_faults(Faults::next([Fault::ExpiredProviderToken]));
    let key = unique_key();

    let result = vendor.adapter.send(&message(), &key).await;

    assert_eq!(accepted_ref(&result), key.as_str());
    assert!(
        result
            .evidence()
            .detail
            .starts_with("sent again with a new provider token after 403 ExpiredProviderToken"),
        "{result:?}"
    );
    assert_eq!(vendor.adapter.provider_tokens_minted(), 2);
    assert_eq!(vendor.fake.tokens_seen(), 2);
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.requests, 3, "the refused request and its resend");
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);

    // The new token serves the next sends; the refused one is not used again.
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    assert_eq!(vendor.adapter.provider_tokens_minted(), 2);
    assert_eq!(vendor.fake.tokens_seen(), 2);
}

#[tokio::test]
async fn no_time_left_for_the_send_once_more_is_a_transient_refusal() {
    // APNs refuses the token, but the answer comes after the process stood still past the
    // route's timeout (the handler blocks the one thread the test runs on, the adapter's timers
    // with it): it is read on waking, and no time is left to send again.
    let timeout = Duration::from_millis(300);
    let requests = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = Arc::clone(&requests);
    let refusing = axum::Router::new().route(
        "/3/device/{device}",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::sleep(timeout + Duration::from_millis(400));
            let apns_id = headers.get("apns-id").cloned();
            async move {
                let mut answer = axum::response::IntoResponse::into_response((
                    axum::http::StatusCode::FORBIDDEN,
                    r#"{"reason":"ExpiredProviderToken"}"#,
                ));
                if let Some(apns_id) = apns_id {
                    answer.headers_mut().insert("apns-id", apns_id);
                }
                answer
            }
        }),
    );
    let server = herald_provider::fake::serve(refusing).await.unwrap();
    let mut route = route_for(&FakeConfig::default(), &server.base_url());
    route.timeout = timeout;
    let adapter = adapter(route);

    let (permanent, retry_after, evidence) =
        rejection(adapter.send(&message(), &unique_key()).await);

    assert!(!permanent, "{evidence:?}");
    assert_eq!(retry_after, None);
    assert_eq!(evidence.status, Some(403));
    assert_eq!(
        evidence.vendor_code.as_deref(),
        Some("ExpiredProviderToken")
    );
    assert!(
        evidence.detail.starts_with("not sent again, no time left"),
        "{evidence:?}"
    );
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
    // The next attempt carries the new token.
    assert_eq!(adapter.provider_tokens_minted(), 2);
}

#[tokio::test]
async fn a_token_apns_keeps_refusing_is_a_refusal_of_the_route_and_no_third_token_is_made() {
    let config = FakeConfig::default();
    // The route signs with a key APNs does not know for this key id.
    let vendor = vendor_with(config, |route| {
        route.signing_key = TestKey::generate().private_pem.into();
    })
    .await;

    let first = vendor.adapter.send(&message(), &unique_key()).await;
    let evidence = permanent_rejection(&first);
    assert_eq!(evidence.status, Some(403));
    assert_eq!(
        evidence.vendor_code.as_deref(),
        Some("InvalidProviderToken")
    );
    assert!(
        evidence
            .detail
            .starts_with("sent again with a new provider token")
    );
    assert_eq!(vendor.adapter.provider_tokens_minted(), 2);

    // Within 20 minutes of the token made on APNs' word, its refusal stands.
    let second = vendor.adapter.send(&message(), &unique_key()).await;
    assert_eq!(permanent_rejection(&second).status, Some(403));
    assert_eq!(vendor.adapter.provider_tokens_minted(), 2);
    let ledger = vendor.fake.ledger();
    assert_eq!(ledger.requests, 3);
    assert_eq!(ledger.total(), 0);
}

#[tokio::test]
async fn an_unregistered_device_is_a_permanent_rejection_that_suppresses_it() {
    let vendor = vendor(FakeConfig {
        unregistered: vec![DEVICE.to_owned()],
        ..FakeConfig::default()
    })
    .await;

    let result = vendor.adapter.send(&message(), &unique_key()).await;

    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.status, Some(410));
    assert_eq!(evidence.vendor_code.as_deref(), Some("Unregistered"));
    let body = json(&evidence.detail);
    assert!(body["timestamp"].as_u64().is_some(), "{body}");
    assert!(vendor.adapter.unsubscribed(evidence));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn a_bad_device_token_is_permanent_and_suppresses_nothing() {
    let vendor = vendor(FakeConfig {
        faults: Faults::next([Fault::BadDeviceToken]),
        ..FakeConfig::default()
    })
    .await;

    let result = vendor.adapter.send(&message(), &unique_key()).await;

    let evidence = permanent_rejection(&result);
    assert_eq!(evidence.status, Some(400));
    assert_eq!(evidence.vendor_code.as_deref(), Some("BadDeviceToken"));
    assert!(!vendor.adapter.unsubscribed(evidence));
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn too_many_requests_for_a_device_is_transient_and_does_not_hold_the_route() {
    let vendor = vendor(FakeConfig {
        faults: Faults::next([Fault::RateLimited]),
        ..FakeConfig::default()
    })
    .await;

    let (permanent, retry_after, evidence) =
        rejection(vendor.adapter.send(&message(), &unique_key()).await);

    assert!(!permanent);
    assert_eq!(
        retry_after, None,
        "no Retry-After: this device's own back-off"
    );
    assert_eq!(evidence.status, Some(429));
    assert_eq!(evidence.vendor_code.as_deref(), Some("TooManyRequests"));
    assert_eq!(vendor.fake.ledger().total(), 0);
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
}

#[tokio::test]
async fn too_many_token_updates_holds_the_route_for_twenty_minutes() {
    let vendor = vendor(FakeConfig {
        faults: Faults::next([Fault::TooManyProviderTokenUpdates]),
        ..FakeConfig::default()
    })
    .await;

    let (permanent, retry_after, evidence) =
        rejection(vendor.adapter.send(&message(), &unique_key()).await);

    assert!(!permanent);
    assert_eq!(retry_after, Some(MIN_UPDATE_INTERVAL));
    assert_eq!(
        evidence.vendor_code.as_deref(),
        Some("TooManyProviderTokenUpdates")
    );
    assert_eq!(vendor.fake.ledger().total(), 0);
}

#[tokio::test]
async fn the_fake_refuses_http1_so_the_adapters_pushes_went_over_http2() {
    let vendor = vendor(FakeConfig::default()).await;
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    install_crypto_provider();
    let ca = reqwest::Certificate::from_pem(vendor.fake.ca_pem().as_bytes()).unwrap();
    let url = format!("{}/3/device/{DEVICE}", vendor.fake.base_url());

    // Offering only http/1.1 in ALPN: the handshake fails, nothing reaches a handler.
    let http1 = reqwest::Client::builder()
        .add_root_certificate(ca.clone())
        .http1_only()
        .build()
        .unwrap();
    let refused = http1.post(&url).body("{}").send().await.unwrap_err();
    assert!(refused.is_connect(), "{refused:?}");

    // The same CA over HTTP/2 is answered (without a token: 403 MissingProviderToken).
    let http2 = reqwest::Client::builder()
        .add_root_certificate(ca)
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let answer = http2.post(&url).body("{}").send().await.unwrap();
    assert_eq!(answer.version(), reqwest::Version::HTTP_2);
    assert_eq!(answer.status(), 403);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body, json!({"reason": "MissingProviderToken"}));

    assert_eq!(vendor.fake.ledger().total(), 1, "only the adapter's push");
}

#[tokio::test]
async fn a_fallback_routes_key_is_sent_as_its_uuid_v5() {
    let vendor = vendor(FakeConfig::default()).await;
    let key = ProviderKey::new(format!("{}-f1", unique_key()));

    let id = accepted_ref(&vendor.adapter.send(&message(), &key).await);

    assert_eq!(id, apns_id_for(&key));
    assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 5);
    assert_eq!(
        vendor.fake.last_request().unwrap().apns_id.as_deref(),
        Some(id.as_str())
    );
}

#[tokio::test]
async fn what_apns_would_refuse_is_refused_before_anything_is_sent() {
    let vendor = vendor(FakeConfig::default()).await;
    let mut not_hex = message();
    not_hex.to = "../../admin?x=1".to_owned();
    let mut empty = message();
    empty.subject = None;
    empty.text = None;
    let mut large = message();
    large.text = Some("x".repeat(herald_apns::MAX_PAYLOAD_BYTES));
    // As FCM's: another channel, tags, attachments.
    let mut email = message();
    email.channel = Channel::Email;
    let mut tagged = message();
    tagged
        .email
        .tags
        .insert("kind".to_owned(), "otp".to_owned());
    let mut attached = message();
    attached.email.attachments.push(Attachment {
        filename: "code.txt".to_owned(),
        content_type: "text/plain".to_owned(),
        size: 6,
        sha256: "8d969eef6ecad3c29a3a629280e686cf0c3f5d5a86aff3ca12020c923adc6c92".to_owned(),
    });

    for push in [not_hex, empty, large, email, tagged, attached] {
        let result = vendor.adapter.send(&push, &unique_key()).await;
        let evidence = permanent_rejection(&result);
        assert_eq!(evidence.stage, "request", "{evidence:?}");
    }
    assert_eq!(vendor.fake.ledger().requests, 0);
    assert_eq!(vendor.fake.connections(), 0, "not even a connection");
}

#[tokio::test]
async fn a_route_from_settings_trusts_the_fakes_ca_from_its_root_certificate_file() {
    let config = FakeConfig::default();
    let key_file = TempFile::with("AuthKey.p8", &config.key.private_pem);
    let (team_id, key_id, topic) = (
        config.team_id.clone(),
        config.key_id.clone(),
        config.topic.clone(),
    );
    let fake = herald_apns::fake::spawn(config).await.unwrap();
    let ca_file = TempFile::with("ca.pem", fake.ca_pem());
    let settings: Settings = serde_json::from_value(json!({
        "base_url": fake.base_url(),
        "team_id": team_id,
        "key_id": key_id,
        "signing_key": {"file": key_file.0},
        "topic": topic,
        "push_type": "alert",
        "priority": 5,
        "collapse_id": "notification",
        "root_certificate": ca_file.0,
    }))
    .unwrap();
    assert_eq!(settings.channels(), &[Channel::Push]);
    let secrets: Vec<String> = settings.secrets().into_iter().map(|(k, _)| k).collect();
    assert_eq!(secrets, ["signing_key"]);
    assert_eq!(
        settings.endpoint(),
        Some(fake.base_url().trim_start_matches("https://").to_owned())
    );
    install_crypto_provider();
    let context = RouteContext {
        name: "ios",
        timeout: Duration::from_secs(10),
    };
    let adapter = settings.adapter(&context).await.unwrap();
    let key = unique_key();

    assert_eq!(
        accepted_ref(&adapter.send(&message(), &key).await),
        key.as_str()
    );
    assert_eq!(fake.last_request().unwrap().priority.as_deref(), Some("5"));

    // Without the CA the fake's certificate is not trusted: refused before anything is sent.
    let untrusted: Settings = serde_json::from_value(json!({
        "base_url": fake.base_url(),
        "team_id": "DEF123GHIJ",
        "key_id": "ABC123DEFG",
        "signing_key": {"file": key_file.0},
        "topic": "com.example.herald",
    }))
    .unwrap();
    let adapter = untrusted.adapter(&context).await.unwrap();
    let (permanent, _, evidence) = rejection(adapter.send(&message(), &unique_key()).await);
    assert!(!permanent);
    assert_eq!(evidence.stage, "connect", "{evidence:?}");
    assert_eq!(fake.ledger().total(), 1);
}

#[test]
fn settings_refuse_unknown_keys_and_name_the_key_at_fault() {
    let unknown = serde_json::from_value::<Settings>(json!({
        "team_id": "DEF123GHIJ", "key_id": "ABC123DEFG", "signing_key": "x",
        "topic": "com.example.herald", "collapse": "notification",
    }));
    assert!(unknown.unwrap_err().to_string().contains("collapse"));
    let bad_type = serde_json::from_value::<Settings>(json!({
        "team_id": "DEF123GHIJ", "key_id": "ABC123DEFG", "signing_key": "x",
        "topic": "com.example.herald", "push_type": "telegram",
    }));
    assert!(bad_type.is_err());
}

#[test]
fn a_route_that_apns_would_refuse_is_refused_when_it_is_built() {
    install_crypto_provider();
    let config = FakeConfig::default();
    let built = |tweak: &dyn Fn(&mut herald_apns::ApnsRoute)| {
        let mut route = route_for(&config, herald_apns::DEFAULT_BASE_URL);
        tweak(&mut route);
        ApnsAdapter::new(route)
    };
    assert!(matches!(
        built(&|r| r.base_url = "api.push.apple.com".into()),
        Err(ApnsError::BaseUrl { .. })
    ));
    assert!(matches!(
        built(&|r| r.team_id = "TEAM".into()),
        Err(ApnsError::TeamId(_))
    ));
    assert!(matches!(
        built(&|r| r.key_id = "ABC123DEF!".into()),
        Err(ApnsError::KeyId(_))
    ));
    assert!(matches!(
        built(&|r| r.topic = "com.ex ample".into()),
        Err(ApnsError::Topic(_))
    ));
    assert!(matches!(
        built(&|r| r.priority = Some(7)),
        Err(ApnsError::Priority(7))
    ));
    assert!(matches!(
        built(&|r| r.push_type = PushType::Background),
        Err(ApnsError::BackgroundPriority)
    ));
    assert!(matches!(
        built(&|r| r.extra_root_certificate_pem = Some("not a certificate".into())),
        Err(ApnsError::Certificate(_))
    ));
    assert!(matches!(
        built(&|r| r.signing_key = "not a key".to_owned().into()),
        Err(ApnsError::SigningKey(_))
    ));
    assert!(
        built(&|r| {
            r.push_type = PushType::Background;
            r.priority = Some(5);
        })
        .is_ok()
    );
    // The sandbox is a base URL like any other.
    assert!(built(&|r| r.base_url = herald_apns::SANDBOX_BASE_URL.into()).is_ok());
}

#[test]
fn capabilities_state_no_dedup_no_look_up_and_apples_4096_bytes() {
    let adapter = adapter(route_for(
        &FakeConfig::default(),
        herald_apns::DEFAULT_BASE_URL,
    ));
    let capabilities = adapter.capabilities();
    assert_eq!(capabilities.idempotency_window, None);
    assert_eq!(capabilities.query_visibility_lag, None);
    assert_eq!(capabilities.max_payload_bytes, Some(4096));
    assert!(!capabilities.tags && !capabilities.attachments);
}
