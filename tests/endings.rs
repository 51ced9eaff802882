//! Every way a notification ends takes its certainty from one rule, and no hold outlives an
//! expiry: a cancellation after a send that may have reached the vendor, `at_least_once` resends
//! after lost answers, and expiries while a route is held back — on both databases, with the
//! stand-in vendor's ledger (which stamps each request's arrival by its own clock) as the witness.

mod support;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use herald::dispatch::policy::{Limits, resend_jitter, retry_delay};
use herald::domain::NotificationId;
use herald_sandbox::{SandboxClient, SandboxConfig, parse_faults};
use support::{
    ACME, ACME_ADMIN, ACME_REVIEWER, Backend, TestApp, eventually, plain_vendor, results,
    spawn_app_with, spawn_stepped,
};

on_both_backends!(
    a_cancellation_after_a_send_that_may_have_arrived_is_unknown_and_waits_in_review,
    a_cancellation_before_any_send_is_known,
    an_at_least_once_resend_after_a_lost_answer_backs_off,
    an_expiry_ends_a_notification_held_by_an_open_circuit,
    an_expiry_ends_a_notification_held_by_an_operators_pause,
    an_expiry_ends_a_notification_held_by_a_vendors_retry_after,
);

mod postgres_only {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancellation_racing_a_claim_is_won_by_one_and_the_loser_is_told() {
        super::a_cancellation_racing_a_claim_is_won_by_one_and_the_loser_is_told().await
    }
}

/// A plain route (no key, no look-up) to `vendor` that sends again after a lost answer.
fn at_least_once(vendor: &str, extra: &str) -> String {
    format!(
        "[dispatch]\nretry_base_ms = 20\nretry_max_seconds = 2\n\n\
         [routes.vendor]\nprovider = \"sandbox\"\nbase_url = \"{vendor}\"\nprofile = \"plain\"\n\
         delivery = \"at_least_once\"\ntimeout_seconds = 1\n{extra}\n[channels]\nsms = \"vendor\"\n"
    )
}

fn sms(to: &str) -> Value {
    json!({"channel": "sms", "to": to, "text": "Your code is 424242"})
}

fn state(n: &Value) -> (&str, &str) {
    (
        n["state"].as_str().unwrap_or_default(),
        n["certainty"].as_str().unwrap_or("-"),
    )
}

fn time_of(value: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(value.as_str().expect("a time"), &Rfc3339).expect("RFC 3339")
}

/// The three ways to cancel: by id, by `cancellation_key`, by `Idempotency-Key`.
#[derive(Debug, Clone, Copy)]
enum Cancel {
    Id,
    CancellationKey,
    IdempotencyKey,
}

impl Cancel {
    /// Cancels the notification `id`, enqueued under `key` (its idempotency and cancellation
    /// key alike): whether it was cancelled, as the answer says.
    async fn cancel(self, app: &TestApp, id: &str, key: &str) -> bool {
        let (path, body) = match self {
            Cancel::Id => (format!("/v1/notifications/{id}/cancel"), json!({})),
            Cancel::CancellationKey => (
                "/v1/notifications/cancel".to_owned(),
                json!({"cancellation_key": key}),
            ),
            Cancel::IdempotencyKey => (
                "/v1/notifications/cancel".to_owned(),
                json!({"idempotency_key": key}),
            ),
        };
        let answer = app.post_json(ACME, &path, &body).await;
        let status = answer.status();
        let body: Value = answer.json().await.unwrap();
        match self {
            Cancel::Id => {
                assert!(
                    status == StatusCode::OK || status == StatusCode::CONFLICT,
                    "{status}: {body}"
                );
                status == StatusCode::OK
            }
            _ => {
                assert_eq!(status, StatusCode::OK, "{body}");
                body["cancelled"].as_array().unwrap().contains(&json!(id))
            }
        }
    }
}

