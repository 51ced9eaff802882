//! Postmark's webhooks, read: only with the webhook URL's Basic credentials (built here by
//! Python's own `base64`, as any client builds them), each documented record type mapped to its
//! receipt, and the settings that turn reading on.

use std::time::Duration;

use herald_postmark::{PostmarkAdapter, Settings};
use herald_provider::callback::{CallbackError, CallbackEvent, CallbackRef, ReceiptStatus};
use herald_provider::settings::{RouteContext, RouteSettings};
use herald_provider_testkit::support::{
    malformed, python_basic_auth, python_with, read_basic_callback, unauthenticated,
};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::support::{CALLBACK_PASSWORD, CALLBACK_USER, adapter, install_crypto_provider, route};

const DELIVERY: &str = include_str!("../../../../fixtures/postmark/webhooks/delivery.json");
const BOUNCE: &str = include_str!("../../../../fixtures/postmark/webhooks/bounce.json");
const KEY: &str = "0190f3a5-7c1e-7a4b-9d2e-3f5a6b7c8d9e";
const MESSAGE: &str = "883953f4-6105-42a2-a16a-77a8eac79483";

fn postmark() -> PostmarkAdapter {
    adapter(&route("https://api.postmarkapp.com", "token"))
}

/// `Authorization: Basic …` for the route's credentials, as Python encodes them.
fn authorization() -> String {
    python_basic_auth(&[(CALLBACK_USER, CALLBACK_PASSWORD)]).remove(0)
}

fn read_with(
    adapter: &PostmarkAdapter,
    authorization: Option<&str>,
    body: &str,
) -> Result<Vec<CallbackEvent>, CallbackError> {
    read_basic_callback(adapter, authorization, body)
}

/// A documented webhook with herald's key in its metadata and `extra` fields.
fn stamped(documented: &str, extra: Value) -> String {
    let mut event: Value = serde_json::from_str(documented).unwrap();
    event["Metadata"] = json!({"herald_key": KEY});
    event
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    event.to_string()
}

fn at(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &Rfc3339).ok()
}

#[test]
fn the_webhook_urls_credentials_are_accepted_and_anything_else_is_refused() {
    if !python_with(&[], "install python3: only its standard library is used") {
        return;
    }
    let adapter = postmark();
    let [right, wrong, other_user] = <[String; 3]>::try_from(python_basic_auth(&[
        (CALLBACK_USER, CALLBACK_PASSWORD),
        (CALLBACK_USER, "0123456789abcdef0123456789abcdef-hooK"),
        ("someone", CALLBACK_PASSWORD),
    ]))
    .unwrap();
    assert_eq!(
        read_with(&adapter, Some(&right), DELIVERY).unwrap().len(),
        1
    );
    for refused in [Some(wrong.as_str()), Some(other_user.as_str()), None] {
        let why = unauthenticated(read_with(&adapter, refused, DELIVERY));
        assert!(!why.contains(CALLBACK_PASSWORD), "{why}");
    }
}

#[test]
fn the_documented_webhooks_name_their_message_and_a_deactivating_bounce_suppresses() {
    if !python_with(&[], "install python3: only its standard library is used") {
        return;
    }
    let adapter = postmark();
    let authorization = authorization();
    let delivered = read_with(&adapter, Some(&authorization), DELIVERY).unwrap();
    assert_eq!(
        delivered,
        vec![CallbackEvent {
            event_id: format!("{MESSAGE}:Delivery:2019-11-05T16:33:54.9070259Z"),
            // The documented metadata has no herald key: Postmark's message id.
            reference: CallbackRef::ProviderRef(MESSAGE.to_owned()),
            message: Some(MESSAGE.to_owned()),
            status: ReceiptStatus::Delivered,
            vendor_status: "Delivery".to_owned(),
            at: at("2019-11-05T16:33:54.9070259Z"),
            suppress: false,
        }]
    );
    let bounced = read_with(&adapter, Some(&authorization), &stamped(BOUNCE, json!({}))).unwrap();
    assert_eq!(
        bounced,
        vec![CallbackEvent {
            event_id: "Bounce:4323372036854775807".to_owned(),
            reference: CallbackRef::Key(KEY.to_owned()),
            message: Some(MESSAGE.to_owned()),
            status: ReceiptStatus::Bounced,
            vendor_status: "Bounce/HardBounce".to_owned(),
            at: at("2019-11-05T16:33:54.9070259Z"),
            // `Inactive: true`: Postmark deactivated the address because of it.
            suppress: true,
        }]
    );
}

