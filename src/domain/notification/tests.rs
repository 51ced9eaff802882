use std::collections::{BTreeMap, HashMap};

use serde_json::json;

use super::*;
use crate::domain::FieldError;
use crate::domain::routing::{Localized, RouteInfo, Routing, Template, Templates};
use herald_provider::PLACEHOLDER_OPEN;

fn routes() -> Routing {
    let all = RouteInfo {
        channels: Channel::ALL.to_vec(),
        delivery: Delivery::AtMostOnce,
        tenants: None,
        allowed_from: Vec::new(),
        tags: true,
        attachments: true,
        operator: None,
    };
    let mail = RouteInfo {
        channels: vec![Channel::Email],
        delivery: Delivery::AtLeastOnce,
        tenants: None,
        allowed_from: vec!["billing@acme.example".into(), "@news.acme.example".into()],
        tags: false,
        attachments: false,
        operator: None,
    };
    Routing::new(
        BTreeMap::from([("sandbox".into(), all), ("mail".into(), mail)]),
        Channel::ALL
            .iter()
            .map(|c| (*c, "sandbox".to_string()))
            .collect::<HashMap<_, _>>(),
    )
}

fn templates() -> Templates {
    Templates::new(BTreeMap::from([(
        "export-ready".to_string(),
        Template {
            subject: Some("Export {{ job }} ready".into()),
            text: Some("Download {{ job }}".into()),
            html: Some("<b>{{ job }}</b>".into()),
            locales: BTreeMap::from([(
                "fr".to_string(),
                Localized {
                    subject: Some("Export {{ job }} prêt".into()),
                    text: Some("Téléchargez {{ job }}".into()),
                    html: Some("<b>{{ job }}</b>".into()),
                },
            )]),
            locale: None,
        },
    )]))
}

fn parse(body: Value) -> Result<Notification, FieldError> {
    let request: NotificationRequest = serde_json::from_value(body).unwrap();
    request
        .parse("acme", &routes(), &templates(), OffsetDateTime::now_utc())
        .map(|(notification, _)| notification)
}

fn field_of(body: Value) -> String {
    parse(body).unwrap_err().field
}

/// An email on the default route (which allows no sender of its own) with `field` set.
fn email_with(field: &str, value: Value) -> Value {
    let mut body = json!({"channel":"email","to":"a@b.io","subject":"s","text":"t"});
    body[field] = value;
    body
}

/// The same on route `mail`, which allows two senders and keeps no tags.
fn mail_with(field: &str, value: Value) -> Value {
    let mut body = email_with(field, value);
    body["route"] = json!("mail");
    body
}

#[test]
fn each_large_field_has_a_limit_of_its_own() {
    let long = |bytes: usize| json!("x".repeat(bytes));
    assert_eq!(field_of(email_with("text", long(200 * 1024 + 1))), "text");
    assert_eq!(field_of(email_with("html", long(200 * 1024 + 1))), "html");
    assert!(parse(email_with("html", long(200 * 1024))).is_ok());
    let hook = |payload: Value| json!({"channel": "webhook", "to": "https://hooks.example.com/x", "payload": payload});
    assert_eq!(field_of(hook(json!({"blob": long(200 * 1024)}))), "payload");
    assert!(parse(hook(json!({"blob": long(1024)}))).is_ok());
    let templated = |job: Value| {
        json!({"channel": "email", "to": "a@b.io", "template": "export-ready",
               "data": {"job": job}})
    };
    assert_eq!(field_of(templated(long(64 * 1024))), "data");
    assert!(parse(templated(json!("42"))).is_ok());
}

