//! The API key appears in no route, adapter or construction error, not even when the key
//! itself is malformed. What the adapter answers and keeps as evidence is the conformance
//! kit's to check (`conformance.rs`).

use herald_resend::{ResendAdapter, ResendError, ResendRoute};
use secrecy::SecretString;

use crate::support::{CLIENT_TIMEOUT, SENDER, install_crypto_provider};

const CANARY: &str = "canary-secret-7f3a";

fn assert_clean(text: &str) {
    assert!(!text.contains(CANARY), "the key leaked into: {text}");
}

#[test]
fn routes_adapters_and_construction_errors_never_print_the_key() {
    install_crypto_provider();
    let route = ResendRoute {
        base_url: "https://api.resend.com".to_owned(),
        api_key: SecretString::from(CANARY),
        from: SENDER.to_owned(),
        timeout: CLIENT_TIMEOUT,
        webhook_secret: None,
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
