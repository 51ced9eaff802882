//! herald never claims more than it knows when a vendor's look-up finds look-alike messages,
//! when a replay meets a route whose configuration changed, or when a vendor is not what its
//! route declares: the false certainties an outside probe found, tried again, on both databases,
//! with the fake vendors' ledgers as ground truth.

mod support;

use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};

use herald::dispatch::Dispatcher;
use support::{ACME, Backend, TestApp, TestDb, build_app, eventually, results, spawn_stepped};

on_both_backends!(
    a_look_alike_never_settles_a_send_the_vendor_did_not_make,
    a_replay_after_resends_route_changed_repeats_the_first_request,
    a_replay_after_onesignals_route_changed_repeats_the_first_request,
    a_replay_after_the_sandboxs_route_changed_repeats_the_first_request,
    a_sandbox_restarted_with_another_profile_settles_nothing,
);

fn config(lease_seconds: u64, timeout_seconds: u64, route: &str) -> String {
    format!(
        "[dispatch]\nlease_seconds = {lease_seconds}\nretry_base_ms = 50\nretry_max_seconds = 1\n\n\
         [routes.vendor]\ntimeout_seconds = {timeout_seconds}\nmax_attempts = 10\n{route}\n"
    )
}

async fn enqueue(app: &TestApp, key: &str, mut body: Value) -> String {
    body["route"] = json!("vendor");
    let created: Value = app.enqueue(ACME, key, &body).await.json().await.unwrap();
    created["id"]
        .as_str()
        .unwrap_or_else(|| panic!("enqueued: {created}"))
        .to_owned()
}

async fn show(app: &TestApp, id: &str) -> Value {
    app.get(ACME, &format!("/v1/notifications/{id}"))
        .await
        .json()
        .await
        .unwrap()
}

async fn drain(dispatcher: &Dispatcher) {
    dispatcher
        .drain(Duration::from_secs(15))
        .await
        .expect("dispatch runs");
}

fn ending(n: &Value) -> (String, String) {
    (
        n["state"].as_str().unwrap_or_default().to_owned(),
        n["certainty"].as_str().unwrap_or("-").to_owned(),
    )
}