#[test]
fn an_email_carries_its_own_sender_copies_tags_and_headers() {
    let mut body = mail_with("from", json!("\"Acme Billing\" <Billing@ACME.example>"));
    body["reply_to"] = json!("help@acme.example");
    body["cc"] = json!(["grace@example.com"]);
    body["bcc"] = json!(["audit@acme.example"]);
    body["headers"] = json!({"List-Unsubscribe": "<mailto:u@acme.example>"});
    let n = parse(body).unwrap();
    let email = &n.content.email;
    assert_eq!(
        email.from.as_deref(),
        Some("Acme Billing <Billing@ACME.example>")
    );
    assert_eq!(email.reply_to.as_deref(), Some("help@acme.example"));
    assert_eq!((email.cc.len(), email.bcc.len()), (1, 1));
    assert_eq!(email.headers["List-Unsubscribe"], "<mailto:u@acme.example>");

    let news = parse(mail_with("from", json!("digest@news.acme.example"))).unwrap();
    assert_eq!(
        news.content.email.from.as_deref(),
        Some("digest@news.acme.example")
    );
    let tagged = parse(email_with("tags", json!({"kind": "invoice"}))).unwrap();
    assert_eq!(tagged.content.email.tags["kind"], "invoice");
}

#[test]
fn attachments_are_kept_by_their_digest_and_refused_where_they_cannot_go() {
    let attachment =
        json!([{"filename": "a.txt", "content_type": "text/plain", "content": "aGk="}]);
    let request: NotificationRequest =
        serde_json::from_value(email_with("attachments", attachment.clone())).unwrap();
    let (n, files) = request
        .parse("acme", &routes(), &templates(), OffsetDateTime::now_utc())
        .unwrap();
    let kept = &n.content.email.attachments;
    assert_eq!((kept.len(), kept[0].size), (1, 2));
    assert_eq!(files.len(), 1);
    assert_eq!(
        (files[0].bytes.as_slice(), &files[0].sha256),
        (&b"hi"[..], &kept[0].sha256)
    );

    let mut forged = email_with("attachments", attachment.clone());
    forged["text"] = json!(format!("{PLACEHOLDER_OPEN}{}:mime}}}}", kept[0].sha256));
    let refused = parse(forged).unwrap_err();
    assert_eq!(refused.field, "text");
    assert!(
        refused.message.contains("herald writes it"),
        "{}",
        refused.message
    );

    let refused = parse(mail_with("attachments", attachment.clone())).unwrap_err();
    assert_eq!(refused.field, "attachments");
    assert!(
        refused.message.contains("cannot take attachments"),
        "{}",
        refused.message
    );
    let sms = json!({"channel":"sms","to":"+15555550100","text":"t","attachments": attachment});
    let refused = parse(sms).unwrap_err();
    assert_eq!(refused.field, "attachments");
    assert!(
        refused.message.contains("not used on the sms channel"),
        "{}",
        refused.message
    );
}

#[test]
fn a_valid_email_is_queued_on_the_default_route() {
    let n =
        parse(json!({"channel":"email","to":"ada@example.com","subject":"Hi","text":"x"})).unwrap();
    assert_eq!((n.state, n.route.as_str()), (State::Queued, "sandbox"));
    assert_eq!(n.delivery, Delivery::AtMostOnce);
    assert_eq!(n.next_attempt_at, Some(n.created_at));
}

#[test]
fn delivery_defaults_to_the_routes_policy() {
    let n = parse(json!({"channel":"email","to":"a@b.io","route":"mail","subject":"s","text":"t"}))
        .unwrap();
    assert_eq!(n.delivery, Delivery::AtLeastOnce);
}

