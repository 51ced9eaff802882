//! Status callbacks: the key stamped on `StatusCallback`, signatures made by Twilio's own helper
//! library (PyPI `twilio`, through `sign.py`) accepted and everything else refused, and each
//! `MessageStatus` read as the crate docs' table says.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use herald_provider::callback::{
    CallbackError, CallbackEvent, CallbackRef, CallbackRequest, ReceiptStatus,
};
use herald_provider::settings::{RouteContext, RouteSettings};
use herald_provider::{Adapter, Evidence, ProviderKey};
use herald_provider_testkit::support::{
    Form, malformed, permanent_rejection, python_with, unauthenticated,
};
use herald_twilio::{Settings, TwilioAdapter, TwilioError, TwilioRoute};
use hmac::{Hmac, KeyInit, Mac};
use reqwest::header::{HeaderMap, HeaderValue};
use secrecy::SecretString;
use sha1::Sha1;
use time::OffsetDateTime;

use crate::support::{
    ACCOUNT, FROM, TO, TOKEN, ToSign, install_crypto_provider, key, route, sdk_signatures, sms,
    unique_text, vendor,
};

const STATUS_URL: &str = "https://herald.example.com/v1/callbacks/twilio-main";
const SID: &str = "SM0123456789abcdef0123456789abcdef";
const API_KEY_SID: &str = "SK00000000000000000000000000000001";

fn adapter_with(adjust: impl FnOnce(&mut TwilioRoute)) -> Result<TwilioAdapter, TwilioError> {
    install_crypto_provider();
    let mut route = route("https://api.twilio.com".to_owned());
    route.status_callback = Some(STATUS_URL.to_owned());
    adjust(&mut route);
    TwilioAdapter::new(route)
}

fn adapter() -> TwilioAdapter {
    adapter_with(|_| {}).expect("a valid route")
}

/// The `StatusCallback` the adapter sends for `key`: the URL Twilio will post to.
fn stamped_url(adapter: &TwilioAdapter, key: &ProviderKey) -> String {
    let request = adapter
        .prepare(&sms("Your code is 123456"), key)
        .expect("an SMS prepares");
    Form::parse(&request.body)
        .get("StatusCallback")
        .expect("the request names a StatusCallback")
        .to_owned()
}

/// The form of a status callback as Twilio documents it, with `ErrorCode` when given.
fn params(
    status: &'static str,
    error_code: Option<&'static str>,
) -> Vec<(&'static str, &'static str)> {
    let mut params = vec![
        ("AccountSid", ACCOUNT),
        ("ApiVersion", "2010-04-01"),
        ("From", FROM),
        ("MessageSid", SID),
        ("MessageStatus", status),
        ("SmsSid", SID),
        ("SmsStatus", status),
        ("To", TO),
    ];
    if let Some(code) = error_code {
        params.push(("ErrorCode", code));
    }
    params
}

