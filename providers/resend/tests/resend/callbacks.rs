//! Webhooks: the `herald_key` tag on every send, webhooks signed by Svix's own library (PyPI
//! `svix`, through `sign.py`) accepted and everything else refused, and each event `type` read
//! as the crate docs' table says.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use herald_provider::callback::{
    CallbackError, CallbackEvent, CallbackRef, CallbackRequest, ReceiptStatus,
};
use herald_provider::settings::{RouteContext, RouteSettings};
use herald_provider::signature::SigningSecret;
use herald_provider::{Adapter, ProviderKey};
use herald_provider_testkit::support::{json, malformed, python_with, unauthenticated, unique_key};
use herald_resend::{ResendAdapter, ResendError, ResendRoute, Settings};
use reqwest::header::{HeaderMap, HeaderValue};
use secrecy::SecretString;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::macros::datetime;

use crate::support::{
    CLIENT_TIMEOUT, SENDER, ToSign, install_crypto_provider, message, svix_signatures,
};

/// Resend's signing secrets are `whsec_` and 24 bytes of base64, like this one.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER_SECRET: &str = "whsec_SGVsbG9IZWxsb0hlbGxvSGVsbG9IZWxsbw==";
const EMAIL_ID: &str = "56761188-7520-42d8-8898-ff6fc54ce618";
const SVIX_ID: &str = "msg_2pX3b4c5d6e7f8g9h0i1j2k3l4m";

fn route(webhook_secret: Option<&str>) -> ResendRoute {
    ResendRoute {
        base_url: herald_resend::DEFAULT_BASE_URL.to_owned(),
        api_key: SecretString::from("re_123"),
        from: SENDER.to_owned(),
        timeout: CLIENT_TIMEOUT,
        webhook_secret: webhook_secret.map(SecretString::from),
    }
}

fn adapter() -> ResendAdapter {
    install_crypto_provider();
    ResendAdapter::new(route(Some(SECRET))).expect("a valid route")
}

/// A webhook shaped like Resend's documented examples, of `kind`, with `data` merged in.
fn event(kind: &str, data: Value) -> String {
    let mut body = json!({
        "type": kind,
        "created_at": "2024-11-22T23:41:12.126Z",
        "data": {
            "created_at": "2024-11-22 23:41:11.894719+00",
            "email_id": EMAIL_ID,
            "from": "Acme <onboarding@resend.dev>",
            "to": ["delivered@resend.dev"],
            "subject": "Sending this example",
        },
    });
    body["data"]
        .as_object_mut()
        .unwrap()
        .extend(data.as_object().unwrap().clone());
    body.to_string()
}

/// The tag herald stamps, in the array form.
fn key_tag(key: &str) -> Value {
    json!({"tags": [{"name": "herald_notification_id", "value": "n-1"}, {"name": "herald_key", "value": key}]})
}

/// A POST from Resend as herald receives it, read at `now`.
struct Posted {
    headers: HeaderMap,
    body: Vec<u8>,
    now: OffsetDateTime,
}

impl Posted {
    fn new(id: &str, timestamp: i64, signature: &str, body: &str) -> Posted {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("svix-id", id.parse().unwrap());
        headers.insert("svix-timestamp", timestamp.to_string().parse().unwrap());
        headers.insert("svix-signature", signature.parse().unwrap());
        Posted {
            headers,
            body: body.as_bytes().to_vec(),
            now: OffsetDateTime::from_unix_timestamp(timestamp).unwrap(),
        }
    }

    /// Signed with the route's secret, sent now.
    fn signed(body: &str) -> Posted {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let signature = secret(SECRET).sign(SVIX_ID, now, body.as_bytes());
        Posted::new(SVIX_ID, now, &signature, body)
    }

    fn read(&self, adapter: &ResendAdapter) -> Result<Vec<CallbackEvent>, CallbackError> {
        let callbacks = adapter.callbacks().expect("the route reads webhooks");
        let result = callbacks.read(&CallbackRequest {
            query: "",
            headers: &self.headers,
            body: &self.body,
            now: self.now,
        });
        if let Err(err) = &result {
            assert!(
                !err.to_string().contains(&SECRET[6..]),
                "the secret leaked: {err}"
            );
        }
        result
    }
}

