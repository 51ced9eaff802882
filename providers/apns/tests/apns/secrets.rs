//! The `.p8` key and the provider tokens appear in no route, adapter, construction error or
//! result, not even when the key itself is malformed; and the device token, which names the
//! recipient, in no transport error. What the adapter keeps as evidence when an answer echoes
//! the request is the conformance kit's to check too (`conformance.rs`).

use herald_apns::fake::{FakeConfig, Fault, Faults};
use herald_apns::{ApnsAdapter, ApnsError};
use herald_provider::Adapter;
use herald_provider_testkit::support::{
    accepted_ref, ambiguous, install_crypto_provider, rejection, unique_key,
};

use crate::support::{DEVICE, adapter, message, route_for, vendor};

/// The base64 body of a PEM block: the key's bytes without the armour.
fn body_of(pem: &str) -> String {
    pem.lines()
        .filter(|line| !line.starts_with("-----"))
        .collect()
}

#[test]
fn routes_adapters_and_construction_errors_never_print_the_key() {
    install_crypto_provider();
    let config = FakeConfig::default();
    let pem = config.key.private_pem.clone();
    let body = body_of(&pem);
    let clean = |text: &str| {
        assert!(!text.contains(&body), "the key leaked into: {text}");
        for line in pem.lines().filter(|l| !l.starts_with("-----")) {
            assert!(
                !text.contains(line),
                "a line of the key leaked into: {text}"
            );
        }
    };
    let route = route_for(&config, herald_apns::DEFAULT_BASE_URL);
    clean(&format!("{route:?}"));
    clean(&format!("{config:?}"));
    let adapter = ApnsAdapter::new(route.clone()).unwrap();
    clean(&format!("{adapter:?}"));

    // A key that is not a P-256 key, or a cut one, is refused without being quoted.
    let half = pem[..pem.len() / 2].to_owned();
    for broken in [
        half,
        pem.replace("PRIVATE KEY", "PUBLIC KEY"),
        format!("{body}\n"),
    ] {
        let mut route = route.clone();
        route.signing_key = broken.into();
        let err = ApnsAdapter::new(route).unwrap_err();
        assert!(matches!(err, ApnsError::SigningKey(_)), "{err:?}");
        clean(&err.to_string());
        clean(&format!("{err:?}"));
    }
}

#[tokio::test]
async fn the_provider_token_sent_is_in_no_debug_and_no_evidence() {
    let vendor = vendor(FakeConfig::default()).await;
    let result = vendor.adapter.send(&message(), &unique_key()).await;
    accepted_ref(&result);
    let token = vendor.fake.last_provider_token().expect("a token was sent");
    assert!(token.len() > 100, "a JWT");
    for shown in [
        format!("{:?}", vendor.adapter),
        format!("{result:?}"),
        serde_json::to_string(result.evidence()).unwrap(),
    ] {
        assert!(!shown.contains(&token), "the token leaked into: {shown}");
        // Nor any of its three parts (the signature is the secret one).
        let signature = token.rsplit('.').next().unwrap();
        assert!(!shown.contains(signature), "{shown}");
    }
}

#[tokio::test]
async fn a_transport_error_does_not_name_the_device_token() {
    // reqwest's errors name the URL, whose path is the device token: a connection refused
    // (before anything was written) and one dropped after the push was processed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let refused = adapter(route_for(&FakeConfig::default(), &base_url));
    let (permanent, _, evidence) = rejection(refused.send(&message(), &unique_key()).await);
    assert!(!permanent);
    assert_eq!(evidence.stage, "connect", "{evidence:?}");
    assert!(!evidence.detail.contains(DEVICE), "{evidence:?}");

    let vendor = vendor(FakeConfig {
        faults: Faults::next([Fault::AcceptThenDrop]),
        ..FakeConfig::default()
    })
    .await;
    let result = vendor.adapter.send(&message(), &unique_key()).await;
    let evidence = ambiguous(&result);
    assert_eq!(evidence.stage, "awaiting_response", "{evidence:?}");
    assert!(!format!("{result:?}").contains(DEVICE), "{result:?}");
}
