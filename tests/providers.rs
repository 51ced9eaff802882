//! Each vendor adapter inside herald, against a local server that speaks the vendor's
//! documented API: the attempts a fault produces and where the notification ends, under the
//! route's delivery policy, with the fake vendor's ledger as ground truth.

mod support;

use std::time::Duration;

use serde_json::{Value, json};

use herald::dispatch::Dispatcher;
use support::{ACME, Backend, TestApp, spawn_stepped};

on_both_backends!(
    mailjet_settles_every_fault_by_looking_up_its_custom_id,
    postmark_settles_every_fault_by_looking_up_its_metadata_and_reads_its_webhooks,
    sendgrid_settles_by_email_activity_only_where_the_account_has_it,
    telnyx_leaves_a_lost_answer_unknown_until_its_signed_webhook_names_the_key,
    ses_leaves_a_lost_answer_unknown_until_its_sns_event_names_the_key,
    twilio_settles_every_fault_by_looking_the_message_up,
    smtp_refusals_and_the_rfc_1047_window_end_where_they_should,
    resend_settles_every_fault_by_replaying_its_key,
    sparkpost_settles_every_fault_by_replaying_its_key_and_reads_its_webhooks,
    an_emails_own_sender_copies_tags_and_headers_reach_resend_as_documented,
    onesignal_settles_every_fault_by_replaying_its_key,
    webhooks_are_signed_classified_and_kept_off_private_networks,
    slack_settles_every_fault_by_reading_its_key_back_from_the_history,
    fcm_leaves_a_lost_answer_to_the_delivery_policy_and_suppresses_unregistered_tokens,
    apns_speaks_http2_with_a_provider_token_and_suppresses_unregistered_devices,
);

/// A herald with one route, stepped by the test.
struct Rig {
    app: TestApp,
    dispatcher: Dispatcher,
}

async fn start_rig(backend: Backend, route: &str) -> Option<Rig> {
    support::install_crypto();
    let config = format!(
        "[dispatch]\nlease_seconds = 4\nretry_base_ms = 50\nretry_max_seconds = 1\n\n[routes.vendor]\ntimeout_seconds = 1\nmax_attempts = 10\n{route}\n"
    );
    let (app, dispatcher) = spawn_stepped(backend, &config).await?;
    Some(Rig { app, dispatcher })
}

impl Rig {
    /// Posts a vendor's report to the route's callback URL with HTTP Basic `credentials`, as a
    /// vendor that signs nothing does: the status herald answers.
    async fn report(&self, (user, password): (&str, &str), body: &Value) -> u16 {
        let response = self
            .app
            .http
            .post(self.app.url("/v1/callbacks/vendor"))
            .basic_auth(user, Some(password))
            .json(body)
            .send()
            .await
            .unwrap();
        response.status().as_u16()
    }

    /// Enqueues `body` on the route, dispatches until nothing is left, and reads it back.
    async fn deliver(&self, key: &str, mut body: Value) -> Value {
        body["route"] = json!("vendor");
        let created: Value = self
            .app
            .enqueue(ACME, key, &body)
            .await
            .json()
            .await
            .unwrap();
        let id = created["id"]
            .as_str()
            .unwrap_or_else(|| panic!("enqueued: {created}"));
        self.dispatcher
            .drain(Duration::from_secs(15))
            .await
            .expect("dispatch runs");
        self.app
            .get(ACME, &format!("/v1/notifications/{id}"))
            .await
            .json()
            .await
            .unwrap()
    }
}

