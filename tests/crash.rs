//! The crash test: real herald processes, killed with SIGKILL every
//! 0.2–2 s and restarted, while a vendor with random faults takes their sends. With the vendor's
//! ledger as ground truth, every notification must satisfy:
//!
//! - I1 no loss: it reaches a final state (nothing is left `queued` or `sending`);
//! - I2 no silent duplicate: delivered more than once ⇒ `duplicate_possible` or `unknown`;
//! - I3 no false certainty: `delivered`/`known` ⇒ delivered exactly once; `failed`/`known` ⇒ never
//!   (and no answer read after a lease, kept as `late_result`, says otherwise);
//! - I4 unknown only where unavoidable: with an outcome query or an idempotency key, no `unknown`
//!   (and no `duplicate_possible` either: such a vendor settles every ambiguity);
//! - `at_most_once` ⇒ delivered at most once, and never `duplicate_possible`;
//! - `unknown` ⇒ an ambiguous attempt is still unsettled; `duplicate_possible` ⇒ at least two
//!   sends may have been taken;
//! - its outbox holds exactly one `accepted` event and one event for its final state, besides
//!   one event per move of its receipt (and an `unknown` before a vendor report's settlement, a
//!   `reopened` after a record that later evidence contradicted).
//!
//! The run as a whole: the vendor delivered nothing outside the test's notifications, and the
//! database holds exactly the notifications enqueued. A run also proves its *premises*, or it
//! would pass without having tested anything: a kill landed between the vendor's processing and
//! herald's record (an attempt recovered by its lease that the vendor's ledger shows processed),
//! and the vendor's settlement means (outcome query or idempotent replay) did settle attempts.
//! Each run prints one line with these counts, on success too.
//!
//! PostgreSQL runs two processes on one database; SQLite one. The vendor is the sandbox in each
//! profile (the queryable one with look-up faults); a failover chain, an idempotent sandbox
//! whose fallback is a plain one, both with faults, and a circuit breaker that opens after three
//! failures in a row (the ledger of a notification is then both vendors'); and on PostgreSQL also the Resend and
//! SparkPost fakes (settled by replaying the idempotency key), the Postmark fake (settled by
//! looking its metadata up), the FCM fake (neither: its ambiguities are left to the delivery
//! policy, as the plain sandbox's are), the Twilio fake (settled by its outcome query,
//! with look-up faults), and the Twilio fake with notifications in same-text groups to one
//! number, whose look-ups find each other's messages (look-alikes): the ledger cannot say which
//! member holds which message, so it is checked per group. A plain sandbox that reports every
//! delivery in signed callbacks (late, twice, last first, into a process being killed) runs on
//! SQLite: its reports are its only means of settling, and a notification still `unknown` is
//! allowed only where no report came. The Twilio fake also runs on both databases with its
//! processes frozen (SIGSTOP past the lease, then SIGCONT) as often as killed: a process that
//! wakes with sends it started before its lease ended writes none after their deadline, and the
//! answers it then reads are held against the record. Only a freeze between a worker's last look
//! at the clock and its write escapes the deadline (the README's residue): such a notification
//! must have been reopened, by the answer or, where none came, by the worker's word that its
//! call outlived its deadline's promise, and is told apart by a freeze across its attempt's
//! deadline (or that moment). `HERALD_CRASH_SCALE=10` soaks ten times longer,
//! `HERALD_CRASH_SCALE=0.2` is a short run for iterating (the default, 1, is 3,000
//! notifications and 40 kills per run).

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use herald_provider::signature::SigningSecret;
use herald_sandbox::{CallbackTarget, Profile, SandboxConfig, SandboxHandle};
use rand::Rng;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::Mutex;

use support::binary::{HeraldProcess, free_port, show};
use support::witness::{self, Freeze};
use support::{ACME, Backend, TempDir, TestDb, http_client, test_config_text};

const FAULTS: &str = "accept_then_drop:0.03,delay:0.02,error_after_processing:0.03,unavailable_before_processing:0.03,rate_limited:0.03";
/// The sandbox's look-up faults, where a run has them ([`Vendor::has_lookup_faults`]): a
/// look-up that proves nothing must be asked again, never taken for an answer.
const LOOKUP_FAULTS: &str = "lookup_error:0.1,lookup_delay:0.03";
/// What herald logs when a look-up proved nothing: the run prints how often, and with look-up
/// faults armed the count proves that they fired.
const FAILED_LOOKUP_LOG: &str = "the outcome query proved nothing";

macro_rules! crash_tests {
    ($($name:ident: $backend:ident, $vendor:expr, $disruption:ident;)*) => {
        $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
          async fn $name() { crash(Backend::$backend, $vendor, Disruption::$disruption).await })*
    };
}

crash_tests! {
    postgres_idempotent_vendor: Postgres, Vendor::Sandbox(Profile::Idempotent), Kills;
    postgres_queryable_vendor: Postgres, Vendor::Sandbox(Profile::Queryable), Kills;
    postgres_plain_vendor: Postgres, Vendor::Sandbox(Profile::Plain), Kills;
    postgres_resend: Postgres, Vendor::Resend, Kills;
    postgres_sparkpost: Postgres, Vendor::SparkPost, Kills;
    postgres_postmark: Postgres, Vendor::Postmark, Kills;
    postgres_fcm: Postgres, Vendor::Fcm, Kills;
    postgres_twilio: Postgres, Vendor::Twilio, Kills;
    postgres_twilio_look_alikes: Postgres, Vendor::TwilioLookAlikes, KillsAndFreezes;
    sqlite_idempotent_vendor: Sqlite, Vendor::Sandbox(Profile::Idempotent), Kills;
    sqlite_queryable_vendor: Sqlite, Vendor::Sandbox(Profile::Queryable), Kills;
    sqlite_plain_vendor: Sqlite, Vendor::Sandbox(Profile::Plain), Kills;
    postgres_failover_chain: Postgres, Vendor::Chain, Kills;
    sqlite_failover_chain: Sqlite, Vendor::Chain, Kills;
    sqlite_reporting_vendor: Sqlite, Vendor::Reporting, Kills;
    postgres_twilio_frozen: Postgres, Vendor::Twilio, KillsAndFreezes;
    sqlite_twilio_frozen: Sqlite, Vendor::Twilio, KillsAndFreezes;
}

/// What befalls the herald processes of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Disruption {
    /// SIGKILL and a restart, again and again.
    Kills,
    /// As many freezes as kills besides: SIGSTOP for longer than the lease, then SIGCONT. The
    /// frozen process wakes with sends it started before its lease ended (in flight, or waiting
    /// for the route), which another worker (or its own claim loop) has taken over meanwhile.
    KillsAndFreezes,
}

/// How long a freeze lasts: past the run's 3 s lease, so that the process wakes without it.
const FROZEN: std::ops::RangeInclusive<u64> = 4000..=5500;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Vendor {
    Sandbox(Profile),
    Resend,
    SparkPost,
    /// No key: settled by the look-up of herald's key in the messages' metadata.
    Postmark,
    /// Firebase Cloud Messaging: neither a key nor a look-up, over OAuth tokens it mints.
    Fcm,
    Twilio,
    /// The Twilio fake, with notifications in same-text groups to one number.
    TwilioLookAlikes,
    /// An idempotent sandbox whose route falls back to a plain one.
    Chain,
    /// A plain sandbox (neither key nor look-up) that reports every delivery to herald in
    /// signed callbacks, each twice and last first: its reports are all that settles.
    Reporting,
}

/// A running vendor, with the fault injectors of the fakes (whose faults are set one request
/// at a time).
enum Running {
    Sandbox(SandboxHandle, Profile),
    Reporting(SandboxHandle),
    Chain {
        primary: SandboxHandle,
        backup: SandboxHandle,
    },
    /// A vendor crate's fake with its faults armed in turn (Resend, SparkPost, Postmark, FCM):
    /// its route, and a reader of its ledger (each fake has its own types).
    Fake {
        route: String,
        ledger: Box<dyn Fn() -> Ledger + Send + Sync>,
        _faults: AbortOnDrop,
    },
    Twilio {
        vendor: Arc<herald_twilio::fake::FakeHandle>,
        _faults: AbortOnDrop,
        _lookup_faults: Option<AbortOnDrop>,
    },
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Arms one fault about every 80 ms: about the sandbox's 14 % of requests at this test's pace.
fn inject(arm: impl Fn(usize) + Send + 'static, kinds: usize) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(40)).await;
            if rand::random::<bool>() {
                arm(rand::rng().random_range(0..kinds));
            }
        }
    }))
}

/// The share of the Twilio fake's look-ups that meet a fault, as the sandbox's look-up faults.
const LOOKUP_FAULT_SHARE: f64 = 0.13;

