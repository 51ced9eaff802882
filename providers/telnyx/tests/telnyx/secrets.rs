//! The API key appears in no route, adapter or construction error, not even when the key itself
//! is malformed; webhooks are read only with both the URL and the public key.

use herald_telnyx::{PublicKeyError, TelnyxAdapter, TelnyxError};
use secrecy::SecretString;

use crate::support::{WEBHOOK_URL, install_crypto_provider, route};

const CANARY: &str = "KEYcanary-secret-7f3a";

fn assert_clean(text: &str) {
    assert!(!text.contains(CANARY), "the key leaked into: {text}");
}

#[test]
fn routes_adapters_and_construction_errors_never_print_the_key() {
    install_crypto_provider();
    let route = route("https://api.telnyx.com/v2", CANARY);
    assert_clean(&format!("{route:?}"));
    let adapter = TelnyxAdapter::new(route.clone()).unwrap();
    assert_clean(&format!("{adapter:?}"));

    let mut broken = route.clone();
    broken.api_key = SecretString::from(format!("{CANARY}\n"));
    let err = TelnyxAdapter::new(broken).unwrap_err();
    assert!(matches!(err, TelnyxError::ApiKey));
    assert_clean(&format!("{err} {err:?}"));

    let mut half = route.clone();
    half.webhook_url = Some(WEBHOOK_URL.to_owned());
    assert!(matches!(
        TelnyxAdapter::new(half),
        Err(TelnyxError::WebhookHalf)
    ));
    let mut short = route.clone();
    short.webhook_url = Some(WEBHOOK_URL.to_owned());
    short.webhook_public_key = Some("c2hvcnQ=".to_owned());
    assert!(matches!(
        TelnyxAdapter::new(short),
        Err(TelnyxError::WebhookPublicKey(PublicKeyError::NotEd25519))
    ));
    let mut stamped = route;
    stamped.webhook_url = Some(format!("{WEBHOOK_URL}?herald_key=x"));
    stamped.webhook_public_key = Some("R+UMEB5mOqTOX+8lyBoP+/prUDoPfOms0HmdqTDatwM=".to_owned());
    assert!(matches!(
        TelnyxAdapter::new(stamped),
        Err(TelnyxError::WebhookUrl(_))
    ));
}