fn secret(text: &str) -> SigningSecret {
    SigningSecret::parse(&SecretString::from(text)).expect("a valid secret")
}

/// The one event a signed `body` reads as.
fn only_event(body: &str) -> CallbackEvent {
    let mut events = Posted::signed(body)
        .read(&adapter())
        .expect("a readable webhook");
    assert_eq!(events.len(), 1, "{events:?}");
    events.remove(0)
}

#[test]
fn a_webhook_signed_by_svixs_own_library_is_read_and_names_the_stamped_key() {
    // Svix's library (PyPI `svix`, pinned in `.ci/run`) signs Resend's webhooks.
    if !python_with(
        &["svix.webhooks"],
        "pip install svix, the version .ci/run pins",
    ) {
        return;
    }
    let adapter = adapter();
    let key = unique_key();
    // The key the adapter stamps is the one the webhook echoes.
    let request = adapter.prepare(&message(), &key).unwrap();
    let tags = json(&request.body)["tags"].clone();
    assert!(
        tags.as_array()
            .unwrap()
            .contains(&json!({"name": "herald_key", "value": key.as_str()})),
        "{tags}"
    );
    let body = event("email.delivered", json!({"tags": tags}));
    let now = OffsetDateTime::now_utc().unix_timestamp();
    let tampered = body.replace("email.delivered", "email.bounced");
    let signatures = svix_signatures(&[
        ToSign {
            secret: SECRET,
            id: SVIX_ID,
            timestamp: now,
            payload: &body,
        },
        ToSign {
            secret: OTHER_SECRET,
            id: SVIX_ID,
            timestamp: now,
            payload: &body,
        },
        ToSign {
            secret: SECRET,
            id: SVIX_ID,
            timestamp: now - 301,
            payload: &body,
        },
        ToSign {
            secret: SECRET,
            id: SVIX_ID,
            timestamp: now + 301,
            payload: &body,
        },
    ]);
    // herald's signer agrees with Svix's, so the mapping tests below sign as Resend does.
    assert_eq!(
        signatures[0],
        secret(SECRET).sign(SVIX_ID, now, body.as_bytes())
    );

    let events = Posted::new(SVIX_ID, now, &signatures[0], &body).read(&adapter);
    assert_eq!(
        events,
        Ok(vec![CallbackEvent {
            event_id: SVIX_ID.to_owned(),
            reference: CallbackRef::Key(key.to_string()),
            message: Some(EMAIL_ID.to_owned()),
            status: ReceiptStatus::Delivered,
            vendor_status: "email.delivered".to_owned(),
            at: Some(datetime!(2024-11-22 23:41:12.126 UTC)),
            suppress: false,
        }])
    );

    // A body other than the one signed.
    let mut posted = Posted::new(SVIX_ID, now, &signatures[0], &tampered);
    unauthenticated(posted.read(&adapter));
    // Another endpoint's secret.
    posted = Posted::new(SVIX_ID, now, &signatures[1], &body);
    unauthenticated(posted.read(&adapter));
    // Signed more than five minutes before (or after) herald read it: a replay.
    posted = Posted::new(SVIX_ID, now - 301, &signatures[2], &body);
    posted.now = OffsetDateTime::from_unix_timestamp(now).unwrap();
    let why = unauthenticated(posted.read(&adapter));
    assert!(why.contains("tolerance"), "{why}");
    posted = Posted::new(SVIX_ID, now + 301, &signatures[3], &body);
    posted.now = OffsetDateTime::from_unix_timestamp(now).unwrap();
    unauthenticated(posted.read(&adapter));
    // Another event id under the same signature.
    unauthenticated(Posted::new("msg_other", now, &signatures[0], &body).read(&adapter));
    // Each header missing.
    for header in ["svix-signature", "svix-id", "svix-timestamp"] {
        let mut posted = Posted::new(SVIX_ID, now, &signatures[0], &body);
        posted.headers.remove(header);
        let why = unauthenticated(posted.read(&adapter));
        assert!(why.contains(header), "{why}");
    }
}