/// Arms look-up faults on the Twilio fake for about [`LOOKUP_FAULT_SHARE`] of its look-ups. An
/// armed fault waits for the next look-up, and look-ups come in bursts (many while sends are
/// faulted and killed, few while the last ambiguities settle): arming by the clock would fail
/// almost every look-up of a quiet spell, so this counts the look-ups that came and arms as many
/// faults as a draw per look-up gives.
fn inject_lookup_faults(
    vendor: Arc<herald_twilio::fake::FakeHandle>,
    kinds: [herald_twilio::fake::Fault; 5],
) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(async move {
        let mut counted = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let received = vendor.received();
            let lookups = received[counted..]
                .iter()
                .filter(|r| r.method == "GET")
                .count();
            counted = received.len();
            let mut rng = rand::rng();
            let faults: Vec<_> = (0..lookups)
                .filter_map(|_| {
                    let k = rng.random_range(0..kinds.len());
                    rng.random_bool(LOOKUP_FAULT_SHARE).then_some(kinds[k])
                })
                .collect();
            if !faults.is_empty() {
                vendor.set_lookup_faults(faults);
            }
        }
    }))
}

/// How the vendor settles an ambiguous attempt, as `settled_by` records it.
const BY_QUERY: &str = "outcome_query";
const BY_REPLAY: &str = "idempotent_replay";
const BY_CALLBACK: &str = "callback";
/// The secret the reporting sandbox signs with, and its route checks.
const REPORT_SECRET: &str = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// The fake of `$krate`, a vendor that settles by replaying the key, with every fault of its
/// armed in turn, as [`Running::Fake`].
macro_rules! replaying {
    ($krate:ident, $provider:literal) => {{
        use $krate::fake::{self, Fault, Faults};
        let config = fake::FakeConfig {
            delay: Duration::from_millis(1500),
            ..fake::FakeConfig::default()
        };
        let route = |base_url: &str| {
            format!(
                "provider = \"{}\"\nbase_url = \"{base_url}\"\napi_key = \"{}\"\nfrom = \"noreply@acme.example\"\n",
                $provider, config.api_key
            )
        };
        let vendor = Arc::new(fake::spawn(config.clone()).await.expect("the fake starts"));
        let kinds = [
            Fault::AcceptThenDrop,
            Fault::Delay,
            Fault::ErrorAfterProcessing,
            Fault::UnavailableBeforeProcessing,
            Fault::RateLimited,
        ];
        let armed = vendor.clone();
        let injector = inject(
            move |k| armed.set_faults(Faults::next([kinds[k]])),
            kinds.len(),
        );
        Running::Fake {
            route: route(&vendor.base_url()),
            ledger: Box::new(move || {
                let ledger = vendor.ledger();
                Ledger {
                    total: ledger.total_deliveries(),
                    deliveries: ledger.deliveries.into_iter().collect(),
                    arrivals: ledger.arrivals.into_iter().collect(),
                    messages: HashMap::new(),
                }
            }),
            _faults: injector,
        }
    }};
}

impl Vendor {
    fn name(self) -> &'static str {
        match self {
            Vendor::Sandbox(profile) => profile.as_str(),
            Vendor::Resend => "resend",
            Vendor::SparkPost => "sparkpost",
            Vendor::Postmark => "postmark",
            Vendor::Fcm => "fcm",
            Vendor::Twilio => "twilio",
            Vendor::TwilioLookAlikes => "twilio-look-alikes",
            Vendor::Chain => "failover-chain",
            Vendor::Reporting => "reporting-plain",
        }
    }

    /// The vendor's means of settling an ambiguity; `None` for the plain sandbox.
    fn settles_by(self) -> Option<&'static str> {
        match self {
            Vendor::Sandbox(Profile::Plain) | Vendor::Fcm => None,
            Vendor::Sandbox(Profile::Queryable)
            | Vendor::Twilio
            | Vendor::TwilioLookAlikes
            | Vendor::Postmark => Some(BY_QUERY),
            Vendor::Sandbox(Profile::Idempotent)
            | Vendor::Resend
            | Vendor::SparkPost
            | Vendor::Chain => Some(BY_REPLAY),
            Vendor::Reporting => Some(BY_CALLBACK),
        }
    }

    /// Whether herald's look-ups meet faults in this run.
    fn has_lookup_faults(self) -> bool {
        matches!(
            self,
            Vendor::Sandbox(Profile::Queryable) | Vendor::Twilio | Vendor::TwilioLookAlikes
        )
    }

    fn is_twilio(self) -> bool {
        matches!(self, Vendor::Twilio | Vendor::TwilioLookAlikes)
    }

    /// Where an ambiguity may stay unsettled (I4): with neither an outcome query nor an
    /// idempotency key (the plain sandbox, and the chain's plain fallback); where the look-up
    /// finds look-alikes whose counts cannot say whose they are (`unknown` under
    /// `at_most_once`, a resend and `duplicate_possible` under `at_least_once`); and where only
    /// reports settle, for a send the vendor never made (nothing to report) and under
    /// `at_least_once` for a resend that went out before the report came.
    fn may_leave_unsettled(self) -> bool {
        matches!(
            self,
            Vendor::Sandbox(Profile::Plain)
                | Vendor::Fcm
                | Vendor::TwilioLookAlikes
                | Vendor::Chain
                | Vendor::Reporting
        )
    }

    /// Notification `i` goes by email or SMS: whichever the vendor carries, alternating.
    fn channel(self, i: usize) -> &'static str {
        match self {
            Vendor::Resend | Vendor::SparkPost | Vendor::Postmark => "email",
            Vendor::Twilio | Vendor::TwilioLookAlikes => "sms",
            Vendor::Fcm => "push",
            Vendor::Sandbox(_) | Vendor::Chain | Vendor::Reporting if i.is_multiple_of(2) => {
                "email"
            }
            Vendor::Sandbox(_) | Vendor::Chain | Vendor::Reporting => "sms",
        }
    }

    /// The group of notification `i`: itself, or in the look-alike run a pair or a triple of
    /// neighbours (blocks of five: 0–1, 2–4, 5–6, …), enqueued at about the same moment.
    fn group(self, i: usize) -> usize {
        match self {
            Vendor::TwilioLookAlikes => i / 5 * 2 + usize::from(i % 5 >= 2),
            _ => i,
        }
    }

    /// What notification `i` says to whom.
    fn spec(self, i: usize) -> Spec {
        let key = format!("crash-{i}");
        let delivery = if i % 4 < 2 {
            "at_least_once"
        } else {
            "at_most_once"
        };
        let group = self.group(i);
        let (channel, to, text) = match (self, self.channel(i)) {
            (Vendor::TwilioLookAlikes, _) => (
                "sms",
                format!("+1415556{:04}", group % 10_000),
                format!("Your code is {:06}", 100_000 + group),
            ),
            (_, "email") => ("email", format!("user{i}@example.com"), text_of(&key)),
            (_, "push") => ("push", format!("device-{i}"), text_of(&key)),
            _ => ("sms", format!("+1415555{:04}", i % 10_000), text_of(&key)),
        };
        Spec {
            key,
            channel,
            to,
            text,
            delivery,
            group,
        }
    }

    async fn start(self) -> Running {
        support::install_crypto();
        match self {
            Vendor::Sandbox(profile) => {
                let faults = if self.has_lookup_faults() {
                    format!("{FAULTS},{LOOKUP_FAULTS}")
                } else {
                    FAULTS.to_owned()
                };
                Running::Sandbox(sandbox(profile, &faults).await, profile)
            }
            Vendor::Chain => Running::Chain {
                primary: sandbox(Profile::Idempotent, FAULTS).await,
                backup: sandbox(Profile::Plain, FAULTS).await,
            },
            Vendor::Reporting => Running::Reporting(
                herald_sandbox::spawn(SandboxConfig {
                    profile: Profile::Plain,
                    visibility_lag: VENDOR_LAG,
                    faults: herald_sandbox::parse_faults(FAULTS).expect("fault syntax"),
                    delay: Duration::from_millis(1500),
                    callback_secret: Some(
                        SigningSecret::parse(&REPORT_SECRET.to_owned().into())
                            .expect("a whsec_ secret"),
                    ),
                    history: GROUND_TRUTH,
                    ..SandboxConfig::default()
                })
                .await
                .expect("sandbox starts"),
            ),
            Vendor::Resend => replaying!(herald_resend, "resend"),
            Vendor::SparkPost => replaying!(herald_sparkpost, "sparkpost"),
            Vendor::Postmark => {
                use herald_postmark::fake::{self, Fault, Faults};
                let config = fake::FakeConfig {
                    visibility_lag: VENDOR_LAG,
                    delay: Duration::from_millis(1500),
                    ..fake::FakeConfig::default()
                };
                let vendor = Arc::new(fake::spawn(config.clone()).await.expect("the fake starts"));
                let route = format!(
                    "provider = \"postmark\"\nbase_url = \"{}\"\nserver_token = \"{}\"\nfrom = \"noreply@acme.example\"\nvisibility_lag_ms = {}\n",
                    vendor.base_url(),
                    config.server_token,
                    VENDOR_LAG.as_millis()
                );
                let kinds = [
                    Fault::AcceptThenDrop,
                    Fault::Delay,
                    Fault::ErrorAfterProcessing,
                    Fault::UnavailableBeforeProcessing,
                    Fault::RateLimited,
                ];
                let armed = vendor.clone();
                let injector = inject(
                    move |k| armed.set_faults(Faults::next([kinds[k]])),
                    kinds.len(),
                );
                Running::Fake {
                    route,
                    ledger: Box::new(move || by_key(&vendor.ledger())),
                    _faults: injector,
                }
            }
            Vendor::Fcm => {
                use herald_fcm::fake::{self, Fault, Faults};
                let vendor = Arc::new(
                    fake::spawn(fake::FakeConfig {
                        delay: Duration::from_millis(1500),
                        ..fake::FakeConfig::default()
                    })
                    .await
                    .expect("the fake starts"),
                );
                let route = format!(
                    "provider = \"fcm\"\nbase_url = \"{}\"\nservice_account = '''{}'''\n",
                    vendor.base_url(),
                    vendor.service_account()
                );
                // Not its 429: FCM asks for a minute's pause after one, which would stall the
                // run, and a refusal before processing is already the 503's case.
                let kinds = [
                    Fault::AcceptThenDrop,
                    Fault::Delay,
                    Fault::ErrorAfterProcessing,
                    Fault::UnavailableBeforeProcessing,
                ];
                let armed = vendor.clone();
                let injector = inject(
                    move |k| armed.set_faults(Faults::next([kinds[k]])),
                    kinds.len(),
                );
                Running::Fake {
                    route,
                    ledger: Box::new(move || by_key(&vendor.ledger())),
                    _faults: injector,
                }
            }
            Vendor::Twilio | Vendor::TwilioLookAlikes => {
                use herald_twilio::fake::{self, Fault};
                let mut config = fake::FakeConfig::new(TWILIO_SID, TWILIO_TOKEN.into());
                config.visibility_lag = VENDOR_LAG;
                config.delay = Duration::from_millis(1500);
                let vendor = Arc::new(fake::spawn(config).await.expect("twilio fake starts"));
                // Every kind applies to a look-up as well: before processing it answers 429 or
                // 503; after, the list is lost, held past the timeout, or spoilt by a 500.
                let kinds = [
                    Fault::AcceptThenDrop,
                    Fault::Delay,
                    Fault::ErrorAfterProcessing,
                    Fault::UnavailableBeforeProcessing,
                    Fault::RateLimited,
                ];
                let armed = vendor.clone();
                let sends = inject(move |k| armed.set_faults([kinds[k]]), kinds.len());
                let lookups = self
                    .has_lookup_faults()
                    .then(|| inject_lookup_faults(vendor.clone(), kinds));
                Running::Twilio {
                    vendor,
                    _faults: sends,
                    _lookup_faults: lookups,
                }
            }
        }
    }
}

