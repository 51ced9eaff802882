//! SES's events as SNS delivers them: each POST one SNS message, signed with SNS's RSA key,
//! whose certificate herald fetches from the message's `SigningCertURL` (only from SNS's own
//! hosts) and keeps. A subscription confirmation is answered by fetching its `SubscribeURL`.
//! The crate docs state the mapping and its sources.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use herald_provider::callback::{
    CallbackError, CallbackEvent, CallbackRef, CallbackRequest, Callbacks, ReceiptStatus,
};
use herald_provider::split_mailbox;
use ring::signature::{
    RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY, RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey,
    VerificationAlgorithm,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{
    AlgorithmIdentifier, CertificateDer, InvalidSignature, SignatureVerificationAlgorithm, alg_id,
};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use url::Url;

use crate::wire::{Envelope, Event, KEY_TAG, NOTIFICATION, SUBSCRIPTION_CONFIRMATION};

/// How many signing certificates a route keeps: SNS uses one per region at a time, and a
/// rotation adds one; past this the cache starts afresh rather than grow on what a forger
/// names.
const CACHED_CERTIFICATES: usize = 8;

/// A certificate is a few kilobytes; an answer longer than this is not one.
const MAX_CERTIFICATE_BYTES: usize = 64 * 1024;

/// Where a route takes SNS's signing certificates and subscription URLs from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnsOrigin {
    /// SNS itself, in the topic's region: `https://sns.<region>.amazonaws.com` (or
    /// `.amazonaws.com.cn`), fetched over TLS with the web's root certificates. Narrower than
    /// the pattern AWS's validators check (any `sns.<label>.amazonaws.com`), which also matches
    /// hosts of other AWS services (an S3 bucket named `sns` on a legacy regional endpoint).
    Aws,
    /// A local stand-in for SNS (LocalStack, a test's fake): URLs on this one origin only.
    Local(Url),
}

/// The file name SNS gives its signing certificates (`SimpleNotificationService-<hash>.pem`).
const CERTIFICATE_PREFIX: &str = "/SimpleNotificationService-";

impl SnsOrigin {
    /// `url` if this origin serves it for a topic in `region`.
    fn admits(&self, url: &str, region: &str) -> Result<Url, String> {
        let parsed = Url::parse(url).map_err(|err| format!("`{url}` is not a URL: {err}"))?;
        let admitted = match self {
            SnsOrigin::Aws => {
                let host = parsed.host_str().unwrap_or_default();
                let sns = format!("sns.{region}.amazonaws.com");
                parsed.scheme() == "https"
                    && parsed.username().is_empty()
                    && parsed.password().is_none()
                    && parsed.port().is_none_or(|port| port == 443)
                    && (host == sns || host == format!("{sns}.cn"))
            }
            SnsOrigin::Local(origin) => parsed.origin() == origin.origin(),
        };
        admitted
            .then_some(parsed)
            .ok_or_else(|| format!("`{url}` is not on SNS's own host for {region}"))
    }

    /// `url` if it names a signing certificate this origin serves.
    fn admits_certificate(&self, url: &str, region: &str) -> Result<Url, String> {
        let parsed = self.admits(url, region)?;
        let named = match self {
            SnsOrigin::Aws => parsed.path().starts_with(CERTIFICATE_PREFIX),
            SnsOrigin::Local(_) => true,
        } && parsed.path().ends_with(".pem")
            && parsed.query().is_none();
        named
            .then_some(parsed)
            .ok_or_else(|| format!("`{url}` does not name an SNS signing certificate"))
    }
}

/// One of SNS's two signature versions, checked with the public key of a certificate.
#[derive(Debug)]
struct SnsSignature {
    algorithm: &'static dyn VerificationAlgorithm,
    id: AlgorithmIdentifier,
}

/// sha1WithRSAEncryption (1.2.840.113549.1.1.5), which `rustls-pki-types` does not name.
const RSA_PKCS1_SHA1: AlgorithmIdentifier = AlgorithmIdentifier::from_slice(&[
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05, 0x05, 0x00,
]);

