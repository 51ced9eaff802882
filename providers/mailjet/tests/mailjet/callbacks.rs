//! Event API callbacks: the Basic credentials of the callback URL (the header built by Python's
//! `base64`) accepted and everything else refused, and each event read as the crate docs' table
//! says, one at a time or grouped. Events are Mailjet's documented samples.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use herald_mailjet::{MailjetAdapter, MailjetError, MailjetRoute, Settings};
use herald_provider::callback::{
    CallbackError, CallbackEvent, CallbackRef, CredentialsError, ReceiptStatus,
};
use herald_provider::settings::{RouteContext, RouteSettings};
use herald_provider::{Adapter, ProviderKey};
use herald_provider_testkit::support::{
    json, malformed, python_basic_auth, python_with, read_basic_callback, unauthenticated,
};
use secrecy::SecretString;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::support::{API_KEY, FROM, SECRET, email, install_crypto_provider, route};

const USER: &str = "mailjet-events";
/// Must never show in an error or a `Debug`.
const PASSWORD: &str = "canary-callback-7f3a-0123456789abcdef";
const KEY: &str = "01970000-0000-7000-8000-000000000001-f1";

fn adapter_with(adjust: impl FnOnce(&mut MailjetRoute)) -> Result<MailjetAdapter, MailjetError> {
    install_crypto_provider();
    let mut route = route("https://api.mailjet.com".to_owned());
    route.callback_username = Some(USER.to_owned());
    route.callback_password = Some(SecretString::from(PASSWORD));
    adjust(&mut route);
    MailjetAdapter::new(route)
}

fn adapter() -> MailjetAdapter {
    adapter_with(|_| {}).expect("a valid route")
}

fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{user}:{password}")))
}

fn read_with(
    adapter: &MailjetAdapter,
    authorization: Option<&str>,
    body: &str,
) -> Result<Vec<CallbackEvent>, CallbackError> {
    let result = read_basic_callback(adapter, authorization, body);
    if let Err(err) = &result {
        assert!(
            !err.to_string().contains(PASSWORD),
            "the password leaked: {err}"
        );
    }
    result
}

/// `body`, posted with the route's credentials.
fn read(body: &str) -> Result<Vec<CallbackEvent>, CallbackError> {
    read_with(&adapter(), Some(&basic(USER, PASSWORD)), body)
}

/// Mailjet's documented sample of `kind` (guides/_event-api.md), with `CustomID` = herald's key.
fn sample(kind: &str) -> Value {
    let mut event = json!({
        "event": kind,
        "time": 1433333949,
        "MessageID": 19421777835146490u64,
        "email": "api@mailjet.com",
        "mj_campaign_id": 7257,
        "mj_contact_id": 4,
        "customcampaign": "",
        "CustomID": KEY,
        "Payload": "",
    });
    let extra = match kind {
        "sent" => json!({
            "mj_message_id": "19421777835146490",
            "smtp_reply": "sent (250 2.0.0 OK 1433333948 fa5si855896wjc.199 - gsmtp)",
        }),
        "open" => json!({"ip": "127.0.0.1", "geo": "US", "agent": "Mozilla/5.0"}),
        "click" => {
            json!({"url": "https://mailjet.com", "ip": "127.0.0.1", "geo": "FR", "agent": "Mozilla/5.0"})
        }
        "bounce" => json!({
            "blocked": true,
            "hard_bounce": true,
            "error_related_to": "recipient",
            "error": "user unknown",
        }),
        "blocked" => json!({"error_related_to": "recipient", "error": "user unknown"}),
        "spam" => json!({"source": "JMRPP"}),
        "unsub" => json!({"mj_list_id": 1, "ip": "127.0.0.1", "geo": "FR", "agent": "Mozilla/5.0"}),
        _ => json!({}),
    };
    event
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    event
}

fn expected(
    kind: &str,
    status: ReceiptStatus,
    vendor_status: &str,
    suppress: bool,
) -> CallbackEvent {
    CallbackEvent {
        event_id: format!("19421777835146490:{kind}:1433333949"),
        reference: CallbackRef::Key(KEY.to_owned()),
        message: Some("19421777835146490".to_owned()),
        status,
        vendor_status: vendor_status.to_owned(),
        at: Some(OffsetDateTime::from_unix_timestamp(1433333949).unwrap()),
        suppress,
    }
}

