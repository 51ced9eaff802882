//! Dispatch against the sandbox vendor over real HTTP: every fault of the adapters' classification
//! table, per vendor profile and delivery policy, ends where docs/api.md says, with the sandbox's
//! ledger as ground truth. The dispatcher is stepped with `drain`, so nothing here sleeps to wait.

mod support;

use std::time::Duration;

use herald_sandbox::{Profile, SandboxClient, SandboxConfig, SandboxHandle};
use serde_json::Value;
use time::OffsetDateTime;

use herald::dispatch::Dispatcher;
use herald::domain::{
    AttemptOutcome, AttemptResult, Certainty, Decision, Next, NotificationId, SettledBy,
    Settlement, State,
};
use herald::review::{Ask, Outcome};
use herald::store::NewResolution;
use herald::store::{Claim, ClaimMode, Recorded, RouteSlot, StoreError};
use support::{ACME_REVIEWER, Backend, TestApp, email, results, spawn_stepped};

on_both_backends!(
    every_fault_ends_where_the_contract_says,
    a_claim_abandoned_by_a_dead_worker_is_reconciled,
    a_worker_whose_lease_expired_cannot_overwrite_the_newer_outcome,
    a_stale_call_that_outlived_its_deadline_takes_known_from_the_delivery,
    a_request_that_may_have_left_late_is_told_to_whoever_settles_its_resend,
    a_look_up_that_waited_out_a_late_word_settles_it,
    retries_stop_at_the_expiry_and_it_ends_failed_without_a_call,
);

/// The one route of the rig.
/// A slot on route `vendor` as its dispatcher would offer it.
fn vendor() -> Vec<RouteSlot> {
    vec![RouteSlot {
        route: "vendor".to_owned(),
        take: 10,
        send_window: Duration::from_secs(1),
    }]
}

/// A herald with one route, `vendor`, to a sandbox of the given profile and faults.
struct Rig {
    app: TestApp,
    dispatcher: Dispatcher,
    ledger: SandboxClient,
    _vendor: SandboxHandle,
}

const LEASE_SECONDS: u64 = 3;