/// `SignatureVersion` 1: SHA1 with RSA, still the default of an SNS topic.
static VERSION_1: SnsSignature = SnsSignature {
    algorithm: &RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY,
    id: RSA_PKCS1_SHA1,
};

/// `SignatureVersion` 2: SHA256 with RSA.
static VERSION_2: SnsSignature = SnsSignature {
    algorithm: &RSA_PKCS1_2048_8192_SHA256,
    id: alg_id::RSA_PKCS1_SHA256,
};

impl SignatureVerificationAlgorithm for SnsSignature {
    fn verify_signature(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), InvalidSignature> {
        UnparsedPublicKey::new(self.algorithm, public_key)
            .verify(message, signature)
            .map_err(|_| InvalidSignature)
    }

    fn public_key_alg_id(&self) -> AlgorithmIdentifier {
        alg_id::RSA_ENCRYPTION
    }

    fn signature_alg_id(&self) -> AlgorithmIdentifier {
        self.id
    }
}

/// The reader of a route's SNS subscription.
#[derive(Debug)]
pub(crate) struct SnsCallbacks {
    /// The one topic the route takes messages from.
    topic_arn: String,
    origin: SnsOrigin,
    /// The route's client: its timeout bounds each fetch.
    http: reqwest::Client,
    /// Signing certificates by URL, DER.
    certificates: Mutex<HashMap<String, Arc<[u8]>>>,
}

impl SnsCallbacks {
    pub(crate) fn new(topic_arn: String, origin: SnsOrigin, http: reqwest::Client) -> Self {
        SnsCallbacks {
            topic_arn,
            origin,
            http,
            certificates: Mutex::new(HashMap::new()),
        }
    }

    /// The topic's region, where SNS serves its certificates: the ARN's fourth field, which
    /// the adapter checked at start-up.
    fn region(&self) -> &str {
        self.topic_arn.split(':').nth(3).unwrap_or_default()
    }

    /// The request's SNS message and its certificate URL, if it is one for the route's topic
    /// with a certificate from SNS.
    fn screen(&self, request: &CallbackRequest<'_>) -> Result<(Envelope, Url), CallbackError> {
        let envelope: Envelope = serde_json::from_slice(request.body).map_err(|err| {
            CallbackError::Malformed(format!("the body is not an SNS message: {err}"))
        })?;
        // Checked before anything is fetched: a message for another topic is not the route's.
        if envelope.topic_arn != self.topic_arn {
            return Err(CallbackError::Unauthenticated(format!(
                "the message is for topic `{}`, not the route's",
                envelope.topic_arn
            )));
        }
        let certificate = self
            .origin
            .admits_certificate(&envelope.signing_cert_url, self.region())
            .map_err(|why| CallbackError::Unauthenticated(format!("SigningCertURL {why}")))?;
        Ok((envelope, certificate))
    }

    fn cached(&self, url: &Url) -> Option<Arc<[u8]>> {
        self.certificates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(url.as_str())
            .cloned()
    }

    /// Fetches and keeps the certificate at `url`, which [`Self::screen`] admitted; answers
    /// it, so that a cache another request just cleared cannot refuse a genuine message.
    async fn fetch_certificate(&self, url: &Url) -> Result<Arc<[u8]>, CallbackError> {
        let unreachable = |why: String| {
            CallbackError::Unreachable(format!("cannot fetch the SNS signing certificate: {why}"))
        };
        let pem = self.get(url).await.map_err(unreachable)?;
        if pem.len() > MAX_CERTIFICATE_BYTES {
            return Err(unreachable(format!(
                "{} bytes is no certificate",
                pem.len()
            )));
        }
        let der = CertificateDer::from_pem_slice(&pem)
            .map_err(|err| unreachable(format!("not a PEM certificate: {err}")))?;
        webpki::EndEntityCert::try_from(&der)
            .map_err(|err| unreachable(format!("not an X.509 certificate: {err}")))?;
        let mut certificates = self
            .certificates
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if certificates.len() >= CACHED_CERTIFICATES {
            certificates.clear();
        }
        let der: Arc<[u8]> = Arc::from(der.as_ref());
        certificates.insert(url.as_str().to_owned(), Arc::clone(&der));
        Ok(der)
    }