#[test]
fn the_callback_urls_credentials_are_accepted_and_anything_else_is_refused() {
    if !python_with(&[], "install python3: only its standard library is used") {
        return;
    }
    let longer_password = format!("{PASSWORD}x");
    let [authorization, wrong, longer, other_user] = <[String; 4]>::try_from(python_basic_auth(&[
        (USER, PASSWORD),
        (USER, "canary-callback-7f3b"),
        (USER, &longer_password),
        ("someone", PASSWORD),
    ]))
    .expect("one header each");
    assert_eq!(authorization, basic(USER, PASSWORD));
    let adapter = adapter();
    let body = sample("sent").to_string();
    assert_eq!(
        read_with(&adapter, Some(&authorization), &body),
        Ok(vec![expected(
            "sent",
            ReceiptStatus::Delivered,
            "sent",
            false
        )])
    );
    // The scheme's name is case-insensitive.
    let lower = authorization.replacen("Basic", "basic", 1);
    assert!(read_with(&adapter, Some(&lower), &body).is_ok());

    unauthenticated(read_with(&adapter, Some(&wrong), &body));
    unauthenticated(read_with(&adapter, Some(&longer), &body));
    unauthenticated(read_with(&adapter, Some(&other_user), &body));
    let why = unauthenticated(read_with(&adapter, None, &body));
    assert!(why.contains("Authorization"), "{why}");
    unauthenticated(read_with(&adapter, Some("Bearer abc"), &body));
    unauthenticated(read_with(&adapter, Some("Basic not-base64!"), &body));
    unauthenticated(read_with(&adapter, Some("Basic"), &body));
    // Refused before the body is read: an unauthenticated body is never judged.
    unauthenticated(read_with(&adapter, Some(&wrong), "not json"));
}

#[test]
fn each_documented_event_maps_to_its_receipt() {
    use ReceiptStatus as R;
    let cases = [
        // Mailjet's `sent`: the receiving server took it, which is delivered.
        ("sent", R::Delivered, "sent", false),
        ("open", R::Delivered, "open", false),
        ("click", R::Delivered, "click", false),
        ("bounce", R::Bounced, "bounce/user unknown", true),
        ("blocked", R::Undeliverable, "blocked/user unknown", false),
        ("spam", R::Complained, "spam", true),
        // An unsubscribe moves no receipt, but no more mail goes to them.
        ("unsub", R::None, "unsub", true),
    ];
    for (kind, status, vendor_status, suppress) in cases {
        assert_eq!(
            read(&sample(kind).to_string()),
            Ok(vec![expected(kind, status, vendor_status, suppress)]),
            "{kind}"
        );
    }
    let mut soft = sample("bounce");
    soft["hard_bounce"] = json!(false);
    soft["error"] = json!("quota exceeded");
    assert_eq!(
        read(&soft.to_string()),
        Ok(vec![expected(
            "bounce",
            R::Bounced,
            "bounce/quota exceeded",
            false
        )])
    );
    for other in ["deferred", "processed", ""] {
        assert_eq!(read(&sample(other).to_string()), Ok(vec![]), "{other}");
    }
}

#[test]
fn grouped_events_are_read_together_and_without_a_custom_id_name_the_message() {
    // The documented grouped sample: older events carry only `mj_message_id`, and no CustomID.
    let grouped = json!([
        {
            "customcampaign": "test",
            "email": "api@mailjet.com",
            "event": "sent",
            "mj_campaign_id": 483,
            "mj_contact_id": 4,
            "mj_message_id": "18858825588804172",
            "smtp_reply": "sent (250 2.0.0 OK 1424873937 fn1si2587485pab.205 - gsmtp)",
            "time": 1424873938
        },
        sample("open"),
        sample("processed"),
        {
            "event": "spam",
            "time": 1430812195,
            "MessageID": 13792286917004336u64,
            "email": "bounce@mailjet.com",
            "CustomID": "",
            "source": "JMRPP"
        }
    ]);
    let events = read(&grouped.to_string()).unwrap();
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(
        events[0].reference,
        CallbackRef::ProviderRef("18858825588804172".to_owned())
    );
    assert_eq!(events[0].event_id, "18858825588804172:sent:1424873938");
    assert_eq!(events[1].reference, CallbackRef::Key(KEY.to_owned()));
    // Every digit of a 17-digit MessageID, as the send's provider_ref has it.
    assert_eq!(
        events[2].reference,
        CallbackRef::ProviderRef("13792286917004336".to_owned())
    );
    assert_eq!(events[2].status, ReceiptStatus::Complained);
    assert_eq!(read("[]"), Ok(vec![]));
}

