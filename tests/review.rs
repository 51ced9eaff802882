//! On-call review over real HTTP, on both databases: every resolution path and where it ends,
//! what waits for a person by default, closing an item (it leaves review, and retention deletes
//! it when due), races between resolutions, scopes and tenants, a requery that settles, bulk
//! resolution bound to its preview, and dead letters resent after their vendor recovered — with
//! the sandbox's ledger as ground truth.
//!
//! The races (a resolution against another, against a vendor's signed delivery report, a bulk
//! resolution against the route's outcome query, a requery against a report) each run on many
//! notifications at once and count the losers that met their winner inside herald (its 409 says
//! the notification changed while it worked), so that a race that ran one request after the
//! other cannot pass for one that was run.

mod support;

use std::time::Duration;

use futures::future::join_all;
use herald_provider::signature::SigningSecret;
use herald_sandbox::{
    CallbackBody, FaultRule, Profile, SandboxClient, SandboxConfig, SandboxHandle, parse_faults,
};
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use herald::dispatch::Dispatcher;
use support::{
    ACME, ACME_ADMIN, ACME_READER, ACME_REVIEWER, Backend, GLOBEX, TestApp, eventually,
    spawn_stepped,
};

on_both_backends!(
    each_resolution_ends_where_the_contract_says,
    two_resolutions_at_once_apply_once,
    a_resolve_racing_a_delivery_report_lets_one_win_and_the_loser_is_told_why,
    a_bulk_resolution_racing_the_outcome_query_settles_each_item_once_and_lists_what_it_lost,
    a_requery_racing_a_delivery_report_settles_once_and_the_loser_is_told_why,
    review_needs_its_scope_and_sees_only_its_tenant,
    a_requery_settles_what_the_vendor_can_now_see,
    a_bulk_dry_run_changes_nothing_and_the_real_run_changes_what_it_listed,
    a_list_resolves_each_item_with_its_own_outcome_under_one_preview,
    a_bulk_confirmation_with_another_outcome_or_filter_is_refused_and_a_preview_is_used_once,
    dead_letters_are_listed_with_their_cause_and_resent_once_the_vendor_is_back,
    a_resolution_is_refused_where_the_item_is_not_in_review,
    a_closed_item_leaves_review_and_retention_deletes_it_when_due,
    a_permanent_refusal_is_final_and_listed_by_filter_unless_configured_to_wait,
);

struct Rig {
    app: TestApp,
    dispatcher: Dispatcher,
    /// Keeps the vendor running for the test; its look-up is asked directly too.
    vendor: SandboxHandle,
    ledger: SandboxClient,
}

/// Faults under which the vendor processes every send and loses its answer: on a route that
/// cannot look (plain), each ends `unknown`.
const LOST_ANSWERS: &str = "accept_then_drop:1";
/// The same, with every look-up failing too: a route that can look (queryable) gives up on
/// each once its age cap runs out, and it ends `unknown`.
const LOST_ANSWERS_UNSEEN: &str = "accept_then_drop:1,lookup_error:1";

/// The secret a route that takes its vendor's delivery reports checks their signatures with.
const CALLBACK_SECRET: &str = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// Route `vendor`'s `extra` keys, and the secret that lets it take its vendor's reports.
fn taking_reports(extra: &str) -> String {
    format!("{extra}callback_secret = \"{CALLBACK_SECRET}\"\n")
}

/// How many notifications a race runs on at once: enough that some pairs meet inside herald
/// whatever the scheduler does with each.
const RACES: usize = 20;