/// Pairs of SMS notifications with the same text to the same number, through a Twilio whose
/// look-up can only match by content. Whatever the faults, no notification may be
/// `delivered`/`known` beyond the messages Twilio really sent for its text.
async fn a_look_alike_never_settles_a_send_the_vendor_did_not_make(backend: Backend) {
    use herald_twilio::fake::{self, Fault};
    use secrecy::SecretString;
    let mut fake_config = fake::FakeConfig::new(
        "AC00000000000000000000000000000001",
        SecretString::from("twilio-token"),
    );
    fake_config.visibility_lag = Duration::from_millis(200);
    let vendor = fake::spawn(fake_config).await.unwrap();
    let route = |delivery: &str| {
        format!(
            "provider = \"twilio\"\nbase_url = \"{}\"\naccount_sid = \"AC00000000000000000000000000000001\"\n\
             auth_token = \"twilio-token\"\nfrom = \"+15005550006\"\nvisibility_lag_ms = 500\n\
             delivery = \"{delivery}\"\n",
            vendor.base_url()
        )
    };
    let Some((app, dispatcher)) =
        spawn_stepped(backend, &config(4, 1, &route("at_most_once"))).await
    else {
        return;
    };
    let sms = |text: &str| json!({"channel": "sms", "to": "+14155550100", "text": text});

    // The twin was sent and recorded; this one was refused before processing (a 503, which
    // Twilio does not document as "not processed"). Its look-up finds only the twin's message.
    let text = "Your code is 424242";
    let first = enqueue(&app, "sent-twin", sms(text)).await;
    drain(&dispatcher).await;
    vendor.set_faults([Fault::UnavailableBeforeProcessing]);
    let second = enqueue(&app, "refused-twin", sms(text)).await;
    drain(&dispatcher).await;
    let (first, second) = (show(&app, &first).await, show(&app, &second).await);
    assert_eq!(ending(&first), ("delivered".into(), "known".into()));
    assert_eq!(
        (ending(&second), results(&second)),
        (
            ("delivered".into(), "known".into()),
            vec!["ambiguous".into(), "accepted".into()]
        ),
        "the twin's message never settles this one: {second:#}"
    );
    assert_eq!(
        second["attempts"][0]["evidence"]["settlement"]["outcome"], "not_accepted",
        "{second:#}"
    );
    assert_ne!(
        first["attempts"][0]["provider_ref"],
        second["attempts"][1]["provider_ref"]
    );
    assert_eq!(vendor.ledger().deliveries_of(text), 2);

    // Both answers lost after processing: two messages for two sends, one each.
    let text = "Your order has shipped";
    vendor.set_faults([Fault::AcceptThenDrop, Fault::AcceptThenDrop]);
    let pair = [
        enqueue(&app, "dropped-a", sms(text)).await,
        enqueue(&app, "dropped-b", sms(text)).await,
    ];
    drain(&dispatcher).await;
    let mut refs = Vec::new();
    for id in &pair {
        let n = show(&app, id).await;
        assert_eq!(
            (ending(&n), results(&n)),
            (
                ("delivered".into(), "known".into()),
                vec!["ambiguous".into()]
            ),
            "{n:#}"
        );
        assert_eq!(n["attempts"][0]["settled_by"], "outcome_query", "{n:#}");
        refs.push(n["attempts"][0]["provider_ref"].clone());
    }
    assert_eq!(
        refs,
        [Value::Null, Value::Null],
        "both were taken, and nothing says which message is whose: neither names one"
    );
    assert_eq!(vendor.ledger().deliveries_of(text), 2);

    // One answer lost after processing, the other refused before it: one message, two
    // ambiguous twins, and nothing says whose it is. Under at_most_once both go to a person.
    let text = "Your appointment is tomorrow";
    vendor.set_faults([Fault::AcceptThenDrop, Fault::UnavailableBeforeProcessing]);
    let pair = [
        enqueue(&app, "murky-a", sms(text)).await,
        enqueue(&app, "murky-b", sms(text)).await,
    ];
    drain(&dispatcher).await;
    for id in &pair {
        let n = show(&app, id).await;
        assert_eq!(ending(&n), ("unknown".into(), "unknown".into()), "{n:#}");
        let findings = &n["attempts"][0]["evidence"]["look_up"]["findings"];
        assert_eq!(
            findings["own_sends"], 1,
            "the candidates are recorded: {n:#}"
        );
        assert_eq!(findings["sibling_sends"], 1, "{n:#}");
        assert_eq!(findings["free"].as_array().map(Vec::len), Some(1), "{n:#}");
    }
    assert_eq!(vendor.ledger().deliveries_of(text), 1);

    // The same under at_least_once: both resend, and neither can be known.
    drop(dispatcher);
    let (app, dispatcher) = app
        .restart_stepped(&config(4, 1, &route("at_least_once")))
        .await;
    let text = "Your appointment is in an hour";
    vendor.set_faults([Fault::AcceptThenDrop, Fault::UnavailableBeforeProcessing]);
    let pair = [
        enqueue(&app, "murky-least-a", sms(text)).await,
        enqueue(&app, "murky-least-b", sms(text)).await,
    ];
    drain(&dispatcher).await;
    for id in &pair {
        let n = show(&app, id).await;
        assert_eq!(
            ending(&n),
            ("delivered".into(), "duplicate_possible".into()),
            "{n:#}"
        );
    }
    assert_eq!(vendor.ledger().deliveries_of(text), 3);
}

/// Sends one notification with a herald whose route is `before`, kills that herald's worker
/// while the vendor holds the processed request's answer, and restarts herald with the route
/// changed to `after`; the new herald reconciles once the lease ends. Returns the notification
/// as the API then shows it. `processed` tells when the vendor has processed the first send.
async fn crash_mid_send_then_change_the_route<F, Fut>(
    backend: Backend,
    before: &str,
    after: &str,
    body: Value,
    processed: F,
) -> Option<Value>
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    // A lease just past the route's timeout, which the vendor's held answer outlasts.
    let (app, dispatcher) = spawn_stepped(backend, &config(7, 5, before)).await?;
    let id = enqueue(&app, "changed-route", body).await;
    let sending = tokio::spawn(async move { dispatcher.drain(Duration::from_secs(30)).await });
    eventually(
        "the vendor to process the first send",
        Duration::from_secs(5),
        || async { processed().await.then_some(()) },
    )
    .await;
    // The worker dies mid-call: its attempt stays in flight until the lease ends.
    sending.abort();
    let _ = sending.await;
    let (app, dispatcher) = app.restart_stepped(&config(7, 5, after)).await;
    drain(&dispatcher).await;
    Some(show(&app, &id).await)
}