#[test]
fn a_body_that_is_not_mailjet_events_is_malformed() {
    let without = |field: &str| {
        let mut event = sample("bounce");
        event.as_object_mut().unwrap().remove(field);
        event.to_string()
    };
    for body in [
        "not json".to_owned(),
        "7".to_owned(),
        json!(["sent"]).to_string(),
        json!([sample("sent"), 7]).to_string(),
        without("event"),
        without("time"),
        without("MessageID"),
        json!({"event": 7, "time": 1}).to_string(),
    ] {
        malformed(read(&body));
    }
}

#[test]
fn every_send_names_the_key_as_custom_id() {
    let key = ProviderKey::new(KEY);
    let request = adapter().prepare(&email(), &key).unwrap();
    assert_eq!(json(&request.body)["Messages"][0]["CustomID"], KEY);
}

#[test]
fn events_are_read_only_with_both_credentials_and_the_password_is_never_shown() {
    let without = adapter_with(|route| {
        route.callback_username = None;
        route.callback_password = None;
    })
    .unwrap();
    assert!(without.callbacks().is_none());
    let with = adapter();
    assert!(with.callbacks().is_some());
    assert!(!format!("{with:?}").contains(PASSWORD), "{with:?}");

    let refused = [
        (
            adapter_with(|route| route.callback_password = None).unwrap_err(),
            "password",
        ),
        (
            adapter_with(|route| route.callback_username = None).unwrap_err(),
            "username",
        ),
        (
            adapter_with(|route| route.callback_username = Some("a:b".to_owned())).unwrap_err(),
            "username",
        ),
        (
            adapter_with(|route| route.callback_username = Some(String::new())).unwrap_err(),
            "username",
        ),
        (
            adapter_with(|route| route.callback_password = Some(SecretString::from("")))
                .unwrap_err(),
            "password",
        ),
        (
            adapter_with(|route| route.callback_password = Some(SecretString::from("x")))
                .unwrap_err(),
            "password",
        ),
        (
            adapter_with(|route| {
                route.callback_password = Some(SecretString::from(&PASSWORD[..31]));
            })
            .unwrap_err(),
            "password",
        ),
    ];
    for (err, which) in refused {
        let matches = match which {
            "username" => matches!(err, MailjetError::Callback(CredentialsError::Username)),
            _ => matches!(err, MailjetError::Callback(CredentialsError::Password)),
        };
        assert!(matches, "{which}: {err:?}");
        assert!(!format!("{err} {err:?}").contains(PASSWORD));
    }
}

#[tokio::test]
async fn settings_read_the_callback_credentials_and_name_the_one_missing() {
    install_crypto_provider();
    let context = RouteContext {
        name: "mailjet-main",
        timeout: Duration::from_secs(5),
    };
    let settings = |extra: Value| {
        let mut table = json!({"api_key": API_KEY, "api_secret": SECRET, "from": FROM});
        table
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value::<Settings>(table)
    };
    let both = settings(json!({"callback_username": USER, "callback_password": PASSWORD})).unwrap();
    assert_eq!(both.secrets().len(), 2);
    assert!(both.adapter(&context).await.unwrap().callbacks().is_some());
    let user_only = settings(json!({"callback_username": USER})).unwrap();
    let err = user_only.adapter(&context).await.map(|_| ()).unwrap_err();
    assert_eq!(err.key, "callback_password");
    let password_only = settings(json!({"callback_password": PASSWORD})).unwrap();
    let err = password_only
        .adapter(&context)
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(err.key, "callback_username");
    assert!(!err.to_string().contains(PASSWORD));
    assert!(settings(json!({"callback_user": USER})).is_err());
}