/// The vendor takes the first send and drops the connection before answering (it holds the
/// message); the resend is refused with `429` and `Retry-After: 1`, so the notification waits,
/// queued, to be sent again with its first attempt unsettled. Cancelled then — each way — it
/// stays cancelled, nothing more is sent, but it is `unknown` and waits in review, for the
/// vendor holds one message of it.
async fn a_cancellation_after_a_send_that_may_have_arrived_is_unknown_and_waits_in_review(
    backend: Backend,
) {
    let vendor = plain_vendor("").await;
    let ledger = vendor.client().unwrap();
    let Some((app, dispatcher)) =
        spawn_stepped(backend, &at_least_once(&vendor.base_url(), "")).await
    else {
        return;
    };
    for (n, form) in [Cancel::Id, Cancel::CancellationKey, Cancel::IdempotencyKey]
        .into_iter()
        .enumerate()
    {
        ledger.clear_ledger().await.unwrap();
        let faults = parse_faults("accept_then_drop:nth=1,rate_limited:nth=2").unwrap();
        ledger.set_faults(&faults).await.unwrap();
        let key = format!("cancel-{n}");
        let mut body = sms("+14155550100");
        body["cancellation_key"] = json!(key);
        let id = app.enqueue_id(&key, &body).await;
        // Up to the refusal: its retry falls due a second later, past this horizon.
        dispatcher.drain(Duration::from_millis(300)).await.unwrap();
        let waiting = app.show(&id).await;
        assert_eq!(
            (state(&waiting), results(&waiting)),
            (("queued", "-"), vec!["ambiguous".into(), "rejected".into()]),
            "{form:?}: {waiting:#}"
        );

        assert!(form.cancel(&app, &id, &key).await, "{form:?}");
        let cancelled = app.show(&id).await;
        assert_eq!(
            state(&cancelled),
            ("cancelled", "unknown"),
            "{form:?}: {cancelled:#}"
        );
        assert_eq!(
            cancelled["review"]["reason"], "may_have_sent",
            "{cancelled:#}"
        );
        assert_eq!(cancelled["review"]["open"], true, "{cancelled:#}");
        let review: Value = app
            .get(ACME_REVIEWER, "/v1/review?reason=may_have_sent")
            .await
            .json()
            .await
            .unwrap();
        assert!(
            review["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|item| item["id"] == json!(id)),
            "{review:#}"
        );

        // Past the retry it was waiting for: nothing more goes out.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        dispatcher.drain(Duration::from_secs(2)).await.unwrap();
        let seen = ledger.ledger().await.unwrap();
        assert_eq!(seen.deliveries_of(&id), 1, "{form:?}: the vendor holds one");
        assert_eq!(seen.arrivals_of(&id).len(), 2, "{form:?}: {seen:?}");
        assert_eq!(state(&app.show(&id).await), ("cancelled", "unknown"));
    }
}

/// A notification that never tried is cancelled for certain, and waits for nobody.
async fn a_cancellation_before_any_send_is_known(backend: Backend) {
    let vendor = plain_vendor("").await;
    let Some((app, _dispatcher)) =
        spawn_stepped(backend, &at_least_once(&vendor.base_url(), "")).await
    else {
        return;
    };
    for (n, form) in [Cancel::Id, Cancel::CancellationKey, Cancel::IdempotencyKey]
        .into_iter()
        .enumerate()
    {
        let key = format!("later-{n}");
        let mut body = sms("+14155550100");
        body["cancellation_key"] = json!(key);
        body["send_at"] = json!("2999-01-01T00:00:00Z");
        let id = app.enqueue_id(&key, &body).await;
        assert!(form.cancel(&app, &id, &key).await, "{form:?}");
        let cancelled = app.show(&id).await;
        assert_eq!(state(&cancelled), ("cancelled", "known"), "{cancelled:#}");
        assert!(cancelled["review"].is_null(), "{cancelled:#}");
    }
}

/// Two PostgreSQL connections: one holds a claim's lease open on a notification while the
/// cancellation asks for it, then commits; and many claims race many cancellations. Each
/// notification is either claimed or cancelled, never both, and a cancellation that lost says
/// that the notification is being sent.
async fn a_cancellation_racing_a_claim_is_won_by_one_and_the_loser_is_told() {
    use sqlx::Connection;
    let vendor = plain_vendor("").await;
    let extra = at_least_once(&vendor.base_url(), "");
    let Some((app, _dispatcher)) = spawn_stepped(Backend::Postgres, &extra).await else {
        return;
    };
    let id = app.enqueue_id("held", &sms("+14155550100")).await;
    let uuid: uuid::Uuid = id.parse().unwrap();
    // A claim mid-transaction: the row is leased but not yet committed.
    let mut claimer = sqlx::PgConnection::connect(&app.db.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut claimer).await.unwrap();
    sqlx::query(
        "UPDATE notifications SET state = 'sending', generation = generation + 1 WHERE id = $1",
    )
    .bind(uuid)
    .execute(&mut claimer)
    .await
    .unwrap();
    let cancel = tokio::spawn({
        let (http, url) = (
            app.http.clone(),
            app.url(&format!("/v1/notifications/{id}/cancel")),
        );
        async move { http.post(url).bearer_auth(ACME).send().await.unwrap() }
    });
    // The cancellation waits on the claim's lock (seen from the server), then the claim commits.
    let watcher = sqlx::PgPool::connect(&app.db.url).await.unwrap();
    eventually(
        "the cancellation waits for the claim",
        Duration::from_secs(10),
        || {
            let watcher = watcher.clone();
            async move {
                let waiting: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity
                     WHERE datname = current_database() AND wait_event_type = 'Lock'",
                )
                .fetch_one(&watcher)
                .await
                .unwrap();
                (waiting > 0).then_some(())
            }
        },
    )
    .await;
    sqlx::query("COMMIT").execute(&mut claimer).await.unwrap();
    let lost = cancel.await.unwrap();
    assert_eq!(lost.status(), StatusCode::CONFLICT);
    let problem: Value = lost.json().await.unwrap();
    assert!(
        problem["detail"].as_str().unwrap().contains("sending"),
        "{problem:#}"
    );

    // Many at once: every notification goes one way only.
    let mut ids = Vec::new();
    for n in 0..40 {
        ids.push(
            app.enqueue_id(&format!("race-{n}"), &sms("+14155550100"))
                .await,
        );
    }
    let claims = tokio::spawn({
        let store = app.store.clone();
        async move {
            let mut claimed = Vec::new();
            for _ in 0..40 {
                let slots = [herald::store::RouteSlot {
                    route: "vendor".into(),
                    take: 1,
                    send_window: Duration::from_secs(10),
                }];
                let taken = store
                    .claim(
                        OffsetDateTime::now_utc(),
                        Duration::from_secs(30),
                        1,
                        &slots,
                        &|_| None,
                    )
                    .await
                    .unwrap();
                claimed.extend(taken.into_iter().map(|c| c.notification.id.to_string()));
            }
            claimed
        }
    });
    let answers = futures::future::join_all(ids.iter().map(|id| {
        let (http, url) = (
            app.http.clone(),
            app.url(&format!("/v1/notifications/{id}/cancel")),
        );
        async move {
            http.post(url)
                .bearer_auth(ACME)
                .send()
                .await
                .unwrap()
                .status()
        }
    }))
    .await;
    let claimed = claims.await.unwrap();
    let mut both = 0;
    for (id, answer) in ids.iter().zip(answers) {
        let now = app.show(id).await;
        match answer {
            StatusCode::OK => {
                assert_eq!(state(&now), ("cancelled", "known"), "{now:#}");
                both += usize::from(claimed.contains(id));
            }
            StatusCode::CONFLICT => {
                assert!(claimed.contains(id), "{id}: refused, yet nobody claimed it");
                assert_eq!(now["state"], "sending");
            }
            other => panic!("{id}: {other}"),
        }
    }
    assert_eq!(both, 0, "a notification both cancelled and claimed");
}