fn outcome(n: &Value) -> (String, String, Vec<String>) {
    let results = n["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["result"].as_str().unwrap().to_owned())
        .collect();
    (
        n["state"].as_str().unwrap().to_owned(),
        n["certainty"].as_str().unwrap_or("-").to_owned(),
        results,
    )
}

fn expect(n: &Value, state: &str, certainty: &str, attempts: &[&str], label: &str) {
    let (s, c, a) = outcome(n);
    assert_eq!(
        (
            s.as_str(),
            c.as_str(),
            a.iter().map(String::as_str).collect::<Vec<_>>()
        ),
        (state, certainty, attempts.to_vec()),
        "{label}: {n:#}"
    );
}

fn email() -> Value {
    json!({"channel": "email", "to": "ada@example.com", "subject": "Hi", "text": "hello", "html": "<p>hello</p>"})
}

/// The faults every fake of a vendor that replays by key plays, in the order herald meets them.
#[derive(Debug, Clone, Copy)]
enum Played {
    Dropped,
    ErrorAfterProcessing,
    UnavailableBeforeProcessing,
    RateLimited,
    /// Held past the route's timeout: the replay meets the first request still in progress.
    Delay,
}

/// [`Played`] as the variant of the same name of a vendor fake's own `Fault`.
macro_rules! fault_of {
    ($fault:ident) => {
        |played: Played| match played {
            Played::Dropped => $fault::AcceptThenDrop,
            Played::ErrorAfterProcessing => $fault::ErrorAfterProcessing,
            Played::UnavailableBeforeProcessing => $fault::UnavailableBeforeProcessing,
            Played::RateLimited => $fault::RateLimited,
            Played::Delay => $fault::Delay,
        }
    };
}

/// Sends an email into each fault (`arm` sets the vendor's fake to play it next), and checks
/// that a replay under the notification's key settles it: delivered and known, delivered once
/// by the vendor's ledger (`deliveries`, by herald's key), the ambiguity settled by replay.
async fn replays_settle_every_fault(
    rig: &Rig,
    vendor: &str,
    arm: impl Fn(Option<Played>),
    deliveries: impl Fn(&str) -> u64,
) {
    let cases: &[(&str, Option<Played>, &[&str])] = &[
        ("plain", None, &["accepted"]),
        ("dropped", Some(Played::Dropped), &["ambiguous", "accepted"]),
        (
            "500",
            Some(Played::ErrorAfterProcessing),
            &["ambiguous", "accepted"],
        ),
        (
            "503",
            Some(Played::UnavailableBeforeProcessing),
            &["ambiguous", "accepted"],
        ),
        ("429", Some(Played::RateLimited), &["rejected", "accepted"]),
    ];
    for (label, fault, attempts) in cases {
        arm(*fault);
        let n = rig.deliver(label, email()).await;
        expect(
            &n,
            "delivered",
            "known",
            attempts,
            &format!("{vendor} {label}"),
        );
        let key = n["id"].as_str().unwrap();
        assert_eq!(deliveries(key), 1, "{vendor} {label}: delivered once");
        if attempts[0] == "ambiguous" {
            assert_eq!(
                n["attempts"][0]["settled_by"], "idempotent_replay",
                "{vendor} {label}"
            );
        }
    }
    // A timeout: the replay meets the first request still in progress (409), then its answer.
    arm(Some(Played::Delay));
    let n = rig.deliver("delayed", email()).await;
    let (state, certainty, attempts) = outcome(&n);
    assert_eq!(
        (state.as_str(), certainty.as_str()),
        ("delivered", "known"),
        "{vendor}: {n:#}"
    );
    assert_eq!(
        (
            attempts.first().map(String::as_str),
            attempts.last().map(String::as_str)
        ),
        (Some("ambiguous"), Some("accepted"))
    );
    assert_eq!(deliveries(n["id"].as_str().unwrap()), 1);
}

async fn resend_settles_every_fault_by_replaying_its_key(backend: Backend) {
    use herald_resend::fake::{self, Fault, Faults};
    let vendor = fake::spawn(fake::FakeConfig {
        delay: Duration::from_millis(1500),
        ..fake::FakeConfig::default()
    })
    .await
    .unwrap();
    let route = format!(
        "provider = \"resend\"\nbase_url = \"{}\"\napi_key = \"{}\"\nfrom = \"Acme <noreply@acme.example>\"\n",
        vendor.base_url(),
        fake::FakeConfig::default().api_key
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let arm = |played: Option<Played>| {
        vendor.set_faults(Faults::next(played.map(fault_of!(Fault))));
    };
    let deliveries = |key: &str| vendor.ledger().deliveries_of(key);
    replays_settle_every_fault(&rig, "resend", arm, deliveries).await;
}

async fn sparkpost_settles_every_fault_by_replaying_its_key_and_reads_its_webhooks(
    backend: Backend,
) {
    use herald_sparkpost::fake::{self, Fault, Faults};
    let config = fake::FakeConfig {
        delay: Duration::from_millis(1500),
        suppressed: vec!["suppressed@example.com".to_owned()],
        ..fake::FakeConfig::default()
    };
    let vendor = fake::spawn(config.clone()).await.unwrap();
    let password = "0123456789abcdef0123456789abcdef";
    let route = format!(
        "provider = \"sparkpost\"\nbase_url = \"{}\"\napi_key = \"{}\"\nfrom = \"Acme <noreply@acme.example>\"\n\
         callback_username = \"sparkpost\"\ncallback_password = \"{password}\"\n",
        vendor.base_url(),
        config.api_key
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let arm = |played: Option<Played>| {
        vendor.set_faults(Faults::next(played.map(fault_of!(Fault))));
    };
    let deliveries = |key: &str| vendor.ledger().deliveries_of(key);
    replays_settle_every_fault(&rig, "sparkpost", arm, deliveries).await;

    // A recipient on SparkPost's suppression list: created with none accepted, nothing sent.
    let mut on_list = email();
    on_list["to"] = json!("suppressed@example.com");
    let n = rig.deliver("suppressed", on_list).await;
    expect(&n, "failed", "known", &["rejected"], "sparkpost suppressed");
    assert_eq!(vendor.ledger().deliveries_of(n["id"].as_str().unwrap()), 0);

    // SparkPost's webhook names the message by the key in its metadata; a hard bounce moves the
    // receipt and suppresses the recipient. Without the webhook's credentials, nothing counts.
    let n = rig.deliver("bounced", email()).await;
    let id = n["id"].as_str().unwrap();
    let batch = json!([{"msys": {"message_event": {
        "type": "bounce", "bounce_class": "10", "event_id": "92356927693813857",
        "transmission_id": n["attempts"][0]["provider_ref"], "timestamp": "1460989507",
        "rcpt_meta": {"herald_key": id},
    }}}]);
    assert_eq!(rig.report(("someone", password), &batch).await, 401);
    assert_eq!(rig.report(("sparkpost", password), &batch).await, 200);
    let n = rig.app.show(id).await;
    assert_eq!(n["receipt"]["status"], "bounced", "{n:#}");
    assert_eq!(suppressed(&rig.app, "email").await, ["ada@example.com"]);
}

async fn an_emails_own_sender_copies_tags_and_headers_reach_resend_as_documented(backend: Backend) {
    use herald_resend::fake;
    let vendor = fake::spawn(fake::FakeConfig::default()).await.unwrap();
    let route = format!(
        "provider = \"resend\"\nbase_url = \"{}\"\napi_key = \"{}\"\nfrom = \"Acme <noreply@acme.example>\"\nallowed_from = [\"@billing.acme.example\"]\n",
        vendor.base_url(),
        fake::FakeConfig::default().api_key
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let mut body = email();
    body["from"] = json!("Acme Billing <invoices@billing.acme.example>");
    body["reply_to"] = json!("help@acme.example");
    body["cc"] = json!(["grace@example.com"]);
    body["bcc"] = json!(["audit@acme.example"]);
    body["tags"] = json!({"kind": "invoice"});
    body["headers"] = json!({"List-Unsubscribe": "<mailto:u@acme.example>"});

    let n = rig.deliver("own-sender", body).await;

    expect(&n, "delivered", "known", &["accepted"], "own sender");
    for (field, value) in [
        (
            "from",
            json!("Acme Billing <invoices@billing.acme.example>"),
        ),
        ("cc", json!(["grace@example.com"])),
        ("tags", json!({"kind": "invoice"})),
    ] {
        assert_eq!(n[field], value, "{field} as shown: {n:#}");
    }
    let sent = vendor.last_request().expect("Resend got the send").body;
    assert_eq!(sent["from"], "Acme Billing <invoices@billing.acme.example>");
    assert_eq!(sent["reply_to"], "help@acme.example");
    assert_eq!(sent["cc"], json!(["grace@example.com"]));
    assert_eq!(sent["bcc"], json!(["audit@acme.example"]));
    assert_eq!(
        sent["headers"],
        json!({"List-Unsubscribe": "<mailto:u@acme.example>"})
    );
    let tags = sent["tags"].as_array().unwrap();
    assert!(
        tags.contains(&json!({"name": "kind", "value": "invoice"}))
            && tags.iter().any(|t| t["name"] == "herald_notification_id"),
        "{tags:?}"
    );

    // A sender outside the route's `allowed_from` is refused before anything is stored.
    let mut stranger = email();
    stranger["route"] = json!("vendor");
    stranger["from"] = json!("ceo@acme.example");
    let refused = rig.app.enqueue(ACME, "stranger", &stranger).await;
    assert_eq!(refused.status(), 422);
    let problem: Value = refused.json().await.unwrap();
    assert_eq!(problem["field"], "from", "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("@billing.acme.example")),
        "{problem}"
    );
}

async fn onesignal_settles_every_fault_by_replaying_its_key(backend: Backend) {
    use herald_onesignal::fake::{self, Fault, Faults};
    let config = fake::FakeConfig {
        unsubscribed: vec!["gone-device".into()],
        ..fake::FakeConfig::default()
    };
    let vendor = fake::spawn(config.clone()).await.unwrap();
    let route = format!(
        "provider = \"onesignal\"\nbase_url = \"{}\"\napp_id = \"{}\"\napi_key = \"{}\"\n",
        vendor.base_url(),
        config.app_id,
        config.api_key
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let push = |to: &str| json!({"channel": "push", "to": to, "subject": "Hi", "text": "hello"});
    for (label, fault, attempts) in [
        ("plain", None, &["accepted"][..]),
        (
            "dropped",
            Some(Fault::AcceptThenDrop),
            &["ambiguous", "accepted"][..],
        ),
        (
            "500",
            Some(Fault::ErrorAfterProcessing),
            &["ambiguous", "accepted"][..],
        ),
        (
            "429",
            Some(Fault::RateLimited),
            &["rejected", "accepted"][..],
        ),
    ] {
        vendor.set_faults(Faults::next(fault));
        let n = rig.deliver(label, push("device-1")).await;
        expect(
            &n,
            "delivered",
            "known",
            attempts,
            &format!("onesignal {label}"),
        );
        let key = herald_onesignal::idempotency_key_for(&herald_provider::ProviderKey::new(
            n["id"].as_str().unwrap(),
        ));
        assert_eq!(
            vendor.ledger().deliveries_of(&key),
            1,
            "onesignal {label}: delivered once"
        );
    }
    let n = rig.deliver("unsubscribed", push("gone-device")).await;
    expect(
        &n,
        "failed",
        "known",
        &["rejected"],
        "onesignal unsubscribed device",
    );
}

async fn webhooks_are_signed_classified_and_kept_off_private_networks(backend: Backend) {
    use herald_webhook::fake::{self, Fault};
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let receiver = fake::spawn(fake::FakeConfig {
        secrets: vec![secret.into()],
        ..fake::FakeConfig::default()
    })
    .await
    .unwrap();
    let open = format!(
        "provider = \"webhook\"\nsecrets = [\"{secret}\"]\nallow_private_networks = true\ntenants = [\"acme\"]\ndelivery = \"at_most_once\"\n"
    );
    let Some(rig) = start_rig(backend, &open).await else {
        return;
    };
    let hook = json!({"channel": "webhook", "to": format!("{}/hooks/orders", receiver.base_url()), "payload": {"order": 42}});
    let cases = [
        ("plain", None, "delivered", "known", &["accepted"][..], 1),
        (
            "gone",
            Some(Fault::StatusBeforeProcessing(410)),
            "failed",
            "known",
            &["rejected"][..],
            0,
        ),
        (
            "429",
            Some(Fault::RateLimited),
            "delivered",
            "known",
            &["rejected", "accepted"][..],
            1,
        ),
        // A receiver without an outcome query or a dedup promise: at most once stops at unknown.
        (
            "500",
            Some(Fault::ErrorAfterProcessing),
            "unknown",
            "unknown",
            &["ambiguous"][..],
            1,
        ),
    ];
    for (label, fault, state, certainty, attempts, delivered) in cases {
        receiver.set_faults(fault.into_iter().collect());
        let n = rig.deliver(label, hook.clone()).await;
        expect(&n, state, certainty, attempts, &format!("webhook {label}"));
        let id = n["id"].as_str().unwrap();
        assert_eq!(
            receiver.ledger().deliveries_of(id),
            delivered,
            "webhook {label}: the receiver's ledger"
        );
    }
    let signed = receiver
        .ledger()
        .requests
        .into_iter()
        .find(|r| r.answer == Some(204))
        .expect("a delivered webhook");
    assert!(
        signed
            .header("webhook-signature")
            .is_some_and(|s| s.starts_with("v1,"))
    );

    // The default: private and loopback addresses are refused before any connection.
    let closed = format!("provider = \"webhook\"\nsecrets = [\"{secret}\"]\n");
    let Some(rig) = start_rig(backend, &closed).await else {
        return;
    };
    let before = receiver.ledger().connections;
    let n = rig.deliver("ssrf", hook).await;
    expect(
        &n,
        "failed",
        "known",
        &["rejected"],
        "webhook to loopback without allow_private_networks",
    );
    assert_eq!(
        receiver.ledger().connections,
        before,
        "no connection was made"
    );
}

async fn smtp_refusals_and_the_rfc_1047_window_end_where_they_should(backend: Backend) {
    use herald_smtp::fake::{self, Script, Step};
    let server = fake::spawn(Script::Accept).await.unwrap();
    let route = format!(
        "provider = \"smtp\"\nhost = \"127.0.0.1\"\nport = {}\ntls = \"none\"\nfrom = \"noreply@acme.example\"\n",
        server.addr().port()
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let cases = [
        (
            "queued",
            Script::Accept,
            "delivered",
            "known",
            &["accepted"][..],
            1,
        ),
        (
            "no such user",
            Script::reply(Step::RcptTo, 550, "5.1.1 No such user"),
            "failed",
            "known",
            &["rejected"][..],
            0,
        ),
        // The connection is lost after the final dot: the server may have the message.
        (
            "rfc 1047",
            Script::DropAfterDot,
            "unknown",
            "unknown",
            &["ambiguous"][..],
            1,
        ),
    ];
    for (label, script, state, certainty, attempts, delivered) in cases {
        server.set_script(script);
        let n = rig.deliver(label, email()).await;
        expect(&n, state, certainty, attempts, &format!("smtp {label}"));
        let message_id = herald_smtp::message_id(n["id"].as_str().unwrap());
        assert_eq!(
            server.ledger().deliveries_of(&message_id),
            delivered,
            "smtp {label}: the server's ledger"
        );
        assert!(
            n["attempts"][0]["evidence"]["detail"]
                .as_str()
                .unwrap()
                .contains(&message_id),
            "smtp {label}: evidence names the Message-ID"
        );
    }
}

async fn twilio_settles_every_fault_by_looking_the_message_up(backend: Backend) {
    use herald_twilio::fake::{self, Fault};
    use secrecy::SecretString;
    let mut config = fake::FakeConfig::new(
        "AC00000000000000000000000000000001",
        SecretString::from("twilio-token"),
    );
    config.visibility_lag = Duration::from_millis(200);
    config.delay = Duration::from_millis(1500);
    let vendor = fake::spawn(config).await.unwrap();
    let route = format!(
        "provider = \"twilio\"\nbase_url = \"{}\"\naccount_sid = \"AC00000000000000000000000000000001\"\nauth_token = \"twilio-token\"\nfrom = \"+15005550006\"\nvisibility_lag_ms = 500\n",
        vendor.base_url()
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let cases = [
        ("plain", None, &["accepted"][..], None),
        (
            "dropped",
            Some(Fault::AcceptThenDrop),
            &["ambiguous"][..],
            Some("outcome_query"),
        ),
        (
            "500",
            Some(Fault::ErrorAfterProcessing),
            &["ambiguous"][..],
            Some("outcome_query"),
        ),
        (
            "timeout",
            Some(Fault::Delay),
            &["ambiguous"][..],
            Some("outcome_query"),
        ),
        // Not processed, but a 503 does not say so: the look-up finds nothing after the lag,
        // which settles it as not accepted, and the retry is then known.
        (
            "503",
            Some(Fault::UnavailableBeforeProcessing),
            &["ambiguous", "accepted"][..],
            Some("outcome_query"),
        ),
        (
            "429",
            Some(Fault::RateLimited),
            &["rejected", "accepted"][..],
            None,
        ),
    ];
    for (label, fault, attempts, settled_by) in cases {
        vendor.set_faults(fault);
        let text = format!("Your code is {label}");
        let n = rig
            .deliver(
                label,
                json!({"channel": "sms", "to": "+14155550100", "text": text}),
            )
            .await;
        expect(
            &n,
            "delivered",
            "known",
            attempts,
            &format!("twilio {label}"),
        );
        assert_eq!(
            n["attempts"][0]["settled_by"].as_str(),
            settled_by,
            "twilio {label}: {n:#}"
        );
        assert_eq!(
            vendor.ledger().deliveries_of(&text),
            1,
            "twilio {label}: delivered once"
        );
    }
}

/// Sends `body` into each fault a vendor without a key meets (`arm` sets its fake to play it
/// next), and checks that the look-up settles it: delivered and known, delivered once by the
/// vendor's ledger (`deliveries`, by herald's key), an ambiguity settled by the look-up (and,
/// where the vendor never took it, sent again).
async fn lookups_settle_every_fault(
    rig: &Rig,
    vendor: &str,
    body: &Value,
    arm: impl Fn(Option<Played>),
    deliveries: impl Fn(&str) -> u64,
) {
    // The label, the fault, the attempts' results, and how the first was settled.
    type Case<'a> = (&'a str, Option<Played>, &'a [&'a str], Option<&'a str>);
    let cases: &[Case] = &[
        ("plain", None, &["accepted"], None),
        (
            "dropped",
            Some(Played::Dropped),
            &["ambiguous"],
            Some("outcome_query"),
        ),
        (
            "500",
            Some(Played::ErrorAfterProcessing),
            &["ambiguous"],
            Some("outcome_query"),
        ),
        (
            "503",
            Some(Played::UnavailableBeforeProcessing),
            &["ambiguous", "accepted"],
            Some("outcome_query"),
        ),
        (
            "429",
            Some(Played::RateLimited),
            &["rejected", "accepted"],
            None,
        ),
    ];
    for (label, fault, attempts, settled_by) in cases {
        arm(*fault);
        let n = rig.deliver(label, body.clone()).await;
        expect(
            &n,
            "delivered",
            "known",
            attempts,
            &format!("{vendor} {label}"),
        );
        assert_eq!(
            n["attempts"][0]["settled_by"].as_str(),
            *settled_by,
            "{vendor} {label}: {n:#}"
        );
        assert_eq!(
            deliveries(n["id"].as_str().unwrap()),
            1,
            "{vendor} {label}: delivered once"
        );
    }
}

/// The tenant's suppressed recipients on `channel`, sorted.
async fn suppressed(app: &TestApp, channel: &str) -> Vec<String> {
    let list: Value = app
        .get(ACME, &format!("/v1/suppressions?channel={channel}"))
        .await
        .json()
        .await
        .unwrap();
    let mut recipients: Vec<String> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["recipient"].as_str().unwrap().to_owned())
        .collect();
    recipients.sort();
    recipients
}

async fn sendgrid_settles_by_email_activity_only_where_the_account_has_it(backend: Backend) {
    use herald_sendgrid::fake::{self, Fault, Faults};
    let config = fake::FakeConfig {
        visibility_lag: Duration::from_millis(200),
        delay: Duration::from_millis(1500),
        ..fake::FakeConfig::default()
    };
    let vendor = fake::spawn(config.clone()).await.unwrap();
    let route = |lookup: &str| {
        format!(
            "provider = \"sendgrid\"\nbase_url = \"{}\"\napi_key = \"{}\"\nfrom = \"noreply@acme.example\"\n{lookup}",
            vendor.base_url(),
            config.api_key
        )
    };
    let arm = |played: Option<Played>| {
        vendor.set_faults(Faults::next(played.map(fault_of!(Fault))));
    };
    let deliveries = |key: &str| vendor.ledger().deliveries_of(key);
    let Some(rig) = start_rig(
        backend,
        &route("activity_lookup = true\nvisibility_lag_ms = 500\n"),
    )
    .await
    else {
        return;
    };
    lookups_settle_every_fault(&rig, "sendgrid", &email(), arm, deliveries).await;

    // Without Email Activity nothing can settle a lost answer: at most once stops at unknown.
    let Some(rig) = start_rig(backend, &route("")).await else {
        return;
    };
    arm(Some(Played::Dropped));
    let n = rig.deliver("no activity", email()).await;
    expect(
        &n,
        "unknown",
        "unknown",
        &["ambiguous"],
        "sendgrid without activity",
    );
    assert_eq!(deliveries(n["id"].as_str().unwrap()), 1);
}

async fn telnyx_leaves_a_lost_answer_unknown_until_its_signed_webhook_names_the_key(
    backend: Backend,
) {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use herald_telnyx::fake::{self, Fault, Faults};
    use ring::signature::{Ed25519KeyPair, KeyPair};
    let signer = Ed25519KeyPair::from_seed_unchecked(&[7; 32]).expect("a seed");
    let public_key = STANDARD.encode(signer.public_key().as_ref());
    let config = fake::FakeConfig::default();
    let vendor = fake::spawn(config.clone()).await.unwrap();
    support::install_crypto();
    // The callback URL is herald's own, which the rig knows only once it runs: a placeholder
    // that names the route's path is enough, since herald reads the key from the URL's query.
    let route = format!(
        "provider = \"telnyx\"\nbase_url = \"{}\"\napi_key = \"{}\"\nfrom = \"+18445550001\"\n\
         webhook_url = \"https://herald.example.com/v1/callbacks/vendor\"\nwebhook_public_key = \"{public_key}\"\n",
        vendor.base_url(),
        config.api_key
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let sms = json!({"channel": "sms", "to": "+18445550002", "text": "Your code is 123456"});
    let n = rig.deliver("plain", sms.clone()).await;
    expect(&n, "delivered", "known", &["accepted"], "telnyx plain");

    // The answer is lost: Telnyx took it, and nothing herald can ask says so.
    vendor.set_faults(Faults::next([Fault::AcceptThenDrop]));
    let n = rig.deliver("dropped", sms).await;
    expect(&n, "unknown", "unknown", &["ambiguous"], "telnyx dropped");
    let id = n["id"].as_str().unwrap();
    let message = &vendor.ledger().deliveries[1];
    assert_eq!(message.key, id);

    // Telnyx's webhook echoes the message's webhook_url, herald's key in it; signed, it settles.
    let body = json!({"data": {
        "event_type": "message.finalized", "id": "4ee8c3a6-4995-4309-a3c6-38e3db9ea4be",
        "occurred_at": "2024-05-01T12:00:05.000+00:00", "record_type": "event",
        "payload": {
            "id": message.message_id, "to": [{"phone_number": "+18445550002", "status": "delivered"}],
            "webhook_url": format!("https://herald.example.com/v1/callbacks/vendor?herald_key={id}"),
            "errors": [],
        },
    }})
    .to_string();
    let post = |signature: String, timestamp: &str| {
        rig.app
            .http
            .post(rig.app.url("/v1/callbacks/vendor"))
            .header("telnyx-timestamp", timestamp)
            .header("telnyx-signature-ed25519", signature)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp().to_string();
    let signed = |timestamp: &str| {
        STANDARD.encode(
            signer
                .sign(format!("{timestamp}|{body}").as_bytes())
                .as_ref(),
        )
    };
    let forged = STANDARD.encode([0u8; 64]);
    assert_eq!(post(forged, &now).await.unwrap().status(), 401);
    assert_eq!(post(signed(&now), &now).await.unwrap().status(), 200);
    let n = rig.app.show(id).await;
    assert_eq!(
        (n["state"].as_str(), n["certainty"].as_str()),
        (Some("delivered"), Some("known")),
        "{n:#}"
    );
    assert_eq!(vendor.ledger().deliveries_of(id), 1);
}

async fn ses_leaves_a_lost_answer_unknown_until_its_sns_event_names_the_key(backend: Backend) {
    use herald_ses::fake::{self, Fault, Faults};
    let config = fake::FakeConfig::default();
    let vendor = fake::spawn(config.clone()).await.unwrap();
    let route = format!(
        "provider = \"ses\"\nregion = \"{}\"\nbase_url = \"{}\"\naccess_key_id = \"{}\"\n\
         secret_access_key = \"{}\"\nfrom = \"noreply@acme.example\"\nconfiguration_set = \"herald-events\"\n\
         sns_topic_arn = \"{}\"\nsns_origin = \"{}\"\n",
        config.region,
        vendor.base_url(),
        config.access_key_id,
        config.secret_access_key,
        config.topic_arn,
        vendor.origin(),
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let post = |body: String| {
        rig.app
            .http
            .post(rig.app.url("/v1/callbacks/vendor"))
            .header("x-amz-sns-message-type", "Notification")
            .header("content-type", "text/plain; charset=UTF-8")
            .body(body)
            .send()
    };

    // The subscription: while SNS cannot hand over its certificate, SNS is told to come back.
    vendor.set_lookup_faults(Faults::next([Fault::UnavailableBeforeProcessing]));
    let answer = post(vendor.subscription_confirmation()).await.unwrap();
    assert_eq!(answer.status(), 503);
    let problem: Value = answer.json().await.unwrap();
    assert!(
        problem["type"]
            .as_str()
            .unwrap()
            .ends_with("/callback-vendor-unreachable"),
        "{problem}"
    );
    assert_eq!(
        post(vendor.subscription_confirmation())
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(vendor.confirmations(), 1);

    let email = json!({"channel": "email", "to": "ada@example.com", "subject": "Your code", "text": "123456"});
    let n = rig.deliver("plain", email.clone()).await;
    expect(&n, "delivered", "known", &["accepted"], "ses plain");

    // The answer is lost: SES took it, and nothing herald can ask says so.
    vendor.set_faults(Faults::next([Fault::AcceptThenDrop]));
    let n = rig.deliver("dropped", email).await;
    expect(&n, "unknown", "unknown", &["ambiguous"], "ses dropped");
    let id = n["id"].as_str().unwrap();
    let message = &vendor.ledger().deliveries[1];
    assert_eq!(message.key, id);

    // SES's event carries the message's tags, herald's key among them; signed by SNS, it settles.
    let delivery = json!({
        "eventType": "Delivery",
        "mail": {"timestamp": "2026-12-03T10:00:00.000Z", "messageId": message.message_id,
                 "commonHeaders": {"to": ["ada@example.com"]}, "tags": {"herald_key": [id]}},
        "delivery": {"timestamp": "2026-12-03T10:00:02.000Z", "recipients": ["ada@example.com"]},
    });
    let signed = vendor.notification(&delivery);
    let forged = signed.replace("Delivery", "Bounce");
    assert_eq!(post(forged).await.unwrap().status(), 401);
    assert_eq!(post(signed.clone()).await.unwrap().status(), 200);
    let n = rig.app.show(id).await;
    assert_eq!(
        (n["state"].as_str(), n["certainty"].as_str()),
        (Some("delivered"), Some("known")),
        "{n:#}"
    );
    // SNS sends a message again until it is answered: a repeat changes nothing.
    let again: Value = post(signed).await.unwrap().json().await.unwrap();
    assert_eq!(
        (again["new"].as_u64(), again["repeats"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(vendor.ledger().deliveries_of(id), 1);
}

async fn mailjet_settles_every_fault_by_looking_up_its_custom_id(backend: Backend) {
    use herald_mailjet::fake::{self, Fault};
    use secrecy::SecretString;
    let mut config = fake::FakeConfig::new("mj-key", SecretString::from("mj-secret"));
    config.visibility_lag = Duration::from_millis(200);
    config.delay = Duration::from_millis(1500);
    let vendor = fake::spawn(config).await.unwrap();
    let route = format!(
        "provider = \"mailjet\"\nbase_url = \"{}\"\napi_key = \"mj-key\"\napi_secret = \"mj-secret\"\nfrom = \"noreply@acme.example\"\nvisibility_lag_ms = 500\n",
        vendor.base_url()
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let arm = |played: Option<Played>| {
        vendor.set_faults(played.map(fault_of!(Fault)));
    };
    let deliveries = |key: &str| vendor.ledger().deliveries_of(key);
    lookups_settle_every_fault(&rig, "mailjet", &email(), arm, deliveries).await;
}

async fn postmark_settles_every_fault_by_looking_up_its_metadata_and_reads_its_webhooks(
    backend: Backend,
) {
    use herald_postmark::fake::{self, Fault, Faults};
    let config = fake::FakeConfig {
        visibility_lag: Duration::from_millis(200),
        delay: Duration::from_millis(1500),
        inactive: vec!["gone@example.com".to_owned()],
        ..fake::FakeConfig::default()
    };
    let vendor = fake::spawn(config.clone()).await.unwrap();
    let password = "0123456789abcdef0123456789abcdef";
    let route = format!(
        "provider = \"postmark\"\nbase_url = \"{}\"\nserver_token = \"{}\"\nfrom = \"noreply@acme.example\"\n\
         visibility_lag_ms = 500\ncallback_username = \"postmark\"\ncallback_password = \"{password}\"\n",
        vendor.base_url(),
        config.server_token
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let arm = |played: Option<Played>| {
        vendor.set_faults(Faults::next(played.map(fault_of!(Fault))));
    };
    let deliveries = |key: &str| vendor.ledger().deliveries_of(key);
    lookups_settle_every_fault(&rig, "postmark", &email(), arm, deliveries).await;

    // An inactive recipient: refused, known, and suppressed here too.
    let mut gone = email();
    gone["to"] = json!("gone@example.com");
    let n = rig.deliver("inactive", gone).await;
    expect(&n, "failed", "known", &["rejected"], "postmark inactive");
    assert_eq!(suppressed(&rig.app, "email").await, ["gone@example.com"]);

    // A webhook names the message by the key in its metadata; a bounce that deactivated the
    // address moves the receipt and suppresses it. Without the URL's credentials, nothing counts.
    let n = rig.deliver("bounced", email()).await;
    let id = n["id"].as_str().unwrap();
    let bounce = json!({
        "RecordType": "Bounce", "ID": 4323372036854775807_i64, "Type": "HardBounce",
        "MessageID": n["attempts"][0]["provider_ref"], "Metadata": {"herald_key": id},
        "Email": "ada@example.com", "BouncedAt": "2019-11-05T16:33:54.9070259Z", "Inactive": true,
    });
    assert_eq!(rig.report(("someone", password), &bounce).await, 401);
    assert_eq!(rig.report(("postmark", password), &bounce).await, 200);
    assert_eq!(rig.app.show(id).await["receipt"]["status"], "bounced");
    assert_eq!(
        suppressed(&rig.app, "email").await,
        ["ada@example.com", "gone@example.com"]
    );
}

async fn slack_settles_every_fault_by_reading_its_key_back_from_the_history(backend: Backend) {
    use herald_slack::fake::{self, Fault, Faults};
    let config = fake::FakeConfig {
        visibility_lag: Duration::from_millis(200),
        delay: Duration::from_millis(1500),
        archived: vec!["C0ARCHIVED".to_owned()],
        ..fake::FakeConfig::default()
    };
    let vendor = fake::spawn(config.clone()).await.unwrap();
    let route = format!(
        "provider = \"slack\"\nbase_url = \"{}\"\nbot_token = \"{}\"\nvisibility_lag_ms = 500\n",
        vendor.base_url(),
        config.bot_token
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let blocks = json!([{"type": "section", "text": {"type": "mrkdwn", "text": "*Deploy* done"}}]);
    let chat =
        json!({"channel": "chat", "to": fake::CHANNEL, "text": "Deploy done", "blocks": blocks});
    let arm = |played: Option<Played>| {
        vendor.set_faults(Faults::next(played.map(fault_of!(Fault))));
    };
    let deliveries = |key: &str| vendor.ledger().deliveries_of(key);
    lookups_settle_every_fault(&rig, "slack", &chat, arm, deliveries).await;
    let posted = vendor.last_request().expect("a post");
    assert_eq!(posted.body["blocks"], blocks, "{:#}", posted.body);

    // An archived channel takes nothing: refused, known, and no suppression (it may reopen).
    let mut archived = chat.clone();
    archived["to"] = json!("C0ARCHIVED");
    let n = rig.deliver("archived", archived).await;
    expect(&n, "failed", "known", &["rejected"], "slack archived");
    assert_eq!(n["attempts"][0]["evidence"]["vendor_code"], "is_archived");
}

async fn fcm_leaves_a_lost_answer_to_the_delivery_policy_and_suppresses_unregistered_tokens(
    backend: Backend,
) {
    use herald_fcm::fake::{self, Fault, Faults};
    let vendor = fake::spawn(fake::FakeConfig {
        unregistered: vec!["gone-token".to_owned()],
        ..fake::FakeConfig::default()
    })
    .await
    .unwrap();
    let route = format!(
        "provider = \"fcm\"\nbase_url = \"{}\"\nservice_account = \'\'\'{}\'\'\'\n",
        vendor.base_url(),
        vendor.service_account()
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let push = |to: &str| json!({"channel": "push", "to": to, "subject": "Hi", "text": "hello"});
    let n = rig.deliver("plain", push("token-1")).await;
    expect(&n, "delivered", "known", &["accepted"], "fcm plain");
    let id = n["id"].as_str().unwrap();
    assert_eq!(
        vendor.ledger().deliveries_of(id),
        1,
        "fcm names it by data.herald_key"
    );

    // FCM takes no key and cannot be asked: a lost answer is left to the delivery policy.
    for (label, fault) in [
        ("dropped", Fault::AcceptThenDrop),
        ("500", Fault::ErrorAfterProcessing),
    ] {
        vendor.set_faults(Faults::next([fault]));
        let n = rig.deliver(label, push("token-1")).await;
        expect(
            &n,
            "unknown",
            "unknown",
            &["ambiguous"],
            &format!("fcm {label}"),
        );
        assert_eq!(vendor.ledger().deliveries_of(n["id"].as_str().unwrap()), 1);
    }
    vendor.set_faults(Faults::next([Fault::AcceptThenDrop]));
    let mut again = push("token-1");
    again["delivery"] = json!("at_least_once");
    let n = rig.deliver("at least once", again).await;
    expect(
        &n,
        "delivered",
        "duplicate_possible",
        &["ambiguous", "accepted"],
        "fcm at least once",
    );
    assert_eq!(vendor.ledger().deliveries_of(n["id"].as_str().unwrap()), 2);

    // UNREGISTERED: the token is gone; refused, known, and suppressed for every route.
    let n = rig.deliver("unregistered", push("gone-token")).await;
    expect(&n, "failed", "known", &["rejected"], "fcm unregistered");
    assert_eq!(n["attempts"][0]["evidence"]["vendor_code"], "UNREGISTERED");
    assert_eq!(suppressed(&rig.app, "push").await, ["gone-token"]);
}

async fn apns_speaks_http2_with_a_provider_token_and_suppresses_unregistered_devices(
    backend: Backend,
) {
    use herald_apns::fake::{self, Fault, Faults};
    const DEVICE: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";
    const GONE: &str = "00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff";
    let config = fake::FakeConfig {
        unregistered: vec![GONE.to_owned()],
        ..fake::FakeConfig::default()
    };
    let vendor = fake::spawn(config.clone()).await.unwrap();
    let dir = support::TempDir::new("herald-apns");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, vendor.ca_pem()).unwrap();
    let route = format!(
        "provider = \"apns\"\nbase_url = \"{}\"\nroot_certificate = \"{}\"\nteam_id = \"{}\"\n\
         key_id = \"{}\"\ntopic = \"{}\"\nsigning_key = \'\'\'{}\'\'\'\n",
        vendor.base_url(),
        ca.display(),
        config.team_id,
        config.key_id,
        config.topic,
        config.key.private_pem
    );
    let Some(rig) = start_rig(backend, &route).await else {
        return;
    };
    let push = |to: &str| json!({"channel": "push", "to": to, "subject": "Hi", "text": "hello"});
    let n = rig.deliver("plain", push(DEVICE)).await;
    expect(&n, "delivered", "known", &["accepted"], "apns plain");
    let id = n["id"].as_str().unwrap();
    assert_eq!(
        n["attempts"][0]["provider_ref"], id,
        "apns-id is herald's key"
    );
    assert_eq!(vendor.ledger().deliveries_of(id), 1);

    // No key and no look-up: a lost answer is left to the delivery policy.
    vendor.set_faults(Faults::next([Fault::AcceptThenDrop]));
    let n = rig.deliver("dropped", push(DEVICE)).await;
    expect(&n, "unknown", "unknown", &["ambiguous"], "apns dropped");

    // 410 Unregistered: the device token is no longer active; refused, known, suppressed.
    let n = rig.deliver("unregistered", push(GONE)).await;
    expect(&n, "failed", "known", &["rejected"], "apns unregistered");
    assert_eq!(n["attempts"][0]["evidence"]["vendor_code"], "Unregistered");
    assert_eq!(suppressed(&rig.app, "push").await, [GONE]);
}
