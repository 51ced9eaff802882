//! The API key appears in no evidence, no error text and no `Debug` output — least of all when
//! Resend refuses it.

use herald_provider::{Adapter, SendResult};
use herald_resend::fake::FakeConfig;
use herald_resend::{ResendAdapter, ResendError, ResendRoute};
use secrecy::SecretString;

use crate::support::{
    CLIENT_TIMEOUT, SENDER, adapter, documented_message, install_crypto_provider, key, message,
    vendor_with,
};

const CANARY: &str = "canary-secret-7f3a";
const INVALID_API_KEY: &str =
    include_str!("../../../../fixtures/resend/errors/invalid_api_key.json");

fn assert_clean(text: &str) {
    assert!(!text.contains(CANARY), "the key leaked into: {text}");
}

#[tokio::test]
async fn a_wrong_api_key_is_a_permanent_rejection_that_does_not_repeat_the_key() {
    let vendor = vendor_with(FakeConfig::default(), CANARY, CLIENT_TIMEOUT).await;

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
    assert_eq!(evidence.vendor_code.as_deref(), Some("invalid_api_key"));
    assert!(
        evidence
            .detail
            .contains(&documented_message(INVALID_API_KEY))
    );
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
    let adapter = adapter(&format!("http://127.0.0.1:{port}"), CANARY, CLIENT_TIMEOUT);

    let result = adapter.send(&message(), &key()).await;

    assert!(matches!(result, SendResult::Rejected { .. }), "{result:?}");
    assert_clean(&format!("{result:?}"));
}

#[test]
fn routes_adapters_and_construction_errors_never_print_the_key() {
    install_crypto_provider();
    let route = ResendRoute {
        base_url: "https://api.resend.com".to_owned(),
        api_key: SecretString::from(CANARY),
        from: SENDER.to_owned(),
        timeout: CLIENT_TIMEOUT,
    };
    assert_clean(&format!("{route:?}"));
    let adapter = ResendAdapter::new(route.clone()).unwrap();
    assert_clean(&format!("{adapter:?}"));

    // A key that cannot be a header value is refused without being quoted.
    let broken = ResendRoute {
        api_key: SecretString::from(format!("{CANARY}\n")),
        ..route
    };
    let err = ResendAdapter::new(broken).unwrap_err();
    assert!(matches!(err, ResendError::ApiKey));
    assert_clean(&err.to_string());
    assert_clean(&format!("{err:?}"));
}