async fn sandbox(profile: Profile, faults: &str) -> SandboxHandle {
    herald_sandbox::spawn(SandboxConfig {
        profile,
        visibility_lag: VENDOR_LAG,
        faults: herald_sandbox::parse_faults(faults).expect("fault syntax"),
        delay: Duration::from_millis(1500),
        history: GROUND_TRUTH,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox starts")
}

/// The vendor's ledger is the ground truth: it forgets nothing, at any `HERALD_CRASH_SCALE`.
const GROUND_TRUTH: usize = usize::MAX;

/// One notification as the test enqueues it.
struct Spec {
    /// The API idempotency key, `crash-{i}`.
    key: String,
    channel: &'static str,
    to: String,
    text: String,
    delivery: &'static str,
    /// Notifications of one group share their text and recipient (the look-alike run).
    group: usize,
}

impl Spec {
    fn body(&self) -> Value {
        match self.channel {
            "email" => json!({"channel": "email", "to": self.to, "subject": "Crash test",
                              "text": self.text, "delivery": self.delivery}),
            "push" => json!({"channel": "push", "to": self.to, "subject": "Crash test",
                             "text": self.text, "delivery": self.delivery}),
            _ => json!({"channel": "sms", "to": self.to, "text": self.text,
                        "delivery": self.delivery}),
        }
    }

    /// How the vendor's ledger names this notification's deliveries: by the idempotency key
    /// (the notification id), or, where there is none (Twilio), by recipient and text.
    fn reference(&self, vendor: Vendor, id: &str) -> String {
        if vendor.is_twilio() {
            twilio_reference(&self.to, &self.text)
        } else {
            id.to_owned()
        }
    }
}

fn twilio_reference(to: &str, text: &str) -> String {
    format!("{to} {text}")
}

const TWILIO_SID: &str = "AC00000000000000000000000000000042";
const TWILIO_TOKEN: &str = "crash-test-token";

/// A fake's ledger by herald's key, which the fake keeps with each delivery.
fn by_key(ledger: &herald_provider::fake::Ledger) -> Ledger {
    let mut deliveries = HashMap::new();
    let mut arrivals: HashMap<String, Vec<OffsetDateTime>> = HashMap::new();
    for delivery in &ledger.deliveries {
        *deliveries.entry(delivery.key.clone()).or_default() += 1;
        arrivals
            .entry(delivery.key.clone())
            .or_default()
            .push(delivery.arrived_at);
    }
    Ledger {
        total: ledger.total(),
        deliveries,
        arrivals,
        messages: HashMap::new(),
    }
}

/// The sandbox's arrivals by reference; `rename` maps a key as the sandbox saw it to the
/// notification's reference.
fn sandbox_arrivals(
    ledger: &herald_sandbox::Ledger,
    into: &mut HashMap<String, Vec<OffsetDateTime>>,
    rename: impl Fn(&str) -> String,
) {
    for arrival in &ledger.arrivals {
        if let Some(reference) = &arrival.reference {
            into.entry(rename(reference)).or_default().push(arrival.at);
        }
    }
}

/// Ground truth from the vendor.
struct Ledger {
    /// Deliveries per reference ([`Spec::reference`]).
    deliveries: HashMap<String, u64>,
    /// When each request per reference arrived, by the vendor's clock (the sandbox's: every
    /// request; the others': every delivery).
    arrivals: HashMap<String, Vec<OffsetDateTime>>,
    total: u64,
    /// Twilio: the reference of each message, by its SID (what herald records as the
    /// provider reference).
    messages: HashMap<String, String>,
}

impl Running {
    /// The `[routes.vendor]` keys for this vendor.
    fn route(&self) -> String {
        match self {
            Running::Sandbox(vendor, profile) => sandbox_route(vendor, *profile),
            Running::Reporting(vendor) => format!(
                "{}callback_secret = \"{REPORT_SECRET}\"\n",
                sandbox_route(vendor, Profile::Plain)
            ),
            Running::Chain { primary, .. } => format!(
                "{}fallback = \"backup\"\ncircuit_failures = 3\ncircuit_open_seconds = 1\n",
                sandbox_route(primary, Profile::Idempotent)
            ),
            Running::Fake { route, .. } => route.clone(),
            Running::Twilio { vendor, .. } => format!(
                "provider = \"twilio\"\nbase_url = \"{}\"\naccount_sid = \"{TWILIO_SID}\"\nauth_token = \"{TWILIO_TOKEN}\"\nfrom = \"+15005550006\"\nvisibility_lag_ms = {}\n",
                vendor.base_url(),
                VENDOR_LAG.as_millis()
            ),
        }
    }

    /// Points the reporting sandbox at herald `base`'s callback URL: reports then come late
    /// (up to the herald kills), twice, and last first. The other vendors report nothing.
    async fn report_to(&self, base: &str) {
        if let Running::Reporting(vendor) = self {
            let target = CallbackTarget {
                url: format!("{base}/v1/callbacks/vendor"),
                delay_ms: 200,
                duplicates: 1,
                reorder: true,
            };
            let client = vendor.client().unwrap();
            client
                .set_callbacks(Some(&target))
                .await
                .expect("the sandbox takes a target");
        }
    }

    /// The routes beside `vendor`: the chain's fallback.
    fn other_routes(&self) -> String {
        match self {
            Running::Chain { backup, .. } => format!(
                "[routes.backup]\ntimeout_seconds = 1\nmax_attempts = {MAX_ATTEMPTS}\n{}",
                sandbox_route(backup, Profile::Plain)
            ),
            _ => String::new(),
        }
    }

    async fn ledger(&self) -> Ledger {
        match self {
            Running::Chain { primary, backup } => {
                let (primary, backup) = (
                    primary.client().unwrap().ledger().await.expect("ledger"),
                    backup.client().unwrap().ledger().await.expect("ledger"),
                );
                // The fallback knows a notification by its key there, `{id}-f1`.
                let unsuffixed = |key: &str| key.strip_suffix("-f1").unwrap_or(key).to_owned();
                let mut arrivals = HashMap::new();
                sandbox_arrivals(&primary, &mut arrivals, str::to_owned);
                sandbox_arrivals(&backup, &mut arrivals, unsuffixed);
                let mut deliveries: HashMap<String, u64> = primary.deliveries.into_iter().collect();
                for (key, count) in backup.deliveries {
                    *deliveries.entry(unsuffixed(&key)).or_default() += count;
                }
                Ledger {
                    total: deliveries.values().sum(),
                    deliveries,
                    arrivals,
                    messages: HashMap::new(),
                }
            }
            Running::Sandbox(vendor, _) | Running::Reporting(vendor) => {
                let ledger = vendor.client().unwrap().ledger().await.expect("ledger");
                let mut arrivals = HashMap::new();
                sandbox_arrivals(&ledger, &mut arrivals, str::to_owned);
                Ledger {
                    total: ledger.total_deliveries(),
                    deliveries: ledger.deliveries.into_iter().collect(),
                    arrivals,
                    messages: HashMap::new(),
                }
            }
            Running::Fake { ledger, .. } => ledger(),
            Running::Twilio { vendor, .. } => {
                let ledger = vendor.ledger();
                let mut deliveries = HashMap::new();
                let mut arrivals: HashMap<String, Vec<OffsetDateTime>> = HashMap::new();
                let mut messages = HashMap::new();
                for delivery in &ledger.deliveries {
                    let reference = twilio_reference(&delivery.to, &delivery.body);
                    *deliveries.entry(reference.clone()).or_default() += 1;
                    arrivals
                        .entry(reference.clone())
                        .or_default()
                        .push(delivery.arrived_at);
                    messages.insert(delivery.sid.clone(), reference);
                }
                Ledger {
                    total: ledger.total(),
                    deliveries,
                    arrivals,
                    messages,
                }
            }
        }
    }
}

fn sandbox_route(vendor: &SandboxHandle, profile: Profile) -> String {
    format!(
        "provider = \"sandbox\"\nbase_url = \"{}\"\nprofile = \"{}\"\nvisibility_lag_ms = {}\n",
        vendor.base_url(),
        profile.as_str(),
        VENDOR_LAG.as_millis()
    )
}

/// How long after processing a send the fakes' message lists show it, and the lag each route
/// declares (a sandbox route must declare its sandbox's own: herald checks it). A look-up's
/// "not found" proves "not accepted" once the send's call, started by its deadline, was cut at
/// the route's timeout and this lag has passed.
const VENDOR_LAG: Duration = Duration::from_millis(300);

/// Attempts each route of a run may make for one notification.
const MAX_ATTEMPTS: usize = 25;

/// `HERALD_CRASH_SCALE` (default 1) multiplies the notifications and kills of each run.
fn scale() -> f64 {
    std::env::var("HERALD_CRASH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|s: &f64| *s > 0.0)
        .unwrap_or(1.0)
}

async fn crash(backend: Backend, vendor: Vendor, disruption: Disruption) {
    let Some(db) = TestDb::new(backend).await else {
        return;
    };
    let notifications = ((3000.0 * scale()) as usize).max(10);
    let min_kills = ((40.0 * scale()) as usize).max(2);
    let running = vendor.start().await;
    let dir = TempDir::new("herald-crash");
    let route = format!(
        r#"
[dispatch]
lease_seconds = 3
retry_base_ms = 100
retry_max_seconds = 2

[routes.vendor]
timeout_seconds = 1
max_attempts = {MAX_ATTEMPTS}
{}{}
{}
[channels]
{}
"#,
        running.route(),
        // The invariants hold with or without a circuit breaker; only the chain runs one (the
        // default, 5 failures in a row, opens now and then under these fault rates and leaves
        // a route without a fallback idle for 30 s, which the settling time was not made for).
        if vendor == Vendor::Chain {
            ""
        } else {
            "circuit_failures = 0\n"
        },
        running.other_routes(),
        ["email", "sms", "push"]
            .iter()
            .filter(|c| (0..2).any(|i| vendor.channel(i) == **c))
            .map(|c| format!("{c} = \"vendor\"\n"))
            .collect::<String>()
    );
    let processes = if backend == Backend::Postgres { 2 } else { 1 };
    let mut fleet = Vec::new();
    for i in 0..processes {
        let listen = format!("127.0.0.1:{}", free_port());
        let config = test_config_text(&db.url, &listen, &route);
        fleet.push(HeraldProcess::start(&config, dir.path(), &format!("herald-{i}")).await);
    }
    let bases: Arc<Vec<String>> = Arc::new(fleet.iter().map(|p| p.base.clone()).collect());
    running.report_to(&bases[0]).await;
    let fleet = Arc::new(Mutex::new(fleet));

    // Enqueue at a pace that spreads the notifications over the kills.
    let ids: Arc<Mutex<HashMap<usize, String>>> = Arc::default();
    let next = Arc::new(AtomicUsize::new(0));
    let pace = Duration::from_millis((50_000 / notifications as u64).max(1) * 8);
    let enqueuers: Vec<_> = (0..8)
        .map(|_| {
            let (bases, ids, next) = (bases.clone(), ids.clone(), next.clone());
            tokio::spawn(async move {
                let http = http_client();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= notifications {
                        return;
                    }
                    let id = enqueue_until_acknowledged(&http, &bases, &vendor.spec(i), i).await;
                    ids.lock().await.insert(i, id);
                    tokio::time::sleep(pace).await;
                }
            })
        })
        .collect();

    let mut kills = 0;
    let mut freezes: Vec<Freeze> = Vec::new();
    let enqueue_done = || enqueuers.iter().all(|e| e.is_finished());
    while kills < min_kills || !enqueue_done() {
        let pause = rand::rng().random_range(200..=2000);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let mut fleet = fleet.lock().await;
        let victim = rand::rng().random_range(0..fleet.len());
        if disruption == Disruption::KillsAndFreezes && rand::random::<bool>() {
            let from = OffsetDateTime::now_utc();
            fleet[victim].freeze();
            let stopped = OffsetDateTime::now_utc();
            let frozen = rand::rng().random_range(FROZEN);
            tokio::time::sleep(Duration::from_millis(frozen)).await;
            let thawing = OffsetDateTime::now_utc();
            fleet[victim].thaw();
            freezes.push(Freeze {
                process: format!("herald-{victim}"),
                from,
                stopped,
                thawing,
                to: OffsetDateTime::now_utc(),
            });
            continue;
        }
        fleet[victim].kill();
        kills += 1;
        fleet[victim].restart().await;
    }
    for e in enqueuers {
        e.await.expect("enqueuer");
    }
    let ids = ids.lock().await.clone();
    assert_eq!(
        ids.len(),
        notifications,
        "every notification was acknowledged"
    );

    // I1: with the processes left running, everything reaches a final state (what does not is
    // reported below with its history).
    let settle_by = tokio::time::Instant::now() + SETTLING;
    while tokio::time::Instant::now() < settle_by
        && db
            .scalar("SELECT count(*) FROM notifications WHERE state IN ('queued', 'sending')")
            .await
            > 0
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Reported as such, even if it finishes while the final state is read below.
    let unfinished = db
        .scalar("SELECT count(*) FROM notifications WHERE state IN ('queued', 'sending')")
        .await;

    // A consistent read: every change herald makes writes an outbox event, and a vendor's late
    // report still changes a finished notification (its receipt), so the outbox and the
    // notifications are read again until no event was written while they were read.
    let last_event = "SELECT coalesce(max(seq), 0) FROM outbox";
    let http = http_client();
    let mut reads = 0;
    let (ledger, events, seen) = loop {
        reads += 1;
        let before = db.scalar(last_event).await;
        let ledger = running.ledger().await;
        let events = events_by_notification(&db).await;
        let mut seen = Vec::with_capacity(notifications);
        for i in 0..notifications {
            let id = &ids[&i];
            let n = show(&http, &bases[0], id).await;
            let spec = vendor.spec(i);
            let reference = spec.reference(vendor, id);
            seen.push(Seen {
                events: events
                    .get(&id.replace('-', ""))
                    .cloned()
                    .unwrap_or_default(),
                delivered: ledger.deliveries.get(&reference).copied().unwrap_or(0),
                arrivals: ledger.arrivals.get(&reference).cloned().unwrap_or_default(),
                reference,
                spec,
                id: id.clone(),
                n,
            });
        }
        if reads == READS || db.scalar(last_event).await == before {
            break (ledger, events, seen);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };

    let logs: Vec<String> = fleet.lock().await.iter().map(|p| p.log()).collect();
    let failed_lookups = logs
        .iter()
        .map(|log| log.matches(FAILED_LOOKUP_LOG).count())
        .sum::<usize>();

    let mut violations = Vec::new();
    if unfinished > 0 {
        violations.push(format!(
            "I1: {unfinished} notification(s) still queued or sending {} s after the last kill",
            SETTLING.as_secs()
        ));
    }
    let grouped = vendor == Vendor::TwilioLookAlikes;
    // The vendor's clock: every request inside the window of one of its attempts (its group's,
    // in the look-alike run), but for the design's residue, named and bounded.
    let sent_late = SentLate::of(&seen, grouped, &freezes);
    violations.extend(sent_late.late.iter().cloned());
    if sent_late.freezes.len() > RESIDUE_BOUND {
        violations.push(format!(
            "{} freezes each cut a worker off between its look at the clock and its write, more \
             than the {RESIDUE_BOUND} a run the design admits: a guard is failing ({:?})",
            sent_late.freezes.len(),
            sent_late.excused
        ));
    }
    let mut residue_notes = Vec::new();
    for s in &seen {
        let residue = sent_late.touches(s, grouped) || reopened_by_a_frozen_word(s, &freezes);
        if residue {
            residue_notes.push(s.id.clone());
        }
        let mut wrong = check_notification(vendor, s, grouped, residue);
        if vendor.is_twilio() {
            wrong.extend(check_references(s, &ledger));
        }
        if !wrong.is_empty() {
            let mut report = format!("{}: {}\n  {}", s.id, wrong.join("; "), s.describe());
            if violations.len() < SHOWN {
                report.push_str(&log_of(&logs, &s.id));
            }
            violations.push(report);
        }
    }
    violations.extend(check_shared_references(&seen));
    if grouped {
        violations.extend(check_groups(&seen, &sent_late));
    }
    // The vendor delivered nothing outside the test's notifications.
    let mut ours: BTreeMap<&str, u64> = BTreeMap::new();
    for s in &seen {
        ours.insert(&s.reference, s.delivered);
    }
    let strangers: Vec<&String> = ledger
        .deliveries
        .keys()
        .filter(|r| !ours.contains_key(r.as_str()))
        .collect();
    if !strangers.is_empty() || ours.values().sum::<u64>() != ledger.total {
        violations.push(format!(
            "the vendor delivered {} messages, the test's notifications account for {}; \
             deliveries to references outside the test: {strangers:?}",
            ledger.total,
            ours.values().sum::<u64>()
        ));
    }
    let rows = db.count("notifications").await;
    if rows != notifications as i64 {
        violations.push(format!(
            "{rows} notification rows for {notifications} enqueued"
        ));
    }
    let strays = events.len() - seen.iter().filter(|s| !s.events.is_empty()).count();
    if strays > 0 {
        violations.push(format!(
            "{strays} notification(s) outside the test have outbox events"
        ));
    }

    let tally = Tally::of(&seen);
    println!(
        "crash test {backend:?}/{}: {notifications} notifications, {kills} kills, {} freezes (each signal landed within {} ms of its sending), {processes} processes | late answers read after a lease {} (may have left late {}), reopened {}, residue of a freeze ({} notification(s); sent late {}, reopened by a frozen worker's word {}) | delivered/known {} | delivered/duplicate_possible {} | unknown {} | failed {} | ambiguous attempts {} | lease-expired attempts {}, ledger >= 1 {}, provably processed {} | settled by query {} ({} not accepted), by replay {} ({} not accepted), by callback {}{} | failed look-ups {failed_lookups} | vendor deliveries {} | final state read {reads} time(s)",
        vendor.name(),
        freezes.len(),
        freezes
            .iter()
            .map(|f| (f.stopped - f.from).whole_milliseconds())
            .max()
            .unwrap_or_default(),
        tally.late_answers,
        tally.left_late,
        tally.reopened,
        residue_notes.len(),
        sent_late.excused.len(),
        seen.iter()
            .filter(|s| reopened_by_a_frozen_word(s, &freezes))
            .count(),
        tally.state("delivered", "known"),
        tally.state("delivered", "duplicate_possible"),
        tally.state("unknown", "unknown"),
        tally.state("failed", "known"),
        tally.ambiguous,
        tally.lease_expired,
        tally.lease_expired_delivered,
        tally.lease_expired_processed,
        tally.settled(BY_QUERY, "accepted") + tally.settled(BY_QUERY, "not_accepted"),
        tally.settled(BY_QUERY, "not_accepted"),
        tally.settled(BY_REPLAY, "accepted") + tally.settled(BY_REPLAY, "not_accepted"),
        tally.settled(BY_REPLAY, "not_accepted"),
        tally.settled(BY_CALLBACK, "accepted"),
        if grouped {
            format!(
                " | look-alike settlements {}, inconclusive look-ups {}",
                tally.look_alike_settlements, tally.inconclusive
            )
        } else if vendor == Vendor::Chain {
            format!(
                " | failed over {}, attempts kept off by an open circuit {}",
                tally.failed_over, tally.circuit_open
            )
        } else {
            String::new()
        },
        ledger.total,
    );
    for note in &sent_late.excused {
        println!("  residue: {note}");
    }
    assert!(
        violations.is_empty(),
        "{} invariant violations (the first {SHOWN} shown):\n{}",
        violations.len(),
        violations[..violations.len().min(SHOWN)].join("\n")
    );

    // The premises: without them the invariants above held trivially.
    assert!(
        tally.lease_expired_delivered > 0,
        "no attempt recovered by its lease belongs to a notification the vendor delivered"
    );
    // Resend and SparkPost answer a replay as the first request, so which send they processed
    // is not for the test to tell: there, the count above is all the proof there is.
    if !matches!(vendor, Vendor::Resend | Vendor::SparkPost) {
        assert!(
            tally.lease_expired_processed > 0,
            "no kill provably landed between the vendor's processing and herald's record"
        );
    }
    if let Some(by) = vendor.settles_by() {
        assert!(
            tally.settled(by, "accepted") + tally.settled(by, "not_accepted") > 0,
            "the vendor settles by {by}, and no attempt was settled so"
        );
    }
    if disruption == Disruption::KillsAndFreezes {
        assert!(
            tally.late_answers > 0,
            "{} freezes, and no frozen worker read an answer after its lease: none caught a send \
             in flight",
            freezes.len()
        );
    }
    if vendor.has_lookup_faults() {
        assert!(
            failed_lookups > 0,
            "look-up faults were armed, and no look-up failed"
        );
    }
    if vendor == Vendor::Chain {
        assert!(
            tally.failed_over > 0,
            "no notification moved to the fallback"
        );
    }
    if grouped {
        assert!(
            tally.look_alike_settlements > 0,
            "no settlement attributed a message among look-alikes"
        );
    }
}

/// How many times the final state is read before it is checked as it is: a read that saw an
/// event written during it is taken again (late reports come within a second or two).
const READS: usize = 5;

/// How long the processes, left running after the last kill, have to finish everything.
const SETTLING: Duration = Duration::from_secs(120);
/// How many violations a failure shows in full (with the herald log lines of each).
const SHOWN: usize = 10;

/// The herald log lines about notification `id`, from every process.
fn log_of(logs: &[String], id: &str) -> String {
    let lines: Vec<&str> = logs
        .iter()
        .flat_map(|log| log.lines())
        .filter(|line| line.contains(id))
        .collect();
    format!("\n  herald's log about it:\n    {}", lines.join("\n    "))
}

/// One notification at the end of a run: herald's view and the ledger's.
struct Seen {
    id: String,
    spec: Spec,
    reference: String,
    /// `GET /v1/notifications/{id}`: state, certainty, delivery, attempts with evidence.
    n: Value,
    /// The ledger's deliveries of its reference (in the look-alike run: of its whole group).
    delivered: u64,
    /// When the vendor saw its reference's requests (in the look-alike run: its group's).
    arrivals: Vec<OffsetDateTime>,
    /// Its outbox event types, oldest first.
    events: Vec<String>,
}

impl Seen {
    fn state(&self) -> &str {
        self.n["state"].as_str().unwrap_or("-")
    }

    fn certainty(&self) -> &str {
        self.n["certainty"].as_str().unwrap_or("-")
    }

    fn delivery(&self) -> &str {
        self.n["delivery"].as_str().unwrap_or("-")
    }

    fn attempts(&self) -> &[Value] {
        self.n["attempts"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The vendor messages herald holds as this notification's: the references of accepted
    /// sends and of settlements.
    fn references(&self) -> Vec<&str> {
        self.attempts()
            .iter()
            .filter_map(|a| a["provider_ref"].as_str())
            .collect()
    }

    /// Every vendor message herald names as this notification's: its attempts' references and
    /// those of answers read after a lease was lost, each once.
    fn named(&self) -> Vec<&str> {
        let late = self
            .attempts()
            .iter()
            .filter_map(|a| a["evidence"]["late_result"]["provider_ref"].as_str());
        let named: BTreeSet<&str> = self.references().into_iter().chain(late).collect();
        named.into_iter().collect()
    }

    fn describe(&self) -> String {
        format!(
            "{} ({}, group {}): {}/{}, {}; ledger {} for {:?}; events {:?}; attempts {}",
            self.spec.key,
            self.spec.to,
            self.spec.group,
            self.state(),
            self.certainty(),
            self.delivery(),
            self.delivered,
            self.reference,
            self.events,
            serde_json::to_string_pretty(&self.n["attempts"]).unwrap_or_default()
        )
    }
}

/// The chain's primary made every attempt it may, and one of them is an unsettled ambiguity.
fn primary_ran_out(attempts: &[Value]) -> bool {
    let on_primary = || attempts.iter().filter(|a| a["route"] == "vendor");
    on_primary().count() >= MAX_ATTEMPTS && on_primary().any(unsettled_ambiguous)
}

fn settled_by_callback(attempts: &[Value]) -> bool {
    attempts.iter().any(|a| a["settled_by"] == BY_CALLBACK)
}

fn unsettled_ambiguous(a: &Value) -> bool {
    a["result"] == "ambiguous" && a["settled_by"].is_null()
}

/// A send the vendor may have taken: accepted, ambiguous and not settled "not accepted", or
/// answered `accepted` after its worker's lease ended, or left unanswered by a call that
/// outlived its deadline's promise (whatever the record had settled).
fn may_have_been_taken(a: &Value) -> bool {
    a["result"] == "accepted"
        || (a["result"] == "ambiguous" && a["evidence"]["settlement"]["outcome"] != "not_accepted")
        || late_acceptance(a)
        || left_late(a)
}

/// A send that may have added a delivery to the ledger, by what the vendor answered (not by
/// what herald concluded): anything but a refusal before processing, and but an answer that
/// the vendor marked as the replay of an earlier acceptance (the sandbox's
/// `Idempotent-Replayed`), which delivers nothing new. Each such send adds at most one: so where
/// the ledger holds as many deliveries as a notification (group) has such sends, every one of
/// them was processed, a lease-expired one included — a kill landed between the vendor's
/// processing and herald's record.
fn may_have_delivered(a: &Value) -> bool {
    let replayed = a["evidence"]["detail"]
        .as_str()
        .is_some_and(|d| d.starts_with("idempotent replay of an earlier acceptance"));
    a["result"] != "rejected" && !(a["result"] == "accepted" && replayed)
}

fn lease_expired(a: &Value) -> bool {
    a["evidence"]["stage"] == "lease_expired"
}

/// A look-up whose look-alikes could not be attributed (its findings are kept on the attempt).
fn inconclusive(a: &Value) -> bool {
    !a["evidence"]["look_up"].is_null()
}

/// An answer read after its worker's lease ended (kept as `late_result`) that says the vendor
/// took the message.
fn late_acceptance(a: &Value) -> bool {
    a["evidence"]["late_result"]["result"] == "accepted"
}

/// A lost call whose worker saw it end unanswered after the moment its send deadline promised
/// every look-up (the deadline, the route's timeout and a second's slack): its request may have
/// left after another worker looked for it.
fn left_late(a: &Value) -> bool {
    a["evidence"]["late_result"]["evidence"]["may_have_left_late"] == true
}

/// How long after its send deadline a request may still reach the vendor by herald's own
/// promise: every route here has a 1 s timeout, and herald cuts a call a second after it.
const PROMISE: Duration = Duration::from_secs(2);

/// The design's residue, at most this many freezes a run: a freeze that lands between a
/// worker's last look at the clock and its write is a coincidence of microseconds to
/// milliseconds. It is counted by freezes, not requests, since the coincidence is the freeze's:
/// one that lands then cuts off every worker in that step at once (a run saw one freeze cut off
/// two). A broken guard shows as late requests after about every other freeze instead.
const RESIDUE_BOUND: usize = 2;

/// What the vendor's clock says of the run: the requests that arrived outside every window
/// their notification's attempts promised (in the look-alike run, their group's), each either
/// excused as the design's residue ([`witness::excused`]: a freeze that cut a worker off right
/// after its last look at the clock, the request arriving just after the thaw) or a violation.
struct SentLate {
    /// Each excused request, with its evidence.
    excused: Vec<String>,
    /// The notifications (or groups) an excused request was of.
    excused_of: BTreeSet<String>,
    /// The freezes that made the excused requests: one freeze may cut off every worker that
    /// was between its look and its write as the signal landed.
    freezes: BTreeSet<String>,
    late: Vec<String>,
}

impl SentLate {
    fn of(seen: &[Seen], grouped: bool, freezes: &[Freeze]) -> SentLate {
        let mut units: BTreeMap<String, Vec<&Seen>> = BTreeMap::new();
        for s in seen {
            units.entry(unit_of(s, grouped)).or_default().push(s);
        }
        let mut found = SentLate {
            excused: Vec::new(),
            excused_of: BTreeSet::new(),
            freezes: BTreeSet::new(),
            late: Vec::new(),
        };
        for (unit, members) in units {
            let windows: Vec<witness::Window> = members
                .iter()
                .flat_map(|s| witness::windows(&s.n, PROMISE))
                .collect();
            for at in witness::unaccounted(&windows, &members[0].arrivals) {
                match witness::excused(at, &windows, freezes) {
                    Some(f) => {
                        found.excused.push(format!(
                            "{unit}: a request arrived {at}, {} ms after {} began to thaw \
                             (frozen from {}, just after an attempt's last look at the clock)",
                            (at - f.thawing).whole_milliseconds(),
                            f.process,
                            f.from
                        ));
                        found.excused_of.insert(unit.clone());
                        found
                            .freezes
                            .insert(format!("{} from {}", f.process, f.from));
                    }
                    None => found.late.push(format!(
                        "I6: {unit}: a request arrived {at}, outside every attempt's window and \
                         not a freeze's residue (freezes around it: {:?}):\n  {}",
                        freezes
                            .iter()
                            .filter(|f| windows.iter().any(|w| f.from <= at && f.to >= w.from))
                            .collect::<Vec<_>>(),
                        members
                            .iter()
                            .map(|s| s.describe())
                            .collect::<Vec<_>>()
                            .join("\n  ")
                    )),
                }
            }
        }
        found
    }

    /// Whether a request of `s`'s (or its group's) was excused as the residue.
    fn touches(&self, s: &Seen, grouped: bool) -> bool {
        self.excused_of.contains(&unit_of(s, grouped))
    }
}

/// What the vendor's clock judges together: a notification, or in the look-alike run its group
/// (whose requests the vendor tells apart by text only).
fn unit_of(s: &Seen, grouped: bool) -> String {
    if grouped {
        format!("group {}", s.spec.group)
    } else {
        s.id.clone()
    }
}

/// The other face of the residue: a worker frozen in its call, after its last look at the
/// clock, that then said its call outlived its deadline's promise (`may_have_left_late`). Its
/// request arrived in time or not at all, but it cannot tell, so the record was reopened (or,
/// where the word came first, the next look-up counted the send as a maybe and it ended
/// `duplicate_possible`): herald says less than it might. Shown by a freeze that began after the
/// attempt's last look and lasted past the moment its deadline promised.
fn reopened_by_a_frozen_word(s: &Seen, freezes: &[Freeze]) -> bool {
    let time = |v: &Value| {
        v.as_str()
            .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
    };
    let reopened = !s.n["contradiction"].is_null();
    let counted_again = |a: &Value| {
        s.certainty() == "duplicate_possible"
            && a["evidence"]["settlement"]["outcome"] == "not_accepted"
    };
    s.attempts().iter().any(|a| {
        let (Some(deadline), Some(looked)) = (
            time(&a["send_deadline"]),
            time(&a["evidence"]["late_result"]["evidence"]["checked_at"]),
        ) else {
            return false;
        };
        let promised = deadline + PROMISE;
        (reopened || counted_again(a))
            && left_late(a)
            && freezes
                .iter()
                .any(|f| looked <= f.stopped && f.from <= promised && f.to > promised)
    })
}

/// Everything that must hold for one notification. In the look-alike run (`grouped`) the
/// ledger counts the whole group, so the checks that need its own count are left to the group.
/// `residue`: a freeze's residue touched it (see [`SentLate`] and [`reopened_by_a_frozen_word`]).
fn check_notification(vendor: Vendor, s: &Seen, grouped: bool, residue: bool) -> Vec<String> {
    let mut wrong = Vec::new();
    let attempts = s.attempts();
    let delivered = (!grouped).then_some(s.delivered);
    // The residue keeps no promise of `at_most_once` nor of a settling vendor; it keeps I2/I3.
    let at_most_once = s.delivery() == "at_most_once" && !residue;
    if s.delivery() != s.spec.delivery {
        wrong.push(format!(
            "delivery {} but enqueued {}",
            s.delivery(),
            s.spec.delivery
        ));
    }
    match (s.state(), s.certainty()) {
        ("delivered", "known") => {
            if delivered.is_some_and(|d| d != 1) {
                wrong.push("I3: delivered/known, not delivered exactly once".into());
            }
        }
        ("failed", "known") => {
            if delivered.is_some_and(|d| d != 0) {
                wrong.push("I3: failed/known, yet delivered".into());
            }
        }
        ("delivered", "duplicate_possible") => {
            if at_most_once {
                wrong.push("at_most_once, yet duplicate_possible".into());
            } else if !vendor.may_leave_unsettled() && !residue {
                wrong.push(format!(
                    "duplicate_possible, though the vendor settles by {}",
                    vendor.settles_by().unwrap_or("-")
                ));
            }
            if attempts.iter().filter(|a| may_have_been_taken(a)).count() < 2 {
                wrong.push("duplicate_possible without two sends that may have been taken".into());
            }
            if delivered == Some(0) {
                wrong.push("delivered, yet the vendor never delivered it".into());
            }
        }
        // The residue makes a send that was settled "not accepted" a maybe again.
        ("unknown", "unknown") if residue => {}
        ("unknown", "unknown") => {
            if !attempts.iter().any(unsettled_ambiguous) {
                wrong.push("unknown without an unsettled ambiguous attempt".into());
            }
            let unavoidable = match vendor {
                Vendor::Sandbox(Profile::Plain) | Vendor::Fcm => true,
                // A report settles the lone send it proves: still unknown is right only where
                // none came (the vendor never made the send, or gave up reporting it).
                Vendor::Reporting => s.n["receipts"].as_array().is_none_or(Vec::is_empty),
                // Only the plain fallback leaves an ambiguity unsettled, or a primary whose
                // replays ran out of attempts (see I4 below).
                Vendor::Chain => {
                    attempts
                        .iter()
                        .any(|a| unsettled_ambiguous(a) && a["route"] == "backup")
                        || primary_ran_out(attempts)
                }
                Vendor::TwilioLookAlikes => attempts
                    .iter()
                    .any(|a| unsettled_ambiguous(a) && inconclusive(a)),
                _ => false,
            };
            if !unavoidable {
                wrong.push(format!(
                    "I4: unknown, though the vendor settles by {}{}",
                    vendor.settles_by().unwrap_or("-"),
                    if grouped {
                        " and no look-up was inconclusive"
                    } else {
                        ""
                    }
                ));
            }
        }
        _ => wrong.push("I1: not in a final state".into()),
    }
    // The chain's idempotent primary settles every ambiguity of its own by replay before
    // anything moves on to the fallback, unless its replays ran out of attempts: a kill in the
    // middle of each of them (a lone SQLite process restarted every two seconds or so can
    // starve one notification that way). Then nothing proves what the primary did, and the
    // result may not say it knows.
    if vendor == Vendor::Chain
        && attempts
            .iter()
            .any(|a| unsettled_ambiguous(a) && a["route"] == "vendor")
    {
        if !primary_ran_out(attempts) {
            wrong.push("I4: an ambiguity on the idempotent primary left unsettled".into());
        } else if s.certainty() == "known" {
            wrong.push("I2: an unsettled ambiguity on the primary, recorded known".into());
        }
    }
    if delivered.is_some_and(|d| d > 1) && s.certainty() == "known" {
        wrong.push("I2: delivered more than once, recorded known".into());
    }
    // A late answer is evidence like any other: no `known` may stand against it.
    let held = s.references();
    for a in attempts.iter().filter(|a| late_acceptance(a)) {
        let late = a["evidence"]["late_result"]["provider_ref"].as_str();
        match (s.state(), s.certainty(), late) {
            ("failed", "known", _) => {
                wrong.push("I3: failed/known, yet a late answer says the vendor took it".into())
            }
            ("delivered", "known", Some(r)) if !held.is_empty() && !held.contains(&r) => wrong
                .push(format!(
                    "I3: delivered/known holding {held:?}, yet a late answer names {r}"
                )),
            _ => {}
        }
    }
    if at_most_once && delivered.is_some_and(|d| d > 1) {
        wrong.push("at_most_once, delivered more than once".into());
    }
    let expected = [
        "dev.herald.notification.accepted".to_owned(),
        format!("dev.herald.notification.{}", s.state()),
    ];
    let last = if s.certainty() == "-" { 1 } else { 2 };
    // Each move of the receipt has its own event; and a report that settles a notification in
    // review finishes it a second time, `unknown` then `delivered`.
    let receipt_moves = s.n["receipts"].as_array().map_or(0, Vec::len);
    let mut states: Vec<String> = s
        .events
        .iter()
        .filter(|t| *t != "dev.herald.notification.receipt")
        .cloned()
        .collect();
    let settled_in_review = settled_by_callback(attempts)
        && states.len() == 3
        && states[1] == "dev.herald.notification.unknown";
    if settled_in_review {
        states.remove(1);
    }
    // Reopened by later evidence: its final state then, and the reopening after it.
    let reopened = !s.n["contradiction"].is_null()
        && states.len() == 3
        && states[2] == "dev.herald.notification.reopened";
    if reopened {
        states.pop();
        if let Some(before) = states.get_mut(1) {
            before.clone_from(&expected[1]);
        }
    }
    if states != expected[..last]
        || s.events.len() - states.len()
            != receipt_moves + usize::from(settled_in_review) + usize::from(reopened)
    {
        wrong.push(format!(
            "events must be exactly {expected:?} (with `unknown` before a callback's settlement, \
             a `reopened` after a contradicted record, and one receipt event per receipt step), \
             are {:?}",
            s.events
        ));
    }
    if s.state() == "delivered"
        && s.certainty() == "known"
        && vendor == Vendor::Reporting
        && !settled_by_callback(attempts)
        && attempts.iter().any(|a| a["result"] == "ambiguous")
    {
        wrong.push("I3: known after an ambiguity, yet no report settled it".into());
    }
    wrong
}

/// Twilio: every message herald holds as this notification's (an attempt's reference, or a late
/// answer's) is a real one, of its recipient and text; `delivered`/`known` holds exactly one (or,
/// settled with look-alike siblings whose sends were all taken, none named: which is whose,
/// nothing says), any other delivery at least one, `failed` none.
fn check_references(s: &Seen, ledger: &Ledger) -> Vec<String> {
    let mut wrong = Vec::new();
    let held = s.named();
    let unnamed = s.attempts().iter().any(|a| {
        a["settled_by"] == "outcome_query"
            && a["provider_ref"].is_null()
            && a["evidence"]["settlement"]["outcome"] == "accepted"
    });
    for r in &held {
        match ledger.messages.get(*r) {
            None => wrong.push(format!("holds {r}, which the vendor never delivered")),
            Some(theirs) if *theirs != s.reference => {
                wrong.push(format!("holds {r}, a message of {theirs:?}"))
            }
            Some(_) => {}
        }
    }
    let fits = match (s.state(), s.certainty()) {
        ("delivered", "known") => held.len() == 1 || (held.is_empty() && unnamed),
        ("delivered", _) => !held.is_empty() || unnamed,
        ("failed", _) => held.is_empty(),
        _ => true,
    };
    if !fits {
        wrong.push(format!(
            "{}/{} holding {} vendor message(s)",
            s.state(),
            s.certainty(),
            held.len()
        ));
    }
    wrong
}

/// A vendor message belongs to at most one notification, and to one of its attempts.
fn check_shared_references(seen: &[Seen]) -> Vec<String> {
    let mut holders: HashMap<&str, Vec<&Seen>> = HashMap::new();
    for s in seen {
        for r in s.named() {
            holders.entry(r).or_default().push(s);
        }
    }
    holders
        .into_iter()
        .filter(|(_, h)| h.len() > 1)
        .map(|(r, h)| {
            format!(
                "vendor message {r} is held {} times:\n  {}",
                h.len(),
                h.iter()
                    .map(|s| s.describe())
                    .collect::<Vec<_>>()
                    .join("\n  ")
            )
        })
        .collect()
}

/// The look-alike run: the ledger counts a group's text, not a member's, so what can be proven
/// is about the group, and the vendor's clock attributes its messages: each message arrived in
/// the window of an attempt of one member (from the attempt's start to its deadline and
/// herald's promise; a window holds one request), and the members' records must fit such an
/// assignment — a `delivered`/`known` member holds exactly one message, a `failed`/`known` one
/// none, any other delivered member at least one, an `at_most_once` member at most one, and an
/// `at_least_once` member that is `duplicate_possible` or `unknown` at most one per send that
/// may have delivered. So an uncertain member can absorb only the messages that arrived while
/// one of its own sends could have made them — right after its worker's last look at the clock,
/// where the attempt says when that was — never a `known` member's second (I2 and I3 per
/// group). Where a freeze's residue sent one of the group's requests late, its windows stay
/// open after their deadline, and an `at_most_once` member may hold one per send, as the
/// residue allows a single notification (`residue`).
fn check_groups(seen: &[Seen], residue: &SentLate) -> Vec<String> {
    let mut groups: BTreeMap<usize, Vec<&Seen>> = BTreeMap::new();
    for s in seen {
        groups.entry(s.spec.group).or_default().push(s);
    }
    let mut wrong = Vec::new();
    for (group, members) in groups {
        let late_allowed = residue.touches(members[0], true);
        let demands: Vec<Demand> = members
            .iter()
            .map(|s| {
                let windows: Vec<witness::Window> = witness::windows(&s.n, PROMISE)
                    .into_iter()
                    .zip(s.attempts())
                    .filter(|(_, a)| may_have_delivered(a))
                    .map(|(mut w, _)| {
                        // Where its worker said when it last read the clock, the request left
                        // right after: nothing waits between that look and the write.
                        if let Some(looked) = w.checked_at {
                            w.from = w.from.max(looked);
                            w.until = w.until.min(looked + SENT_AFTER_LOOK);
                        }
                        if late_allowed {
                            w.until = OffsetDateTime::now_utc();
                        }
                        w
                    })
                    .collect();
                // As for a single notification (`check_notification`): the residue keeps no
                // promise of `at_most_once`. A send cut off after its last look at the clock
                // reaches the vendor after the look-up that proved it absent, and the member is
                // sent again; its record must say so (reopened), which `min`/`max` still hold.
                let cap = if s.delivery() == "at_most_once" && !late_allowed {
                    1
                } else {
                    windows.len()
                };
                let (min, max) = match (s.state(), s.certainty()) {
                    ("delivered", "known") => (1, 1),
                    ("failed", "known") => (0, 0),
                    ("delivered", _) => (1, cap),
                    _ => (0, cap),
                };
                Demand { windows, min, max }
            })
            .collect();
        let arrivals = &members[0].arrivals;
        if !assignable(arrivals, &demands) {
            wrong.push(format!(
                "group {group}: the vendor's {} message(s) of the text, arrived at {arrivals:?}, \
                 fit no assignment to the members' sends that their records allow (I2/I3):\n  {}",
                arrivals.len(),
                members
                    .iter()
                    .map(|s| format!("{}: {}", s.id, s.describe()))
                    .collect::<Vec<_>>()
                    .join("\n  ")
            ));
        }
    }
    wrong
}

/// How soon after its worker's last look at the clock a request reaches the vendor: the write
/// follows the look at once; the rest is a loaded machine's scheduling and loopback.
const SENT_AFTER_LOOK: Duration = Duration::from_secs(2);

/// What a look-alike member's record allows it to hold: between `min` and `max` messages, each
/// arrived in one of `windows` (one a window).
struct Demand {
    windows: Vec<witness::Window>,
    min: usize,
    max: usize,
}

/// Whether every arrival can be given to a window of one member that contains it, one arrival a
/// window, each member getting as many as its record allows. (A group is a few members with a
/// few sends each: a search over the assignments is small.)
fn assignable(arrivals: &[OffsetDateTime], demands: &[Demand]) -> bool {
    fn search(
        arrivals: &[OffsetDateTime],
        demands: &[Demand],
        used: &mut [Vec<bool>],
        held: &mut [usize],
    ) -> bool {
        let owed: usize = demands
            .iter()
            .zip(held.iter())
            .map(|(d, h)| d.min.saturating_sub(*h))
            .sum();
        let Some((at, rest)) = arrivals.split_first() else {
            return owed == 0;
        };
        if owed > arrivals.len() {
            return false;
        }
        for (m, demand) in demands.iter().enumerate() {
            if held[m] == demand.max {
                continue;
            }
            for (w, window) in demand.windows.iter().enumerate() {
                let tick = time::Duration::microseconds(1);
                if used[m][w] || *at < window.from - tick || *at > window.until {
                    continue;
                }
                used[m][w] = true;
                held[m] += 1;
                if search(rest, demands, used, held) {
                    return true;
                }
                used[m][w] = false;
                held[m] -= 1;
            }
        }
        false
    }
    let mut used: Vec<Vec<bool>> = demands
        .iter()
        .map(|d| vec![false; d.windows.len()])
        .collect();
    let mut held = vec![0; demands.len()];
    let mut sorted = arrivals.to_vec();
    sorted.sort();
    search(&sorted, demands, &mut used, &mut held)
}

/// The counts a run prints.
#[derive(Default)]
struct Tally {
    states: HashMap<(String, String), usize>,
    ambiguous: usize,
    /// Attempts recovered by a lease (a killed or stalled worker); of those, the ones whose
    /// notification (group) the vendor delivered; and the ones the vendor provably processed.
    lease_expired: usize,
    lease_expired_delivered: usize,
    lease_expired_processed: usize,
    /// Settled attempts by (`settled_by`, outcome).
    settlements: HashMap<(String, String), usize>,
    /// Settlements by look-up that attributed a message among two or more look-alikes.
    look_alike_settlements: usize,
    /// Attempts left with the findings of an inconclusive look-up.
    inconclusive: usize,
    /// Notifications that moved to a fallback, and attempts an open circuit kept from a vendor.
    failed_over: usize,
    circuit_open: usize,
    /// Answers a worker read after its lease ended (of any result), of them those whose call
    /// outlived its deadline's promise unanswered, and notifications that later evidence
    /// reopened.
    late_answers: usize,
    left_late: usize,
    reopened: usize,
}

impl Tally {
    fn of(seen: &[Seen]) -> Tally {
        let mut t = Tally::default();
        let mut groups: BTreeMap<usize, Vec<&Seen>> = BTreeMap::new();
        for s in seen {
            groups.entry(s.spec.group).or_default().push(s);
        }
        for members in groups.values() {
            let attempts = || members.iter().flat_map(|s| s.attempts());
            let reached = attempts().filter(|a| may_have_delivered(a)).count() as u64;
            if members[0].delivered >= reached {
                t.lease_expired_processed += attempts().filter(|a| lease_expired(a)).count();
            }
        }
        for s in seen {
            *t.states
                .entry((s.state().to_owned(), s.certainty().to_owned()))
                .or_default() += 1;
            t.failed_over += usize::from(s.n["failovers"].as_i64().unwrap_or(0) > 0);
            t.reopened += usize::from(!s.n["contradiction"].is_null());
            for a in s.attempts() {
                t.late_answers += usize::from(!a["evidence"]["late_result"].is_null());
                t.left_late += usize::from(left_late(a));
                t.circuit_open += usize::from(a["evidence"]["stage"] == "circuit_open");
                t.ambiguous += usize::from(a["result"] == "ambiguous");
                if lease_expired(a) {
                    t.lease_expired += 1;
                    t.lease_expired_delivered += usize::from(s.delivered > 0);
                }
                t.inconclusive += usize::from(inconclusive(a));
                if let Some(by) = a["settled_by"].as_str() {
                    let settlement = &a["evidence"]["settlement"];
                    let outcome = settlement["outcome"].as_str().unwrap_or("-");
                    *t.settlements
                        .entry((by.to_owned(), outcome.to_owned()))
                        .or_default() += 1;
                    let look_alikes = settlement["evidence"]["look_alikes"]
                        .as_array()
                        .map_or(0, Vec::len);
                    t.look_alike_settlements += usize::from(by == BY_QUERY && look_alikes > 1);
                }
            }
        }
        t
    }

    fn state(&self, state: &str, certainty: &str) -> usize {
        self.states
            .get(&(state.to_owned(), certainty.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    fn settled(&self, by: &str, outcome: &str) -> usize {
        self.settlements
            .get(&(by.to_owned(), outcome.to_owned()))
            .copied()
            .unwrap_or(0)
    }
}

/// Every notification event's type, oldest first, by notification id (32 hex digits, no
/// dashes). A route's events (its circuit opening under the faults) are about no notification.
async fn events_by_notification(db: &TestDb) -> HashMap<String, Vec<String>> {
    let id = match db.backend {
        Backend::Postgres => "replace(notification_id::text, '-', '')",
        Backend::Sqlite => "lower(hex(notification_id))",
    };
    let mut events: HashMap<String, Vec<String>> = HashMap::new();
    for row in db
        .texts(&format!(
            "SELECT {id} || ' ' || type FROM outbox
             WHERE type LIKE 'dev.herald.notification.%' ORDER BY seq"
        ))
        .await
    {
        let (id, event_type) = row.split_once(' ').expect("id and type");
        events
            .entry(id.to_owned())
            .or_default()
            .push(event_type.to_owned());
    }
    events
}

/// Posts notification `i` until some herald acknowledges it, the same key every time, as a
/// careful upstream would: a retry after a lost answer is a replay, never a second notification.
async fn enqueue_until_acknowledged(
    http: &reqwest::Client,
    bases: &[String],
    spec: &Spec,
    i: usize,
) -> String {
    let body = spec.body();
    for round in 0.. {
        let base = &bases[(i + round) % bases.len()];
        let response = http
            .post(format!("{base}/v1/notifications"))
            .bearer_auth(ACME)
            .header("Idempotency-Key", &spec.key)
            .timeout(Duration::from_secs(5))
            .json(&body)
            .send()
            .await;
        match response {
            // A process frozen between the answer's head and its body leaves the body unread:
            // the same request again, under the same key, answers the same notification.
            Ok(r) if r.status() == reqwest::StatusCode::ACCEPTED => {
                if let Ok(body) = r.json::<Value>().await {
                    return body["id"].as_str().unwrap().to_owned();
                }
            }
            Ok(r)
                if r.status().is_client_error() && r.status() != reqwest::StatusCode::CONFLICT =>
            {
                panic!(
                    "notification {i} refused: {} {}",
                    r.status(),
                    r.text().await.unwrap_or_default()
                );
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    unreachable!("the loop returns or panics")
}

/// Outside the look-alike run each notification's text is unique, so a vendor without a client
/// reference (Twilio) can be matched to it.
fn text_of(key: &str) -> String {
    format!("Crash test message {key}")
}
