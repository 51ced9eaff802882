//! The secret key and session token appear in no route, adapter or construction error, and
//! never leave as anything but a signature.

use herald_provider::Adapter;
use herald_provider_testkit::support::unique_key;
use herald_ses::SesAdapter;
use herald_ses::fake::FakeConfig;
use secrecy::SecretString;

use crate::support::{install_crypto_provider, message, route, vendor};

const CANARY: &str = "canary/Secret+Key7f3aEXAMPLEKEYxxxxxxxx";
const TOKEN: &str = "canaryTokenFQoGZXIvYXdzEXAMPLE";

fn assert_clean(text: &str) {
    assert!(!text.contains(CANARY), "the secret key leaked into: {text}");
    assert!(
        !text.contains(TOKEN),
        "the session token leaked into: {text}"
    );
}

#[test]
fn routes_adapters_and_construction_errors_never_print_the_secret() {
    install_crypto_provider();
    let mut route = route(
        "https://email.us-east-1.amazonaws.com",
        &FakeConfig::default(),
    );
    route.secret_access_key = SecretString::from(CANARY);
    route.session_token = Some(SecretString::from(TOKEN));
    assert_clean(&format!("{route:?}"));
    let adapter = SesAdapter::new(route.clone()).unwrap();
    assert_clean(&format!("{adapter:?}"));
    let mut broken = route;
    broken.region = String::new();
    let err = SesAdapter::new(broken).unwrap_err();
    assert_clean(&format!("{err} {err:?}"));
}

#[tokio::test]
async fn the_secret_key_is_never_sent() {
    let vendor = vendor(FakeConfig::default()).await;
    let config = FakeConfig::default();
    vendor.adapter.send(&message(), &unique_key()).await;
    let received = vendor.fake.last_request().unwrap();
    assert!(received.signed);
    assert!(!format!("{received:?}").contains(&config.secret_access_key));
}