#[test]
fn each_bad_field_is_named() {
    let cases = [
        (json!({"channel":"fax","to":"x"}), "channel"),
        (
            json!({"channel":"email","to":"nope","subject":"s","text":"t"}),
            "to",
        ),
        (json!({"channel":"sms","to":"555","text":"t"}), "to"),
        (
            json!({"channel":"webhook","to":"ftp://x.io","payload":{}}),
            "to",
        ),
        (
            json!({"channel":"email","to":"a@b.io","subject":"a\r\nBcc: e@x.io","text":"t"}),
            "subject",
        ),
        (
            json!({"channel":"email","to":"a@b.io","text":"t"}),
            "subject",
        ),
        (
            json!({"channel":"email","to":"a@b.io","subject":"s"}),
            "text",
        ),
        (
            json!({"channel":"sms","to":"+14155550100","text":"t","route":"mail"}),
            "route",
        ),
        (
            json!({"channel":"sms","to":"+14155550100","text":"t","route":"nope"}),
            "route",
        ),
        (
            json!({"channel":"sms","to":"+14155550100","text":"t","delivery":"twice"}),
            "delivery",
        ),
        (
            json!({"channel":"webhook","to":"https://h.io/x","payload":[1]}),
            "payload",
        ),
        (
            json!({"channel":"sms","to":"+14155550100","text":"t","metadata":{"k":1}}),
            "metadata.k",
        ),
        (
            json!({"channel":"email","to":"a@b.io","template":"nope"}),
            "template",
        ),
        (
            json!({"channel":"email","to":"a@b.io","template":"export-ready","data":{}}),
            "data",
        ),
        (
            json!({"channel":"email","to":"a@b.io","template":"export-ready","text":"t"}),
            "text",
        ),
        (
            json!({"channel":"sms","to":"+14155550100","text":"t","cc":["a@b.io"]}),
            "cc",
        ),
        (email_with("from", json!("billing@acme.example")), "from"),
        (mail_with("from", json!("ceo@acme.example")), "from"),
        (
            mail_with("from", json!("Eve <eve@news.acme.example.evil.io>")),
            "from",
        ),
        (
            mail_with("from", json!("Acme, Inc. <billing@acme.example>")),
            "from",
        ),
        (email_with("reply_to", json!("not an address")), "reply_to"),
        (email_with("cc", json!(["a@b.io", "nope"])), "cc[1]"),
        (email_with("bcc", json!(vec!["x@b.io"; 50])), "bcc"),
        (mail_with("tags", json!({"kind": "invoice"})), "tags"),
        (email_with("tags", json!({"kind": "in voice"})), "tags.kind"),
        (
            email_with("tags", json!({"herald_id": "x"})),
            "tags.herald_id",
        ),
        (
            email_with("headers", json!({"Bcc": "eve@x.io"})),
            "headers.Bcc",
        ),
        (
            email_with("headers", json!({"content-type": "text/x"})),
            "headers.content-type",
        ),
        (
            email_with("headers", json!({"X-A": "1\r\nBcc: eve@x.io"})),
            "headers.X-A",
        ),
        (email_with("headers", json!({"X A": "1"})), "headers.X A"),
        (
            email_with("headers", json!({"X-A": "1", "x-a": "2"})),
            "headers.x-a",
        ),
        (email_with("headers", json!({"X-A": 1})), "headers.X-A"),
    ];
    for (body, field) in cases {
        assert_eq!(field_of(body.clone()), field, "{body}");
    }
}

#[test]
fn a_template_is_rendered_with_its_data_and_html_is_escaped() {
    let n = parse(
        json!({"channel":"email","to":"a@b.io","template":"export-ready",
                         "data":{"job":"<42>"}}),
    )
    .unwrap();
    assert_eq!(n.content.subject.as_deref(), Some("Export <42> ready"));
    assert_eq!(n.content.html.as_deref(), Some("<b>&lt;42&gt;</b>"));
    assert_eq!(n.content.template.as_deref(), Some("export-ready"));
}

#[test]
fn a_send_at_that_is_not_rfc_3339_says_which_form_to_use() {
    let err = serde_json::from_value::<NotificationRequest>(json!({
        "channel": "email", "to": "a@example.com", "text": "hi",
        "send_at": "2026-12-01 09:30"
    }))
    .unwrap_err();
    assert!(
        err.to_string().contains(
            "`2026-12-01 09:30` is not an RFC 3339 date-time: use e.g. 2026-12-01T09:30:00Z"
        ),
        "{err}"
    );
}

