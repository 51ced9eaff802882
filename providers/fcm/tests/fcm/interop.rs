//! The assertion herald signs, judged by a client nobody here wrote: Google's own google-auth
//! verifies it (`verify.py`), and the fake's token endpoint takes the one google-auth signs
//! (`sign.py`), so that the fake checks what Google checks rather than what herald sends.
//! Skipped loudly without google-auth; without `HERALD_ALLOW_SKIP=1`, a failure.

use herald_fcm::MESSAGING_SCOPE;
use herald_fcm::fake::{FakeConfig, TEST_PUBLIC_KEY};
use herald_provider::Adapter;
use herald_provider_testkit::support::{accepted_ref, python_with, run_python, unique_key};
use serde_json::json;

use crate::support::{message, vendor};

/// The pins `.ci/run` installs.
const INSTALL: &str =
    "pip install google-auth==2.63.0 cryptography==50.0.2, the versions .ci/run pins";

fn script(name: &str) -> String {
    format!("{}/tests/fcm/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test]
async fn google_auth_verifies_the_assertion_herald_signs() {
    if !python_with(&["google.auth.jwt", "cryptography"], INSTALL) {
        return;
    }
    let config = FakeConfig::default();
    let vendor = vendor(config.clone()).await;
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    let assertion = vendor.fake.last_assertion().expect("the fake took one");

    let read = run_python(
        &script("verify.py"),
        &json!({
            "assertion": assertion,
            "public_key": TEST_PUBLIC_KEY,
            "key_id": config.private_key_id,
            "audience": vendor.fake.token_uri(),
        }),
    );

    assert_eq!(read["header"]["alg"], "RS256");
    assert_eq!(read["header"]["typ"], "JWT");
    assert_eq!(read["header"]["kid"], json!(config.private_key_id));
    let claims = &read["claims"];
    assert_eq!(claims["iss"], json!(config.client_email));
    assert_eq!(claims["aud"], json!(vendor.fake.token_uri()));
    assert_eq!(claims["scope"], MESSAGING_SCOPE);
    let (iat, exp) = (
        claims["iat"].as_u64().unwrap(),
        claims["exp"].as_u64().unwrap(),
    );
    assert_eq!(exp - iat, 3600, "an hour, the longest Google takes");
}

#[tokio::test]
async fn the_fake_takes_the_assertion_google_auth_signs() {
    if !python_with(&["google.oauth2.service_account", "cryptography"], INSTALL) {
        return;
    }
    let vendor = vendor(FakeConfig::default()).await;

    let signed = run_python(
        &script("sign.py"),
        &json!({
            "service_account": vendor.fake.service_account(),
            "scopes": [MESSAGING_SCOPE],
        }),
    );
    let answer = reqwest::Client::new()
        .post(vendor.fake.token_uri())
        .form(&[
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            ("assertion", signed["assertion"].as_str().unwrap()),
        ])
        .send()
        .await
        .unwrap();

    let status = answer.status();
    let token: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(status, 200, "{token}");
    assert_eq!(token["token_type"], "Bearer");
    assert!(
        token["access_token"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    );
    assert_eq!(vendor.fake.exchanges(), 1);
}