async fn rig(backend: Backend, profile: Profile, route_extra: &str) -> Option<Rig> {
    support::install_crypto();
    let vendor = herald_sandbox::spawn(SandboxConfig {
        profile,
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let config = format!(
        "[dispatch]\nlease_seconds = 4\nretry_base_ms = 20\nretry_max_seconds = 1\n\n\
         [routes.vendor]\nprovider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"{}\"\n\
         timeout_seconds = 1\n{route_extra}\n\n[channels]\nemail = \"vendor\"\n",
        vendor.base_url(),
        profile.as_str()
    );
    let (app, dispatcher) = spawn_stepped(backend, &config).await?;
    let ledger = vendor.client().unwrap();
    Some(Rig {
        app,
        dispatcher,
        vendor,
        ledger,
    })
}

impl Rig {
    async fn faults(&self, spec: &str) {
        let rules: Vec<FaultRule> = parse_faults(spec).unwrap();
        self.ledger.set_faults(&rules).await.unwrap();
    }

    async fn enqueue(&self, key: &str) -> String {
        let body = json!({"channel": "email", "to": format!("{key}@example.com"),
                          "subject": "Hi", "text": "hello"});
        let created: Value = self
            .app
            .enqueue(ACME, key, &body)
            .await
            .json()
            .await
            .unwrap();
        created["id"].as_str().unwrap().to_owned()
    }

    async fn drain(&self) {
        self.dispatcher
            .drain(Duration::from_secs(10))
            .await
            .expect("dispatch runs");
    }

    /// A notification that ends `unknown`: its only send was processed, then its answer lost.
    async fn unknown(&self, key: &str) -> String {
        self.unknowns(LOST_ANSWERS, &[key.to_owned()])
            .await
            .remove(0)
    }

    /// One notification per key, each sent once while `faults` hold, that all end `unknown`.
    async fn unknowns(&self, faults: &str, keys: &[String]) -> Vec<String> {
        self.faults(faults).await;
        let mut ids = Vec::with_capacity(keys.len());
        for key in keys {
            ids.push(self.enqueue(key).await);
        }
        self.drain().await;
        self.faults("").await;
        for id in &ids {
            assert_eq!(self.show(id).await["state"], "unknown");
        }
        ids
    }

    async fn show(&self, id: &str) -> Value {
        self.app
            .get(ACME, &format!("/v1/notifications/{id}"))
            .await
            .json()
            .await
            .unwrap()
    }

    async fn resolve(&self, id: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .app
            .post_json(
                ACME_REVIEWER,
                &format!("/v1/notifications/{id}/resolve"),
                &body,
            )
            .await;
        (
            response.status(),
            response.json().await.unwrap_or(Value::Null),
        )
    }

    async fn requery(&self, id: &str) -> (StatusCode, Value) {
        let response = self
            .app
            .post_json(
                ACME_REVIEWER,
                &format!("/v1/notifications/{id}/requery"),
                &json!({}),
            )
            .await;
        (
            response.status(),
            response.json().await.unwrap_or(Value::Null),
        )
    }

    /// Posts a vendor's signed report to route `vendor`'s callback URL, as the vendor does.
    async fn post_report(&self, report: &Report) -> (StatusCode, Value) {
        let mut request = self
            .app
            .http
            .post(self.app.url("/v1/callbacks/vendor"))
            .header("content-type", "application/json")
            .body(report.body.clone());
        for (name, value) in &report.headers {
            request = request.header(*name, value);
        }
        let response = request.send().await.unwrap();
        (
            response.status(),
            response.json().await.unwrap_or(Value::Null),
        )
    }

    /// The vendor's id of the one message it holds under `key`, as its look-up (queryable
    /// profile) answers it.
    async fn vendor_message(&self, key: &str) -> String {
        let list: Value = self
            .app
            .http
            .get(format!("{}/messages", self.vendor.base_url()))
            .query(&[("reference", key)])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(list["data"].as_array().map(Vec::len), Some(1), "{list:#}");
        list["data"][0]["id"].as_str().unwrap().to_owned()
    }

    async fn queue(&self, query: &str) -> Value {
        let response = self
            .app
            .get(ACME_REVIEWER, &format!("/v1/review{query}"))
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        response.json().await.unwrap()
    }

    /// Closes `id` as not delivered, with `note`.
    async fn close(&self, id: &str, note: &str) -> (StatusCode, Value) {
        self.resolve(
            id,
            json!({"outcome": "not_delivered", "then": "close", "note": note}),
        )
        .await
    }

    /// `POST /v1/review/resolve` as the reviewer.
    async fn bulk(&self, body: Value) -> (StatusCode, Value) {
        let response = self
            .app
            .post_json(ACME_REVIEWER, "/v1/review/resolve", &body)
            .await;
        (
            response.status(),
            response.json().await.unwrap_or(Value::Null),
        )
    }

    /// A dry run of `body` (which must preview something), then its confirmation with a note:
    /// what the confirmation changed.
    async fn bulk_confirmed(&self, body: Value) -> (Value, Value) {
        let mut dry = body.clone();
        dry["dry_run"] = json!(true);
        let (status, preview) = self.bulk(dry).await;
        assert_eq!(status, StatusCode::OK, "{preview:#}");
        let token = preview["preview"].as_str().expect("a preview to confirm");
        let (status, real) = self
            .bulk(json!({"preview": token, "note": "confirmed after the dry run"}))
            .await;
        assert_eq!(status, StatusCode::OK, "{real:#}");
        (preview, real)
    }

    async fn delivered(&self, id: &str) -> u64 {
        self.ledger.ledger().await.unwrap().deliveries_of(id)
    }
}

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Whether a problem's (or a refusal's) `detail` says `words`.
fn says(problem: &Value, words: &str) -> bool {
    problem["detail"]
        .as_str()
        .is_some_and(|detail| detail.contains(words))
}

/// A vendor's delivery report, signed as the sandbox signs its own, ready to post.
struct Report {
    body: Vec<u8>,
    headers: [(&'static str, String); 3],
}

/// The vendor's signed report that `message_id`, the message sent to `n`'s recipient under its
/// first attempt's key, was delivered.
fn delivery_report(n: &Value, message_id: &str) -> Report {
    let body = serde_json::to_vec(&CallbackBody {
        reference: n["attempts"][0]["provider_idempotency_key"]
            .as_str()
            .unwrap()
            .to_owned(),
        message_id: message_id.to_owned(),
        to: n["to"].as_str().unwrap().to_owned(),
        status: "delivered".to_owned(),
        at: time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap(),
    })
    .unwrap();
    let event = format!("evt_{}", uuid::Uuid::now_v7().simple());
    let timestamp = time::OffsetDateTime::now_utc().unix_timestamp();
    let secret = SigningSecret::parse(&SecretString::from(CALLBACK_SECRET)).unwrap();
    let signature = secret.sign(&event, timestamp, &body);
    Report {
        body,
        headers: [
            ("webhook-id", event),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", signature),
        ],
    }
}

/// `prefix-0`, `prefix-1`, …: one idempotency key per notification of a race.
fn keys(prefix: &str) -> Vec<String> {
    (0..RACES).map(|i| format!("{prefix}-{i}")).collect()
}

/// Whether the loser of a race met the winner inside herald: refused because the winner
/// committed while it was under way (it had read the notification as it stood before), rather
/// than because the winner had finished before it read. Its refusal must say one or the other.
fn met_the_winner(refusal: &Value) -> bool {
    let said = |phrases: &[&str]| phrases.iter().any(|p| says(refusal, p));
    if said(&[
        "changed while it was being resolved",
        "changed while it was requeried",
    ]) {
        return true;
    }
    assert!(
        said(&[
            "not in review",
            "only an `unknown` notification is requeried",
            "changed since the preview",
        ]),
        "the loser is told why it lost: {refusal:#}"
    );
    false
}

/// Says how a batch of races went (`outcome`: who won them), and fails unless they were really
/// run: some losers read the notification before their winner changed it. (Both requests of a
/// pair are always under way at once as the client sees them; only herald's own answer shows
/// that they met inside it.)
fn assert_raced(backend: Backend, met: usize, outcome: &str) {
    eprintln!(
        "{backend:?}: in {met} of {RACES} races the loser met its winner inside herald{outcome}"
    );
    assert!(
        met > 0,
        "no loser met its winner inside herald: the race was not run"
    );
}

/// The 409 that a race's loser gets: a conflict that says why. Whether it met the winner.
fn lost(status: StatusCode, problem: &Value) -> bool {
    assert_eq!(status, StatusCode::CONFLICT, "{problem:#}");
    assert_eq!(problem["type"], "/problems/conflict", "{problem:#}");
    met_the_winner(problem)
}

fn ending(n: &Value) -> (&str, &str) {
    (
        n["state"].as_str().unwrap_or_default(),
        n["certainty"].as_str().unwrap_or("-"),
    )
}

async fn each_resolution_ends_where_the_contract_says(backend: Backend) {
    let Some(rig) = rig(backend, Profile::Plain, "").await else {
        return;
    };
    let delivered = rig.unknown("said-delivered").await;
    let closed = rig.unknown("said-closed").await;
    let resent = rig.unknown("said-resend").await;
    let page = rig.queue("").await;
    assert_eq!(
        ids(&page),
        [delivered.clone(), closed.clone(), resent.clone()]
    );
    assert_eq!(page["data"][0]["reason"], "unknown");
    assert!(
        page["data"][0]["why"]
            .as_str()
            .unwrap()
            .contains("ambiguous"),
        "{page:#}"
    );
    assert_eq!(page["data"][0]["attempts"][0]["result"], "ambiguous");

    let note = "the vendor's dashboard shows it";
    let (status, n) = rig
        .resolve(&delivered, json!({"outcome": "delivered", "note": note}))
        .await;
    assert_eq!(status, StatusCode::OK, "{n:#}");
    assert_eq!(ending(&n), ("delivered", "known"));
    assert_eq!(n["attempts"][0]["settled_by"], "review");
    assert_eq!(
        n["settled_by"], "person",
        "the person's word, not herald's proof"
    );
    let audit = &n["review"]["resolutions"][0];
    assert_eq!(audit["principal"], "acme-oncall");
    assert_eq!(audit["note"], note);
    assert_eq!(
        (
            audit["state_before"].as_str(),
            audit["state_after"].as_str()
        ),
        (Some("unknown"), Some("delivered"))
    );
    assert_eq!(n["review"]["open"], false);

    let (status, n) = rig.close(&closed, "bounced").await;
    assert_eq!(status, StatusCode::OK, "{n:#}");
    assert_eq!(ending(&n), ("failed", "known"));
    assert_eq!(n["settled_by"], "person");

    let (status, n) = rig
        .resolve(
            &resent,
            json!({"outcome": "not_delivered", "then": "resend", "note": "not on the dashboard"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{n:#}");
    assert_eq!(n["state"], "queued");
    rig.drain().await;
    let n = rig.show(&resent).await;
    // The vendor had the first send after all (its answer was lost): the recipient has two.
    // The person said it never arrived, so the resend's acceptance is `known` on their word —
    // and says so: a reader can tell it from a certainty herald proved.
    assert_eq!(rig.delivered(&resent).await, 2, "the vendor's ledger");
    assert_eq!(
        (ending(&n), n["settled_by"].as_str()),
        (("delivered", "known"), Some("person")),
        "{n:#}"
    );
    assert!(
        ids(&rig.queue("").await).is_empty(),
        "nothing left to look at"
    );

    // A duplicate_possible delivery is acknowledged and leaves the queue.
    // Counted from a fresh ledger: the first request is dropped after processing, then resent.
    rig.ledger.clear_ledger().await.unwrap();
    rig.faults("accept_then_drop:nth=1").await;
    let body = json!({"channel": "email", "to": "dup@example.com", "subject": "Hi", "text": "hello",
                      "delivery": "at_least_once"});
    let created: Value = rig
        .app
        .enqueue(ACME, "dup", &body)
        .await
        .json()
        .await
        .unwrap();
    let dup = created["id"].as_str().unwrap().to_owned();
    rig.drain().await;
    assert_eq!(
        ending(&rig.show(&dup).await),
        ("delivered", "duplicate_possible")
    );
    let page = rig.queue("?reason=duplicate_possible").await;
    assert_eq!(ids(&page), [dup.as_str()]);
    let (status, n) = rig
        .resolve(
            &dup,
            json!({"outcome": "acknowledged", "note": "customer told"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{n:#}");
    assert_eq!(n["acknowledged"], true);
    assert!(ids(&rig.queue("").await).is_empty());

    let events = rig
        .app
        .db
        .event_types(uuid::Uuid::parse_str(&delivered).unwrap())
        .await;
    assert_eq!(
        events.last().map(String::as_str),
        Some("dev.herald.notification.resolved")
    );
}

async fn two_resolutions_at_once_apply_once(backend: Backend) {
    let Some(rig) = rig(backend, Profile::Plain, "").await else {
        return;
    };
    let ids = rig.unknowns(LOST_ANSWERS, &keys("raced")).await;
    let resend = json!({"outcome": "not_delivered", "then": "resend", "note": "racing"});
    // Every pair at once: two people resend the same notification.
    let races = join_all(ids.iter().map(|id| async {
        tokio::join!(
            rig.resolve(id, resend.clone()),
            rig.resolve(id, resend.clone())
        )
    }))
    .await;
    let mut met = 0;
    for (id, (a, b)) in ids.iter().zip(&races) {
        let (won, loser) = match (a.0, b.0) {
            (StatusCode::OK, _) => (a, b),
            (_, StatusCode::OK) => (b, a),
            _ => panic!("one of the two must win: {a:?} {b:?}"),
        };
        assert_eq!(won.1["state"], "queued", "{:#}", won.1);
        met += usize::from(lost(loser.0, &loser.1));
        let n = rig.show(id).await;
        assert_eq!(
            n["review"]["resolutions"].as_array().unwrap().len(),
            1,
            "never two resends: {n:#}"
        );
    }
    assert_raced(backend, met, "");
    rig.drain().await;
    for id in &ids {
        assert_eq!(ending(&rig.show(id).await), ("delivered", "known"));
        assert_eq!(
            rig.delivered(id).await,
            2,
            "the send whose answer was lost, and the one resend that won"
        );
    }
}

async fn a_resolve_racing_a_delivery_report_lets_one_win_and_the_loser_is_told_why(
    backend: Backend,
) {
    let Some(rig) = rig(backend, Profile::Plain, &taking_reports("")).await else {
        return;
    };
    let ids = rig.unknowns(LOST_ANSWERS, &keys("reported")).await;
    let mut reports = Vec::with_capacity(ids.len());
    for id in &ids {
        // herald never learnt the vendor's id of a send whose answer was lost: whatever id the
        // vendor names is new to it.
        let message = format!("sbx_{}", uuid::Uuid::now_v7());
        reports.push(delivery_report(&rig.show(id).await, &message));
    }
    let resend = json!({"outcome": "not_delivered", "then": "resend",
                        "note": "not on the vendor's dashboard"});
    // Every pair at once: a person says the message never left while its vendor reports it
    // delivered.
    let races = join_all(ids.iter().zip(&reports).map(|(id, report)| async {
        tokio::join!(rig.resolve(id, resend.clone()), rig.post_report(report))
    }))
    .await;
    let (mut met, mut resolved) = (0, 0);
    for (id, (resolve, report)) in ids.iter().zip(&races) {
        // The report is the vendor's word: taken as evidence whoever won.
        assert_eq!(report.0, StatusCode::OK, "{:#}", report.1);
        assert_eq!(report.1["new"], 1, "{:#}", report.1);
        let n = rig.show(id).await;
        assert_eq!(ending(&n), ("delivered", "known"), "{n:#}");
        let resolutions = n["review"]["resolutions"].as_array().map_or(0, Vec::len);
        if resolve.0 == StatusCode::OK {
            // The person won; the report that came after contradicts them, and reopens it as
            // delivered, for a person to acknowledge: it is never sent again.
            resolved += 1;
            assert_eq!(resolutions, 1, "{n:#}");
            assert_eq!(n["review"]["reason"], "contradicted", "{n:#}");
            assert_eq!(n["review"]["open"], true, "{n:#}");
        } else {
            met += usize::from(lost(resolve.0, &resolve.1));
            assert_eq!(resolutions, 0, "the loser changed nothing: {n:#}");
            assert_eq!(n["attempts"][0]["settled_by"], "callback", "{n:#}");
            assert_eq!(n["contradiction"], Value::Null, "{n:#}");
        }
    }
    assert_raced(backend, met, &format!("; {resolved} resolves won"));
    rig.drain().await;
    for id in &ids {
        let n = rig.show(id).await;
        assert_eq!(ending(&n), ("delivered", "known"), "{n:#}");
        assert_eq!(n["attempts"].as_array().unwrap().len(), 1, "{n:#}");
        assert_eq!(
            rig.delivered(id).await,
            1,
            "known, and the vendor holds exactly one: {n:#}"
        );
    }
}

async fn a_bulk_resolution_racing_the_outcome_query_settles_each_item_once_and_lists_what_it_lost(
    backend: Backend,
) {
    // The dispatcher never claims an item in review: what settles one on the route's own
    // evidence is its outcome query, which a requery asks now and decides by the dispatcher's
    // reconciliation policy. Every look-up fails while the route's age cap runs out, so the
    // notifications end unknown; once the look-up works again, a requery settles each.
    let Some(rig) = rig(backend, Profile::Queryable, "max_age_seconds = 1\n").await else {
        return;
    };
    // The requeries usually finish before the bulk resolution reads their items: rounds until
    // one of them meets it inside herald.
    const ROUNDS: usize = 5;
    let mut met = 0;
    for round in 0..ROUNDS {
        met += bulk_racing_requeries(&rig, round).await;
        if met > 0 {
            eprintln!("{backend:?}: met inside herald {met} times in round {round}");
            break;
        }
    }
    assert!(
        met > 0,
        "in {ROUNDS} rounds of {RACES}, no requery met the bulk resolution inside herald"
    );
}

/// One round of the bulk race, on its own notifications; how many of its pairs met inside
/// herald.
async fn bulk_racing_requeries(rig: &Rig, round: usize) -> usize {
    let ids = rig
        .unknowns(LOST_ANSWERS_UNSEEN, &keys(&format!("bulk-raced-{round}")))
        .await;
    // Earlier rounds' items are all delivered: only this round's wait as unknown.
    let (status, dry) = rig
        .bulk(json!({"filter": {"reason": "unknown"}, "outcome": "delivered", "dry_run": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "{dry:#}");
    assert_eq!(dry["ids"], json!(ids), "{dry:#}");
    // The confirmation and a requery of every item it applies to, all at once.
    let confirm = json!({"preview": dry["preview"], "note": "the vendor's dashboard has them all"});
    let ((status, real), requeries) = tokio::join!(
        rig.bulk(confirm),
        join_all(ids.iter().map(|id| rig.requery(id)))
    );
    assert_eq!(status, StatusCode::OK, "{real:#}");
    let applied = |id: &str| real["ids"].as_array().unwrap().contains(&json!(id));
    let refusal = |id: &str| {
        real["refused"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
    };
    let mut met = 0;
    for (id, (status, body)) in ids.iter().zip(&requeries) {
        let n = rig.show(id).await;
        assert_eq!(ending(&n), ("delivered", "known"), "{n:#}");
        let resolutions = n["review"]["resolutions"].as_array().map_or(0, Vec::len);
        let ended_by = if *status == StatusCode::OK {
            // The look-up settled it first: the bulk resolution lists it as refused, and why.
            assert_eq!(body["settled"], true, "{body:#}");
            assert!(!applied(id), "applied twice: {real:#}");
            let refusal =
                refusal(id).unwrap_or_else(|| panic!("{id} neither applied nor refused: {real:#}"));
            met += usize::from(met_the_winner(refusal));
            assert_eq!(n["attempts"][0]["settled_by"], "outcome_query", "{n:#}");
            assert_eq!(resolutions, 0, "{n:#}");
            "dev.herald.notification.delivered"
        } else {
            met += usize::from(lost(*status, body));
            assert!(applied(id), "{id} settled by nobody: {real:#}");
            assert_eq!(refusal(id), None, "{real:#}");
            assert_eq!(n["attempts"][0]["settled_by"], "review", "{n:#}");
            assert_eq!(resolutions, 1, "{n:#}");
            "dev.herald.notification.resolved"
        };
        let events = rig.app.db.event_types(id.parse().unwrap()).await;
        assert_eq!(
            events,
            [
                "dev.herald.notification.accepted",
                "dev.herald.notification.unknown",
                ended_by
            ],
            "it ended once"
        );
        assert_eq!(rig.delivered(id).await, 1, "known: the vendor holds one");
    }
    let listed = |field: &str| real[field].as_array().unwrap().len();
    assert_eq!(listed("ids") + listed("refused"), RACES, "{real:#}");
    met
}

async fn a_requery_racing_a_delivery_report_settles_once_and_the_loser_is_told_why(
    backend: Backend,
) {
    let route = taking_reports("max_age_seconds = 1\n");
    let Some(rig) = rig(backend, Profile::Queryable, &route).await else {
        return;
    };
    let ids = rig.unknowns(LOST_ANSWERS_UNSEEN, &keys("requeried")).await;
    let mut reports = Vec::with_capacity(ids.len());
    for id in &ids {
        let n = rig.show(id).await;
        let key = n["attempts"][0]["provider_idempotency_key"]
            .as_str()
            .unwrap();
        // The report names the message the look-up finds: the two are evidence of one message.
        let message = rig.vendor_message(key).await;
        reports.push(delivery_report(&n, &message));
    }
    let races = join_all(
        ids.iter()
            .zip(&reports)
            .map(|(id, report)| async { tokio::join!(rig.requery(id), rig.post_report(report)) }),
    )
    .await;
    let (mut met, mut requeried) = (0, 0);
    for (id, ((status, body), report)) in ids.iter().zip(&races) {
        assert_eq!(report.0, StatusCode::OK, "{:#}", report.1);
        assert_eq!(report.1["new"], 1, "{:#}", report.1);
        let n = rig.show(id).await;
        let settled_by = if *status == StatusCode::OK {
            assert_eq!(body["settled"], true, "{body:#}");
            requeried += 1;
            "outcome_query"
        } else {
            met += usize::from(lost(*status, body));
            "callback"
        };
        assert_eq!(n["attempts"][0]["settled_by"], settled_by, "{n:#}");
        // Both name the same message: nothing contradicts, nothing waits for a person.
        assert_eq!(ending(&n), ("delivered", "known"), "{n:#}");
        assert_eq!(n["contradiction"], Value::Null, "{n:#}");
        assert_eq!(n["attempts"].as_array().unwrap().len(), 1, "{n:#}");
        assert_eq!(rig.delivered(id).await, 1, "known: the vendor holds one");
    }
    assert_raced(backend, met, &format!("; {requeried} requeries won"));
    assert_eq!(
        rig.queue("").await["data"],
        json!([]),
        "nothing waits for a person"
    );
}

async fn review_needs_its_scope_and_sees_only_its_tenant(backend: Backend) {
    let Some(rig) = rig(backend, Profile::Plain, "").await else {
        return;
    };
    let id = rig.unknown("scoped").await;
    let body = json!({"outcome": "delivered", "note": "x"});
    for token in [ACME, ACME_READER] {
        let response = rig.app.get(token, "/v1/review").await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        let response = rig
            .app
            .post_json(token, &format!("/v1/notifications/{id}/resolve"), &body)
            .await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
    }
    let other: Value = rig
        .app
        .enqueue(
            GLOBEX,
            "theirs",
            &json!({"channel": "email", "to": "g@example.com", "subject": "Hi", "text": "hi"}),
        )
        .await
        .json()
        .await
        .unwrap();
    let theirs = other["id"].as_str().unwrap();
    let (status, _) = rig.resolve(theirs, body.clone()).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another tenant's notification does not exist here"
    );
    let (status, problem) = rig
        .resolve(&id, json!({"outcome": "delivered", "note": " "}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(problem["field"], "note");
    let (status, problem) = rig
        .resolve(&id, json!({"outcome": "not_delivered", "note": "n"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(problem["field"], "then");
    let (status, problem) = rig
        .resolve(&id, json!({"outcome": "maybe", "note": "n"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(problem["field"], "outcome");
}

async fn a_requery_settles_what_the_vendor_can_now_see(backend: Backend) {
    // Every look-up fails while the route's age cap runs out: the notification ends unknown.
    let Some(rig) = rig(backend, Profile::Queryable, "max_age_seconds = 1\n").await else {
        return;
    };
    rig.faults("accept_then_drop:nth=1,lookup_error:1").await;
    let id = rig.enqueue("requeried").await;
    rig.drain().await;
    let n = rig.show(&id).await;
    assert_eq!(ending(&n), ("unknown", "unknown"), "{n:#}");

    // Still failing: the answer is kept, nothing else changes.
    let (status, body) = rig.requery(&id).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["settled"], false, "{body:#}");
    assert_eq!(body["notification"]["state"], "unknown");
    assert!(
        body["notification"]["attempts"][0]["evidence"]["look_up"].is_object(),
        "{body:#}"
    );

    // The look-up works again: the requery finds the delivery and settles it.
    rig.faults("").await;
    let (_, body) = rig.requery(&id).await;
    assert_eq!(body["settled"], true, "{body:#}");
    assert_eq!(ending(&body["notification"]), ("delivered", "known"));
    assert_eq!(
        body["notification"]["attempts"][0]["settled_by"],
        "outcome_query"
    );
    assert_eq!(rig.delivered(&id).await, 1);

    // Nothing left to ask; and a route without a query refuses.
    let (status, _) = rig.requery(&id).await;
    assert_eq!(status, StatusCode::CONFLICT);
}

async fn a_bulk_dry_run_changes_nothing_and_the_real_run_changes_what_it_listed(backend: Backend) {
    let Some(rig) = rig(backend, Profile::Plain, "").await else {
        return;
    };
    let mut unknown = Vec::new();
    for i in 0..3 {
        unknown.push(rig.unknown(&format!("bulk-{i}")).await);
    }
    let (status, dry) = rig
        .bulk(
            json!({"filter": {"reason": "unknown"}, "outcome": "not_delivered", "then": "close",
                     "dry_run": true, "max": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{dry:#}");
    assert_eq!(dry["ids"], json!(unknown[..2]), "{dry:#}");
    assert_eq!(dry["more"], true);
    // What a person checks before confirming: the recipient, since when, and why.
    let first = &dry["items"][0];
    assert_eq!(first["id"], json!(unknown[0]));
    assert_eq!(first["to"], "bulk-0@example.com");
    assert_eq!(first["reason"], "unknown");
    assert!(
        first["why"].as_str().unwrap().contains("ambiguous"),
        "{dry:#}"
    );
    assert!(first["waiting_since"].is_string(), "{dry:#}");
    let token = dry["preview"].as_str().expect("a preview");
    assert!(dry["expires_at"].is_string(), "{dry:#}");
    for id in &unknown {
        assert_eq!(
            rig.show(id).await["state"],
            "unknown",
            "a dry run changes nothing"
        );
    }
    // Another item arrives after the preview: the confirmation leaves it alone.
    let late = rig.unknown("bulk-late").await;
    let (status, problem) = rig.bulk(json!({"preview": token, "note": " "})).await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a note is required: {problem:#}"
    );
    let (status, real) = rig
        .bulk(json!({"preview": token, "note": "vendor confirmed the outage dropped them"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{real:#}");
    assert_eq!(real["ids"], dry["ids"], "exactly what the dry run listed");
    for (i, id) in unknown.iter().enumerate() {
        let expected = if i < 2 { "failed" } else { "unknown" };
        assert_eq!(rig.show(id).await["state"], expected);
    }
    assert_eq!(
        rig.show(&late).await["state"],
        "unknown",
        "unseen, unchanged"
    );
    let n = rig.show(&unknown[0]).await;
    assert_eq!(
        n["review"]["resolutions"][0]["note"],
        "vendor confirmed the outage dropped them"
    );
    // A real run needs its preview.
    let (status, problem) = rig
        .bulk(json!({"filter": {"reason": "unknown"}, "outcome": "delivered", "note": "n"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem:#}");
    assert_eq!(problem["field"], "preview");
}

/// After asking the vendor item by item (some found, some not), a person settles the whole
/// list at once: one dry run shows each item with its own resolution, one confirmation applies
/// exactly those, and a list changed in between is refused whole.
async fn a_list_resolves_each_item_with_its_own_outcome_under_one_preview(backend: Backend) {
    let Some(rig) = rig(backend, Profile::Plain, "").await else {
        return;
    };
    let keys: Vec<String> = (0..3).map(|i| format!("listed-{i}")).collect();
    let ids = rig.unknowns(LOST_ANSWERS, &keys).await;
    let sent = rig.enqueue("listed-sent").await;
    rig.drain().await;
    let list = json!([
        {"id": ids[0], "outcome": "delivered"},
        {"id": ids[1], "outcome": "not_delivered", "then": "close"},
        {"id": ids[2], "outcome": "not_delivered", "then": "resend"},
        // Not in review: refused on its own, the rest still previewed.
        {"id": sent, "outcome": "delivered"},
    ]);
    let (status, dry) = rig.bulk(json!({"items": list, "dry_run": true})).await;
    assert_eq!(status, StatusCode::OK, "{dry:#}");
    assert_eq!(dry["ids"], json!(ids), "{dry:#}");
    let resolutions: Vec<&str> = dry["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["resolution"].as_str().unwrap())
        .collect();
    assert_eq!(
        resolutions,
        [
            "delivered",
            "not_delivered + close",
            "not_delivered + resend"
        ]
    );
    assert_eq!(dry["refused"][0]["id"], json!(sent), "{dry:#}");
    for id in &ids {
        assert_eq!(
            rig.show(id).await["state"],
            "unknown",
            "a dry run changes nothing"
        );
    }
    let token = dry["preview"].as_str().expect("a preview");

    // The same preview confirmed with another list is refused, and nothing changes.
    let mut changed = list.clone();
    changed[1]["then"] = json!("resend");
    let (status, problem) = rig
        .bulk(json!({"preview": token, "items": changed, "note": "checked each"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem:#}");
    assert!(says(&problem, "list changed"), "{problem:#}");
    // Nor with an outcome beside it, which a list's preview never had.
    let (status, problem) = rig
        .bulk(json!({"preview": token, "then": "close", "note": "checked each"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem:#}");
    assert!(says(&problem, "made for a list"), "{problem:#}");
    for id in &ids {
        assert_eq!(rig.show(id).await["state"], "unknown");
    }
    let (status, real) = rig
        .bulk(json!({"preview": token, "note": "checked each in the vendor's log"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{real:#}");
    assert_eq!(real["ids"], json!(ids));
    assert_eq!(ending(&rig.show(&ids[0]).await), ("delivered", "known"));
    assert_eq!(ending(&rig.show(&ids[1]).await), ("failed", "known"));
    assert_eq!(rig.show(&ids[2]).await["state"], "queued");

    // A list says each outcome itself: one beside it, an id twice, a `not_delivered` without
    // what follows, or no item at all is a 422 naming the field. (An id that is not the
    // tenant's is refused on its own, as `sent` was above.)
    for (body, field) in [
        (
            json!({"items": [{"id": ids[0], "outcome": "delivered"}], "outcome": "delivered",
                   "dry_run": true}),
            "items",
        ),
        (
            json!({"items": [{"id": ids[0], "outcome": "delivered"},
                             {"id": ids[0], "outcome": "delivered"}], "dry_run": true}),
            "items[1].id",
        ),
        (
            json!({"items": [{"id": ids[0], "outcome": "not_delivered"}], "dry_run": true}),
            "items[0].then",
        ),
        (json!({"items": [], "dry_run": true}), "items"),
    ] {
        let (status, problem) = rig.bulk(body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem:#}");
        assert_eq!(problem["field"], field, "{problem:#}");
    }
}

async fn a_bulk_confirmation_with_another_outcome_or_filter_is_refused_and_a_preview_is_used_once(
    backend: Backend,
) {
    let Some(rig) = rig(backend, Profile::Plain, "").await else {
        return;
    };
    let ids: Vec<String> = vec![rig.unknown("bound-0").await, rig.unknown("bound-1").await];
    let (_, dry) = rig
        .bulk(json!({"filter": {"reason": "unknown"}, "outcome": "delivered", "dry_run": true}))
        .await;
    let token = dry["preview"].as_str().unwrap();
    // The form said "delivered" for the preview and "not delivered, close" at confirm time.
    let (status, problem) = rig
        .bulk(
            json!({"preview": token, "outcome": "not_delivered", "then": "close",
                     "filter": {"reason": "unknown"}, "note": "changed my mind"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem:#}");
    assert_eq!(problem["type"], "/problems/preview-stale");
    assert!(says(&problem, "outcome changed"), "{problem:#}");
    let (status, problem) = rig
        .bulk(json!({"preview": token, "outcome": "delivered",
                     "filter": {"reason": "unknown,exhausted"}, "note": "more"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem:#}");
    assert!(says(&problem, "filter changed"));
    for id in &ids {
        assert_eq!(rig.show(id).await["state"], "unknown", "nothing applied");
    }
    // The same outcome and filter, said again, confirm it; once.
    let confirm = json!({"preview": token, "outcome": "delivered",
                         "filter": {"reason": "unknown"}, "note": "seen on the dashboard"});
    let (status, real) = rig.bulk(confirm.clone()).await;
    assert_eq!(status, StatusCode::OK, "{real:#}");
    assert_eq!(real["ids"], json!(ids));
    let (status, problem) = rig.bulk(confirm).await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem:#}");
    assert_eq!(problem["type"], "/problems/preview-stale");
    let (status, problem) = rig
        .bulk(json!({"preview": "0123456789abcdef", "note": "forged"}))
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a token herald never made: {problem:#}"
    );

    // An item that changed after its preview is left alone and said so.
    let raced = rig.unknown("bound-raced").await;
    let (_, dry) = rig
        .bulk(
            json!({"filter": {"reason": "unknown"}, "outcome": "not_delivered",
                     "then": "resend", "dry_run": true}),
        )
        .await;
    let (status, _) = rig
        .resolve(
            &raced,
            json!({"outcome": "delivered", "note": "someone else was faster"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, real) = rig
        .bulk(json!({"preview": dry["preview"], "note": "resend"}))
        .await;
    assert_eq!(real["ids"], json!([]), "{real:#}");
    assert_eq!(real["refused"][0]["id"], json!(raced));
    assert!(
        says(&real["refused"][0], "changed since the preview"),
        "{real:#}"
    );
    assert_eq!(ending(&rig.show(&raced).await), ("delivered", "known"));
}

async fn dead_letters_are_listed_with_their_cause_and_resent_once_the_vendor_is_back(
    backend: Backend,
) {
    // Its circuit breaker stays closed: the resend is meant to reach the vendor at once.
    let Some(rig) = rig(
        backend,
        Profile::Plain,
        "max_attempts = 2\ncircuit_failures = 1000\n",
    )
    .await
    else {
        return;
    };
    // The vendor is down: every try is refused before processing, until the route gives up.
    rig.faults("unavailable_before_processing:1").await;
    let letters = {
        let mut v = Vec::new();
        for i in 0..3 {
            v.push(rig.enqueue(&format!("letter-{i}")).await);
        }
        v
    };
    rig.drain().await;
    for id in &letters {
        assert_eq!(ending(&rig.show(id).await), ("failed", "known"));
        assert_eq!(rig.delivered(id).await, 0);
    }
    let page = rig.queue("?reason=exhausted").await;
    assert_eq!(ids(&page), letters);
    assert!(
        page["data"][0]["why"]
            .as_str()
            .unwrap()
            .contains("may pass"),
        "{page:#}"
    );
    let page = rig.queue("").await;
    assert_eq!(
        ids(&page),
        letters,
        "dead letters need a person: the default view lists them"
    );
    assert_eq!(page["data"][0]["review"]["open"], true, "{page:#}");

    // The vendor is back: resend them all, dry run first.
    rig.faults("").await;
    let (dry, real) = rig
        .bulk_confirmed(json!({"filter": {"reason": "exhausted", "route": "vendor"},
                               "outcome": "not_delivered", "then": "resend"}))
        .await;
    assert_eq!(dry["ids"], json!(letters));
    assert_eq!(real["ids"], json!(letters));
    rig.drain().await;
    for id in &letters {
        let n = rig.show(id).await;
        assert_eq!(ending(&n), ("delivered", "known"), "{n:#}");
        assert_eq!(rig.delivered(id).await, 1, "delivered exactly once");
        assert_eq!(
            n["attempts"].as_array().unwrap().len(),
            3,
            "a fresh budget after the resend"
        );
    }
}

async fn a_resolution_is_refused_where_the_item_is_not_in_review(backend: Backend) {
    let Some(rig) = rig(backend, Profile::Plain, "").await else {
        return;
    };
    let id = rig.enqueue("fine").await;
    rig.drain().await;
    assert_eq!(ending(&rig.show(&id).await), ("delivered", "known"));
    let (status, problem) = rig
        .resolve(&id, json!({"outcome": "delivered", "note": "sure"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem:#}");
    assert!(says(&problem, "not in review"));
    let unknown = rig.unknown("wrong-word").await;
    let (status, problem) = rig
        .resolve(&unknown, json!({"outcome": "acknowledged", "note": "hm"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem:#}");
    let (status, _) = rig
        .resolve(
            "01970000-0000-7000-8000-000000000000",
            json!({"outcome": "delivered", "note": "x"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn a_closed_item_leaves_review_and_retention_deletes_it_when_due(backend: Backend) {
    let Some(rig) = rig(
        backend,
        Profile::Plain,
        "max_attempts = 1\ncircuit_failures = 1000\n",
    )
    .await
    else {
        return;
    };
    let unknown = rig.unknown("close-unknown").await;
    rig.faults("unavailable_before_processing:1").await;
    let dead = rig.enqueue("close-dead").await;
    rig.drain().await;
    rig.faults("").await;
    assert_eq!(ids(&rig.queue("").await), [unknown.clone(), dead.clone()]);

    for (id, note) in [
        (&unknown, "the vendor has no trace of it"),
        (&dead, "the one-time code it carried has expired"),
    ] {
        let (status, n) = rig.close(id, note).await;
        assert_eq!(status, StatusCode::OK, "{n:#}");
        assert_eq!(ending(&n), ("failed", "known"));
        assert_eq!(n["review"]["open"], false, "{n:#}");
        assert_eq!(n["review"]["reason"], Value::Null, "{n:#}");
        assert_eq!(n["review"]["resolutions"][0]["note"], note);
        assert_eq!(n["review"]["resolutions"][0]["then"], "close");
    }
    assert!(
        ids(&rig.queue("").await).is_empty(),
        "closed items left review"
    );
    assert!(
        ids(&rig
            .queue("?reason=unknown,duplicate_possible,exhausted,rejected")
            .await)
        .is_empty(),
        "under any reason"
    );
    let (status, _) = rig
        .resolve(
            &dead,
            json!({"outcome": "not_delivered", "then": "resend", "note": "again?"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "closed is closed");

    // Once every sink has its events, retention deletes them when due, as it deletes a
    // delivered notification.
    let store = rig.app.store.clone();
    eventually(
        "the relay to publish every event",
        Duration::from_secs(20),
        || {
            let store = store.clone();
            async move { (store.outbox_backlog("log").await.ok()?.events == 0).then_some(()) }
        },
    )
    .await;
    let retention = herald::retention::Settings {
        idempotency: Duration::from_secs(7 * 86_400),
        finished: Some(Duration::from_secs(7 * 86_400)),
        batch_size: 100,
        refusals: herald::review::PermanentRefusals::Final,
    };
    let due = time::OffsetDateTime::now_utc() + Duration::from_secs(8 * 86_400);
    let swept = herald::retention::sweep(
        &*store,
        &retention,
        due,
        &tokio_util::sync::CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(swept.notifications, 2);
    for id in [&unknown, &dead] {
        let response = rig.app.get(ACME, &format!("/v1/notifications/{id}")).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
    }
}

async fn a_permanent_refusal_is_final_and_listed_by_filter_unless_configured_to_wait(
    backend: Backend,
) {
    for waits in [false, true] {
        let review = if waits {
            "\n[review]\npermanent_refusals = \"review\"\n"
        } else {
            ""
        };
        let Some(rig) = rig(backend, Profile::Plain, review).await else {
            return;
        };
        let response = rig
            .app
            .post_json(
                ACME_ADMIN,
                "/v1/suppressions",
                &json!({"channel": "email", "recipient": "gone@example.com",
                        "note": "asked not to be mailed"}),
            )
            .await;
        assert!(response.status().is_success(), "{}", response.status());
        let body =
            json!({"channel": "email", "to": "gone@example.com", "subject": "Hi", "text": "hi"});
        let refused = rig.app.enqueue_id("to-the-suppressed", &body).await;
        let unknown = rig.unknown("beside-it").await;
        rig.drain().await;
        let n = rig.show(&refused).await;
        assert_eq!(
            (ending(&n), n["failure_reason"].as_str()),
            (("failed", "known"), Some("suppressed"))
        );
        assert_eq!(n["review"]["reason"], "rejected", "{n:#}");
        assert_eq!(n["review"]["open"], waits, "{n:#}");

        let default = ids(&rig.queue("").await);
        if waits {
            assert_eq!(default, [refused.clone(), unknown.clone()]);
        } else {
            assert_eq!(
                default,
                [unknown.as_str()],
                "final: not waiting for a person"
            );
        }
        assert_eq!(
            ids(&rig.queue("?reason=rejected").await),
            [refused.as_str()],
            "listed by filter"
        );

        // A person may close it either way; it leaves every list.
        let (status, n) = rig.close(&refused, "they unsubscribed").await;
        assert_eq!(status, StatusCode::OK, "{n:#}");
        assert!(ids(&rig.queue("?reason=rejected").await).is_empty());
        assert_eq!(ids(&rig.queue("").await), [unknown]);
    }
}