/// Every answer is lost after the vendor took the message: under `at_least_once` herald sends
/// again, but as a retry would — with backoff and full jitter from `retry_base_ms` (50 ms here)
/// — not all at once, and no more than `max_attempts` times. The vendor's stamps are the
/// witness of when each request arrived: each resend came no sooner after the request before it
/// than its backoff (the ceiling doubling from 50 ms, the jitter drawn once per attempt, so the
/// test reads the same draw herald made); a busy machine only adds to the gaps.
async fn an_at_least_once_resend_after_a_lost_answer_backs_off(backend: Backend) {
    const NOTIFICATIONS: usize = 20;
    let vendor = plain_vendor("accept_then_drop:1").await;
    let ledger = vendor.client().unwrap();
    let extra = at_least_once(&vendor.base_url(), "max_attempts = 8\n").replace(
        "retry_base_ms = 20\nretry_max_seconds = 2",
        "retry_base_ms = 50\nretry_max_seconds = 4",
    );
    let limits = Limits {
        max_attempts: 8,
        max_age: Duration::from_secs(3600),
        retry_base: Duration::from_millis(50),
        retry_max: Duration::from_secs(4),
        timeout: Duration::from_secs(1),
    };
    let Some((app, dispatcher)) = spawn_stepped(backend, &extra).await else {
        return;
    };
    let mut ids = Vec::new();
    for n in 0..NOTIFICATIONS {
        ids.push(
            app.enqueue_id(&format!("lost-{n}"), &sms("+14155550100"))
                .await,
        );
    }
    dispatcher.drain(Duration::from_secs(15)).await.unwrap();
    let seen = ledger.ledger().await.unwrap();
    let (mut first, mut last) = (None::<OffsetDateTime>, None::<OffsetDateTime>);
    let mut waited = time::Duration::ZERO;
    for id in &ids {
        let n = app.show(id).await;
        assert_eq!(state(&n), ("unknown", "unknown"), "{n:#}");
        let arrivals = seen.arrivals_of(id);
        assert_eq!(arrivals.len(), 8, "max_attempts requests for {id}");
        let notification = NotificationId::parse(id).unwrap();
        for (attempt, gap) in (1..).zip(arrivals.windows(2).map(|w| w[1] - w[0])) {
            let backoff = retry_delay(
                &limits,
                attempt as u32,
                resend_jitter(notification, attempt),
                None,
            );
            assert!(
                gap >= backoff,
                "{id}: request {} came {gap} after request {attempt}, before its backoff {backoff:?}",
                attempt + 1
            );
            waited += gap;
        }
        first = first.min(Some(arrivals[0])).or(Some(arrivals[0]));
        last = last.max(Some(arrivals[7]));
    }
    eprintln!(
        "{} requests for {NOTIFICATIONS} notifications over {:.2} s (retry_base_ms = 50); on \
         average {:.0} ms from a notification's first request to its last",
        seen.requests,
        (last.unwrap() - first.unwrap()).as_seconds_f64(),
        waited.as_seconds_f64() * 1000.0 / NOTIFICATIONS as f64,
    );
    assert_eq!(seen.requests, 8 * NOTIFICATIONS as u64);
}