    /// One GET of `url` within the route's timeout (the client's), its body if the answer
    /// is 200.
    async fn get(&self, url: &Url) -> Result<Vec<u8>, String> {
        let failed = |err: reqwest::Error| herald_provider::http::error_chain(&err);
        let response = self.http.get(url.clone()).send().await.map_err(failed)?;
        let status = response.status();
        if status != reqwest::StatusCode::OK {
            return Err(format!("{url} answered {status}"));
        }
        Ok(response.bytes().await.map_err(failed)?.to_vec())
    }

    /// The events of `envelope`, once its signature holds under the certificate `der`.
    fn events(&self, envelope: &Envelope, der: &[u8]) -> Result<Vec<CallbackEvent>, CallbackError> {
        verify(envelope, der)?;
        if envelope.kind != NOTIFICATION {
            // A subscription's own messages carry no event; `receive` answers a confirmation.
            return Ok(Vec::new());
        }
        let event: Event = serde_json::from_str(&envelope.message).map_err(|err| {
            CallbackError::Malformed(format!("the SNS message is not an SES event: {err}"))
        })?;
        Ok(understood(&envelope.message_id, &event)
            .into_iter()
            .collect())
    }
}

/// Whether `envelope`'s signature holds under the certificate `der`.
fn verify(envelope: &Envelope, der: &[u8]) -> Result<(), CallbackError> {
    let refused = |why: &str| CallbackError::Unauthenticated(why.to_owned());
    let algorithm = match envelope.signature_version.as_str() {
        "1" => &VERSION_1,
        "2" => &VERSION_2,
        _ => return Err(refused("SignatureVersion is neither 1 nor 2")),
    };
    let signature = STANDARD
        .decode(envelope.signature.trim())
        .map_err(|_| refused("Signature is not base64"))?;
    let der = CertificateDer::from(der);
    let certificate = webpki::EndEntityCert::try_from(&der)
        .map_err(|_| refused("the signing certificate is not X.509"))?;
    certificate
        .verify_signature(algorithm, envelope.signed_text().as_bytes(), &signature)
        .map_err(|_| refused("the SNS signature does not match the message"))
}

#[async_trait::async_trait]
impl Callbacks for SnsCallbacks {
    /// Without I/O: a certificate not fetched yet (by [`Self::receive`]) refuses the message.
    fn read(&self, request: &CallbackRequest<'_>) -> Result<Vec<CallbackEvent>, CallbackError> {
        let (envelope, certificate) = self.screen(request)?;
        let Some(der) = self.cached(&certificate) else {
            return Err(CallbackError::Unauthenticated(
                "the SNS signing certificate was not fetched".into(),
            ));
        };
        self.events(&envelope, &der)
    }

    async fn receive(
        &self,
        request: &CallbackRequest<'_>,
    ) -> Result<Vec<CallbackEvent>, CallbackError> {
        let (envelope, certificate) = self.screen(request)?;
        let der = match self.cached(&certificate) {
            Some(der) => der,
            None => self.fetch_certificate(&certificate).await?,
        };
        let events = self.events(&envelope, &der)?;
        if envelope.kind == SUBSCRIPTION_CONFIRMATION {
            let url = envelope.subscribe_url.as_deref().unwrap_or("");
            let url = self
                .origin
                .admits(url, self.region())
                .map_err(|why| CallbackError::Malformed(format!("SubscribeURL {why}")))?;
            self.get(&url).await.map_err(|why| {
                CallbackError::Unreachable(format!("cannot confirm the SNS subscription: {why}"))
            })?;
        }
        Ok(events)
    }
}