fn replayed_once(n: &Value, label: &str) {
    assert_eq!(
        (ending(n), results(n)),
        (
            ("delivered".into(), "known".into()),
            vec!["ambiguous".into(), "accepted".into()]
        ),
        "{label}: {n:#}"
    );
    assert_eq!(n["attempts"][0]["evidence"]["stage"], "lease_expired");
    assert_eq!(n["attempts"][0]["settled_by"], "idempotent_replay", "{n:#}");
}

async fn a_replay_after_resends_route_changed_repeats_the_first_request(backend: Backend) {
    use herald_resend::fake::{self, Fault, Faults};
    let vendor = fake::spawn(fake::FakeConfig {
        delay: Duration::from_secs(3),
        faults: Faults::next([Fault::Delay]),
        ..fake::FakeConfig::default()
    })
    .await
    .unwrap();
    let route = |from: &str| {
        format!(
            "provider = \"resend\"\nbase_url = \"{}\"\napi_key = \"{}\"\nfrom = \"{from}\"\n",
            vendor.base_url(),
            fake::FakeConfig::default().api_key
        )
    };
    let body =
        json!({"channel": "email", "to": "ada@example.com", "subject": "Hi", "text": "hello"});
    let Some(n) = crash_mid_send_then_change_the_route(
        backend,
        &route("Acme <old@acme.example>"),
        &route("Acme <new@acme.example>"),
        body,
        || async { vendor.ledger().total_deliveries() == 1 },
    )
    .await
    else {
        return;
    };
    replayed_once(&n, "resend");
    assert_eq!(
        vendor.last_request().unwrap().body["from"],
        "Acme <old@acme.example>",
        "the replay is the first request, not one rebuilt from the changed route"
    );
    assert_eq!(vendor.ledger().total_deliveries(), 1);
}

async fn a_replay_after_onesignals_route_changed_repeats_the_first_request(backend: Backend) {
    use herald_onesignal::fake::{self, Fault, Faults};
    let config = fake::FakeConfig {
        delay: Duration::from_secs(3),
        faults: Faults::next([Fault::Delay]),
        ..fake::FakeConfig::default()
    };
    let vendor = fake::spawn(config.clone()).await.unwrap();
    let route = |app_id: &str| {
        format!(
            "provider = \"onesignal\"\nbase_url = \"{}\"\napp_id = \"{app_id}\"\napi_key = \"{}\"\n",
            vendor.base_url(),
            config.api_key
        )
    };
    let body = json!({"channel": "push", "to": "device-1", "subject": "Hi", "text": "hello"});
    let Some(n) = crash_mid_send_then_change_the_route(
        backend,
        &route(&config.app_id),
        // Another app: a request rebuilt for it would be refused for good, and the
        // notification recorded failed although the vendor delivered it.
        &route("00000000-0000-4000-8000-0000000000ff"),
        body,
        || async { vendor.ledger().total_deliveries() == 1 },
    )
    .await
    else {
        return;
    };
    replayed_once(&n, "onesignal");
    assert_eq!(vendor.last_request().unwrap().body["app_id"], config.app_id);
    assert_eq!(vendor.ledger().total_deliveries(), 1);
}

fn sandbox_route(base_url: &str, profile: &str, from: &str) -> String {
    format!(
        "provider = \"sandbox\"\nbase_url = \"{base_url}\"\nprofile = \"{profile}\"\n\
         idempotency_window_seconds = 86400\nvisibility_lag_ms = 0\nfrom = \"{from}\"\n"
    )
}

