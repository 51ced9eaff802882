//! The API key appears in no route, adapter or construction error, not even when the key itself
//! is malformed; a malformed verification key is named by its form. What the adapter answers
//! and keeps as evidence is the conformance kit's to check (`conformance.rs`).

use herald_sendgrid::{PublicKeyError, SendGridAdapter, SendGridError};
use secrecy::SecretString;

use crate::support::{install_crypto_provider, route};

const CANARY: &str = "SG.canary-secret-7f3a";

fn assert_clean(text: &str) {
    assert!(!text.contains(CANARY), "the key leaked into: {text}");
}

#[test]
fn routes_adapters_and_construction_errors_never_print_the_key() {
    install_crypto_provider();
    let route = route("https://api.sendgrid.com", CANARY);
    assert_clean(&format!("{route:?}"));
    let adapter = SendGridAdapter::new(route.clone()).unwrap();
    assert_clean(&format!("{adapter:?}"));

    let mut broken = route.clone();
    broken.api_key = SecretString::from(format!("{CANARY}\n"));
    let err = SendGridAdapter::new(broken).unwrap_err();
    assert!(matches!(err, SendGridError::ApiKey));
    assert_clean(&format!("{err} {err:?}"));

    for (key, expected) in [
        ("not base64!", PublicKeyError::Base64),
        // An RSA-shaped DER: base64, but not a P-256 point.
        (
            "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA",
            PublicKeyError::NotP256,
        ),
    ] {
        let mut bad = route.clone();
        bad.webhook_public_key = Some(key.to_owned());
        match SendGridAdapter::new(bad) {
            Err(SendGridError::WebhookPublicKey(err)) => assert_eq!(err, expected),
            other => panic!("{key}: {other:?}"),
        }
    }
}