#[test]
fn each_email_event_maps_to_its_receipt_and_the_others_are_left_out() {
    use ReceiptStatus as R;
    let key = "01970000-0000-7000-8000-000000000001-f1";
    let cases: [(&str, Option<(ReceiptStatus, bool)>); 11] = [
        ("email.sent", Some((R::Sent, false))),
        ("email.delivered", Some((R::Delivered, false))),
        ("email.opened", Some((R::Delivered, false))),
        ("email.clicked", Some((R::Delivered, false))),
        ("email.complained", Some((R::Complained, true))),
        ("email.failed", Some((R::Undeliverable, false))),
        ("email.delivery_delayed", None),
        ("email.scheduled", None),
        ("email.received", None),
        ("contact.created", None),
        ("domain.updated", None),
    ];
    for (kind, expected) in cases {
        let events = Posted::signed(&event(kind, key_tag(key)))
            .read(&adapter())
            .unwrap_or_else(|err| panic!("{kind}: {err}"));
        let expected: Vec<CallbackEvent> = expected
            .into_iter()
            .map(|(status, suppress)| CallbackEvent {
                event_id: SVIX_ID.to_owned(),
                reference: CallbackRef::Key(key.to_owned()),
                message: Some(EMAIL_ID.to_owned()),
                status,
                vendor_status: kind.to_owned(),
                at: Some(datetime!(2024-11-22 23:41:12.126 UTC)),
                suppress,
            })
            .collect();
        assert_eq!(events, expected, "{kind}");
    }
    // Other events' data need not look like an email's.
    let contact = json!({"type": "contact.created", "data": {"id": "c-1", "tags": 7}});
    assert_eq!(
        Posted::signed(&contact.to_string()).read(&adapter()),
        Ok(vec![])
    );
}

#[test]
fn a_bounce_suppresses_the_recipient_unless_it_was_soft_or_undetermined() {
    let bounce = |kind: Option<&str>| {
        let mut data = key_tag("k-1");
        if let Some(kind) = kind {
            data["bounce"] = json!({
                "diagnosticCode": ["smtp; 550 5.1.1 user unknown"],
                "message": "The recipient's email provider sent a hard bounce message.",
                "subType": "General",
                "type": kind,
            });
        }
        only_event(&event("email.bounced", data))
    };
    for (kind, suppress, vendor_status) in [
        (Some("Permanent"), true, "email.bounced/Permanent"),
        (Some("Transient"), false, "email.bounced/Transient"),
        (Some("transient"), false, "email.bounced/transient"),
        (Some("Undetermined"), false, "email.bounced/Undetermined"),
        // `email.bounced` is documented as a permanent rejection.
        (None, true, "email.bounced"),
    ] {
        let event = bounce(kind);
        assert_eq!(event.status, ReceiptStatus::Bounced, "{kind:?}");
        assert_eq!(event.suppress, suppress, "{kind:?}");
        assert_eq!(event.vendor_status, vendor_status);
    }
}

#[test]
fn tags_read_as_an_array_or_an_object_and_without_the_key_the_email_id_names_the_email() {
    let object = only_event(&event(
        "email.delivered",
        json!({"tags": {"category": "confirm_email", "herald_key": "k-object"}}),
    ));
    assert_eq!(object.reference, CallbackRef::Key("k-object".to_owned()));
    let array = only_event(&event("email.delivered", key_tag("k-array")));
    assert_eq!(array.reference, CallbackRef::Key("k-array".to_owned()));
    for tags in [
        json!({"tags": {"category": "confirm_email"}}),
        json!({"tags": [{"name": "category", "value": "confirm_email"}]}),
        json!({"tags": []}),
        json!({"tags": null}),
        json!({}),
    ] {
        let event = only_event(&event("email.delivered", tags.clone()));
        assert_eq!(
            event.reference,
            CallbackRef::ProviderRef(EMAIL_ID.to_owned()),
            "{tags}"
        );
    }
    // No created_at, or one that is not RFC 3339: no time rather than a guess.
    let mut body: Value = serde_json::from_str(&event("email.sent", json!({}))).unwrap();
    body["created_at"] = json!("yesterday");
    assert_eq!(only_event(&body.to_string()).at, None);
    body.as_object_mut().unwrap().remove("created_at");
    assert_eq!(only_event(&body.to_string()).at, None);
}