/// A route with its dispatcher running, polling every 200 ms; `vendor` is the route's section.
async fn running(backend: Backend, vendor: &str) -> Option<TestApp> {
    let extra = format!(
        "[dispatch]\npoll_interval_ms = 200\nretry_base_ms = 20\n\n[routes.vendor]\n{vendor}\n[channels]\nsms = \"vendor\"\n"
    );
    spawn_app_with(backend, &extra).await
}

/// Waits for `id` to end expired, and checks it ended so without a request after its expiry
/// (by the vendor's stamps) and long before the hold that kept its route back would lift.
async fn ends_expired_in_time(app: &TestApp, ledger: &SandboxClient, id: &str, hold: Duration) {
    let n = eventually("the expiry to end it", Duration::from_secs(20), || async {
        let n = app.show(id).await;
        (n["state"] != "queued" && n["state"] != "sending").then_some(n)
    })
    .await;
    assert_eq!(state(&n), ("failed", "known"), "{n:#}");
    assert_eq!(n["failure_reason"], "expired", "{n:#}");
    let expires_at = time_of(&n["expires_at"]);
    let finished_at = time_of(&n["updated_at"]);
    // Generous for a busy machine, and far inside the hold it would have waited out before.
    let slack = Duration::from_secs(5);
    assert!(hold > slack * 6);
    assert!(
        finished_at < expires_at + slack,
        "ended {} after its expiry",
        finished_at - expires_at
    );
    let arrivals = ledger.ledger().await.unwrap().arrivals_of(id);
    assert!(
        arrivals.iter().all(|at| *at < expires_at),
        "a request after the expiry at {expires_at}: {arrivals:?}"
    );
}

