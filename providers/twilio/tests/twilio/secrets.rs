//! The auth token appears in no route and no construction error. What the adapter answers,
//! keeps as evidence or shows in its `Debug` is the conformance kit's to check
//! (`conformance.rs`).

use herald_twilio::{TwilioAdapter, TwilioError};

use crate::support::{TOKEN, install_crypto_provider, route};

fn assert_clean(what: &str, text: &str) {
    assert!(!text.contains(TOKEN), "{what} leaks the token: {text}");
}

#[tokio::test]
async fn routes_and_route_errors_leak_no_token() {
    install_crypto_provider();
    assert_clean(
        "the route",
        &format!("{:?}", route("https://api.twilio.com".to_owned())),
    );
    let mut bad = route("not a url".to_owned());
    bad.from = None;
    let err: TwilioError = TwilioAdapter::new(bad).unwrap_err();
    assert_clean("an error", &err.to_string());
    assert_clean("an error", &format!("{err:?}"));
    let err = TwilioAdapter::new(route("not a url".to_owned())).unwrap_err();
    assert_clean("an error", &err.to_string());
    assert_clean("an error", &format!("{err:?}"));
}
