//! SendGrid's Event Webhook, read: only with a signature SendGrid's own library accepts (made by
//! `sign.py`, which checks each with `sendgrid.helpers.eventwebhook`), each documented event
//! mapped to its receipt, and the settings that turn reading on.

use std::time::Duration;

use herald_provider::Adapter;
use herald_provider::callback::{
    CallbackError, CallbackEvent, CallbackRef, CallbackRequest, ReceiptStatus,
};
use herald_provider::settings::{RouteContext, RouteSettings};
use herald_provider_testkit::support::{malformed, python_with, unauthenticated};
use herald_sendgrid::{SIGNATURE, SendGridAdapter, Settings, TIMESTAMP};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::support::{ToSign, adapter, install_crypto_provider, route, sendgrid_signatures};

const EVENTS: &str = include_str!("../../../../fixtures/sendgrid/events.json");
const KEY: &str = "0190f3a5-7c1e-7a4b-9d2e-3f5a6b7c8d9e";
const MESSAGE: &str = "14c5d75ce93";
const SDK: &str = "pip install sendgrid==6.12.5, the version .ci/run pins";

fn reader(public_key: &str) -> SendGridAdapter {
    let mut route = route("https://api.sendgrid.com", "SG.key");
    route.webhook_public_key = Some(public_key.to_owned());
    adapter(&route)
}

fn read(
    adapter: &SendGridAdapter,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &str,
) -> Result<Vec<CallbackEvent>, CallbackError> {
    let mut headers = HeaderMap::new();
    for (name, value) in [(TIMESTAMP, timestamp), (SIGNATURE, signature)] {
        if let Some(value) = value {
            headers.insert(name, HeaderValue::from_str(value).unwrap());
        }
    }
    adapter
        .callbacks()
        .expect("the route reads events")
        .read(&CallbackRequest {
            query: "",
            headers: &headers,
            body: body.as_bytes(),
            now: OffsetDateTime::now_utc(),
        })
}

fn now() -> String {
    OffsetDateTime::now_utc().unix_timestamp().to_string()
}

/// One event of `kind` about herald's message, with `extra` fields.
fn event(kind: &str, extra: Value) -> Value {
    let mut event = json!({
        "email": "ada@example.com",
        "timestamp": 1_513_299_569,
        "event": kind,
        "sg_event_id": "changes-on-every-retry",
        "sg_message_id": format!("{MESSAGE}.dfd.64b469.filter0001.16648.5515E0B88.0"),
        "herald_key": KEY,
    });
    event
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    event
}

#[test]
fn only_a_signature_sendgrids_library_accepts_over_this_timestamp_and_body_is_taken() {
    if !python_with(&["sendgrid"], SDK) {
        return;
    }
    let (ts, stale) = (
        now(),
        (OffsetDateTime::now_utc().unix_timestamp() - 600).to_string(),
    );
    let (key, signatures) = sendgrid_signatures(&[
        ToSign {
            timestamp: &ts,
            payload: EVENTS,
        },
        ToSign {
            timestamp: &stale,
            payload: EVENTS,
        },
        ToSign {
            timestamp: &ts,
            payload: "[]",
        },
    ]);
    let (_, other_key_signatures) = sendgrid_signatures(&[ToSign {
        timestamp: &ts,
        payload: EVENTS,
    }]);
    let adapter = reader(&key);

    assert_eq!(
        read(&adapter, Some(&ts), Some(&signatures[0]), EVENTS)
            .unwrap()
            .len(),
        2
    );
    let refused = [
        // Another body, another timestamp, another key's signature, nothing at all.
        read(&adapter, Some(&ts), Some(&signatures[2]), EVENTS),
        read(&adapter, Some(&now_plus(1)), Some(&signatures[0]), EVENTS),
        read(&adapter, Some(&ts), Some(&other_key_signatures[0]), EVENTS),
        read(&adapter, Some(&stale), Some(&signatures[1]), EVENTS),
        read(&adapter, None, Some(&signatures[0]), EVENTS),
        read(&adapter, Some(&ts), None, EVENTS),
        read(&adapter, Some(&ts), Some("not base64!"), EVENTS),
    ];
    for result in refused {
        unauthenticated(result);
    }
}

fn now_plus(seconds: i64) -> String {
    (OffsetDateTime::now_utc().unix_timestamp() + seconds).to_string()
}

/// What an event comes to: its receipt, and whether it suppresses the recipient.
type Mapped = (ReceiptStatus, bool);

