//! Telnyx's message webhooks, read: only with a signature Telnyx's own library accepts (made by
//! `sign.py`, which checks each with `telnyx.lib.webhook_verification`), the key read back from
//! the signed payload's `webhook_url`, each event mapped to its receipt.

use herald_provider::Adapter;
use herald_provider::callback::{
    CallbackError, CallbackEvent, CallbackRef, CallbackRequest, ReceiptStatus,
};
use herald_provider_testkit::support::{malformed, python_with, unauthenticated};
use herald_telnyx::{SIGNATURE, TIMESTAMP, TelnyxAdapter};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::support::{ToSign, WEBHOOK_URL, adapter, route, telnyx_signatures};

const FINALIZED: &str = include_str!("../../../../fixtures/telnyx/webhook-finalized.json");
const KEY: &str = "0190f3a5-7c1e-7a4b-9d2e-3f5a6b7c8d9e";
const MESSAGE: &str = "40385f64-5717-4562-b3fc-2c963f66afa6";
const SDK: &str = "pip install telnyx==4.189.0 pynacl==1.6.2, the versions .ci/run pins";

fn reader(public_key: &str) -> TelnyxAdapter {
    let mut route = route("https://api.telnyx.com/v2", "KEY");
    route.webhook_url = Some(WEBHOOK_URL.to_owned());
    route.webhook_public_key = Some(public_key.to_owned());
    adapter(&route)
}

fn read(
    adapter: &TelnyxAdapter,
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
        .expect("the route reads webhooks")
        .read(&CallbackRequest {
            query: "",
            headers: &headers,
            body: body.as_bytes(),
            now: OffsetDateTime::now_utc(),
        })
}

fn seconds_from_now(seconds: i64) -> String {
    (OffsetDateTime::now_utc().unix_timestamp() + seconds).to_string()
}

/// The documented `message.finalized` webhook as `event_type`, the message's final `status`, its
/// `webhook_url` naming herald's key, and `errors`.
fn webhook(event_type: &str, status: &str, errors: Value) -> String {
    let mut webhook: Value = serde_json::from_str(FINALIZED).unwrap();
    webhook["data"]["event_type"] = event_type.into();
    webhook["data"]["id"] = format!("ev-{event_type}-{status}").into();
    let payload = &mut webhook["data"]["payload"];
    payload["to"][0]["status"] = status.into();
    payload["webhook_url"] = format!("{WEBHOOK_URL}?herald_key={KEY}").into();
    payload["errors"] = errors;
    webhook.to_string()
}

#[test]
fn only_a_signature_telnyxs_library_accepts_over_this_timestamp_and_body_is_taken() {
    if !python_with(&["telnyx", "nacl"], SDK) {
        return;
    }
    let (now, stale) = (seconds_from_now(0), seconds_from_now(-600));
    let (key, signatures) = telnyx_signatures(&[
        ToSign {
            timestamp: &now,
            payload: FINALIZED,
        },
        ToSign {
            timestamp: &stale,
            payload: FINALIZED,
        },
        ToSign {
            timestamp: &now,
            payload: "{}",
        },
    ]);
    let (_, other) = telnyx_signatures(&[ToSign {
        timestamp: &now,
        payload: FINALIZED,
    }]);
    let adapter = reader(&key);

    let events = read(&adapter, Some(&now), Some(&signatures[0]), FINALIZED).unwrap();
    assert_eq!(
        events,
        [CallbackEvent {
            event_id: "4ee8c3a6-4995-4309-a3c6-38e3db9ea4be".to_owned(),
            // The documented webhook's URL has no herald key: Telnyx's message id.
            reference: CallbackRef::ProviderRef(MESSAGE.to_owned()),
            message: Some(MESSAGE.to_owned()),
            status: ReceiptStatus::Delivered,
            vendor_status: "message.finalized/delivered".to_owned(),
            at: OffsetDateTime::parse(
                "2024-05-01T12:00:05.000+00:00",
                &time::format_description::well_known::Rfc3339
            )
            .ok(),
            suppress: false,
        }]
    );
    for refused in [
        read(&adapter, Some(&now), Some(&signatures[2]), FINALIZED),
        read(
            &adapter,
            Some(&seconds_from_now(1)),
            Some(&signatures[0]),
            FINALIZED,
        ),
        read(&adapter, Some(&now), Some(&other[0]), FINALIZED),
        read(&adapter, Some(&stale), Some(&signatures[1]), FINALIZED),
        read(&adapter, None, Some(&signatures[0]), FINALIZED),
        read(&adapter, Some(&now), None, FINALIZED),
    ] {
        unauthenticated(refused);
    }
}

