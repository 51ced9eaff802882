//! SES's events as SNS delivers them: each POST one SNS message, signed with SNS's RSA key,
//! whose certificate herald fetches from the message's `SigningCertURL` (only from SNS's own
//! hosts) and keeps. A subscription confirmation is answered by fetching its `SubscribeURL`.
//! The crate docs state the mapping and its sources.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

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

/// A certificate is a few kilobytes; an answer longer than this is not one, and is not read
/// further. (A subscription's confirmation answers less.)
const MAX_CERTIFICATE_BYTES: usize = 64 * 1024;

/// How long a certificate URL SNS said it does not serve is refused without asking again: a
/// forger who repeats one costs one fetch, not one per request.
const ABSENT_FOR: Duration = Duration::from_secs(600);

/// Certificates fetched a minute at most, per route: SNS signs with one per region and adds
/// one at a rotation, so more are a forger's invention (each naming a new URL on SNS's host).
/// Past it a message is answered as if SNS were unreachable, and SNS sends a genuine one again.
const FETCHES_PER_MINUTE: u32 = 10;

/// How old a message may be: SNS retries an HTTP/S delivery for at most an hour after it was
/// published (its `Timestamp`), and five minutes more for clocks and queues. An older one is a
/// replay. One dated more than those five minutes ahead is not SNS's either.
const MAX_MESSAGE_AGE: time::Duration = time::Duration::minutes(65);
const MAX_CLOCK_SKEW: time::Duration = time::Duration::minutes(5);

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

/// What a GET of an SNS URL came to, when not its body.
enum Fetched {
    /// SNS says it holds nothing there (a 4xx), or what it holds is too long to be what was asked.
    Absent(String),
    /// SNS could not be reached, or failed: it sends the message again.
    Unreachable(String),
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
    /// Certificate URLs SNS said it does not serve, and when it said so.
    absent: Mutex<HashMap<String, Instant>>,
    /// The minute the fetches are counted in, and how many it has had.
    fetches: Mutex<(Instant, u32)>,
}

impl SnsCallbacks {
    pub(crate) fn new(topic_arn: String, origin: SnsOrigin, http: reqwest::Client) -> Self {
        SnsCallbacks {
            topic_arn,
            origin,
            http,
            certificates: Mutex::new(HashMap::new()),
            absent: Mutex::new(HashMap::new()),
            fetches: Mutex::new((Instant::now(), 0)),
        }
    }

    /// The topic's region, where SNS serves its certificates: the ARN's fourth field, which
    /// the adapter checked at start-up.
    fn region(&self) -> &str {
        self.topic_arn.split(':').nth(3).unwrap_or_default()
    }

    /// The request's SNS message and its certificate URL, if it is one for the route's topic,
    /// of its time, with a certificate from SNS.
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
        // The Timestamp is signed: a message replayed past SNS's last retry is refused too.
        let published = OffsetDateTime::parse(&envelope.timestamp, &Rfc3339).map_err(|_| {
            CallbackError::Malformed(format!("Timestamp `{}` is not a time", envelope.timestamp))
        })?;
        if published < request.now - MAX_MESSAGE_AGE || published > request.now + MAX_CLOCK_SKEW {
            return Err(CallbackError::Unauthenticated(format!(
                "the message is dated {}, outside the {} minutes SNS retries a delivery",
                envelope.timestamp,
                MAX_MESSAGE_AGE.whole_minutes()
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
    /// it, so that a cache another request just cleared cannot refuse a genuine message. A URL
    /// SNS does not serve (a 4xx, or no certificate) makes the message a forgery, remembered
    /// for [`ABSENT_FOR`]; one SNS could not answer now, SNS's to send again.
    async fn fetch_certificate(&self, url: &Url) -> Result<Arc<[u8]>, CallbackError> {
        let unreachable = |why: String| {
            CallbackError::Unreachable(format!("cannot fetch the SNS signing certificate: {why}"))
        };
        if self.absent(url) {
            return Err(CallbackError::Unauthenticated(
                "SNS does not serve the SigningCertURL (it said so lately)".into(),
            ));
        }
        self.count_fetch().map_err(unreachable)?;
        let pem = match self.get(url).await {
            Ok(pem) => pem,
            Err(Fetched::Absent(why)) => return Err(self.forged(url, why)),
            Err(Fetched::Unreachable(why)) => return Err(unreachable(why)),
        };
        let der = match CertificateDer::from_pem_slice(&pem) {
            Ok(der) => der,
            Err(err) => return Err(self.forged(url, format!("not a PEM certificate: {err}"))),
        };
        if let Err(err) = webpki::EndEntityCert::try_from(&der) {
            return Err(self.forged(url, format!("not an X.509 certificate: {err}")));
        }
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

    fn absent(&self, url: &Url) -> bool {
        let mut absent = self.absent.lock().unwrap_or_else(PoisonError::into_inner);
        absent.retain(|_, since| since.elapsed() < ABSENT_FOR);
        absent.contains_key(url.as_str())
    }

    /// A message whose certificate SNS does not serve: refused, and its URL remembered.
    fn forged(&self, url: &Url, why: String) -> CallbackError {
        let mut absent = self.absent.lock().unwrap_or_else(PoisonError::into_inner);
        if absent.len() >= CACHED_CERTIFICATES * 64 {
            absent.clear();
        }
        absent.insert(url.as_str().to_owned(), Instant::now());
        CallbackError::Unauthenticated(format!(
            "the SigningCertURL holds no SNS certificate: {why}"
        ))
    }

    /// Counts a fetch against this minute's [`FETCHES_PER_MINUTE`].
    fn count_fetch(&self) -> Result<(), String> {
        let mut fetches = self.fetches.lock().unwrap_or_else(PoisonError::into_inner);
        if fetches.0.elapsed() >= Duration::from_secs(60) {
            *fetches = (Instant::now(), 0);
        }
        if fetches.1 >= FETCHES_PER_MINUTE {
            return Err(format!(
                "{FETCHES_PER_MINUTE} certificates fetched this minute already; SNS sends the message again"
            ));
        }
        fetches.1 += 1;
        Ok(())
    }

    /// One GET of `url` within the route's timeout (the client's), its body if the answer is
    /// 200 and at most [`MAX_CERTIFICATE_BYTES`] long: a longer one is not read further.
    async fn get(&self, url: &Url) -> Result<Vec<u8>, Fetched> {
        let failed =
            |err: reqwest::Error| Fetched::Unreachable(herald_provider::http::error_chain(&err));
        let mut response = self.http.get(url.clone()).send().await.map_err(failed)?;
        let status = response.status();
        if status.is_client_error() {
            return Err(Fetched::Absent(format!("{url} answered {status}")));
        }
        if status != reqwest::StatusCode::OK {
            return Err(Fetched::Unreachable(format!("{url} answered {status}")));
        }
        let too_long = || {
            Fetched::Absent(format!(
                "{url} answered more than {MAX_CERTIFICATE_BYTES} bytes, which is no certificate"
            ))
        };
        if response
            .content_length()
            .is_some_and(|length| length > MAX_CERTIFICATE_BYTES as u64)
        {
            return Err(too_long());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if body.len() + chunk.len() > MAX_CERTIFICATE_BYTES {
                return Err(too_long());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
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
            self.get(&url).await.map_err(|fetched| {
                let (Fetched::Absent(why) | Fetched::Unreachable(why)) = fetched;
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