#[test]
fn a_send_at_whose_offset_leaves_the_range_in_utc_is_refused() {
    for poison in [
        "0000-01-01T00:00:00+23:59",
        "9999-12-31T23:59:59-23:59",
        "1969-12-31T23:59:59Z",
    ] {
        let err = serde_json::from_value::<NotificationRequest>(json!({
            "channel": "email", "to": "a@example.com", "text": "hi", "send_at": poison
        }))
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("must be between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z"),
            "{poison}: {err}"
        );
    }
}

#[test]
fn send_at_in_the_future_sets_the_first_due_time() {
    let n = parse(json!({"channel":"sms","to":"+14155550100","text":"t",
                         "send_at":"2999-01-01T00:00:00Z"}))
    .unwrap();
    assert_eq!(n.next_attempt_at, n.send_at);
}

#[test]
fn a_locale_falls_back_to_its_language_then_to_the_default_and_is_recorded() {
    let export = |locale: &str| {
        parse(
            json!({"channel":"email","to":"a@b.io","template":"export-ready",
                     "data":{"job":"j-7"},"locale":locale}),
        )
    };
    for (asked, subject, recorded) in [
        ("fr", "Export j-7 prêt", Some("fr")),
        ("fr-CA", "Export j-7 prêt", Some("fr")),
        ("FR-ca", "Export j-7 prêt", Some("fr")),
        ("de-AT", "Export j-7 ready", None),
        ("frx", "Export j-7 ready", None),
    ] {
        let n = export(asked).unwrap();
        assert_eq!(n.content.subject.as_deref(), Some(subject), "{asked}");
        assert_eq!(n.content.locale.as_deref(), recorded, "{asked}");
    }
    for (locale, message) in [
        ("fr_CA", "must be a language tag such as fr or fr-CA"),
        ("", "must be a language tag such as fr or fr-CA"),
        ("fr--CA", "must be a language tag such as fr or fr-CA"),
        ("1fr", "must be a language tag such as fr or fr-CA"),
    ] {
        let err = export(locale).unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.message.as_str()),
            ("locale", message)
        );
    }
    let literal = parse(json!({"channel":"sms","to":"+14155550100","text":"t","locale":"fr"}));
    assert_eq!(literal.unwrap_err().message, "is only used with a template");
}

#[test]
fn an_expiry_is_later_than_now_and_than_send_at_and_given_one_way() {
    let sms = |extra: Value| {
        let mut body = json!({"channel":"sms","to":"+14155550100","text":"t"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let now = OffsetDateTime::now_utc();
    let n = parse(sms(json!({"ttl_seconds": 60}))).unwrap();
    let ttl = n.expires_at.unwrap() - n.created_at;
    assert_eq!(ttl, time::Duration::seconds(60));
    assert!(n.created_at >= now - time::Duration::seconds(5));
    let n = parse(sms(json!({"expires_at": "2999-01-01T01:00:00+01:00"}))).unwrap();
    assert_eq!(
        n.expires_at,
        Some(time::macros::datetime!(2999-01-01 00:00 UTC))
    );
    for (extra, field, message) in [
        (
            json!({"expires_at": "2999-01-01T00:00:00Z", "ttl_seconds": 60}),
            "ttl_seconds",
            "give expires_at or ttl_seconds, not both",
        ),
        (
            json!({"ttl_seconds": 0}),
            "ttl_seconds",
            "must be 1 to 31536000",
        ),
        (
            json!({"ttl_seconds": 31_536_001}),
            "ttl_seconds",
            "must be 1 to 31536000",
        ),
        (
            json!({"expires_at": "2001-01-01T00:00:00Z"}),
            "expires_at",
            "must be later than now",
        ),
        (
            json!({"send_at": "2999-01-01T00:00:00Z", "expires_at": "2999-01-01T00:00:00Z"}),
            "expires_at",
            "must be later than send_at",
        ),
        (
            json!({"send_at": "2999-01-01T00:00:00Z", "ttl_seconds": 60}),
            "ttl_seconds",
            "must be later than send_at",
        ),
    ] {
        let err = parse(sms(extra.clone())).unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.message.as_str()),
            (field, message),
            "{extra}"
        );
    }
}
