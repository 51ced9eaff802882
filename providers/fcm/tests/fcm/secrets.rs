//! The service account's private key appears in no route, adapter, settings or construction
//! error, not even when the key file itself is broken. What the adapter answers and keeps as
//! evidence, access tokens included, is the conformance kit's to check (`conformance.rs`).

use herald_fcm::fake::{FakeConfig, TEST_PRIVATE_KEY};
use herald_fcm::{FcmAdapter, FcmError, KeyError, Settings};
use herald_provider::Channel;
use herald_provider::settings::{RouteContext, RouteSettings};
use serde_json::json;

use crate::support::{CLIENT_TIMEOUT, install_crypto_provider, private_key_line, route};

const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

fn assert_clean(text: &str) {
    assert!(
        !text.contains(private_key_line()),
        "the private key leaked into: {text}"
    );
    assert!(
        !text.contains("BEGIN PRIVATE KEY"),
        "the PEM leaked into: {text}"
    );
}

#[test]
fn routes_adapters_and_construction_errors_never_print_the_private_key() {
    install_crypto_provider();
    let key = FakeConfig::default().service_account(GOOGLE_TOKEN_URI);
    let route = route(herald_fcm::DEFAULT_BASE_URL, &key, CLIENT_TIMEOUT);
    assert_clean(&format!("{route:?}"));
    let adapter = FcmAdapter::new(route.clone()).unwrap();
    assert_clean(&format!("{adapter:?}"));

    // A key file cut short, a key of another kind, a PEM that is no RSA key: each refused by
    // name or position, never quoted.
    let pem = TEST_PRIVATE_KEY.replace('\n', "\\n");
    let broken = [
        (key[..key.len() / 2].to_owned(), "not JSON"),
        (
            json!({"type": "authorized_user", "private_key": TEST_PRIVATE_KEY}).to_string(),
            "not a service account key",
        ),
        (
            key.replace(&pem, &pem.replace("MII", "XII")),
            "not an RSA private key",
        ),
        (format!("\"{pem}\""), "not a JSON object"),
    ];
    for (json, why) in broken {
        let mut broken = route.clone();
        broken.service_account = json.into();
        let err = FcmAdapter::new(broken).unwrap_err();
        assert!(matches!(err, FcmError::ServiceAccount(_)), "{why}: {err:?}");
        assert!(err.to_string().contains(why), "{why}: {err}");
        assert_clean(&format!("{err} {err:?}"));
    }
    let err = KeyError::PrivateKey;
    assert_clean(&format!("{err} {err:?}"));
}

#[tokio::test]
async fn settings_name_their_secret_refuse_unknown_keys_and_build_from_a_key_file() {
    install_crypto_provider();
    let path =
        std::env::temp_dir().join(format!("herald-fcm-test-key-{}.json", std::process::id()));
    std::fs::write(
        &path,
        FakeConfig::default().service_account(GOOGLE_TOKEN_URI),
    )
    .unwrap();
    let settings: Settings = serde_json::from_value(json!({
        "service_account": {"file": path},
        "project_id": "herald-test",
    }))
    .unwrap();
    assert_eq!(settings.channels(), &[Channel::Push]);
    let secrets: Vec<String> = settings.secrets().into_iter().map(|(k, _)| k).collect();
    assert_eq!(secrets, ["service_account"]);
    assert_eq!(
        settings.endpoint().as_deref(),
        Some("fcm.googleapis.com:443")
    );

    let context = RouteContext {
        name: "push",
        timeout: CLIENT_TIMEOUT,
    };
    let built = settings.adapter(&context).await;
    std::fs::remove_file(&path).unwrap();
    let adapter = built.expect("the route builds from the key file");
    assert_eq!(adapter.capabilities().max_payload_bytes, Some(4096));
    assert_clean(&format!("{settings:?}"));

    let misspelt = serde_json::from_value::<Settings>(json!({
        "service_account": {"env": "FCM_KEY"},
        "projectid": "herald-test",
    }));
    assert!(misspelt.unwrap_err().to_string().contains("projectid"));

    // A key file that names no project, and a route that names none either.
    let mut projectless: serde_json::Value =
        serde_json::from_str(&FakeConfig::default().service_account(GOOGLE_TOKEN_URI)).unwrap();
    projectless.as_object_mut().unwrap().remove("project_id");
    let settings: Settings = serde_json::from_value(json!({
        "service_account": projectless.to_string(),
    }))
    .unwrap();
    let err = settings.adapter(&context).await.err().expect("no project");
    assert_eq!(err.key, "project_id");
    assert_clean(&format!("{err} {err:?}"));
}
