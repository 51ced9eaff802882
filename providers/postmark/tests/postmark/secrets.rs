//! The server token and the webhook password appear in no route, adapter or construction
//! error, not even when the token itself is malformed. What the adapter answers and keeps as
//! evidence is the conformance kit's to check (`conformance.rs`).

use herald_postmark::{PostmarkAdapter, PostmarkError};
use herald_provider::callback::CredentialsError;
use secrecy::SecretString;

use crate::support::{CALLBACK_PASSWORD, install_crypto_provider, route};

const CANARY: &str = "canary-secret-7f3a";

fn assert_clean(text: &str) {
    assert!(!text.contains(CANARY), "the token leaked into: {text}");
    assert!(
        !text.contains(CALLBACK_PASSWORD),
        "the password leaked into: {text}"
    );
}

#[test]
fn routes_adapters_and_construction_errors_never_print_a_secret() {
    install_crypto_provider();
    let route = route("https://api.postmarkapp.com", CANARY);
    assert_clean(&format!("{route:?}"));
    let adapter = PostmarkAdapter::new(route.clone()).unwrap();
    assert_clean(&format!("{adapter:?}"));

    let mut broken = route.clone();
    broken.server_token = SecretString::from(format!("{CANARY}\n"));
    let err = PostmarkAdapter::new(broken).unwrap_err();
    assert!(matches!(err, PostmarkError::ServerToken));
    assert_clean(&format!("{err} {err:?}"));

    let mut weak = route;
    weak.callback_password = Some(SecretString::from(&CALLBACK_PASSWORD[..31]));
    let err = PostmarkAdapter::new(weak).unwrap_err();
    assert!(matches!(
        err,
        PostmarkError::Callback(CredentialsError::Password)
    ));
    assert_clean(&format!("{err} {err:?}"));
}
