//! SparkPost's webhook batches, read: only with the webhook's Basic credentials (built here by
//! Python's own `base64`, as any client builds them), each documented event type mapped to its
//! receipt, copies to CC and BCC left out, and the settings that turn reading on.

use std::time::Duration;

use herald_provider::callback::{CallbackError, CallbackEvent, CallbackRef, ReceiptStatus};
use herald_provider::settings::{RouteContext, RouteSettings};
use herald_provider_testkit::support::{
    malformed, python_basic_auth, python_with, read_basic_callback, unauthenticated,
};
use herald_sparkpost::{Settings, SparkPostAdapter};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::support::{
    CALLBACK_PASSWORD, CALLBACK_USER, CLIENT_TIMEOUT, adapter, install_crypto_provider, route,
};

const BATCH: &str = include_str!("../../../../fixtures/sparkpost/webhook-batch.json");
const KEY: &str = "0190f3a5-7c1e-7a4b-9d2e-3f5a6b7c8d9e";

fn sparkpost() -> SparkPostAdapter {
    adapter(&route(
        "https://api.sparkpost.com/api/v1",
        "key",
        CLIENT_TIMEOUT,
    ))
}

/// `Authorization: Basic …` for the route's credentials, as Python encodes them.
fn authorization() -> String {
    python_basic_auth(&[(CALLBACK_USER, CALLBACK_PASSWORD)]).remove(0)
}

fn read_with(
    adapter: &SparkPostAdapter,
    authorization: Option<&str>,
    body: &str,
) -> Result<Vec<CallbackEvent>, CallbackError> {
    read_basic_callback(adapter, authorization, body)
}

/// One `message_event` (or `track_event`, …) of `kind` about herald's transmission.
fn event(group: &str, kind: &str, extra: Value) -> Value {
    let mut event = json!({
        "type": kind,
        "event_id": format!("ev-{kind}"),
        "transmission_id": "11668787484950529",
        "message_id": "000443ee14578172be22",
        "rcpt_to": "ada@example.com",
        "rcpt_meta": {"herald_key": KEY, "herald_notification_id": "n-1"},
        "timestamp": "1460989507",
    });
    event
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    json!({"msys": {group: event}})
}

#[test]
fn the_webhooks_credentials_are_accepted_and_anything_else_is_refused() {
    if !python_with(&[], "install python3: only its standard library is used") {
        return;
    }
    let adapter = sparkpost();
    let [right, wrong, other_user] = <[String; 3]>::try_from(python_basic_auth(&[
        (CALLBACK_USER, CALLBACK_PASSWORD),
        (CALLBACK_USER, "0123456789abcdef0123456789abcdef-hooK"),
        ("someone", CALLBACK_PASSWORD),
    ]))
    .unwrap();
    assert_eq!(read_with(&adapter, Some(&right), BATCH).unwrap().len(), 2);
    for refused in [Some(wrong.as_str()), Some(other_user.as_str()), None] {
        let why = unauthenticated(read_with(&adapter, refused, BATCH));
        assert!(!why.contains(CALLBACK_PASSWORD), "{why}");
    }
    let bearer = format!("Bearer {CALLBACK_PASSWORD}");
    assert!(unauthenticated(read_with(&adapter, Some(&bearer), BATCH)).contains("not HTTP Basic"));
}

#[test]
fn the_documented_batch_names_its_messages_by_transmission_and_a_hard_bounce_suppresses() {
    if !python_with(&[], "install python3: only its standard library is used") {
        return;
    }
    let events = read_with(&sparkpost(), Some(&authorization()), BATCH).unwrap();
    assert_eq!(
        events,
        vec![
            CallbackEvent {
                event_id: "92356927693813856".to_owned(),
                // Sent without herald's key in its metadata: SparkPost's transmission id.
                reference: CallbackRef::ProviderRef("65832150921904138".to_owned()),
                message: Some("65832150921904138".to_owned()),
                status: ReceiptStatus::Delivered,
                vendor_status: "delivery".to_owned(),
                at: OffsetDateTime::from_unix_timestamp(1_460_989_507).ok(),
                suppress: false,
            },
            CallbackEvent {
                event_id: "92356927693813857".to_owned(),
                reference: CallbackRef::ProviderRef("65832150921904139".to_owned()),
                message: Some("65832150921904139".to_owned()),
                status: ReceiptStatus::Bounced,
                // Class 10: invalid recipient, a hard bounce.
                vendor_status: "bounce/10".to_owned(),
                at: OffsetDateTime::from_unix_timestamp(1_460_989_507).ok(),
                suppress: true,
            },
        ]
    );
}

/// What an event comes to: its receipt, and whether it suppresses the recipient.
type Mapped = (ReceiptStatus, bool);