/// The vendor refuses every send before processing: after two the route's circuit opens for a
/// minute, and the notification (3 s to live) waits for it — until its expiry ends it.
async fn an_expiry_ends_a_notification_held_by_an_open_circuit(backend: Backend) {
    let vendor = plain_vendor("unavailable_before_processing:1").await;
    let ledger = vendor.client().unwrap();
    let route = format!(
        "provider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"plain\"\ntimeout_seconds = 1\n\
         circuit_failures = 2\ncircuit_open_seconds = 60\n",
        vendor.base_url()
    );
    let Some(app) = running(backend, &route).await else {
        return;
    };
    let mut body = sms("+14155550100");
    body["ttl_seconds"] = json!(3);
    let id = app.enqueue_id("circuit", &body).await;
    eventually("the circuit to open", Duration::from_secs(10), || async {
        let routes: Value = app.get(ACME, "/v1/routes").await.json().await.unwrap();
        let vendor = routes["data"]
            .as_array()?
            .iter()
            .find(|r| r["name"] == "vendor")?
            .clone();
        (vendor["circuit"]["state"] == "open").then_some(())
    })
    .await;
    ends_expired_in_time(&app, &ledger, &id, Duration::from_secs(60)).await;
}

/// An operator paused the route; a notification with 2 s to live ends at its expiry, not at the
/// resume, and never reaches the vendor.
async fn an_expiry_ends_a_notification_held_by_an_operators_pause(backend: Backend) {
    let vendor = plain_vendor("").await;
    let ledger = vendor.client().unwrap();
    let route = format!(
        "provider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"plain\"\ntimeout_seconds = 1\n\
         operated_by = \"acme\"\n",
        vendor.base_url()
    );
    let Some(app) = running(backend, &route).await else {
        return;
    };
    let paused = app
        .post_json(
            ACME_ADMIN,
            "/v1/routes/vendor/pause",
            &json!({"note": "incident"}),
        )
        .await;
    assert_eq!(paused.status(), 200, "{}", paused.text().await.unwrap());
    // The dispatcher reads pauses within a second; it has, once its gauge says so.
    eventually(
        "the dispatcher to hold the route",
        Duration::from_secs(10),
        || async {
            let metrics = app.http.get(app.url("/metrics")).send().await.unwrap();
            let metrics = metrics.text().await.unwrap();
            metrics
                .contains("herald_route_paused{route=\"vendor\"} 1")
                .then_some(())
        },
    )
    .await;
    let mut body = sms("+14155550100");
    body["ttl_seconds"] = json!(2);
    let id = app.enqueue_id("paused", &body).await;
    // An hour: the pause is never lifted in this test.
    ends_expired_in_time(&app, &ledger, &id, Duration::from_secs(3600)).await;
    assert_eq!(ledger.ledger().await.unwrap().requests, 0);
}

/// The vendor answers `429` with `Retry-After: 60`: the route waits a minute, and a
/// notification with 3 s to live ends at its expiry.
async fn an_expiry_ends_a_notification_held_by_a_vendors_retry_after(backend: Backend) {
    support::install_crypto();
    let vendor = herald_sandbox::spawn(SandboxConfig {
        profile: herald_sandbox::Profile::Plain,
        faults: parse_faults("rate_limited:1").unwrap(),
        retry_after: Duration::from_secs(60),
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let ledger = vendor.client().unwrap();
    let route = format!(
        "provider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"plain\"\ntimeout_seconds = 1\n",
        vendor.base_url()
    );
    let Some(app) = running(backend, &route).await else {
        return;
    };
    let mut body = sms("+14155550100");
    body["ttl_seconds"] = json!(3);
    let id = app.enqueue_id("slow-down", &body).await;
    ends_expired_in_time(&app, &ledger, &id, Duration::from_secs(60)).await;
    assert_eq!(ledger.ledger().await.unwrap().requests, 1);
}
