//! The API key appears in no route, adapter or construction error, not even when the key
//! itself is malformed. What the adapter answers and keeps as evidence is the conformance
//! kit's to check (`conformance.rs`).

use herald_onesignal::{OneSignalAdapter, OneSignalError, OneSignalRoute};
use secrecy::SecretString;

use crate::support::{CLIENT_TIMEOUT, install_crypto_provider};

const CANARY: &str = "canary-secret-7f3a";
const APP_ID: &str = "8250eaf6-1a58-489e-b136-7c74a864b434";

fn assert_clean(text: &str) {
    assert!(!text.contains(CANARY), "the key leaked into: {text}");
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
