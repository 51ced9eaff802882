//! The API secret appears in no route and no construction error. What the adapter answers,
//! keeps as evidence or shows in its `Debug` is the conformance kit's to check
//! (`conformance.rs`).

use herald_mailjet::{MailjetAdapter, MailjetError};

use crate::support::{SECRET, install_crypto_provider, route};

fn assert_clean(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} leaks the secret: {text}");
}

#[tokio::test]
async fn routes_and_route_errors_leak_no_secret() {
    install_crypto_provider();
    assert_clean(
        "the route",
        &format!("{:?}", route("https://api.mailjet.com".to_owned())),
    );
    let mut bad = route("not a url".to_owned());
    bad.from = String::new();
    let err: MailjetError = MailjetAdapter::new(bad).unwrap_err();
    assert_clean("an error", &err.to_string());
    assert_clean("an error", &format!("{err:?}"));
    let err = MailjetAdapter::new(route("not a url".to_owned())).unwrap_err();
    assert_clean("an error", &err.to_string());
    assert_clean("an error", &format!("{err:?}"));
}