#[test]
fn each_event_type_maps_to_its_receipt_and_copies_are_left_out() {
    if !python_with(&[], "install python3: only its standard library is used") {
        return;
    }
    let cases: [(&str, &str, Value, Option<Mapped>); 18] = [
        (
            "message_event",
            "injection",
            json!({}),
            Some((ReceiptStatus::Sent, false)),
        ),
        (
            "message_event",
            "delivery",
            json!({}),
            Some((ReceiptStatus::Delivered, false)),
        ),
        (
            "track_event",
            "open",
            json!({}),
            Some((ReceiptStatus::Delivered, false)),
        ),
        (
            "track_event",
            "initial_open",
            json!({}),
            Some((ReceiptStatus::Delivered, false)),
        ),
        (
            "track_event",
            "click",
            json!({}),
            Some((ReceiptStatus::Delivered, false)),
        ),
        (
            "track_event",
            "amp_click",
            json!({}),
            Some((ReceiptStatus::Delivered, false)),
        ),
        (
            "message_event",
            "bounce",
            json!({"bounce_class": "10"}),
            Some((ReceiptStatus::Bounced, true)),
        ),
        (
            "message_event",
            "bounce",
            json!({"bounce_class": "21"}),
            Some((ReceiptStatus::Bounced, false)),
        ),
        (
            "message_event",
            "bounce",
            json!({"bounce_class": "1"}),
            Some((ReceiptStatus::Bounced, false)),
        ),
        (
            "message_event",
            "out_of_band",
            json!({"bounce_class": "30"}),
            Some((ReceiptStatus::Bounced, true)),
        ),
        (
            "message_event",
            "spam_complaint",
            json!({}),
            Some((ReceiptStatus::Complained, true)),
        ),
        (
            "message_event",
            "policy_rejection",
            json!({}),
            Some((ReceiptStatus::Undeliverable, false)),
        ),
        (
            "message_event",
            "generation_failure",
            json!({}),
            Some((ReceiptStatus::Undeliverable, false)),
        ),
        (
            "unsubscribe_event",
            "list_unsubscribe",
            json!({}),
            Some((ReceiptStatus::None, true)),
        ),
        (
            "unsubscribe_event",
            "link_unsubscribe",
            json!({}),
            Some((ReceiptStatus::None, true)),
        ),
        ("message_event", "delay", json!({}), None),
        // A copy's fate is another recipient's: it neither delivers nor suppresses ours.
        (
            "message_event",
            "bounce",
            json!({"bounce_class": "10", "rcpt_type": "cc"}),
            None,
        ),
        ("track_event", "open", json!({"rcpt_type": "bcc"}), None),
    ];
    let adapter = sparkpost();
    let authorization = authorization();
    for (group, kind, extra, expected) in cases {
        let body = json!([event(group, kind, extra.clone())]).to_string();
        let events = read_with(&adapter, Some(&authorization), &body).unwrap();
        let got = events.first().map(|e| (e.status, e.suppress));
        assert_eq!(got, expected, "{kind} {extra}");
        if let Some(event) = events.first() {
            assert_eq!(event.reference, CallbackRef::Key(KEY.to_owned()));
            assert_eq!(event.event_id, format!("ev-{kind}"));
        }
    }
    // The webhook's own test batch holds no event.
    let test_batch = r#"[{"msys": {}}]"#;
    assert!(
        read_with(&adapter, Some(&authorization), test_batch)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_body_that_is_not_a_sparkpost_batch_is_malformed() {
    if !python_with(&[], "install python3: only its standard library is used") {
        return;
    }
    let adapter = sparkpost();
    let authorization = authorization();
    let without_id =
        json!([{"msys": {"message_event": {"type": "delivery", "transmission_id": "1"}}}]);
    let unnamed = json!([{"msys": {"message_event": {"type": "delivery", "event_id": "e"}}}]);
    for body in [
        "not json".to_owned(),
        r#"{"msys": {}}"#.to_owned(),
        r#"[{"other": {}}]"#.to_owned(),
        r#"[{"msys": {"message_event": "delivery"}}]"#.to_owned(),
        r#"[{"msys": {"message_event": {"event_id": "e"}}}]"#.to_owned(),
        without_id.to_string(),
        unnamed.to_string(),
    ] {
        malformed(read_with(&adapter, Some(&authorization), &body));
    }
}

#[tokio::test]
async fn settings_read_the_callback_credentials_and_name_the_one_missing() {
    install_crypto_provider();
    let context = RouteContext {
        name: "sparkpost",
        timeout: Duration::from_secs(5),
    };
    let settings = |extra: Value| {
        let mut table = json!({"api_key": "key", "from": "noreply@acme.example"});
        table
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value::<Settings>(table)
    };
    let none = settings(json!({})).unwrap();
    assert!(none.adapter(&context).await.unwrap().callbacks().is_none());
    let both = settings(
        json!({"callback_username": CALLBACK_USER, "callback_password": CALLBACK_PASSWORD}),
    )
    .unwrap();
    assert_eq!(both.secrets().len(), 2);
    assert!(both.adapter(&context).await.unwrap().callbacks().is_some());
    let user_only = settings(json!({"callback_username": CALLBACK_USER})).unwrap();
    let err = user_only.adapter(&context).await.map(|_| ()).unwrap_err();
    assert_eq!(err.key, "callback_password");
    let password_only = settings(json!({"callback_password": CALLBACK_PASSWORD})).unwrap();
    let err = password_only
        .adapter(&context)
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(err.key, "callback_username");
    assert!(!err.to_string().contains(CALLBACK_PASSWORD));
    assert!(settings(json!({"webhook_user": CALLBACK_USER})).is_err());
}
