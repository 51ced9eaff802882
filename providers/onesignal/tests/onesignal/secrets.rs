//! The API key appears in no evidence, no error text and no `Debug` output — least of all when
//! OneSignal refuses it.

use herald_onesignal::fake::FakeConfig;
use herald_onesignal::{OneSignalAdapter, OneSignalError, OneSignalRoute};
use herald_provider::{Adapter, SendResult};
use secrecy::SecretString;

use crate::support::{
    CLIENT_TIMEOUT, adapter, documented_error, install_crypto_provider, key, message, vendor_with,
};

const CANARY: &str = "canary-secret-7f3a";
const APP_ID: &str = "8250eaf6-1a58-489e-b136-7c74a864b434";
const ACCESS_DENIED: &str =
    include_str!("../../../../fixtures/onesignal/errors/access-denied.403.json");

fn assert_clean(text: &str) {
    assert!(!text.contains(CANARY), "the key leaked into: {text}");
}

#[tokio::test]
async fn a_wrong_api_key_is_a_permanent_rejection_that_does_not_repeat_the_key() {
    let config = FakeConfig::default();
    let app_id = config.app_id.clone();
    let vendor = vendor_with(config, &app_id, CANARY, CLIENT_TIMEOUT).await;

    let result = vendor.adapter.send(&message(), &key()).await;

    let SendResult::Rejected {
        permanent: true,
        evidence,
        ..
    } = &result
    else {
        panic!("expected a permanent rejection, got {result:?}");
    };
    assert_eq!(evidence.status, Some(403));
    assert_eq!(evidence.vendor_code, Some(documented_error(ACCESS_DENIED)));
    assert_clean(&format!("{result:?}"));
    assert_clean(&serde_json::to_string(evidence).unwrap());
    assert_clean(&format!("{:?}", vendor.adapter));
    assert_eq!(vendor.fake.ledger().total_deliveries(), 0);
    // The fake checked the key, but keeps only the scheme.
    assert_clean(&format!("{:?}", vendor.fake.last_request()));
}

#[tokio::test]
async fn a_transport_failure_does_not_repeat_the_key() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let adapter = adapter(
        &format!("http://127.0.0.1:{port}"),
        APP_ID,
        CANARY,
        CLIENT_TIMEOUT,
    );

    let result = adapter.send(&message(), &key()).await;

    assert!(matches!(result, SendResult::Rejected { .. }), "{result:?}");
    assert_clean(&format!("{result:?}"));
}

#[test]
fn routes_adapters_and_construction_errors_never_print_the_key() {
    install_crypto_provider();
    let route = OneSignalRoute {
        base_url: "https://api.onesignal.com".to_owned(),
        app_id: APP_ID.to_owned(),
        api_key: SecretString::from(CANARY),
        timeout: CLIENT_TIMEOUT,
    };
    assert_clean(&format!("{route:?}"));
    let adapter = OneSignalAdapter::new(route.clone()).unwrap();
    assert_clean(&format!("{adapter:?}"));

    // A key that cannot be a header value is refused without being quoted.
    let broken = OneSignalRoute {
        api_key: SecretString::from(format!("{CANARY}\n")),
        ..route
    };
    let err = OneSignalAdapter::new(broken).unwrap_err();
    assert!(matches!(err, OneSignalError::ApiKey));
    assert_clean(&err.to_string());
    assert_clean(&format!("{err:?}"));
}
