//! A route's pace: its own rate limit, and a route-wide pause when its vendor answers 429 with
//! `Retry-After` — while other routes keep going. Waiting on herald's own account (its pace, an
//! open circuit without a fallback) is a hold: no attempt, no budget spent, however long.

mod support;

use std::time::Duration;

use herald_sandbox::{Profile, SandboxConfig, SandboxHandle};
use serde_json::{Value, json};
use time::OffsetDateTime;

use support::{ACME, Backend, TestApp, eventually, spawn_app_with};

on_both_backends!(
    a_route_keeps_to_its_rate_limit,
    a_429_pauses_its_route_and_no_other,
    a_webhook_receivers_429_pauses_its_host_and_no_other_receiver,
    a_burst_far_above_the_rate_waits_for_the_route_and_spends_no_attempt,
    an_open_circuit_without_a_fallback_holds_its_work_until_a_probe_closes_it,
    what_the_pace_holds_past_its_expiry_ends_expired_and_is_never_sent,
);

async fn vendor(faults: &str) -> SandboxHandle {
    vendor_pausing(faults, Duration::from_secs(1)).await
}

/// A vendor whose `rate_limited` refusals ask for `retry_after`.
async fn vendor_pausing(faults: &str, retry_after: Duration) -> SandboxHandle {
    support::install_crypto();
    herald_sandbox::spawn(SandboxConfig {
        profile: Profile::Plain,
        faults: herald_sandbox::parse_faults(faults).expect("fault syntax"),
        retry_after,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox starts")
}

fn route(name: &str, vendor: &SandboxHandle, extra: &str) -> String {
    format!(
        "[routes.{name}]\nprovider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"plain\"\ntimeout_seconds = 2\n{extra}\n",
        vendor.base_url()
    )
}

async fn enqueue(app: &TestApp, key: &str, route: &str) -> String {
    let body = json!({"channel": "sms", "to": "+14155550100", "text": key, "route": route});
    let response: Value = app.enqueue(ACME, key, &body).await.json().await.unwrap();
    response["id"].as_str().unwrap().to_owned()
}

/// Enqueues `items` in one batch: their ids, in order.
async fn batch(app: &TestApp, items: Vec<Value>) -> Vec<String> {
    let answer: Value = app
        .post_json(ACME, "/v1/notifications/batch", &json!({ "items": items }))
        .await
        .json()
        .await
        .unwrap();
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["notification"]["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn delivered(app: &TestApp, id: &str) -> Value {
    eventually(
        &format!("{id} delivered"),
        Duration::from_secs(30),
        || async {
            let n: Value = app
                .get(ACME, &format!("/v1/notifications/{id}"))
                .await
                .json()
                .await
                .ok()?;
            (n["state"] == "delivered").then_some(n)
        },
    )
    .await
}

async fn a_route_keeps_to_its_rate_limit(backend: Backend) {
    let vendor = vendor("").await;
    let config = format!(
        "[dispatch]\nretry_base_ms = 50\n{}",
        route("slow", &vendor, "rate_limit_per_second = 5\nburst = 1")
    );
    let Some(app) = spawn_app_with(backend, &config).await else {
        return;
    };
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(enqueue(&app, &format!("paced-{i}"), "slow").await);
    }
    for id in &ids {
        let n = delivered(&app, id).await;
        assert_eq!(n["certainty"], "known");
    }
    // The vendor's clock: when each request arrived. At 5/s with a burst of 1, the k-th send
    // after the first takes its token at least k × 200 ms after the first took its own, and
    // arrives no earlier than its token: so it arrives at least k × 200 ms after the first,
    // less however late the first arrived after its token (allowed 20 ms). A request that
    // arrives late only squeezes the gap after it (a run saw 225.7 ms then 179.5 ms): it lets
    // no more sends through than the rate, so gaps are not held one by one. No pace, twice the
    // rate or a burst of 2 fail at once (a burst of 2 checked).
    let ledger = vendor.client().unwrap().ledger().await.unwrap();
    let arrivals: Vec<OffsetDateTime> = ledger.arrivals.iter().map(|a| a.at).collect();
    assert_eq!((arrivals.len(), ledger.total_deliveries()), (6, 6));
    let since_first: Vec<time::Duration> = arrivals.iter().map(|at| *at - arrivals[0]).collect();
    let first_late = Duration::from_millis(20);
    for (k, since) in since_first.iter().enumerate() {
        let promised = Duration::from_millis(200) * k as u32;
        assert!(
            *since + first_late >= promised,
            "6 sends at 5/s with a burst of 1: the {k}th arrived {since:?} after the first, \
             sooner than {promised:?} less {first_late:?} (all: {since_first:?})"
        );
    }
}

async fn a_429_pauses_its_route_and_no_other(backend: Backend) {
    // A pause long enough that a loaded machine cannot make the healthy route look held.
    const RETRY_AFTER: Duration = Duration::from_secs(8);
    let limited = vendor_pausing("rate_limited:nth=1", RETRY_AFTER).await;
    let healthy = vendor("").await;
    let config = format!(
        "[dispatch]\nretry_base_ms = 50\n{}{}",
        route("limited", &limited, ""),
        route("healthy", &healthy, "")
    );
    let Some(app) = spawn_app_with(backend, &config).await else {
        return;
    };
    let first = enqueue(&app, "limited-1", "limited").await;
    // Wait for the 429 to land, then queue more on both routes during the pause.
    eventually("the 429", Duration::from_secs(5), || async {
        let n: Value = app
            .get(ACME, &format!("/v1/notifications/{first}"))
            .await
            .json()
            .await
            .ok()?;
        (n["attempts"][0]["result"] == "rejected").then_some(())
    })
    .await;
    let second = enqueue(&app, "limited-2", "limited").await;
    let other = enqueue(&app, "healthy-1", "healthy").await;
    delivered(&app, &other).await;
    for id in [&first, &second] {
        delivered(&app, id).await;
    }
    // By the vendors' clocks: the refused request, then nothing on that route until the pause
    // it asked for ran out, while the other route's send went out within it.
    let limited = limited.client().unwrap().ledger().await.unwrap();
    let refused_at = limited.arrivals[0].at;
    let pause_ends = refused_at + RETRY_AFTER;
    assert!(
        limited.arrivals[1..].iter().all(|a| a.at >= pause_ends),
        "no send on the paused route before Retry-After ran out: {:?}",
        limited.arrivals
    );
    assert_eq!((limited.arrivals.len(), limited.total_deliveries()), (3, 2));
    let healthy = healthy.client().unwrap().ledger().await.unwrap();
    assert!(
        healthy.arrivals_of(&other)[0] < pause_ends,
        "the healthy route was not held: {:?}",
        healthy.arrivals
    );
}

/// A webhook route sends to many receivers: one that answers 429 with a long `Retry-After`
/// holds its own host's messages (no attempt is spent on them), never the route's others.
async fn a_webhook_receivers_429_pauses_its_host_and_no_other_receiver(backend: Backend) {
    use herald_webhook::fake::{self, FakeConfig, Fault};
    let slow = fake::spawn(FakeConfig {
        faults: vec![Fault::RateLimitedFor(60)],
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let other = fake::spawn(FakeConfig::default()).await.unwrap();
    let config = "[dispatch]\nretry_base_ms = 50\n\
                  [routes.hooks]\nprovider = \"webhook\"\n\
                  secrets = [\"whsec_YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE=\"]\n\
                  allow_private_networks = true\ntenants = [\"acme\"]\ntimeout_seconds = 2\n";
    let Some(app) = spawn_app_with(backend, config).await else {
        return;
    };
    let hook = |receiver: &fake::FakeHandle, key: &str| {
        json!({"channel": "webhook", "to": format!("{}/hook", receiver.base_url()),
               "payload": {"key": key}, "route": "hooks"})
    };
    let enqueue = |body: Value, key: &'static str| {
        let app = &app;
        async move {
            let created: Value = app.enqueue(ACME, key, &body).await.json().await.unwrap();
            created["id"].as_str().unwrap().to_owned()
        }
    };
    let first = enqueue(hook(&slow, "slow-1"), "slow-1").await;
    eventually("the 429", Duration::from_secs(10), || async {
        (app.show(&first).await["attempts"][0]["result"] == "rejected").then_some(())
    })
    .await;
    let second = enqueue(hook(&slow, "slow-2"), "slow-2").await;
    let elsewhere = enqueue(hook(&other, "other-1"), "other-1").await;

    // Well inside the 60 s pause: the other receiver was not held.
    delivered(&app, &elsewhere).await;
    let held = app.show(&second).await;
    assert_eq!(held["state"], "queued", "{held}");
    assert_eq!(
        held["attempts"],
        json!([]),
        "a hold spends no attempt: {held}"
    );
    assert_eq!(
        slow.ledger().requests.len(),
        1,
        "the paused host heard nothing more"
    );
}

/// The burst: `HERALD_BURST=COUNT@RATE` (the was `1000@2`, 500 s), else 120 at 20/s.
fn burst() -> (usize, u32) {
    std::env::var("HERALD_BURST")
        .ok()
        .and_then(|b| {
            let (count, rate) = b.split_once('@')?;
            Some((count.parse().ok()?, rate.parse().ok()?))
        })
        .unwrap_or((120, 20))
}

async fn a_burst_far_above_the_rate_waits_for_the_route_and_spends_no_attempt(backend: Backend) {
    let (count, rate) = burst();
    let vendor = vendor("").await;
    // Every other setting at its default: 8 attempts, a 30 s lease.
    let config = route("slow", &vendor, &format!("rate_limit_per_second = {rate}"));
    let Some(app) = spawn_app_with(backend, &config).await else {
        return;
    };
    let items: Vec<Value> = (0..count)
        .map(|i| {
            json!({"idempotency_key": format!("burst-{i}"), "channel": "sms",
                   "to": "+14155550100", "text": format!("burst {i}"), "route": "slow"})
        })
        .collect();
    let ids = batch(&app, items).await;
    assert_eq!(ids.len(), count);
    let waiting = Duration::from_secs(30 + 3 * count as u64 / u64::from(rate));
    eventually("the burst delivered", waiting, || async {
        let delivered = app
            .db
            .scalar("SELECT count(*) FROM notifications WHERE state = 'delivered'")
            .await;
        (delivered == count as i64).then_some(())
    })
    .await;
    for id in &ids {
        let n: Value = app
            .get(ACME, &format!("/v1/notifications/{id}"))
            .await
            .json()
            .await
            .unwrap();
        let attempts = n["attempts"].as_array().unwrap();
        assert_eq!(
            attempts.len(),
            1,
            "one attempt, the vendor's: the pace held it, and a hold is no attempt: {n}"
        );
        assert_eq!(
            (n["state"].as_str(), attempts[0]["result"].as_str()),
            (Some("delivered"), Some("accepted"))
        );
    }
    let ledger = vendor.client().unwrap().ledger().await.unwrap();
    assert_eq!(
        (ledger.requests, ledger.total_deliveries()),
        (count as u64, count as u64),
        "one vendor call a notification"
    );
    // And the pace held, by the vendor's clock: after a burst of one, the n-th request arrived
    // no sooner than n/rate seconds after the first (20 ms of slack for the clock's reads).
    let first = ledger.arrivals[0].at;
    for (n, arrival) in ledger.arrivals.iter().enumerate().skip(1) {
        let earliest =
            first + Duration::from_secs_f64(n as f64 / f64::from(rate)) - Duration::from_millis(20);
        assert!(
            arrival.at >= earliest,
            "request {n} arrived {} after the first, faster than {rate}/s",
            arrival.at - first
        );
    }
    let holds = metric_sum(&app, "herald_holds_total{").await;
    eprintln!(
        "{count} at {rate}/s: {count} delivered, {} vendor calls, {holds} holds",
        ledger.requests
    );
}

/// A burst of one-time codes far above the route's rate, worth a second each: the pace lets
/// a second's worth through, and every other one ends `expired` at its expiry, never sent.
async fn what_the_pace_holds_past_its_expiry_ends_expired_and_is_never_sent(backend: Backend) {
    const COUNT: usize = 20;
    const RATE: u32 = 5;
    let vendor = vendor("").await;
    let config = route(
        "slow",
        &vendor,
        &format!("rate_limit_per_second = {RATE}\nburst = 1"),
    );
    let Some(app) = spawn_app_with(backend, &config).await else {
        return;
    };
    let items: Vec<Value> = (0..COUNT)
        .map(|i| {
            json!({"idempotency_key": format!("code-{i}"), "channel": "sms", "to": "+14155550100",
                   "text": format!("your code is {i:04}"), "route": "slow", "ttl_seconds": 1})
        })
        .collect();
    let ids = batch(&app, items).await;
    eventually(
        "every code delivered or expired",
        Duration::from_secs(30),
        || async {
            let open = app
                .db
                .scalar("SELECT count(*) FROM notifications WHERE state IN ('queued', 'sending')")
                .await;
            (open == 0).then_some(())
        },
    )
    .await;
    let (mut delivered, mut expired) = (0, 0);
    for id in &ids {
        let n = app.show(id).await;
        let attempts = n["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 1, "a hold is no attempt: {n}");
        match n["state"].as_str() {
            Some("delivered") => delivered += 1,
            Some("failed") => {
                assert_eq!(n["failure_reason"], "expired", "{n}");
                assert_eq!(attempts[0]["evidence"]["stage"], "expired", "{n}");
                expired += 1;
            }
            other => panic!("{other:?}: {n}"),
        }
    }
    // The pace is herald's own: in the second before the codes expire it allows its burst and
    // a second at its rate, however fast or slow the machine is.
    assert!(
        delivered <= 1 + RATE,
        "{delivered} sent in a second at {RATE}/s"
    );
    assert_eq!(delivered + expired, COUNT as u32);
    let ledger = vendor.client().unwrap().ledger().await.unwrap();
    assert_eq!(
        (ledger.requests, ledger.total_deliveries()),
        (u64::from(delivered), u64::from(delivered)),
        "the vendor saw only the codes that went in time"
    );
    assert_eq!(
        app.db
            .scalar(
                "SELECT count(*) FROM outbox WHERE type = 'dev.herald.notification.failed' \
                     AND CAST(data AS text) LIKE '%expires_at%'"
            )
            .await,
        i64::from(expired)
    );
}

async fn an_open_circuit_without_a_fallback_holds_its_work_until_a_probe_closes_it(
    backend: Backend,
) {
    // The vendor refuses its first four requests, then recovers: counted in requests, not in
    // the test's time, so that a slow machine cannot let probes spend a notification's budget
    // while the test looks on. (A probe is a real send: it spends an attempt; a hold does not.)
    const REFUSED: usize = 4;
    let faults: Vec<String> = (1..=REFUSED)
        .map(|n| format!("unavailable_before_processing:nth={n}"))
        .collect();
    let vendor = vendor(&faults.join(",")).await;
    // Budget enough for every refusal to land on one notification, and its delivery.
    let config = format!(
        "[dispatch]\nretry_base_ms = 50\nretry_max_seconds = 1\n{}",
        route(
            "lone",
            &vendor,
            &format!(
                "circuit_failures = 2\ncircuit_open_seconds = 1\nmax_attempts = {}",
                REFUSED + 1
            )
        )
    );
    let Some(app) = spawn_app_with(backend, &config).await else {
        return;
    };
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(enqueue(&app, &format!("lone-{i}"), "lone").await);
    }
    let mut attempts = 0;
    for id in &ids {
        let n = delivered(&app, id).await;
        let vendors_answers = n["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["evidence"]["stage"] != "circuit_open");
        assert!(vendors_answers, "no attempt for a hold: {n}");
        assert_eq!(n["certainty"], "known", "{n}");
        attempts += n["attempts"].as_array().unwrap().len();
    }
    // Every attempt is a request the vendor answered: its refusals and its deliveries.
    let ledger = vendor.client().unwrap().ledger().await.unwrap();
    assert_eq!(ledger.total_deliveries(), 4);
    assert_eq!(
        (attempts as u64, ledger.requests),
        ((REFUSED + 4) as u64, (REFUSED + 4) as u64),
        "an attempt without a request, or a request without an attempt"
    );

    // And the circuit did hold work back while it rested.
    let holds = metric_sum(
        &app,
        "herald_holds_total{route=\"lone\",reason=\"circuit_open\"}",
    )
    .await;
    assert!(holds >= 1.0, "the circuit never held anything back");
}

/// The sum of every series of the metric family that `prefix` starts (up to and with `{` and
/// any labels to match).
async fn metric_sum(app: &TestApp, prefix: &str) -> f64 {
    let text = app.get(ACME, "/metrics").await.text().await.unwrap();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
