//! The API key and the webhook password appear in no route, adapter or construction error, not
//! even when the key itself is malformed. What the adapter answers and keeps as evidence is the
//! conformance kit's to check (`conformance.rs`).

use herald_provider::callback::CredentialsError;
use herald_sparkpost::{SparkPostAdapter, SparkPostError};
use secrecy::SecretString;

use crate::support::{CALLBACK_PASSWORD, CLIENT_TIMEOUT, install_crypto_provider, route};

const CANARY: &str = "canary-secret-7f3a";

fn assert_clean(text: &str) {
    assert!(!text.contains(CANARY), "the key leaked into: {text}");
    assert!(
        !text.contains(CALLBACK_PASSWORD),
        "the password leaked into: {text}"
    );
}

#[test]
fn routes_adapters_and_construction_errors_never_print_a_secret() {
    install_crypto_provider();
    let route = route("https://api.sparkpost.com/api/v1", CANARY, CLIENT_TIMEOUT);
    assert_clean(&format!("{route:?}"));
    let adapter = SparkPostAdapter::new(route.clone()).unwrap();
    assert_clean(&format!("{adapter:?}"));

    // A key that cannot be a header value is refused without being quoted.
    let mut broken = route.clone();
    broken.api_key = SecretString::from(format!("{CANARY}\n"));
    let err = SparkPostAdapter::new(broken).unwrap_err();
    assert!(matches!(err, SparkPostError::ApiKey));
    assert_clean(&format!("{err} {err:?}"));

    // A password too short to guard a public URL is refused without being quoted.
    let mut weak = route;
    weak.callback_password = Some(SecretString::from(&CALLBACK_PASSWORD[..31]));
    let err = SparkPostAdapter::new(weak).unwrap_err();
    assert!(matches!(
        err,
        SparkPostError::Callback(CredentialsError::Password)
    ));
    assert_clean(&format!("{err} {err:?}"));
}