async fn a_replay_after_the_sandboxs_route_changed_repeats_the_first_request(backend: Backend) {
    use herald_sandbox::{SandboxConfig, parse_faults};
    support::install_crypto();
    let sandbox = herald_sandbox::spawn(SandboxConfig {
        delay: Duration::from_secs(3),
        faults: parse_faults("delay:nth=1").unwrap(),
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let ledger = sandbox.client().unwrap();
    let base = sandbox.base_url();
    let body =
        json!({"channel": "email", "to": "ada@example.com", "subject": "Hi", "text": "hello"});
    let Some(n) = crash_mid_send_then_change_the_route(
        backend,
        &sandbox_route(&base, "idempotent", "old@acme.example"),
        &sandbox_route(&base, "idempotent", "new@acme.example"),
        body,
        || async {
            ledger
                .ledger()
                .await
                .map(|l| l.total_deliveries())
                .unwrap_or(0)
                == 1
        },
    )
    .await
    else {
        return;
    };
    // A changed body would have been refused as a reused key; the same body is replayed.
    replayed_once(&n, "sandbox");
    assert!(
        n["attempts"][1]["evidence"]["detail"]
            .as_str()
            .unwrap()
            .starts_with("idempotent replay"),
        "{n:#}"
    );
    assert_eq!(ledger.ledger().await.unwrap().total_deliveries(), 1);
}

#[tokio::test]
async fn a_route_that_declares_another_sandbox_than_it_reaches_does_not_start() {
    use herald_sandbox::{Profile, SandboxConfig};
    support::install_crypto();
    let plain = herald_sandbox::spawn(SandboxConfig {
        profile: Profile::Plain,
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let db = TestDb::new(Backend::Sqlite).await.unwrap();
    let route = sandbox_route(&plain.base_url(), "idempotent", "noreply@acme.example");
    let err = match build_app(&db, &config(4, 1, &route)).await {
        Ok(_) => panic!("a route declaring an idempotent sandbox started against a plain one"),
        Err(err) => format!("{err:#}"),
    };
    assert!(
        err.contains("routes.vendor:") && err.contains("profile=plain"),
        "the refusal names the route and what the sandbox offers: {err}"
    );
}

/// The sandbox behind a route that declares `idempotent` is restarted as `plain` while herald
/// runs: a replay is then a new delivery, and nothing it answers may settle a notification.
async fn a_sandbox_restarted_with_another_profile_settles_nothing(backend: Backend) {
    use herald_sandbox::{Profile, SandboxConfig, parse_faults};
    support::install_crypto();
    let idempotent = herald_sandbox::spawn(SandboxConfig::default())
        .await
        .unwrap();
    let addr = idempotent.addr();
    let route = sandbox_route(&idempotent.base_url(), "idempotent", "noreply@acme.example");
    let Some((app, dispatcher)) = spawn_stepped(backend, &config(4, 1, &route)).await else {
        return;
    };
    idempotent.shutdown().await.unwrap();
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let plain = tokio::spawn(herald_sandbox::serve(
        listener,
        SandboxConfig {
            profile: Profile::Plain,
            faults: parse_faults("accept_then_drop:nth=1").unwrap(),
            ..SandboxConfig::default()
        },
        async move {
            let _ = stopped.await;
        },
    ));
    let ledger = herald_sandbox::SandboxClient::new(format!("http://{addr}")).unwrap();

    let id = enqueue(
        &app,
        "profile-changed",
        json!({"channel": "email", "to": "ada@example.com", "subject": "Hi", "text": "hello"}),
    )
    .await;
    drain(&dispatcher).await;
    let n = show(&app, &id).await;
    assert_eq!(ending(&n), ("unknown".into(), "unknown".into()), "{n:#}");
    let attempts = n["attempts"].as_array().unwrap();
    assert!(
        attempts
            .iter()
            .all(|a| a["result"] == "ambiguous" && a["settled_by"].is_null()),
        "{n:#}"
    );
    assert!(
        attempts[1..].iter().all(|a| a["evidence"]["detail"]
            .as_str()
            .unwrap()
            .contains("profile=plain")),
        "each answer is recorded with why it settles nothing: {n:#}"
    );
    let delivered = ledger.ledger().await.unwrap().total_deliveries();
    assert_eq!(
        delivered,
        attempts.len() as u64,
        "every replay delivered again: the vendor was not what the route declared"
    );
    let _ = stop.send(());
    let _ = plain.await;
}