async fn rig(backend: Backend, profile: Profile, delivery: &str, faults: &str) -> Option<Rig> {
    support::install_crypto();
    let vendor = herald_sandbox::spawn(SandboxConfig {
        profile,
        visibility_lag: Duration::from_millis(200),
        faults: herald_sandbox::parse_faults(faults).expect("fault syntax"),
        // Longer than the route's timeout (1 s), so a delayed answer is a client timeout.
        delay: Duration::from_millis(1500),
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox starts");
    let config = format!(
        r#"
[dispatch]
lease_seconds = {LEASE_SECONDS}
retry_base_ms = 100
retry_max_seconds = 2

[routes.vendor]
provider = "sandbox"
base_url = "{url}"
profile = "{profile}"
visibility_lag_ms = 200
timeout_seconds = 1
max_attempts = 20
delivery = "{delivery}"

[channels]
email = "vendor"
"#,
        url = vendor.base_url(),
        profile = profile.as_str(),
    );
    let (app, dispatcher) = spawn_stepped(backend, &config).await?;
    Some(Rig {
        app,
        dispatcher,
        ledger: vendor.client().expect("sandbox client"),
        _vendor: vendor,
    })
}

impl Rig {
    async fn enqueue(&self, key: &str) -> String {
        self.app.enqueue_id(key, &email("ada@example.com")).await
    }

    async fn drain(&self) {
        support::drain(&self.dispatcher).await;
    }

    async fn show(&self, id: &str) -> Value {
        self.app.show(id).await
    }

    /// How many times the vendor really delivered this notification.
    async fn delivered(&self, id: &str) -> u64 {
        self.ledger
            .ledger()
            .await
            .expect("ledger")
            .deliveries_of(id)
    }
}

struct Case {
    profile: Profile,
    delivery: &'static str,
    fault: &'static str,
    state: &'static str,
    certainty: &'static str,
    /// The attempts' results; `..` in the middle stands for any number of transient rejections.
    attempts: &'static [&'static str],
    first_settled_by: Option<&'static str>,
    delivered: u64,
}

const CASES: &[Case] = &[
    Case {
        profile: Profile::Plain,
        delivery: "at_most_once",
        fault: "",
        state: "delivered",
        certainty: "known",
        attempts: &["accepted"],
        first_settled_by: None,
        delivered: 1,
    },
    Case {
        profile: Profile::Plain,
        delivery: "at_most_once",
        fault: "accept_then_drop:nth=1",
        state: "unknown",
        certainty: "unknown",
        attempts: &["ambiguous"],
        first_settled_by: None,
        delivered: 1,
    },
    Case {
        profile: Profile::Plain,
        delivery: "at_least_once",
        fault: "accept_then_drop:nth=1",
        state: "delivered",
        certainty: "duplicate_possible",
        attempts: &["ambiguous", "accepted"],
        first_settled_by: None,
        delivered: 2,
    },
    Case {
        profile: Profile::Plain,
        delivery: "at_most_once",
        fault: "error_after_processing:nth=1",
        state: "unknown",
        certainty: "unknown",
        attempts: &["ambiguous"],
        first_settled_by: None,
        delivered: 1,
    },
    Case {
        profile: Profile::Plain,
        delivery: "at_most_once",
        fault: "delay:nth=1",
        state: "unknown",
        certainty: "unknown",
        attempts: &["ambiguous"],
        first_settled_by: None,
        delivered: 1,
    },
    Case {
        profile: Profile::Plain,
        delivery: "at_least_once",
        fault: "delay:nth=1",
        state: "delivered",
        certainty: "duplicate_possible",
        attempts: &["ambiguous", "accepted"],
        first_settled_by: None,
        delivered: 2,
    },
    Case {
        profile: Profile::Plain,
        delivery: "at_most_once",
        fault: "unavailable_before_processing:nth=1",
        state: "delivered",
        certainty: "known",
        attempts: &["rejected", "accepted"],
        first_settled_by: None,
        delivered: 1,
    },
    Case {
        profile: Profile::Plain,
        delivery: "at_most_once",
        fault: "rate_limited:nth=1",
        state: "delivered",
        certainty: "known",
        attempts: &["rejected", "accepted"],
        first_settled_by: None,
        delivered: 1,
    },
    Case {
        profile: Profile::Idempotent,
        delivery: "at_most_once",
        fault: "accept_then_drop:nth=1",
        state: "delivered",
        certainty: "known",
        attempts: &["ambiguous", "accepted"],
        first_settled_by: Some("idempotent_replay"),
        delivered: 1,
    },
    Case {
        profile: Profile::Idempotent,
        delivery: "at_most_once",
        fault: "error_after_processing:nth=1",
        state: "delivered",
        certainty: "known",
        attempts: &["ambiguous", "accepted"],
        first_settled_by: Some("idempotent_replay"),
        delivered: 1,
    },
    Case {
        profile: Profile::Idempotent,
        delivery: "at_least_once",
        fault: "delay:nth=1",
        state: "delivered",
        certainty: "known",
        attempts: &["ambiguous", "..", "accepted"],
        first_settled_by: Some("idempotent_replay"),
        delivered: 1,
    },
    Case {
        profile: Profile::Idempotent,
        delivery: "at_most_once",
        fault: "rate_limited:nth=1",
        state: "delivered",
        certainty: "known",
        attempts: &["rejected", "accepted"],
        first_settled_by: None,
        delivered: 1,
    },
    Case {
        profile: Profile::Queryable,
        delivery: "at_most_once",
        fault: "accept_then_drop:nth=1",
        state: "delivered",
        certainty: "known",
        attempts: &["ambiguous"],
        first_settled_by: Some("outcome_query"),
        delivered: 1,
    },
    Case {
        profile: Profile::Queryable,
        delivery: "at_least_once",
        fault: "delay:nth=1",
        state: "delivered",
        certainty: "known",
        attempts: &["ambiguous"],
        first_settled_by: Some("outcome_query"),
        delivered: 1,
    },
    Case {
        profile: Profile::Queryable,
        delivery: "at_most_once",
        fault: "error_after_processing:nth=1",
        state: "delivered",
        certainty: "known",
        attempts: &["ambiguous"],
        first_settled_by: Some("outcome_query"),
        delivered: 1,
    },
    Case {
        profile: Profile::Queryable,
        delivery: "at_most_once",
        fault: "unavailable_before_processing:nth=1",
        state: "delivered",
        certainty: "known",
        attempts: &["rejected", "accepted"],
        first_settled_by: None,
        delivered: 1,
    },
];

fn attempts_match(got: &[String], want: &[&str]) -> bool {
    match want.iter().position(|w| *w == "..") {
        None => got.iter().map(String::as_str).eq(want.iter().copied()),
        Some(gap) => {
            let (head, tail) = (&want[..gap], &want[gap + 1..]);
            got.len() >= head.len() + tail.len()
                && got[..head.len()]
                    .iter()
                    .map(String::as_str)
                    .eq(head.iter().copied())
                && got[got.len() - tail.len()..]
                    .iter()
                    .map(String::as_str)
                    .eq(tail.iter().copied())
                && got[head.len()..got.len() - tail.len()]
                    .iter()
                    .all(|r| r == "rejected")
        }
    }
}

async fn every_fault_ends_where_the_contract_says(backend: Backend) {
    for case in CASES {
        let label = format!(
            "{} / {} / fault `{}`",
            case.profile.as_str(),
            case.delivery,
            case.fault
        );
        let Some(rig) = rig(backend, case.profile, case.delivery, case.fault).await else {
            return;
        };
        let id = rig.enqueue("case").await;
        rig.drain().await;
        let n = rig.show(&id).await;
        assert_eq!(
            (n["state"].as_str(), n["certainty"].as_str()),
            (Some(case.state), Some(case.certainty)),
            "{label}: {n:#}"
        );
        assert!(
            attempts_match(&results(&n), case.attempts),
            "{label}: attempts {:?}, want {:?}",
            results(&n),
            case.attempts
        );
        assert_eq!(
            n["attempts"][0]["settled_by"].as_str(),
            case.first_settled_by,
            "{label}: {n:#}"
        );
        assert_eq!(
            rig.delivered(&id).await,
            case.delivered,
            "{label}: the vendor's ledger"
        );
        for attempt in n["attempts"].as_array().unwrap() {
            assert_eq!(
                attempt["provider_idempotency_key"],
                id.as_str(),
                "{label}: one key per notification"
            );
            assert!(
                attempt["evidence"]["stage"].is_string(),
                "{label}: evidence names its stage: {attempt}"
            );
        }
        if case.fault.starts_with("rate_limited") {
            // By the vendor's clock: the second request came a second after the refused one.
            let arrivals = rig.ledger.ledger().await.unwrap().arrivals_of(&id);
            assert!(
                arrivals[1] - arrivals[0] >= Duration::from_secs(1),
                "{label}: Retry-After: 1 is honoured: {arrivals:?}"
            );
        }
        let events = rig
            .app
            .db
            .scalar(&format!(
                "SELECT count(*) FROM outbox WHERE type = 'dev.herald.notification.{}'",
                case.state
            ))
            .await;
        assert_eq!(events, 1, "{label}: one event for the final state");
    }
}

async fn a_claim_abandoned_by_a_dead_worker_is_reconciled(backend: Backend) {
    // The worker claimed (committing its in_flight attempt) and died before calling the vendor:
    // nothing was delivered, and only what the vendor offers can prove it.
    let cases = [
        (
            Profile::Queryable,
            "at_most_once",
            "delivered",
            "known",
            Some("outcome_query"),
            1,
        ),
        (
            Profile::Idempotent,
            "at_most_once",
            "delivered",
            "known",
            Some("idempotent_replay"),
            1,
        ),
        (
            Profile::Plain,
            "at_most_once",
            "unknown",
            "unknown",
            None,
            0,
        ),
        (
            Profile::Plain,
            "at_least_once",
            "delivered",
            "duplicate_possible",
            None,
            1,
        ),
    ];
    for (profile, delivery, state, certainty, settled_by, delivered) in cases {
        let label = format!("{} / {delivery}", profile.as_str());
        let Some(rig) = rig(backend, profile, delivery, "").await else {
            return;
        };
        let id = rig.enqueue("abandoned").await;
        let claims = rig
            .app
            .store
            .claim(
                OffsetDateTime::now_utc(),
                Duration::from_secs(LEASE_SECONDS),
                10,
                &vendor(),
                &|_| None,
            )
            .await
            .unwrap();
        assert_eq!(claims.len(), 1);
        assert!(matches!(
            claims[0].mode,
            ClaimMode::Send {
                n: 1,
                suppressed: false
            }
        ));
        let during = rig.show(&id).await;
        assert_eq!(
            (during["state"].as_str(), results(&during)),
            (Some("sending"), vec!["in_flight".to_owned()]),
            "{label}"
        );

        rig.drain().await;
        let n = rig.show(&id).await;
        assert_eq!(
            (n["state"].as_str(), n["certainty"].as_str()),
            (Some(state), Some(certainty)),
            "{label}: {n:#}"
        );
        assert_eq!(n["attempts"][0]["result"], "ambiguous", "{label}");
        assert_eq!(
            n["attempts"][0]["evidence"]["stage"], "lease_expired",
            "{label}"
        );
        assert_eq!(
            n["attempts"][0]["settled_by"].as_str(),
            settled_by,
            "{label}"
        );
        assert_eq!(
            rig.delivered(&id).await,
            delivered,
            "{label}: the vendor's ledger"
        );
    }
}

/// A notification whose first worker's lease ended before it recorded: its stale claim, the
/// second worker's claim that reconciles the now ambiguous attempt 1, and when that came.
struct Lost {
    id: String,
    stale: Claim,
    fresh: Claim,
    later: OffsetDateTime,
}

async fn lost_to_a_second_worker(rig: &Rig) -> Lost {
    let id = rig
        .enqueue(&format!("fenced-{}", uuid::Uuid::new_v4()))
        .await;
    let store = &rig.app.store;
    let lease = Duration::from_secs(LEASE_SECONDS);
    let now = OffsetDateTime::now_utc();
    let stale = store
        .claim(now, lease, 10, &vendor(), &|_| None)
        .await
        .unwrap()
        .remove(0);
    // Another worker claims it after the lease: attempt 1 becomes ambiguous, generation moves on.
    let later = now + lease + Duration::from_secs(1);
    let fresh = store
        .claim(later, lease, 10, &vendor(), &|_| None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(fresh.mode, ClaimMode::Reconcile);
    assert_eq!(fresh.generation, stale.generation + 1);
    Lost {
        id,
        stale,
        fresh,
        later,
    }
}

/// A notification whose first worker lost its lease: the next claim's look-up found nothing of
/// attempt 1 once it could have shown, and attempt 2 was sent, recorded as `second`. Its id, and
/// the stale claim whose worker has not recorded yet.
async fn resent_beside_a_stale_claim(rig: &Rig, second: &Decision) -> (String, Claim) {
    let Lost {
        id,
        stale,
        fresh,
        later,
    } = lost_to_a_second_worker(rig).await;
    let store = &rig.app.store;
    let lease = Duration::from_secs(LEASE_SECONDS);
    let not_found = Decision {
        attempt: None,
        settle: Some(Settlement {
            by: SettledBy::OutcomeQuery,
            accepted: false,
            evidence: serde_json::json!({"detail": "not found"}),
            provider_ref: None,
        }),
        findings: None,
        next: Next::Retry { at: later },
    };
    assert!(matches!(
        store.record(&fresh, &not_found, later).await.unwrap(),
        Recorded::Applied { .. }
    ));
    let resend = store
        .claim(later, lease, 10, &vendor(), &|_| None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        resend.mode,
        ClaimMode::Send {
            n: 2,
            suppressed: false
        }
    );
    assert!(matches!(
        store.record(&resend, second, later).await.unwrap(),
        Recorded::Applied { .. }
    ));
    (id, stale)
}

/// [`resent_beside_a_stale_claim`], attempt 2 accepted: delivered, known, as far as anything
/// recorded can tell.
async fn delivered_beside_a_stale_claim(rig: &Rig) -> (String, Claim) {
    let (id, stale) = resent_beside_a_stale_claim(rig, &answered(2, accepted("resent-ref"))).await;
    let n = rig.show(&id).await;
    assert_eq!(
        (n["state"].as_str(), n["certainty"].as_str()),
        (Some("delivered"), Some("known"))
    );
    (id, stale)
}

/// Attempt `n`'s answer, recorded as the step that ends it delivered and known.
fn answered(
    n: i32,
    (result, provider_ref, evidence): (AttemptResult, Option<&str>, Value),
) -> Decision {
    Decision {
        attempt: Some(AttemptOutcome {
            n,
            result,
            permanent: None,
            provider_ref: provider_ref.map(str::to_owned),
            evidence,
        }),
        settle: None,
        findings: None,
        next: Next::Finish {
            state: State::Delivered,
            certainty: Certainty::Known,
        },
    }
}

fn accepted(reference: &str) -> (AttemptResult, Option<&str>, Value) {
    (
        AttemptResult::Accepted,
        Some(reference),
        serde_json::json!({"stage": "response", "status": 202}),
    )
}

/// Attempt 1's call, ended without an answer; `may_have_left_late` where it ended after the
/// moment its send deadline promised.
fn unanswered(may_have_left_late: bool) -> Decision {
    let mut evidence = serde_json::json!({
        "stage": "awaiting_response",
        "detail": "connection closed before message completed",
    });
    if may_have_left_late {
        evidence["may_have_left_late"] = true.into();
    }
    answered(1, (AttemptResult::Ambiguous, None, evidence))
}

/// The notification's state events, oldest first.
async fn events(rig: &Rig, id: &str) -> Vec<String> {
    rig.app.db.state_event_types(id.parse().unwrap()).await
}

const DELIVERED_THEN_REOPENED: [&str; 3] = [
    "dev.herald.notification.accepted",
    "dev.herald.notification.delivered",
    "dev.herald.notification.reopened",
];

async fn a_worker_whose_lease_expired_cannot_overwrite_the_newer_outcome(backend: Backend) {
    let Some(rig) = rig(backend, Profile::Plain, "at_most_once", "").await else {
        return;
    };
    let (id, stale) = delivered_beside_a_stale_claim(&rig).await;

    // Then the stale worker reads the answer it was sent: the vendor had taken attempt 1 too.
    let recorded = rig
        .app
        .store
        .record(
            &stale,
            &answered(1, accepted("late-ref")),
            OffsetDateTime::now_utc(),
        )
        .await
        .unwrap();
    assert!(matches!(recorded, Recorded::Fenced));
    let n = rig.show(&id).await;
    let first = &n["attempts"][0];
    assert_eq!(
        first["result"], "ambiguous",
        "the stale worker did not rewrite the result"
    );
    assert_eq!(first["provider_ref"], Value::Null);
    assert_eq!(
        first["evidence"]["late_result"]["provider_ref"], "late-ref",
        "its answer is kept as evidence: {first}"
    );
    assert_eq!(
        (n["state"].as_str(), n["certainty"].as_str()),
        (Some("delivered"), Some("duplicate_possible")),
        "the evidence contradicts the known delivery: {n:#}"
    );
    let why = n["contradiction"]["why"].as_str().unwrap_or_default();
    assert!(
        why.contains("attempt 1 was answered `accepted` (late-ref)")
            && why.contains("2 message(s)"),
        "{why}"
    );
    assert_eq!(
        events(&rig, &id).await,
        DELIVERED_THEN_REOPENED,
        "one delivery recorded, and one reopening"
    );
}

/// The stale worker was held up past its send deadline and its call ended unanswered: its
/// request may have left after the look-up found nothing, so `known` cannot stand beside it.
async fn a_stale_call_that_outlived_its_deadline_takes_known_from_the_delivery(backend: Backend) {
    let Some(rig) = rig(backend, Profile::Plain, "at_most_once", "").await else {
        return;
    };
    let (id, stale) = delivered_beside_a_stale_claim(&rig).await;
    let store = &rig.app.store;
    let now = OffsetDateTime::now_utc();

    // Unanswered within its deadline's promise, it proves nothing against the look-up.
    let recorded = store.record(&stale, &unanswered(false), now).await.unwrap();
    assert!(matches!(recorded, Recorded::Fenced));
    let n = rig.show(&id).await;
    assert_eq!(
        (n["state"].as_str(), n["certainty"].as_str()),
        (Some("delivered"), Some("known")),
        "{n:#}"
    );

    let recorded = store.record(&stale, &unanswered(true), now).await.unwrap();
    assert!(matches!(recorded, Recorded::Fenced));
    let n = rig.show(&id).await;
    assert_eq!(
        n["attempts"][0]["evidence"]["late_result"]["evidence"]["may_have_left_late"], true,
        "{n:#}"
    );
    assert_eq!(
        (n["state"].as_str(), n["certainty"].as_str()),
        (Some("delivered"), Some("duplicate_possible")),
        "{n:#}"
    );
    let why = n["contradiction"]["why"].as_str().unwrap_or_default();
    assert!(
        why.contains("attempt 1's worker was held up past its send deadline")
            && why.contains("may hold one more"),
        "{why}"
    );
    assert_eq!(n["review"]["reason"], "contradicted", "{n:#}");
    assert_eq!(events(&rig, &id).await, DELIVERED_THEN_REOPENED);
}

/// The held-up worker's request may have left late while the resend waits in review, itself
/// unanswered (`unknown`): the person who settles it hears of it first; a requery that finds
/// the resend cannot make it `known` beside it; and a person's own resolution weighs it once.
async fn a_request_that_may_have_left_late_is_told_to_whoever_settles_its_resend(backend: Backend) {
    let Some(rig) = rig(backend, Profile::Plain, "at_most_once", "").await else {
        return;
    };
    let store = &rig.app.store;
    let unknown = Decision {
        attempt: Some(AttemptOutcome {
            n: 2,
            result: AttemptResult::Ambiguous,
            permanent: None,
            provider_ref: None,
            evidence: serde_json::json!({"stage": "awaiting_response"}),
        }),
        settle: None,
        findings: None,
        next: Next::Finish {
            state: State::Unknown,
            certainty: Certainty::Unknown,
        },
    };
    let found = Decision {
        attempt: None,
        settle: Some(Settlement {
            by: SettledBy::OutcomeQuery,
            accepted: true,
            evidence: serde_json::json!({"detail": "found"}),
            provider_ref: None,
        }),
        findings: None,
        next: Next::Finish {
            state: State::Delivered,
            certainty: Certainty::Known,
        },
    };
    for settled_by_requery in [true, false] {
        let (id, stale) = resent_beside_a_stale_claim(&rig, &unknown).await;
        let now = OffsetDateTime::now_utc();
        let late = store.record(&stale, &unanswered(true), now).await.unwrap();
        assert!(matches!(late, Recorded::Fenced));
        let n = rig.show(&id).await;
        assert_eq!(
            (n["state"].as_str(), n["review"]["reason"].as_str()),
            (Some("unknown"), Some("contradicted")),
            "{n:#}"
        );
        let id = NotificationId::parse(&id).unwrap();
        let read = store.notification("acme", id).await.unwrap();
        if settled_by_requery {
            // The look-up found the resend; a `known` beside attempt 1's late word is refused
            // by the store itself, whoever asks for it.
            let refused = store
                .record_in_review(&Claim::in_review(read.clone()), &found, now)
                .await;
            assert!(
                matches!(refused, Err(StoreError::Unjustified(_))),
                "{refused:?}"
            );
            // What herald's rule makes of the same look-up stands.
            let ruled = Decision {
                next: Next::Finish {
                    state: State::Delivered,
                    certainty: Certainty::DuplicatePossible,
                },
                ..found.clone()
            };
            store
                .record_in_review(&Claim::in_review(read), &ruled, now)
                .await
                .unwrap();
            let n = store.notification("acme", id).await.unwrap().notification;
            assert_eq!(
                (n.state, n.certainty),
                (State::Delivered, Some(Certainty::DuplicatePossible)),
                "the resend found, and attempt 1 may have left too"
            );
            continue;
        }
        // A person acknowledges what they were told, then says delivered.
        for (outcome, then) in [(Outcome::Acknowledged, None), (Outcome::Delivered, None)] {
            let read = store.notification("acme", id).await.unwrap();
            let ask = Ask::new(outcome, then, false).unwrap();
            let change =
                herald::review::resolve(&read.notification, &read.attempts, &ask, None, now)
                    .unwrap();
            let resolution = NewResolution {
                principal: "on-call".into(),
                outcome,
                then,
                note: "the vendor's log shows one message".into(),
                change,
                before: (read.notification.state, read.notification.certainty),
            };
            store
                .resolve("acme", id, read.generation, &resolution, now)
                .await
                .unwrap();
        }
        let read = store.notification("acme", id).await.unwrap();
        assert_eq!(
            (read.notification.state, read.notification.certainty),
            (State::Delivered, Some(Certainty::Known))
        );
        assert_eq!(
            read.attempts[0].evidence["late_result_reviewed"], true,
            "{:#}",
            read.attempts[0].evidence
        );
        // Their word stands against the same possibility, however often it is held up again.
        let again = store.record(&stale, &unanswered(true), now).await.unwrap();
        assert!(matches!(again, Recorded::Fenced));
        let n = store.notification("acme", id).await.unwrap().notification;
        assert_eq!(
            (n.state, n.certainty),
            (State::Delivered, Some(Certainty::Known))
        );
    }
}

/// The held-up worker said its request may have left late *before* the look-up: the look-up
/// waited it out (its settlement lists it in `covers_late`), so its absence covers that request
/// too, and the notification goes on as the look-up says, to a known end. A look-up that did
/// not have the late word in view lists nothing, and the word reopens what it settled.
async fn a_look_up_that_waited_out_a_late_word_settles_it(backend: Backend) {
    let Some(rig) = rig(backend, Profile::Plain, "at_most_once", "").await else {
        return;
    };
    let store = &rig.app.store;
    // Retried after the test, so that no claim here takes an earlier round's notification.
    let retry = Next::Retry {
        at: OffsetDateTime::now_utc() + Duration::from_secs(3600),
    };
    let failed = Next::Finish {
        state: State::Failed,
        certainty: Certainty::Known,
    };
    for (covered, next) in [(true, retry.clone()), (true, failed), (false, retry)] {
        let Lost {
            id,
            stale,
            fresh,
            later,
        } = lost_to_a_second_worker(&rig).await;
        let late = store
            .record(&stale, &unanswered(true), later)
            .await
            .unwrap();
        assert!(matches!(late, Recorded::Fenced));

        let mut evidence = serde_json::json!({"detail": "not found, after the late request"});
        if covered {
            evidence["covers_late"] = serde_json::json!([1]);
        }
        let not_found = Decision {
            attempt: None,
            settle: Some(Settlement {
                by: SettledBy::OutcomeQuery,
                accepted: false,
                evidence,
                provider_ref: None,
            }),
            findings: None,
            next: next.clone(),
        };
        let recorded = store.record(&fresh, &not_found, later).await;
        let n = rig.show(&id).await;
        let ended = (n["state"].as_str(), n["certainty"].as_str());
        match (covered, &next) {
            (true, Next::Retry { .. }) => {
                assert!(
                    matches!(recorded, Ok(Recorded::Applied { .. })),
                    "{recorded:?}"
                );
                assert_eq!(ended, (Some("queued"), None), "{n:#}");
                assert_eq!(n["review"], Value::Null, "{n:#}");
                // Cancelled now, it is known not sent: the database's own rule agrees.
                let id = NotificationId::parse(&id).unwrap();
                let cancelled = store.cancel("acme", id, later).await.unwrap();
                assert_eq!(
                    (cancelled.state, cancelled.certainty),
                    (State::Cancelled, Some(Certainty::Known))
                );
            }
            (true, _) => {
                assert!(
                    matches!(recorded, Ok(Recorded::Applied { .. })),
                    "{recorded:?}"
                );
                assert_eq!(ended, (Some("failed"), Some("known")), "{n:#}");
            }
            (false, _) => {
                assert_eq!(ended, (Some("unknown"), Some("unknown")), "{n:#}");
                assert_eq!(n["review"]["reason"], "contradicted", "{n:#}");
            }
        }
    }
}

/// A vendor that is down past the notification's expiry: herald retries until then, the claim
/// at the expiry refuses it without a call, and only a person's forced resend sends it later.
async fn retries_stop_at_the_expiry_and_it_ends_failed_without_a_call(backend: Backend) {
    let Some(rig) = rig(
        backend,
        Profile::Plain,
        "at_most_once",
        "unavailable_before_processing:1.0",
    )
    .await
    else {
        return;
    };
    let mut body = email("ada@example.com");
    body["ttl_seconds"] = 1.into();
    let id = rig.app.enqueue_id("expiring", &body).await;
    rig.drain().await;
    let n = rig.show(&id).await;
    assert_eq!(
        (
            n["state"].as_str(),
            n["certainty"].as_str(),
            n["failure_reason"].as_str()
        ),
        (Some("failed"), Some("known"), Some("expired")),
        "{n:#}"
    );
    let expires_at = time_of(&n["expires_at"]);
    let attempts = n["attempts"].as_array().unwrap();
    let (last, tried) = attempts.split_last().unwrap();
    assert!(
        !tried.is_empty(),
        "the vendor was tried before the expiry: {n:#}"
    );
    for attempt in tried {
        assert_eq!(attempt["evidence"]["status"], 503, "{attempt}");
    }
    // By the vendor's clock, every request it saw came before the expiry.
    let arrivals = rig.ledger.ledger().await.unwrap().arrivals_of(&id);
    assert!(
        arrivals.iter().all(|at| *at < expires_at),
        "a request after the expiry at {expires_at}: {arrivals:?}"
    );
    assert_eq!(last["evidence"]["stage"], "expired", "{last}");
    // The last claim may take a retry due just before the expiry; what must come after it is
    // the refusal, which is checked just before the call would have gone.
    assert!(time_of(&last["finished_at"]) >= expires_at, "{last}");
    let ledger = rig.ledger.ledger().await.unwrap();
    assert_eq!(
        (ledger.requests, ledger.total_deliveries()),
        (tried.len() as u64, 0),
        "every request the vendor saw is one of the attempts before the expiry"
    );
    assert_eq!(
        n["review"]["reason"], "rejected",
        "final, not waiting: {n:#}"
    );
    assert_eq!(
        events(&rig, &id).await,
        [
            "dev.herald.notification.accepted",
            "dev.herald.notification.failed"
        ]
    );

    // Resending it now is worth nothing to the upstream unless a person insists.
    let path = format!("/v1/notifications/{id}/resolve");
    let mut resend = serde_json::json!({"outcome": "not_delivered", "then": "resend",
                                        "note": "the code is still valid, per support"});
    let refused = rig.app.post_json(ACME_REVIEWER, &path, &resend).await;
    assert_eq!(refused.status(), reqwest::StatusCode::CONFLICT);
    let refused: Value = refused.json().await.unwrap();
    assert!(
        refused["detail"].as_str().unwrap().contains("expired at"),
        "{refused}"
    );
    resend["force"] = true.into();
    let resent = rig.app.post_json(ACME_REVIEWER, &path, &resend).await;
    assert_eq!(resent.status(), reqwest::StatusCode::OK);
    rig.ledger.set_faults(&[]).await.unwrap();
    rig.drain().await;
    let n = rig.show(&id).await;
    assert_eq!(n["state"], "delivered", "{n:#}");
    assert_eq!(n["expires_at"], Value::Null, "the forced resend lifted it");
    assert_eq!(n["review"]["resolutions"][0]["forced"], true);
    assert_eq!(rig.delivered(&id).await, 1);
}

fn time_of(value: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(
        value.as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
}