#[test]
fn a_signed_body_that_is_not_a_resend_webhook_is_malformed() {
    let adapter = adapter();
    for body in [
        "not json".to_owned(),
        "[]".to_owned(),
        json!({"data": {"email_id": EMAIL_ID}}).to_string(),
        json!({"type": "email.delivered"}).to_string(),
        json!({"type": "email.delivered", "data": "x"}).to_string(),
        json!({"type": 7, "data": {}}).to_string(),
        // An email event that names no email.
        json!({"type": "email.delivered", "data": {"to": ["a@example.com"]}}).to_string(),
        json!({"type": "email.delivered", "data": {"email_id": ""}}).to_string(),
        // Tags of neither documented shape.
        json!({"type": "email.delivered", "data": {"email_id": EMAIL_ID, "tags": "x"}}).to_string(),
    ] {
        malformed(Posted::signed(&body).read(&adapter));
    }
}

#[test]
fn every_send_carries_the_key_tag_and_a_messages_own_is_refused() {
    let adapter = adapter();
    let key = ProviderKey::new("01970000-0000-7000-8000-000000000009-f1");
    let request = adapter.prepare(&message(), &key).unwrap();
    assert_eq!(
        json(&request.body)["tags"][1],
        json!({"name": "herald_key", "value": key.as_str()})
    );
    let mut own = message();
    own.email
        .tags
        .insert("herald_key".to_owned(), "mine".to_owned());
    let refused = adapter.prepare(&own, &key).unwrap_err();
    assert_eq!(refused.stage, "request");
    assert!(refused.detail.contains("herald_key"), "{refused:?}");
}

#[test]
fn webhooks_are_read_only_where_a_secret_is_configured_and_a_bad_one_is_never_quoted() {
    install_crypto_provider();
    let without = ResendAdapter::new(route(None)).unwrap();
    assert!(without.callbacks().is_none());
    let with = adapter();
    assert!(with.callbacks().is_some());
    assert!(!format!("{with:?}").contains(&SECRET[6..]), "{with:?}");
    assert!(!format!("{:?}", route(Some(SECRET))).contains(&SECRET[6..]));

    let canary = "canarySecret7f3a";
    for bad in [
        canary.to_owned(),
        format!("whsec_{canary}!"),
        format!("whsec_{}", STANDARD.encode(canary)),
    ] {
        let err = ResendAdapter::new(route(Some(&bad))).unwrap_err();
        assert!(matches!(err, ResendError::WebhookSecret(_)), "{err:?}");
        assert!(!err.to_string().contains(canary), "{err}");
        assert!(!format!("{err:?}").contains(canary), "{err:?}");
    }
}

#[tokio::test]
async fn settings_read_the_webhook_secret_and_name_it_when_it_is_malformed() {
    install_crypto_provider();
    let context = RouteContext {
        name: "resend-main",
        timeout: Duration::from_secs(5),
    };
    let settings = |secret: &str| {
        serde_json::from_value::<Settings>(json!({
            "api_key": "re_123",
            "from": SENDER,
            "webhook_secret": secret,
        }))
        .unwrap()
    };
    let ok = settings(SECRET);
    assert_eq!(ok.secrets().len(), 2);
    assert!(ok.adapter(&context).await.unwrap().callbacks().is_some());
    let err = settings("canarySecret7f3a")
        .adapter(&context)
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(err.key, "webhook_secret");
    assert!(!err.to_string().contains("canarySecret7f3a"), "{err}");
    assert!(
        serde_json::from_value::<Settings>(json!({
            "api_key": "re_123",
            "from": SENDER,
            "signing_secret": SECRET,
        }))
        .is_err()
    );
}
