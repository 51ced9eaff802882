//! The auth token never leaves the Authorization header: not into evidence, errors or Debug.

use herald_provider::{Adapter, SendResult};
use herald_twilio::fake::{FakeConfig, Fault};
use herald_twilio::{TwilioAdapter, TwilioError};
use secrecy::SecretString;

use crate::support::{
    ACCOUNT, TOKEN, fake_config, install_crypto_provider, key, route, sms, unique_text, vendor,
    vendor_with,
};

fn assert_clean(what: &str, text: &str) {
    assert!(!text.contains(TOKEN), "{what} leaks the token: {text}");
}

#[tokio::test]
async fn the_token_appears_in_no_evidence_error_or_debug_output() {
    let vendor = vendor().await;
    assert_clean("the route", &format!("{:?}", route(vendor.fake.base_url())));
    assert_clean("the adapter", &format!("{:?}", vendor.adapter));
    assert_clean("the fake's config", &format!("{:?}", fake_config()));

    let message = sms(&unique_text());
    let mut results = Vec::new();
    results.push(vendor.adapter.send(&message, &key(&message)).await);
    for fault in [
        Fault::AcceptThenDrop,
        Fault::ErrorAfterProcessing,
        Fault::RateLimited,
    ] {
        vendor.fake.set_faults([fault]);
        results.push(vendor.adapter.send(&message, &key(&message)).await);
    }
    for result in &results {
        assert_clean("a send result", &format!("{result:?}"));
        let stored = serde_json::to_string(result.evidence()).unwrap();
        assert_clean("stored evidence", &stored);
    }
    let lookup = vendor.adapter.query(&message, &key(&message)).await;
    assert_clean("a query result", &format!("{lookup:?}"));
    assert_clean(
        "stored evidence",
        &serde_json::to_string(lookup.evidence()).unwrap(),
    );
}

#[tokio::test]
async fn a_401_leaks_neither_the_wrong_token_nor_the_right_one() {
    // The fake expects another token; the adapter sends the canary and is refused.
    let vendor = vendor_with(
        FakeConfig::new(ACCOUNT, SecretString::from("the-right-one")),
        |_| {},
    )
    .await;
    let message = sms(&unique_text());
    let sent = vendor.adapter.send(&message, &key(&message)).await;
    assert!(
        matches!(
            sent,
            SendResult::Rejected {
                permanent: true,
                ..
            }
        ),
        "{sent:?}"
    );
    let looked_up = vendor.adapter.query(&message, &key(&message)).await;
    for text in [format!("{sent:?}"), format!("{looked_up:?}")] {
        assert_clean("a 401 result", &text);
        assert!(!text.contains("the-right-one"), "{text}");
    }
}

#[tokio::test]
async fn route_errors_leak_no_token() {
    install_crypto_provider();
    let mut bad = route("not a url".to_owned());
    bad.from = None;
    let err: TwilioError = TwilioAdapter::new(bad).unwrap_err();
    assert_clean("an error", &err.to_string());
    assert_clean("an error", &format!("{err:?}"));
    let err = TwilioAdapter::new(route("not a url".to_owned())).unwrap_err();
    assert_clean("an error", &err.to_string());
    assert_clean("an error", &format!("{err:?}"));
}