/// What an event comes to: its receipt, and whether it suppresses the recipient.
type Mapped = (ReceiptStatus, bool);

#[test]
fn each_event_maps_to_its_receipt_under_the_key_its_webhook_url_names() {
    if !python_with(&["telnyx", "nacl"], SDK) {
        return;
    }
    let stop = json!([{"code": "40300", "title": "Blocked due to STOP message"}]);
    let cases: [(&str, &str, Value, Option<Mapped>); 7] = [
        (
            "message.sent",
            "sent",
            json!([]),
            Some((ReceiptStatus::Sent, false)),
        ),
        (
            "message.finalized",
            "delivered",
            json!([]),
            Some((ReceiptStatus::Delivered, false)),
        ),
        (
            "message.finalized",
            "delivery_failed",
            json!([{"code": "40001"}]),
            Some((ReceiptStatus::Undeliverable, false)),
        ),
        (
            "message.finalized",
            "sending_failed",
            stop,
            Some((ReceiptStatus::Undeliverable, true)),
        ),
        (
            "message.finalized",
            "delivery_unconfirmed",
            json!([]),
            Some((ReceiptStatus::Sent, false)),
        ),
        ("message.finalized", "queued", json!([]), None),
        ("message.received", "webhook_delivered", json!([]), None),
    ];
    let bodies: Vec<String> = cases
        .iter()
        .map(|(kind, status, errors, _)| webhook(kind, status, errors.clone()))
        .collect();
    let now = seconds_from_now(0);
    let to_sign: Vec<ToSign> = bodies
        .iter()
        .map(|payload| ToSign {
            timestamp: &now,
            payload,
        })
        .collect();
    let (key, signatures) = telnyx_signatures(&to_sign);
    let adapter = reader(&key);
    for ((kind, status, _, expected), (body, signature)) in
        cases.iter().zip(bodies.iter().zip(&signatures))
    {
        let events = read(&adapter, Some(&now), Some(signature), body).unwrap();
        assert_eq!(
            events.first().map(|e| (e.status, e.suppress)),
            *expected,
            "{kind} {status}"
        );
        if let Some(event) = events.first() {
            assert_eq!(event.reference, CallbackRef::Key(KEY.to_owned()));
            assert_eq!(event.message.as_deref(), Some(MESSAGE));
        }
    }
}

#[test]
fn a_signed_body_that_is_not_a_telnyx_message_webhook_is_malformed() {
    if !python_with(&["telnyx", "nacl"], SDK) {
        return;
    }
    let bodies = [
        "not json".to_owned(),
        "{}".to_owned(),
        json!({"data": {"event_type": "message.sent", "id": "e", "payload": {"to": []}}})
            .to_string(),
        json!({"data": {"event_type": "message.sent", "id": "e", "payload": {"id": ""}}})
            .to_string(),
    ];
    let now = seconds_from_now(0);
    let to_sign: Vec<ToSign> = bodies
        .iter()
        .map(|payload| ToSign {
            timestamp: &now,
            payload,
        })
        .collect();
    let (key, signatures) = telnyx_signatures(&to_sign);
    let adapter = reader(&key);
    for (body, signature) in bodies.iter().zip(&signatures) {
        malformed(read(&adapter, Some(&now), Some(signature), body));
    }
}