/// What an event comes to: its receipt, and whether it suppresses the recipient.
type Mapped = (ReceiptStatus, bool);

#[test]
fn each_record_type_maps_to_its_receipt() {
    if !python_with(&[], "install python3: only its standard library is used") {
        return;
    }
    let cases: [(&str, Value, Option<Mapped>); 10] = [
        (
            "Open",
            json!({"ReceivedAt": "2019-11-05T16:33:54Z"}),
            Some((ReceiptStatus::Delivered, false)),
        ),
        (
            "Click",
            json!({"ReceivedAt": "2019-11-05T16:33:54Z"}),
            Some((ReceiptStatus::Delivered, false)),
        ),
        (
            "Bounce",
            json!({"Type": "SoftBounce", "ID": 7, "Inactive": false}),
            Some((ReceiptStatus::Bounced, false)),
        ),
        (
            "Bounce",
            json!({"Type": "HardBounce", "ID": 8, "Inactive": true}),
            Some((ReceiptStatus::Bounced, true)),
        ),
        ("Bounce", json!({"Type": "AutoResponder", "ID": 9}), None),
        ("Bounce", json!({"Type": "Unsubscribe", "ID": 10}), None),
        (
            "SpamComplaint",
            json!({"Type": "SpamComplaint", "ID": 42}),
            Some((ReceiptStatus::Complained, true)),
        ),
        (
            "SubscriptionChange",
            json!({"SuppressSending": true, "ChangedAt": "2019-11-05T16:33:54Z"}),
            Some((ReceiptStatus::None, true)),
        ),
        (
            "SubscriptionChange",
            json!({"SuppressSending": false}),
            None,
        ),
        ("InboundMessage", json!({}), None),
    ];
    let adapter = postmark();
    let authorization = authorization();
    for (kind, extra, expected) in cases {
        let mut fields = extra.clone();
        fields["RecordType"] = kind.into();
        let body = stamped(DELIVERY, fields);
        let events = read_with(&adapter, Some(&authorization), &body).unwrap();
        assert_eq!(
            events.first().map(|e| (e.status, e.suppress)),
            expected,
            "{kind} {extra}"
        );
        if let Some(event) = events.first() {
            assert_eq!(event.reference, CallbackRef::Key(KEY.to_owned()));
        }
    }
}

#[test]
fn a_body_that_is_not_a_postmark_webhook_is_malformed() {
    if !python_with(&[], "install python3: only its standard library is used") {
        return;
    }
    let adapter = postmark();
    let authorization = authorization();
    for body in [
        "not json",
        "[]",
        r#"{"MessageID": "m"}"#,
        r#"{"RecordType": "Delivery", "DeliveredAt": "2019-11-05T16:33:54Z"}"#,
    ] {
        malformed(read_with(&adapter, Some(&authorization), body));
    }
}

#[tokio::test]
async fn settings_read_the_callback_credentials_and_name_the_one_missing() {
    install_crypto_provider();
    let context = RouteContext {
        name: "postmark",
        timeout: Duration::from_secs(5),
    };
    let settings = |extra: Value| {
        let mut table = json!({"server_token": "token", "from": "noreply@acme.example"});
        table
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value::<Settings>(table)
    };
    let none = settings(json!({})).unwrap();
    let adapter = none.adapter(&context).await.unwrap();
    assert!(adapter.callbacks().is_none());
    assert_eq!(
        adapter.capabilities().query_visibility_lag,
        Some(herald_postmark::DEFAULT_VISIBILITY_LAG)
    );
    let both = settings(
        json!({"callback_username": CALLBACK_USER, "callback_password": CALLBACK_PASSWORD}),
    )
    .unwrap();
    assert_eq!(both.secrets().len(), 2);
    assert!(both.adapter(&context).await.unwrap().callbacks().is_some());
    let user_only = settings(json!({"callback_username": CALLBACK_USER})).unwrap();
    let err = user_only.adapter(&context).await.map(|_| ()).unwrap_err();
    assert_eq!(err.key, "callback_password");
    let zero_lag = settings(json!({"visibility_lag_ms": 0})).unwrap();
    let err = zero_lag.adapter(&context).await.map(|_| ()).unwrap_err();
    assert_eq!(err.key, "visibility_lag_ms");
}