/// The receipt an SES event carries, if herald reads one from it.
fn understood(event_id: &str, event: &Event) -> Option<CallbackEvent> {
    let at = |stamp: Option<&String>| {
        stamp.and_then(|stamp| OffsetDateTime::parse(stamp, &Rfc3339).ok())
    };
    let mail = &event.mail;
    let (status, vendor_status, when, suppress) = match event.event_type.as_str() {
        "Send" => (
            ReceiptStatus::Sent,
            "Send".to_owned(),
            mail.timestamp.as_ref(),
            false,
        ),
        "Delivery" => {
            let delivery = event.delivery.as_ref();
            let named = delivery.into_iter().flat_map(|d| &d.recipients);
            if !about_recipient(event, named.map(String::as_str)) {
                return None;
            }
            (
                ReceiptStatus::Delivered,
                "Delivery".to_owned(),
                delivery.and_then(|d| d.timestamp.as_ref()),
                false,
            )
        }
        kind @ ("Open" | "Click") => (
            ReceiptStatus::Delivered,
            kind.to_owned(),
            event
                .open
                .as_ref()
                .or(event.click.as_ref())
                .and_then(|e| e.timestamp.as_ref()),
            false,
        ),
        "Bounce" => {
            let bounce = event.bounce.as_ref()?;
            let named = bounce.bounced_recipients.iter();
            if !about_recipient(event, named.map(|r| r.email_address.as_str())) {
                return None;
            }
            let (status, suppress) = match bounce.bounce_type.as_str() {
                "Permanent" => (ReceiptStatus::Bounced, true),
                // SES reports a soft bounce only once it has stopped retrying it.
                "Transient" => (ReceiptStatus::Undeliverable, false),
                _ => (ReceiptStatus::Bounced, false),
            };
            (
                status,
                format!("Bounce/{}", bounce.bounce_type),
                bounce.timestamp.as_ref(),
                suppress,
            )
        }
        "Complaint" => {
            let complaint = event.complaint.as_ref()?;
            let named = complaint.complained_recipients.iter();
            if !about_recipient(event, named.map(|r| r.email_address.as_str())) {
                return None;
            }
            let not_spam = complaint.complaint_feedback_type.as_deref() == Some("not-spam");
            (
                ReceiptStatus::Complained,
                "Complaint".to_owned(),
                complaint.timestamp.as_ref(),
                !not_spam,
            )
        }
        kind @ ("Reject" | "Rendering Failure") => (
            ReceiptStatus::Undeliverable,
            kind.to_owned(),
            mail.timestamp.as_ref(),
            false,
        ),
        // DeliveryDelay (SES still trying), Subscription and anything newer: not a receipt.
        _ => return None,
    };
    let reference = match mail.tags.get(KEY_TAG).and_then(|values| values.first()) {
        Some(key) => CallbackRef::Key(key.clone()),
        None => CallbackRef::ProviderRef(mail.message_id.clone()),
    };
    Some(CallbackEvent {
        event_id: event_id.to_owned(),
        reference,
        message: Some(mail.message_id.clone()),
        status,
        vendor_status,
        at: at(when),
        suppress,
    })
}

/// Whether a delivery, bounce or complaint is about the message's `To` recipient, herald's
/// one, rather than only about a copy's; an event that names no one, or a message whose
/// headers SES did not report, is taken as about the message.
fn about_recipient<'a>(event: &Event, named: impl Iterator<Item = &'a str>) -> bool {
    let to = event
        .mail
        .common_headers
        .as_ref()
        .map(|headers| headers.to.as_slice())
        .unwrap_or_default();
    let mut named = named.peekable();
    if to.is_empty() || named.peek().is_none() {
        return true;
    }
    named.any(|address| {
        to.iter().any(|mailbox| {
            split_mailbox(mailbox)
                .1
                .eq_ignore_ascii_case(split_mailbox(address).1)
        })
    })
}
