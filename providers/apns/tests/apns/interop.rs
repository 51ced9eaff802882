//! The provider token herald signs, checked by a client nobody here wrote: PyJWT with the
//! `cryptography` backend verifies it with the public half of the key (`verify.py`), as APNs
//! would with the key it holds, and reads its header and claims. Skipped loudly where PyJWT is
//! missing; a failure without `HERALD_ALLOW_SKIP=1`.

use herald_apns::fake::FakeConfig;
use herald_provider::Adapter;
use herald_provider_testkit::support::{accepted_ref, python_with, run_python, unique_key};
use serde_json::json;

use crate::support::{message, vendor};

const VERIFY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/apns/verify.py");

#[tokio::test]
async fn pyjwt_verifies_the_provider_token_with_the_public_key() {
    if !python_with(
        &["jwt", "cryptography"],
        "pip install PyJWT cryptography, the versions .ci/run pins",
    ) {
        return;
    }
    let config = FakeConfig::default();
    let (public_pem, team_id, key_id) = (
        config.key.public_pem.clone(),
        config.team_id.clone(),
        config.key_id.clone(),
    );
    let vendor = vendor(config).await;
    accepted_ref(&vendor.adapter.send(&message(), &unique_key()).await);
    let token = vendor.fake.last_provider_token().expect("a token was sent");

    let checked = run_python(
        VERIFY,
        &json!({"token": token, "public_pem": public_pem, "team_id": team_id}),
    );

    assert_eq!(checked["header"], json!({"alg": "ES256", "kid": key_id}));
    assert_eq!(checked["claims"]["iss"], json!(team_id));
    let iat = checked["claims"]["iat"].as_i64().expect("iat is a number");
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    assert!((now - 120..=now).contains(&iat), "iat {iat}, now {now}");
    assert_eq!(
        checked["claims"].as_object().unwrap().len(),
        2,
        "iss and iat only: {checked}"
    );
    // A token whose signature does not verify is refused by PyJWT too.
    let (signed, _) = token.rsplit_once('.').unwrap();
    let forged = format!("{signed}.{}", "A".repeat(86));
    let refused = run_python(
        VERIFY,
        &json!({"token": forged, "public_pem": public_pem, "team_id": team_id}),
    );
    assert_eq!(
        refused["error"],
        json!("InvalidSignatureError"),
        "{refused}"
    );
}