/// `X-Twilio-Signature` as Twilio's security guide describes it, written here from the guide:
/// the SDK test below shows that it agrees with Twilio's own library, so that the tests of the
/// mapping need no Python.
fn sign(token: &str, url: &str, params: &[(&str, &str)]) -> String {
    let mut sorted = params.to_vec();
    sorted.sort();
    let mut mac = Hmac::<Sha1>::new_from_slice(token.as_bytes()).unwrap();
    mac.update(url.as_bytes());
    for (name, value) in sorted {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
    STANDARD.encode(mac.finalize().into_bytes())
}

/// A POST to `url` (herald sees its query) with `params` as its form, signed with `signature`.
struct Posted {
    query: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Posted {
    fn new(url: &str, params: &[(&str, &str)], signature: Option<&str>) -> Posted {
        let mut headers = HeaderMap::new();
        headers.insert(
            "content-type",
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        if let Some(signature) = signature {
            headers.insert("x-twilio-signature", signature.parse().unwrap());
        }
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish()
            .into_bytes();
        Posted {
            query: url.split_once('?').map_or("", |(_, q)| q).to_owned(),
            headers,
            body,
        }
    }

    /// Signed with the route's token for `url`, as Twilio would.
    fn signed(url: &str, params: &[(&str, &str)]) -> Posted {
        Posted::new(url, params, Some(&sign(TOKEN, url, params)))
    }

    fn read(&self, adapter: &TwilioAdapter) -> Result<Vec<CallbackEvent>, CallbackError> {
        let callbacks = adapter.callbacks().expect("the route reads callbacks");
        let result = callbacks.read(&CallbackRequest {
            query: &self.query,
            headers: &self.headers,
            body: &self.body,
            now: OffsetDateTime::now_utc(),
        });
        if let Err(err) = &result {
            assert!(!err.to_string().contains(TOKEN), "the token leaked: {err}");
        }
        result
    }
}

#[test]
fn a_status_callback_signed_by_twilios_own_sdk_is_read_and_names_the_stamped_key() {
    // Twilio's helper library (PyPI `twilio`, pinned in `.ci/run`) signs as Twilio does.
    if !python_with(
        &["twilio.request_validator"],
        "pip install twilio, the version .ci/run pins",
    ) {
        return;
    }
    let adapter = adapter();
    let key = ProviderKey::new("01970000-0000-7000-8000-000000000001-f1");
    let url = stamped_url(&adapter, &key);
    assert_eq!(url, format!("{STATUS_URL}?herald_key={key}"));
    let delivered = params("delivered", None);
    let stopped = params("failed", Some("21610"));
    let with_port = url.replacen("herald.example.com", "herald.example.com:443", 1);
    let signatures = sdk_signatures(&[
        ToSign {
            token: TOKEN,
            url: &url,
            params: &delivered,
        },
        ToSign {
            token: TOKEN,
            url: &url,
            params: &stopped,
        },
        ToSign {
            token: TOKEN,
            url: &with_port,
            params: &delivered,
        },
        ToSign {
            token: "another-auth-token",
            url: &url,
            params: &delivered,
        },
    ]);
    // The signer the other tests use agrees with Twilio's.
    assert_eq!(signatures[0], sign(TOKEN, &url, &delivered));
    assert_eq!(signatures[2], sign(TOKEN, &with_port, &delivered));

    let events = Posted::new(&url, &delivered, Some(&signatures[0])).read(&adapter);
    assert_eq!(
        events,
        Ok(vec![CallbackEvent {
            event_id: format!("{SID}:delivered"),
            reference: CallbackRef::Key(key.to_string()),
            message: Some(SID.to_owned()),
            status: ReceiptStatus::Delivered,
            vendor_status: "delivered".to_owned(),
            at: None,
            suppress: false,
        }])
    );
    let events = Posted::new(&url, &stopped, Some(&signatures[1]))
        .read(&adapter)
        .unwrap();
    assert_eq!(events[0].status, ReceiptStatus::Undeliverable);
    assert_eq!(events[0].vendor_status, "failed/21610");
    assert!(events[0].suppress);
    // Twilio sometimes signs the URL with its default port written out.
    assert_eq!(
        Posted::new(&url, &delivered, Some(&signatures[2]))
            .read(&adapter)
            .unwrap()
            .len(),
        1
    );

    // Another account's token.
    unauthenticated(Posted::new(&url, &delivered, Some(&signatures[3])).read(&adapter));
    // A body other than the one signed.
    unauthenticated(Posted::new(&url, &stopped, Some(&signatures[0])).read(&adapter));
    // A query other than the one signed: the key cannot be swapped.
    let other_key = url.replace("-f1", "-f2");
    unauthenticated(Posted::new(&other_key, &delivered, Some(&signatures[0])).read(&adapter));
    // No signature at all.
    let why = unauthenticated(Posted::new(&url, &delivered, None).read(&adapter));
    assert!(why.contains("X-Twilio-Signature"), "{why}");
}

#[test]
fn each_message_status_maps_to_its_receipt_and_the_others_are_left_out() {
    use ReceiptStatus as R;
    let adapter = adapter();
    let key = ProviderKey::new("01970000-0000-7000-8000-000000000002");
    let url = stamped_url(&adapter, &key);
    // Status, ErrorCode, and the receipt, vendor status and suppression expected (or none).
    type Expected = Option<(ReceiptStatus, &'static str, bool)>;
    let cases: [(&str, Option<&str>, Expected); 14] = [
        ("sent", None, Some((R::Sent, "sent", false))),
        ("delivered", None, Some((R::Delivered, "delivered", false))),
        ("read", None, Some((R::Delivered, "read", false))),
        (
            "undelivered",
            Some("30003"),
            Some((R::Undeliverable, "undelivered/30003", false)),
        ),
        (
            "failed",
            Some("30008"),
            Some((R::Undeliverable, "failed/30008", false)),
        ),
        (
            "failed",
            Some("21610"),
            Some((R::Undeliverable, "failed/21610", true)),
        ),
        (
            "undelivered",
            Some("21610"),
            Some((R::Undeliverable, "undelivered/21610", true)),
        ),
        // An empty ErrorCode is no code.
        (
            "undelivered",
            Some(""),
            Some((R::Undeliverable, "undelivered", false)),
        ),
        ("queued", None, None),
        ("accepted", None, None),
        ("sending", None, None),
        ("scheduled", None, None),
        ("canceled", None, None),
        ("partially_delivered", None, None),
    ];
    for (status, code, expected) in cases {
        let events = Posted::signed(&url, &params(status, code))
            .read(&adapter)
            .unwrap_or_else(|err| panic!("{status}: {err}"));
        let expected: Vec<CallbackEvent> = expected
            .into_iter()
            .map(|(receipt, vendor_status, suppress)| CallbackEvent {
                event_id: format!("{SID}:{status}"),
                reference: CallbackRef::Key(key.to_string()),
                message: Some(SID.to_owned()),
                status: receipt,
                vendor_status: vendor_status.to_owned(),
                at: None,
                suppress,
            })
            .collect();
        assert_eq!(events, expected, "{status} {code:?}");
    }
}

#[test]
fn a_callback_without_the_key_names_the_message_by_its_sid() {
    let adapter = adapter();
    // Sent before herald stamped its key: Twilio posts to the URL as it was then.
    let events = Posted::signed(STATUS_URL, &params("delivered", None))
        .read(&adapter)
        .unwrap();
    assert_eq!(
        events[0].reference,
        CallbackRef::ProviderRef(SID.to_owned())
    );
}

#[test]
fn a_configured_query_is_kept_and_signed_with_the_key() {
    let adapter = adapter_with(|route| {
        route.status_callback = Some(format!("{STATUS_URL}?tenant=acme"));
    })
    .unwrap();
    let key = ProviderKey::new("01970000-0000-7000-8000-000000000003");
    let url = stamped_url(&adapter, &key);
    assert_eq!(url, format!("{STATUS_URL}?tenant=acme&herald_key={key}"));
    let events = Posted::signed(&url, &params("sent", None))
        .read(&adapter)
        .unwrap();
    assert_eq!(events[0].reference, CallbackRef::Key(key.to_string()));
}

#[test]
fn a_signed_callback_that_is_not_a_status_callback_is_malformed() {
    let adapter = adapter();
    let no_sid: Vec<_> = params("delivered", None)
        .into_iter()
        .filter(|(name, _)| *name != "MessageSid")
        .collect();
    let why = malformed(Posted::signed(STATUS_URL, &no_sid).read(&adapter));
    assert!(why.contains("MessageSid"), "{why}");
    let no_status: Vec<_> = params("delivered", None)
        .into_iter()
        .filter(|(name, _)| *name != "MessageStatus")
        .collect();
    malformed(Posted::signed(STATUS_URL, &no_status).read(&adapter));
    malformed(Posted::signed(STATUS_URL, &[]).read(&adapter));
}

#[test]
fn signatures_that_are_not_the_auth_tokens_are_refused() {
    let adapter = adapter();
    let delivered = params("delivered", None);
    unauthenticated(Posted::new(STATUS_URL, &delivered, Some("not base64!")).read(&adapter));
    unauthenticated(Posted::new(STATUS_URL, &delivered, Some("")).read(&adapter));
    // Signed for another URL.
    let elsewhere = sign(TOKEN, "https://attacker.example/cb", &delivered);
    unauthenticated(Posted::new(STATUS_URL, &delivered, Some(&elsewhere)).read(&adapter));
    // A Webhooks Rule's shared key signed it: herald holds no shared key.
    let mut posted = Posted::signed(STATUS_URL, &delivered);
    posted.headers.insert(
        "x-twilio-webhooks-signature-settings",
        HeaderValue::from_static("key=webhooks_sharedkey_1,algorithm=HMAC_SHA256"),
    );
    let why = unauthenticated(posted.read(&adapter));
    assert!(why.contains("shared key"), "{why}");
}

#[test]
fn callbacks_are_read_only_where_a_status_callback_is_configured() {
    let without = adapter_with(|route| route.status_callback = None).unwrap();
    assert!(without.callbacks().is_none());
    let request = without
        .prepare(&sms(&unique_text()), &ProviderKey::new("k"))
        .unwrap();
    assert_eq!(Form::parse(&request.body).get("StatusCallback"), None);
    assert!(adapter().callbacks().is_some());

    for bad in [
        "not a url",
        "ftp://herald.example.com/cb",
        "https://h.example/cb?herald_key=x",
    ] {
        let result = adapter_with(|route| route.status_callback = Some(bad.to_owned()));
        assert!(
            matches!(result, Err(TwilioError::StatusCallback { .. })),
            "{bad}: {result:?}"
        );
    }
}

#[test]
fn an_api_key_route_checks_callbacks_with_the_accounts_auth_token() {
    let with_key = |route: &mut TwilioRoute| {
        route.api_key_sid = Some(API_KEY_SID.to_owned());
        route.auth_token = SecretString::from("key-secret");
    };
    // The key's secret signs nothing, so the account's token must be given.
    let err = adapter_with(with_key).unwrap_err();
    assert!(matches!(err, TwilioError::CallbackAuthToken), "{err:?}");
    assert!(!err.to_string().contains("key-secret"));

    let adapter = adapter_with(|route| {
        with_key(route);
        route.callback_auth_token = Some(SecretString::from(TOKEN));
    })
    .unwrap();
    let delivered = params("delivered", None);
    assert!(
        Posted::signed(STATUS_URL, &delivered)
            .read(&adapter)
            .is_ok()
    );
    let by_key = sign("key-secret", STATUS_URL, &delivered);
    unauthenticated(Posted::new(STATUS_URL, &delivered, Some(&by_key)).read(&adapter));

    let unused = adapter_with(|route| {
        route.status_callback = None;
        route.callback_auth_token = Some(SecretString::from(TOKEN));
    });
    assert!(matches!(unused, Err(TwilioError::UnusedCallbackAuthToken)));
}

#[tokio::test]
async fn settings_name_the_callback_keys_they_refuse() {
    install_crypto_provider();
    let context = RouteContext {
        name: "twilio-main",
        timeout: Duration::from_secs(5),
    };
    let settings = |extra: serde_json::Value| {
        let mut table = serde_json::json!({
            "account_sid": ACCOUNT,
            "auth_token": TOKEN,
            "from": FROM,
            "status_callback": STATUS_URL,
        });
        table
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value::<Settings>(table)
    };
    let key_of = |result: Result<_, herald_provider::settings::SettingsError>| {
        result.map(|_| ()).unwrap_err().key
    };

    let ok = settings(serde_json::json!({})).unwrap();
    assert!(ok.adapter(&context).await.unwrap().callbacks().is_some());
    let api_key = settings(serde_json::json!({"api_key_sid": API_KEY_SID})).unwrap();
    assert_eq!(
        key_of(api_key.adapter(&context).await),
        "callback_auth_token"
    );
    let api_key = settings(serde_json::json!({
        "api_key_sid": API_KEY_SID,
        "callback_auth_token": TOKEN,
    }))
    .unwrap();
    assert_eq!(api_key.secrets().len(), 2);
    assert!(
        api_key
            .adapter(&context)
            .await
            .unwrap()
            .callbacks()
            .is_some()
    );
    let bad_url =
        settings(serde_json::json!({"status_callback": "herald.example.com/cb"})).unwrap();
    assert_eq!(key_of(bad_url.adapter(&context).await), "status_callback");
    assert!(settings(serde_json::json!({"callback_token": TOKEN})).is_err());
}

#[tokio::test]
async fn a_send_refused_because_the_recipient_replied_stop_says_they_unsubscribed() {
    let vendor = vendor().await;
    let mut stopped = sms(&unique_text());
    stopped.to = "+15005550004".to_owned();
    let result = vendor.adapter.send(&stopped, &key(&stopped)).await;
    assert!(vendor.adapter.unsubscribed(permanent_rejection(&result)));

    let mut invalid = sms(&unique_text());
    invalid.to = "+15005550001".to_owned();
    let result = vendor.adapter.send(&invalid, &key(&invalid)).await;
    assert!(!vendor.adapter.unsubscribed(permanent_rejection(&result)));
    assert!(!vendor.adapter.unsubscribed(&Evidence::default()));
}