#[test]
fn the_documented_events_and_each_type_map_to_their_receipts() {
    if !python_with(&["sendgrid"], SDK) {
        return;
    }
    let cases: [(&str, Value, Option<Mapped>); 13] = [
        ("processed", json!({}), Some((ReceiptStatus::Sent, false))),
        (
            "delivered",
            json!({}),
            Some((ReceiptStatus::Delivered, false)),
        ),
        ("open", json!({}), Some((ReceiptStatus::Delivered, false))),
        (
            "click",
            json!({"url": "https://example.com"}),
            Some((ReceiptStatus::Delivered, false)),
        ),
        (
            "bounce",
            json!({"type": "bounce"}),
            Some((ReceiptStatus::Bounced, true)),
        ),
        (
            "bounce",
            json!({"type": "blocked"}),
            Some((ReceiptStatus::Bounced, false)),
        ),
        (
            "dropped",
            json!({"reason": "Bounced Address"}),
            Some((ReceiptStatus::Undeliverable, true)),
        ),
        (
            "dropped",
            json!({"reason": "Invalid SMTPAPI header"}),
            Some((ReceiptStatus::Undeliverable, false)),
        ),
        (
            "spamreport",
            json!({}),
            Some((ReceiptStatus::Complained, true)),
        ),
        ("unsubscribe", json!({}), Some((ReceiptStatus::None, true))),
        (
            "group_unsubscribe",
            json!({"asm_group_id": 1}),
            Some((ReceiptStatus::None, true)),
        ),
        ("deferred", json!({"attempt": "1"}), None),
        ("group_resubscribe", json!({}), None),
    ];
    let bodies: Vec<String> = cases
        .iter()
        .map(|(kind, extra, _)| json!([event(kind, extra.clone())]).to_string())
        .collect();
    let ts = now();
    let mut to_sign: Vec<ToSign> = bodies
        .iter()
        .map(|payload| ToSign {
            timestamp: &ts,
            payload,
        })
        .collect();
    to_sign.push(ToSign {
        timestamp: &ts,
        payload: EVENTS,
    });
    let (key, signatures) = sendgrid_signatures(&to_sign);
    let adapter = reader(&key);

    for ((kind, extra, expected), (body, signature)) in
        cases.iter().zip(bodies.iter().zip(&signatures))
    {
        let events = read(&adapter, Some(&ts), Some(signature), body).unwrap();
        assert_eq!(
            events.first().map(|e| (e.status, e.suppress)),
            *expected,
            "{kind} {extra}"
        );
        if let Some(event) = events.first() {
            assert_eq!(event.reference, CallbackRef::Key(KEY.to_owned()));
            assert_eq!(event.message.as_deref(), Some(MESSAGE));
            assert_eq!(event.event_id, format!("{MESSAGE}:{kind}:1513299569"));
        }
    }
    // The documented batch has no herald key: it names SendGrid's message id.
    let documented = read(
        &adapter,
        Some(&ts),
        signatures.last().map(String::as_str),
        EVENTS,
    )
    .unwrap();
    assert_eq!(
        documented
            .iter()
            .map(|e| (&e.reference, e.vendor_status.as_str(), e.suppress))
            .collect::<Vec<_>>(),
        [
            (
                &CallbackRef::ProviderRef(MESSAGE.to_owned()),
                "delivered",
                false
            ),
            (
                &CallbackRef::ProviderRef(MESSAGE.to_owned()),
                "bounce/bounce",
                true
            ),
        ]
    );
}

#[test]
fn a_signed_body_that_is_not_sendgrid_events_is_malformed() {
    if !python_with(&["sendgrid"], SDK) {
        return;
    }
    let bodies = [
        "not json".to_owned(),
        r#"{"event": "delivered"}"#.to_owned(),
        "[1]".to_owned(),
        json!([{"timestamp": 1}]).to_string(),
        json!([{"event": "delivered", "timestamp": 1}]).to_string(),
        json!([{"event": "delivered", "sg_message_id": "m"}]).to_string(),
    ];
    let ts = now();
    let to_sign: Vec<ToSign> = bodies
        .iter()
        .map(|payload| ToSign {
            timestamp: &ts,
            payload,
        })
        .collect();
    let (key, signatures) = sendgrid_signatures(&to_sign);
    let adapter = reader(&key);
    for (body, signature) in bodies.iter().zip(&signatures) {
        malformed(read(&adapter, Some(&ts), Some(signature), body));
    }
}

#[tokio::test]
async fn settings_read_the_verification_key_and_the_look_up_only_when_asked() {
    install_crypto_provider();
    let context = RouteContext {
        name: "sendgrid",
        timeout: Duration::from_secs(5),
    };
    let settings = |extra: Value| {
        let mut table = json!({"api_key": "SG.key", "from": "noreply@acme.example"});
        table
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value::<Settings>(table)
    };
    let plain = settings(json!({}))
        .unwrap()
        .adapter(&context)
        .await
        .unwrap();
    assert!(plain.callbacks().is_none());
    assert_eq!(plain.capabilities().query_visibility_lag, None);
    let looked_up = settings(json!({"activity_lookup": true})).unwrap();
    assert_eq!(
        looked_up
            .adapter(&context)
            .await
            .unwrap()
            .capabilities()
            .query_visibility_lag,
        Some(herald_sendgrid::DEFAULT_VISIBILITY_LAG)
    );
    let stray_lag = settings(json!({"visibility_lag_ms": 1000})).unwrap();
    let err = stray_lag.adapter(&context).await.map(|_| ()).unwrap_err();
    assert_eq!(err.key, "visibility_lag_ms");
    let bad_key = settings(json!({"webhook_public_key": "nope"})).unwrap();
    let err = bad_key.adapter(&context).await.map(|_| ()).unwrap_err();
    assert_eq!(err.key, "webhook_public_key");
}
