//! The request on the wire: Standard Webhooks headers and body, and signatures that an
//! independent implementation (Python's standard library) verifies, with and without rotation.

use std::time::{SystemTime, UNIX_EPOCH};

use herald_provider::{Adapter, SendResult};
use herald_webhook::fake::FakeConfig;
use herald_webhook::signature::SigningSecret;
use herald_webhook::{DEFAULT_USER_AGENT, WebhookRoute};
use secrecy::SecretString;

use crate::support::{
    PAYLOAD, adapter, key, message, only_request, python_verify, python_verify_raw, receiver,
    receiver_with, route, secret,
};

const VECTOR: &str = include_str!("../../../../fixtures/webhook/signature.vector.json");
const EXAMPLE_HEADERS: &str = include_str!("../../../../fixtures/webhook/headers.example.json");

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn a_webhook_is_a_signed_json_post_with_the_standard_headers() {
    let s1 = secret(1);
    let receiver = receiver(&[&s1]).await;
    let adapter = adapter(route(&[&s1]));
    let key = key();
    let before = now();

    let result = adapter
        .send(
            &message(format!("{}/hooks/contacts", receiver.base_url())),
            &key,
        )
        .await;

    match result {
        SendResult::Accepted {
            provider_ref,
            evidence,
        } => {
            assert_eq!(provider_ref, None);
            assert_eq!(evidence.status, Some(204));
            assert_eq!(evidence.stage, "response");
        }
        other => panic!("expected an acceptance, got {other:?}"),
    }
    let request = only_request(&receiver);
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/hooks/contacts");
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(request.header("user-agent"), Some(DEFAULT_USER_AGENT));
    assert_eq!(request.header("webhook-id"), Some(key.as_str()));
    let timestamp: i64 = request
        .header("webhook-timestamp")
        .unwrap()
        .parse()
        .expect("integer unix seconds");
    assert!((before..=now()).contains(&timestamp), "{timestamp}");
    let signature = request.header("webhook-signature").unwrap();
    assert!(
        signature.starts_with("v1,") && !signature.contains(' '),
        "{signature}"
    );
    // The body is the payload, compact: what is signed is what is sent.
    let payload: serde_json::Value = serde_json::from_str(PAYLOAD).unwrap();
    assert_eq!(request.body, serde_json::to_vec(&payload).unwrap());
    assert_eq!(receiver.ledger().deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn the_signature_verifies_with_an_independent_python_implementation() {
    let s1 = secret(1);
    let receiver = receiver(&[&s1]).await;
    let key = key();
    adapter(route(&[&s1]))
        .send(&message(format!("{}/h", receiver.base_url())), &key)
        .await;
    let request = only_request(&receiver);

    assert_eq!(python_verify(&[&s1], &request, &request.body), vec![0]);
    // The check is not vacuous: another secret, or a body changed by one byte, fails.
    assert_eq!(
        python_verify(&[&secret(2)], &request, &request.body),
        vec![-1]
    );
    let mut tampered = request.body.clone();
    tampered.push(b' ');
    assert_eq!(python_verify(&[&s1], &request, &tampered), vec![-1]);
}

#[tokio::test]
async fn with_two_secrets_each_signature_verifies_with_its_own_secret() {
    let (new, old) = (secret(10), secret(11));
    let receiver = receiver(&[]).await;
    adapter(route(&[&new, &old]))
        .send(&message(format!("{}/h", receiver.base_url())), &key())
        .await;
    let request = only_request(&receiver);

    let signatures: Vec<&str> = request
        .header("webhook-signature")
        .unwrap()
        .split(' ')
        .collect();
    assert_eq!(signatures.len(), 2, "{signatures:?}");
    assert!(signatures.iter().all(|s| s.starts_with("v1,")));
    assert_eq!(
        python_verify(&[&new, &old, &secret(12)], &request, &request.body),
        vec![0, 1, -1]
    );
}

#[tokio::test]
async fn a_receiver_that_knows_only_one_of_the_rotated_secrets_accepts() {
    let (new, old) = (secret(20), secret(21));
    let adapter = adapter(route(&[&new, &old]));
    for knows in [&new, &old] {
        let receiver = receiver(&[knows]).await;
        let key = key();
        let result = adapter
            .send(&message(format!("{}/h", receiver.base_url())), &key)
            .await;
        assert!(matches!(result, SendResult::Accepted { .. }), "{result:?}");
        assert_eq!(receiver.ledger().deliveries_of(key.as_str()), 1);
    }

    // A receiver that knows neither refuses, and that is the receiver's permanent verdict.
    let receiver = receiver(&[&secret(22)]).await;
    let key = key();
    match adapter
        .send(&message(format!("{}/h", receiver.base_url())), &key)
        .await
    {
        SendResult::Rejected {
            permanent,
            evidence,
            ..
        } => {
            assert!(permanent);
            assert_eq!(evidence.status, Some(401));
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(receiver.ledger().deliveries_of(key.as_str()), 0);
}

#[tokio::test]
async fn every_resend_carries_the_same_webhook_id_so_a_deduplicating_receiver_processes_it_once() {
    let s1 = secret(1);
    let receiver = receiver_with(FakeConfig {
        secrets: vec![s1.clone()],
        dedup: true,
        ..FakeConfig::default()
    })
    .await;
    let adapter = adapter(route(&[&s1]));
    let key = key();
    let message = message(format!("{}/h", receiver.base_url()));

    let first = adapter.send(&message, &key).await;
    let second = adapter.send(&message, &key).await;

    assert!(matches!(first, SendResult::Accepted { .. }), "{first:?}");
    match second {
        SendResult::Accepted { evidence, .. } => {
            assert_eq!(evidence.status, Some(200));
            assert!(evidence.detail.contains("duplicate"), "{evidence:?}");
        }
        other => panic!("expected an acceptance, got {other:?}"),
    }
    let ledger = receiver.ledger();
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);
    let ids: Vec<_> = ledger
        .requests
        .iter()
        .map(|r| r.header("webhook-id").unwrap().to_owned())
        .collect();
    assert_eq!(ids, vec![key.as_str(); 2]);
}

#[test]
fn the_published_test_vector_signs_as_the_reference_libraries_do() {
    let vector: serde_json::Value = serde_json::from_str(VECTOR).unwrap();
    let text = |field: &str| vector[field].as_str().unwrap().to_owned();
    let timestamp = vector["webhook-timestamp"].as_i64().unwrap();
    let secret = SigningSecret::parse(&SecretString::from(text("secret"))).unwrap();

    let signature = secret.sign(&text("webhook-id"), timestamp, text("payload").as_bytes());

    assert_eq!(signature, text("webhook-signature"));
    // And the Python verifier agrees on the same third-party vector.
    assert_eq!(
        python_verify_raw(
            &[&text("secret")],
            &text("webhook-id"),
            &timestamp.to_string(),
            &signature,
            text("payload").as_bytes()
        ),
        vec![0]
    );
}

#[test]
fn a_signature_list_with_other_schemes_still_verifies_by_its_v1_entry() {
    let vector: serde_json::Value = serde_json::from_str(VECTOR).unwrap();
    let example: serde_json::Value = serde_json::from_str(EXAMPLE_HEADERS).unwrap();
    let secret =
        SigningSecret::parse(&SecretString::from(vector["secret"].as_str().unwrap())).unwrap();
    let (id, payload) = (
        vector["webhook-id"].as_str().unwrap(),
        vector["payload"].as_str().unwrap(),
    );
    let timestamp = vector["webhook-timestamp"].as_i64().unwrap();
    // The spec's example list: a `v1,` made with an unpublished secret and a `v1a,` (ed25519).
    let others = example["webhook-signature"].as_str().unwrap();

    let header = format!("{others} {}", vector["webhook-signature"].as_str().unwrap());
    assert!(secret.verifies(&header, id, timestamp, payload.as_bytes()));
    assert!(!secret.verifies(others, id, timestamp, payload.as_bytes()));
}

#[tokio::test]
async fn a_configured_user_agent_reaches_the_receiver() {
    let s1 = secret(1);
    let receiver = receiver(&[&s1]).await;
    let adapter = adapter(WebhookRoute {
        user_agent: Some("acme-notifier/2".to_owned()),
        ..route(&[&s1])
    });
    adapter
        .send(&message(format!("{}/h", receiver.base_url())), &key())
        .await;
    assert_eq!(
        only_request(&receiver).header("user-agent"),
        Some("acme-notifier/2")
    );
}
