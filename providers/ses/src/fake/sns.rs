//! SNS's side of SES's events as the fake plays it: the signing certificate, the
//! `ConfirmSubscription` URL, and the messages SNS POSTs, signed (SignatureVersion 2) with the
//! test key in `fixtures/ses/`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use herald_provider::fake::{FaultAnswers, Kill};

use super::Fault;
use super::api::Vendor;
use crate::wire::{Envelope, NOTIFICATION, SUBSCRIPTION_CONFIRMATION};

/// Where the certificate is served, named as SNS names its own.
pub(super) const CERTIFICATE_PATH: &str = "/SimpleNotificationService-fake.pem";

const CERTIFICATE: &str = include_str!("../../../../fixtures/ses/sns-signing.pem");
const KEY: &str = include_str!("../../../../fixtures/ses/sns-signing.key");
const TOKEN: &str = "2336412f37fb687f5d51e6e2425dacbbafee1e5df7f4ca69a0bd5ad9c85cefdc";
const SNS_ANSWERS: FaultAnswers = FaultAnswers {
    rate_limited: "{\"Error\": {\"Code\": \"Throttling\"}}",
    server_error: "{\"Error\": {\"Code\": \"InternalFailure\"}}",
};

/// SNS's signing key, the fake's.
pub(super) struct Signer(RsaKeyPair);

impl Signer {
    pub(super) fn load() -> Signer {
        let der = PrivatePkcs8KeyDer::from_pem_slice(KEY.as_bytes()).expect("the fixture key");
        Signer(RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).expect("an RSA key"))
    }

    fn sign(&self, text: &str) -> String {
        let mut signature = vec![0; self.0.public().modulus_len()];
        self.0
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                text.as_bytes(),
                &mut signature,
            )
            .expect("RSA signing");
        STANDARD.encode(signature)
    }
}

impl Vendor {
    /// The body SNS POSTs for `event`, an SES event (`{"eventType", "mail", …}`), published to
    /// the fake's topic and signed.
    pub fn notification(&self, event: &Value) -> String {
        self.envelope(NOTIFICATION, event.to_string(), None)
    }

    /// The body SNS POSTs when a subscription to the fake's topic is made, signed.
    pub fn subscription_confirmation(&self) -> String {
        let confirm = format!(
            "{}/?Action=ConfirmSubscription&TopicArn={}&Token={TOKEN}",
            self.origin(),
            self.config.topic_arn
        );
        self.envelope(
            SUBSCRIPTION_CONFIRMATION,
            format!(
                "You have chosen to subscribe to the topic {}.",
                self.config.topic_arn
            ),
            Some(confirm),
        )
    }

    fn envelope(&self, kind: &str, message: String, subscribe_url: Option<String>) -> String {
        let mut envelope = Envelope {
            kind: kind.to_owned(),
            message_id: uuid::Uuid::new_v4().to_string(),
            topic_arn: self.config.topic_arn.clone(),
            subject: None,
            message,
            timestamp: OffsetDateTime::now_utc().format(&Rfc3339).expect("a time"),
            token: subscribe_url.as_ref().map(|_| TOKEN.to_owned()),
            subscribe_url,
            signature_version: "2".to_owned(),
            signature: String::new(),
            signing_cert_url: format!("{}{CERTIFICATE_PATH}", self.origin()),
            unsubscribe_url: None,
        };
        envelope.signature = self.signer.sign(&envelope.signed_text());
        serde_json::to_string(&envelope).expect("JSON")
    }
}

pub(super) async fn certificate(
    State(vendor): State<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
) -> Response {
    let fault = vendor.lock().lookup_faults.draw();
    let processed = (!fault.is_some_and(Fault::is_before_processing)).then(|| {
        (
            [(header::CONTENT_TYPE, "application/x-pem-file")],
            CERTIFICATE,
        )
            .into_response()
    });
    SNS_ANSWERS
        .answer(fault, processed, kill, vendor.config.delay)
        .await
}

pub(super) async fn confirm(
    State(vendor): State<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let fault = vendor.lock().lookup_faults.draw();
    let asked = |name: &str, value: &str| query.get(name).map(String::as_str) == Some(value);
    let valid = asked("Action", "ConfirmSubscription")
        && asked("TopicArn", &vendor.config.topic_arn)
        && asked("Token", TOKEN);
    let processed = (!fault.is_some_and(Fault::is_before_processing)).then(|| {
        if !valid {
            return (StatusCode::BAD_REQUEST, "InvalidParameter").into_response();
        }
        vendor.confirmations.fetch_add(1, Ordering::SeqCst);
        (
            [(header::CONTENT_TYPE, "text/xml")],
            "<ConfirmSubscriptionResponse><ConfirmSubscriptionResult><SubscriptionArn>\
             arn:aws:sns:us-east-1:123456789012:herald-ses-events:1</SubscriptionArn>\
             </ConfirmSubscriptionResult></ConfirmSubscriptionResponse>",
        )
            .into_response()
    });
    SNS_ANSWERS
        .answer(fault, processed, kill, vendor.config.delay)
        .await
}
