//! The command line's API client: the real `herald` binary against a running herald, with its
//! output and exit codes (0 ok, 1 an error named in one line, 2 usage).

mod support;

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use herald_sandbox::SandboxHandle;
use support::{ACME, ACME_REVIEWER, Backend, TestApp, eventually, spawn_app_with};

/// Runs `herald ARGS` against `app` as `token`.
fn herald(app: &TestApp, token: &str, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .env("HERALD_URL", &app.base)
        .env("HERALD_TOKEN", token)
        .env_remove("HERALD_CONFIG")
        .output()
        .expect("the herald binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `herald review resolve` for every unknown, closing them (add `--dry-run` or `--note`).
const CLOSE_UNKNOWNS: [&str; 8] = [
    "review",
    "resolve",
    "--filter",
    "reason=unknown",
    "--outcome",
    "not_delivered",
    "--then",
    "close",
];

/// A herald whose email route's vendor processes every send and loses its answer: each
/// notification ends `unknown`. The vendor runs while its handle lives.
async fn herald_whose_vendor_loses_every_answer() -> (TestApp, SandboxHandle) {
    let vendor = support::plain_vendor("accept_then_drop:1").await;
    let config = format!(
        "[dispatch]\nlease_seconds = 4\nretry_base_ms = 20\n\n[routes.mail]\nprovider = \"sandbox\"\n\
         base_url = \"{}\"\nprofile = \"plain\"\ntimeout_seconds = 1\n\n[channels]\nemail = \"mail\"\n",
        vendor.base_url()
    );
    let app = spawn_app_with(Backend::Sqlite, &config).await.unwrap();
    (app, vendor)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_sent_with_a_cancellation_key_is_called_off_from_the_command_line() {
    let app = spawn_app_with(Backend::Sqlite, "[dispatch]\nenabled = false\n")
        .await
        .unwrap();
    let send = |key: &str| {
        herald(
            &app,
            ACME,
            &[
                "send",
                "--idempotency-key",
                key,
                "--channel",
                "email",
                "--to",
                "ada@example.com",
                "--subject",
                "Welcome",
                "--text",
                "hi",
                "--cancellation-key",
                "signup/ada",
                "--expires-at",
                "2999-01-01T00:00:00Z",
            ],
        )
    };
    let first = send("welcome-1");
    assert!(first.status.success(), "{}", stderr(&first));
    let first = stdout(&first).split_whitespace().next().unwrap().to_owned();
    let second = stdout(&send("welcome-2"))
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(app.show(&first).await["cancellation_key"], "signup/ada");
    let status = stdout(&herald(&app, ACME, &["status", &first]));
    assert!(
        status.contains("expires    2999-01-01T00:00:00Z"),
        "{status}"
    );
    let both = herald(
        &app,
        ACME,
        &[
            "send",
            "--idempotency-key",
            "x",
            "--expires-at",
            "2999-01-01T00:00:00Z",
            "--ttl-seconds",
            "60",
        ],
    );
    assert!(!both.status.success(), "clap refuses both");
    let uncategorized = herald(
        &app,
        ACME,
        &[
            "send",
            "--idempotency-key",
            "c",
            "--channel",
            "email",
            "--to",
            "ada@example.com",
            "--subject",
            "s",
            "--text",
            "t",
            "--category",
            "digest",
            "--locale",
            "fr",
        ],
    );
    assert!(!uncategorized.status.success());
    assert!(
        stderr(&uncategorized).contains("unknown category `digest`: none is configured"),
        "{}",
        stderr(&uncategorized)
    );

    let one = herald(&app, ACME, &["cancel", "--idempotency-key", "welcome-1"]);
    assert!(one.status.success(), "{}", stderr(&one));
    assert_eq!(stdout(&one), format!("{first} cancelled\n"));
    let rest = herald(&app, ACME, &["cancel", "--cancellation-key", "signup/ada"]);
    assert_eq!(
        stdout(&rest),
        format!("{second} cancelled\n{first} not cancelled: cancelled\n")
    );
    let neither = herald(&app, ACME, &["cancel"]);
    assert!(!neither.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_attached_on_the_command_line_are_sent_with_their_names_and_types() {
    let app = spawn_app_with(Backend::Sqlite, "[dispatch]\nenabled = false\n")
        .await
        .unwrap();
    let dir = support::TempDir::new("herald-attach");
    let invoice = dir.path().join("invoice.PDF");
    std::fs::write(&invoice, b"%PDF-1.7\n\xff\x00").unwrap();
    let notes = dir.path().join("notes.log");
    std::fs::write(&notes, b"shipped").unwrap();
    let send = |key: &str, attach: &[String]| {
        let mut args = vec![
            "send",
            "--idempotency-key",
            key,
            "--channel",
            "email",
            "--to",
            "ada@example.com",
            "--subject",
            "Your invoice",
            "--text",
            "Attached.",
        ];
        for a in attach {
            args.extend(["--attach", a.as_str()]);
        }
        herald(&app, ACME, &args)
    };

    let sent = send(
        "invoice-1",
        &[
            invoice.display().to_string(),
            format!("{};type=text/plain", notes.display()),
        ],
    );

    assert!(sent.status.success(), "{}", stderr(&sent));
    let id = stdout(&sent).split_whitespace().next().unwrap().to_owned();
    let n = app.show(&id).await;
    let attached: Vec<(&str, &str, u64)> = n["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["filename"].as_str().unwrap(),
                a["content_type"].as_str().unwrap(),
                a["size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        attached,
        [
            ("invoice.PDF", "application/pdf", 11),
            ("notes.log", "text/plain", 7)
        ]
    );
    let status = stdout(&herald(&app, ACME, &["status", &id]));
    assert!(
        status.contains("attached   invoice.PDF (application/pdf, 11 bytes)"),
        "{status}"
    );
    let untyped = dir.path().join("figures.q3");
    std::fs::write(&untyped, b"1,2,3").unwrap();
    let unknown = send("invoice-2", &[untyped.display().to_string()]);
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown).contains("give its type as"),
        "{}",
        stderr(&unknown)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_pauses_a_route_to_its_fallback_and_resumes_it_from_the_command_line() {
    let app = spawn_app_with(
        Backend::Sqlite,
        "[dispatch]\nenabled = false\n\n[routes.mail]\nprovider = \"sandbox\"\nfallback = \"spare\"\n\
         operated_by = \"acme\"\n\n\
         [routes.spare]\nprovider = \"sandbox\"\noperated_by = \"acme\"\n\n[channels]\nemail = \"mail\"\n",
    )
    .await
    .unwrap();
    let admin = support::ACME_ADMIN;

    let paused = herald(
        &app,
        admin,
        &[
            "routes",
            "pause",
            "mail",
            "--note",
            "INC-7",
            "--to-fallback",
        ],
    );

    assert!(paused.status.success(), "{}", stderr(&paused));
    assert!(
        stdout(&paused).contains("paused by acme-admin at ")
            && stdout(&paused).contains(", its work to spare: INC-7"),
        "{}",
        stdout(&paused)
    );
    let listed = stdout(&herald(&app, admin, &["routes", "list"]));
    assert!(
        listed.contains("mail  sandbox  circuit closed  paused by"),
        "{listed}"
    );
    assert!(
        listed.contains("spare  sandbox  circuit closed  sending"),
        "{listed}"
    );
    let refused = herald(
        &app,
        admin,
        &["routes", "pause", "spare", "--note", "x", "--to-fallback"],
    );
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("has no fallback"),
        "{}",
        stderr(&refused)
    );
    let resumed = herald(&app, admin, &["routes", "resume", "mail", "--note", "over"]);
    assert!(
        stdout(&resumed).contains("mail  sandbox  circuit closed  sending"),
        "{}",
        stdout(&resumed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_on_call_engineer_settles_an_unknown_send_from_the_command_line() {
    let (app, _vendor) = herald_whose_vendor_loses_every_answer().await;

    let sent = herald(
        &app,
        ACME,
        &[
            "send",
            "--idempotency-key",
            "cli-1",
            "--channel",
            "email",
            "--to",
            "ada@example.com",
            "--subject",
            "Your export",
            "--text",
            "ready",
        ],
    );
    assert!(sent.status.success(), "{}", stderr(&sent));
    let id = stdout(&sent).split_whitespace().next().unwrap().to_owned();
    assert!(stdout(&sent).contains("(accepted)"), "{}", stdout(&sent));
    let again = herald(
        &app,
        ACME,
        &[
            "send",
            "--idempotency-key",
            "cli-1",
            "--channel",
            "email",
            "--to",
            "ada@example.com",
            "--subject",
            "Your export",
            "--text",
            "ready",
        ],
    );
    assert!(stdout(&again).contains("(replayed)"), "{}", stdout(&again));

    eventually(
        "the send to end unknown",
        Duration::from_secs(20),
        || async { (app.show(&id).await["state"] == "unknown").then_some(()) },
    )
    .await;

    let list = herald(&app, ACME_REVIEWER, &["review", "list"]);
    assert!(list.status.success(), "{}", stderr(&list));
    let table = stdout(&list);
    assert!(table.starts_with("ID"), "{table}");
    assert!(
        table.contains(&id) && table.contains("unknown") && table.contains("mail"),
        "{table}"
    );
    assert!(table.contains("ada@example.com"), "the recipient: {table}");
    let n = app.show(&id).await;
    let why = n["review"]["why"].as_str().unwrap();
    assert!(why.chars().count() > 80, "{why}");
    assert!(table.contains(why), "the whole why, not cut: {table}");

    let json = herald(&app, ACME_REVIEWER, &["review", "list", "--json"]);
    let items: Vec<Value> = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["id"], json!(id));

    let show = herald(&app, ACME_REVIEWER, &["review", "show", &id]);
    let text = stdout(&show);
    assert!(text.contains("in review  unknown:"), "{text}");
    assert!(text.contains("#1 ") && text.contains("ambiguous"), "{text}");

    let resolved = herald(
        &app,
        ACME_REVIEWER,
        &[
            "review",
            "resolve",
            &id,
            "--outcome",
            "delivered",
            "--note",
            "vendor dashboard shows it",
        ],
    );
    assert!(resolved.status.success(), "{}", stderr(&resolved));
    assert_eq!(
        stdout(&resolved).trim(),
        format!("{id} is now delivered/known (settled by a person)"),
        "a person's word is shown as theirs, not as herald's proof"
    );

    let status = herald(&app, ACME, &["status", &id]);
    let text = stdout(&status);
    assert!(text.contains("delivered/known"), "{text}");
    assert!(text.contains("settled by review: accepted"), "{text}");
    assert!(text.contains("acme-oncall: delivered"), "{text}");
    assert_eq!(
        stdout(&herald(&app, ACME_REVIEWER, &["review", "list"])).trim(),
        "nothing to review"
    );

    // Bulk, dry run: nothing is in review any more.
    let bulk = herald(
        &app,
        ACME_REVIEWER,
        &[&CLOSE_UNKNOWNS[..], &["--dry-run"]].concat(),
    );
    assert!(bulk.status.success(), "{}", stderr(&bulk));
    assert!(
        stdout(&bulk).starts_with("would resolve 0"),
        "{}",
        stdout(&bulk)
    );
}

/// The preview a dry run printed.
fn printed_preview(text: &str) -> String {
    text.lines()
        .find_map(|line| line.strip_prefix("preview "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the dry run prints its preview")
        .to_owned()
}

/// One email to each of `to`, each ended `unknown` by a vendor that loses every answer.
async fn unknown_emails(app: &support::TestApp, to: &[&str]) -> Vec<String> {
    let mut ids = Vec::new();
    for to in to {
        ids.push(app.enqueue_id(to, &support::email(to)).await);
    }
    for id in &ids {
        eventually(
            "the send to end unknown",
            Duration::from_secs(20),
            || async { (app.show(id).await["state"] == "unknown").then_some(()) },
        )
        .await;
    }
    ids
}

/// `herald review resolve` for many: the dry run prints each item and a preview; the
/// confirmation resolves exactly that, and refuses another outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_items_are_resolved_from_the_command_line_exactly_as_previewed() {
    let (app, _vendor) = herald_whose_vendor_loses_every_answer().await;
    let ids = unknown_emails(&app, &["ada@example.com", "grace@example.com"]).await;
    let dry = herald(
        &app,
        ACME_REVIEWER,
        &[&CLOSE_UNKNOWNS[..], &["--dry-run"]].concat(),
    );
    assert!(dry.status.success(), "{}", stderr(&dry));
    let text = stdout(&dry);
    assert!(text.starts_with("would resolve 2:"), "{text}");
    for needle in [
        &ids[0],
        &ids[1],
        "ada@example.com",
        "grace@example.com",
        "ambiguous",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    let preview = printed_preview(&text);
    assert!(
        text.contains(&format!("herald review resolve --preview {preview}")),
        "{text}"
    );

    let unconfirmed = herald(
        &app,
        ACME_REVIEWER,
        &[&CLOSE_UNKNOWNS[..], &["--note", "n"]].concat(),
    );
    assert_eq!(unconfirmed.status.code(), Some(1));
    assert!(
        stderr(&unconfirmed).contains("--dry-run"),
        "{}",
        stderr(&unconfirmed)
    );
    let confirm = |more: &[&str]| {
        let args = [
            &["review", "resolve", "--preview", preview.as_str()][..],
            more,
        ]
        .concat();
        herald(&app, ACME_REVIEWER, &args)
    };
    let changed = confirm(&["--outcome", "delivered", "--note", "n"]);
    assert_eq!(changed.status.code(), Some(1));
    assert!(
        stderr(&changed).starts_with("herald: 409") && stderr(&changed).contains("outcome changed"),
        "{}",
        stderr(&changed)
    );
    let confirmed = confirm(&["--note", "vendor lost both"]);
    assert!(confirmed.status.success(), "{}", stderr(&confirmed));
    assert!(
        stdout(&confirmed).starts_with("resolved 2:"),
        "{}",
        stdout(&confirmed)
    );
    for id in &ids {
        assert_eq!(app.show(id).await["state"], "failed");
    }
}

/// `herald review resolve --items FILE`: each line its own outcome, one dry run and one
/// confirmation for the whole list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_with_an_outcome_per_item_is_resolved_from_a_file_as_previewed() {
    let (app, _vendor) = herald_whose_vendor_loses_every_answer().await;
    let ids = unknown_emails(&app, &["found@example.com", "missing@example.com"]).await;
    let dir = support::TempDir::new("herald-cli-items");
    let file = dir.path().join("checked.txt");
    std::fs::write(
        &file,
        format!(
            "# what the vendor's log showed\n{} delivered\n\n{} not_delivered close  # absent\n",
            ids[0], ids[1]
        ),
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let dry = herald(
        &app,
        ACME_REVIEWER,
        &["review", "resolve", "--items", file, "--dry-run"],
    );
    assert!(dry.status.success(), "{}", stderr(&dry));
    let text = stdout(&dry);
    assert!(text.starts_with("would resolve 2:"), "{text}");
    assert!(
        text.contains("-> delivered\n") && text.contains("-> not_delivered + close\n"),
        "{text}"
    );
    let preview = printed_preview(&text);
    let confirmed = herald(
        &app,
        ACME_REVIEWER,
        &[
            "review",
            "resolve",
            "--preview",
            &preview,
            "--note",
            "checked one by one",
        ],
    );
    assert!(confirmed.status.success(), "{}", stderr(&confirmed));
    assert_eq!(app.show(&ids[0]).await["state"], "delivered");
    assert_eq!(app.show(&ids[1]).await["state"], "failed");

    std::fs::write(
        dir.path().join("bad.txt"),
        format!("{} \n{}\n", ids[0], ids[1]),
    )
    .unwrap();
    let bad = herald(
        &app,
        ACME_REVIEWER,
        &[
            "review",
            "resolve",
            "--items",
            dir.path().join("bad.txt").to_str().unwrap(),
            "--dry-run",
        ],
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("line 1:"), "{}", stderr(&bad));
}

/// Each command's help names what serves it: the server commands their config and logs, the
/// API client's none of those, and the sandbox every fault it can inject.
#[test]
fn each_command_offers_its_own_flags_and_the_sandbox_names_every_fault() {
    let help = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(args)
            .arg("--help")
            .env_remove("HERALD_CONFIG")
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        stdout(&output)
    };
    let sandbox = help(&["sandbox"]);
    for fault in herald_sandbox::Fault::ALL {
        assert!(
            sandbox.contains(fault.as_str()),
            "{fault} missing from:\n{sandbox}"
        );
    }
    assert!(!sandbox.contains("--config"), "{sandbox}");
    for client in [
        &["send"][..],
        &["status"],
        &["review", "list"],
        &["review", "show"],
        &["review", "resolve"],
        &["review", "requery"],
    ] {
        let text = help(client);
        for flag in ["--config", "--log-format"] {
            assert!(!text.contains(flag), "{client:?} offers {flag}:\n{text}");
        }
    }
    for server in ["serve", "migrate", "check-config", "relay", "health"] {
        let text = help(&[server]);
        assert!(
            text.contains("--config") && text.contains("--log-format"),
            "{server}:\n{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_one_line_with_their_cause_and_exit_codes_say_what_failed() {
    let app = support::spawn_app(Backend::Sqlite).await.unwrap();
    let wrong = herald(&app, "not-a-token", &["review", "list"]);
    assert_eq!(wrong.status.code(), Some(1));
    let line = stderr(&wrong);
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(line.starts_with("herald: 401"), "{line}");

    let missing = herald(
        &app,
        ACME,
        &["status", "01970000-0000-7000-8000-000000000000"],
    );
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).starts_with("herald: 404"),
        "{}",
        stderr(&missing)
    );

    let scope = herald(&app, ACME, &["review", "list"]);
    assert_eq!(scope.status.code(), Some(1));
    assert!(stderr(&scope).contains("review"), "{}", stderr(&scope));

    let usage = herald(&app, ACME, &["review", "resolve", "x"]);
    assert_eq!(
        usage.status.code(),
        Some(2),
        "a missing --outcome is a usage error"
    );

    let down = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["status", "x"])
        .env("HERALD_URL", "http://127.0.0.1:9")
        .env("HERALD_TOKEN", ACME)
        .output()
        .unwrap();
    assert_eq!(down.status.code(), Some(1));
    assert!(
        stderr(&down).starts_with("herald: cannot reach herald at http://127.0.0.1:9"),
        "{}",
        stderr(&down)
    );
}

/// `herald health` is the container's probe: it asks `/readyz` where the config and
/// environment say herald listens (a wildcard address on loopback), or at `--url`, and its exit
/// code says whether herald is ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_probe_asks_readyz_where_herald_listens_and_exits_by_the_answer() {
    let app = support::spawn_app(Backend::Sqlite).await.unwrap();
    let port = app.base.rsplit(':').next().unwrap().to_owned();
    let health = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_herald"));
        command
            .arg("health")
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().expect("the herald binary runs")
    };

    let listen = format!("0.0.0.0:{port}");
    let ready = health(&[], &[("HERALD_SERVER__LISTEN", &listen)]);
    assert_eq!(ready.status.code(), Some(0), "{}", stderr(&ready));
    assert_eq!(stdout(&ready), "ready\n");
    let asked = health(&["--url", &app.base], &[]);
    assert_eq!(asked.status.code(), Some(0), "{}", stderr(&asked));

    let elsewhere = format!("{}/nowhere", app.base);
    let refused = health(&["--url", &elsewhere], &[]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).starts_with(&format!(
            "herald: not ready: {elsewhere}/readyz answered 404"
        )),
        "{}",
        stderr(&refused)
    );

    let base = app.base.clone();
    app.stop().await;
    let down = health(&["--url", &base], &[]);
    assert_eq!(down.status.code(), Some(1));
    assert!(
        stderr(&down).starts_with(&format!("herald: cannot reach herald at {base}")),
        "{}",
        stderr(&down)
    );
}

/// Runs `herald check-config` on `config` with exactly `env` set.
fn check_config(config: &std::path::Path, env: &[(&str, &str)]) -> Output {
    check_config_with(&[], config, env)
}

/// [`check_config`] with more flags (`--connect`).
fn check_config_with(flags: &[&str], config: &std::path::Path, env: &[(&str, &str)]) -> Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_herald"));
    command
        .arg("check-config")
        .args(flags)
        .arg("--config")
        .arg(config)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("the herald binary runs")
}

#[test]
fn check_config_names_every_problem_of_the_example_at_once_and_passes_the_runnable_one() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = check_config(&root.join("herald.example.toml"), &[]);
    assert_eq!(example.status.code(), Some(1), "{}", stderr(&example));
    let problems = stderr(&example);
    // Every secret the reference names is missing, and each is named in the same run.
    for key in [
        "tokens[0].secret: environment variable BILLING_TOKEN is not set",
        "tokens[1].secret: cannot read /run/secrets/herald-oncall",
        "routes.hooks.secrets[0]: environment variable WEBHOOK_SECRET is not set",
        "routes.hooks.secrets[1]: environment variable WEBHOOK_SECRET_PREVIOUS is not set",
        "routes.mail.password: environment variable SMTP_PASSWORD is not set",
        "routes.mailjet.api_secret",
        "routes.onesignal.api_key",
        "routes.postmark.server_token",
        "routes.resend.api_key",
        "routes.sendgrid.api_key",
        "routes.ses.secret_access_key",
        "routes.telnyx.api_key",
        "routes.sparkpost.api_key",
        "routes.sparkpost.callback_password",
        "routes.twilio.auth_token",
        "routes.fcm.service_account: cannot read /run/secrets/fcm-service-account.json",
        "routes.apns.signing_key: cannot read /run/secrets/AuthKey_ABC123DEFG.p8",
        "routes.slack.bot_token: environment variable SLACK_BOT_TOKEN is not set",
        "sinks.upstream.secret: environment variable HERALD_EVENTS_SECRET is not set",
        "unsubscribe.secrets[0]: environment variable HERALD_UNSUBSCRIBE_SECRET is not set",
    ] {
        assert!(problems.contains(key), "{key:?} missing from:\n{problems}");
    }
    assert!(problems.contains("config: 20 problems"), "{problems}");
    assert!(problems.contains("(in ") && problems.contains("herald.example.toml)"));

    // A value of the wrong type from the environment names its key and its variable.
    let typed = check_config(
        &root.join("herald.example.toml"),
        &[("HERALD_ROUTES__MAIL__PORT", "\"2525\"")],
    );
    assert!(
        stderr(&typed).contains(
            "routes.mail.port: invalid type: a string, expected u16 \
             (set by HERALD_ROUTES__MAIL__PORT)"
        ),
        "{}",
        stderr(&typed)
    );

    let token = "0123456789abcdef0123456789abcdef";
    let runnable = check_config(
        &root.join("examples/sandbox.toml"),
        &[("HERALD_EXAMPLE_TOKEN", token)],
    );
    assert_eq!(runnable.status.code(), Some(0), "{}", stderr(&runnable));
    assert_eq!(stdout(&runnable).trim(), "config is valid");

    // A secret in the wrong format is named with its rule, not found on the first request.
    let dir = support::TempDir::new("herald-cli");
    let config = dir.path().join("herald.toml");
    std::fs::write(
        &config,
        "[[tokens]]\nname = \"a\"\ntenant = \"t\"\nscopes = [\"send\"]\nsecret = { env = \"T\" }\n\
         [routes.hooks]\nprovider = \"webhook\"\nsecrets = [{ env = \"HOOK\" }]\n",
    )
    .unwrap();
    let wrong = check_config(&config, &[("T", "short"), ("HOOK", "not-a-whsec")]);
    let problems = stderr(&wrong);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(problems.contains("config: 2 problems"), "{problems}");
    assert!(
        problems.contains("its secret has 5 characters"),
        "{problems}"
    );
    assert!(
        problems.contains("routes.hooks.secrets[0]: does not start with `whsec_`"),
        "{problems}"
    );
    assert!(
        !problems.contains("not-a-whsec"),
        "a secret is never echoed: {problems}"
    );

    // What a route's settings make of each send is said, not left to the vendor's docs; a lag
    // that would let a look-up call a queued SMS absent is refused, not turned into a short life.
    let twilio = |lag_ms: u64| {
        format!(
            "[routes.sms]\nprovider = \"twilio\"\naccount_sid = \"AC1\"\nauth_token = \"t\"\n\
             from = \"+15005550006\"\nvisibility_lag_ms = {lag_ms}\nvalidity_period_seconds = 120\n"
        )
    };
    std::fs::write(&config, twilio(150_000)).unwrap();
    let said = check_config(&config, &[]);
    assert_eq!(said.status.code(), Some(0), "{}", stderr(&said));
    assert!(
        stdout(&said).contains(
            "routes.sms: each SMS carries ValidityPeriod = its time left before expiry, at most \
             120 s (validity_period_seconds)"
        ),
        "{}",
        stdout(&said)
    );
    std::fs::write(&config, twilio(5000)).unwrap();
    let short = check_config(&config, &[]);
    assert_eq!(short.status.code(), Some(1));
    assert!(
        stderr(&short).contains("routes.sms.visibility_lag_ms: the visibility lag (5000 ms) is shorter than the validity period (120 s)")
            && stderr(&short).contains("at least 150000"),
        "{}",
        stderr(&short)
    );
    // A test double on loopback may take any lag, and check-config says that it was let off.
    std::fs::write(
        &config,
        format!("{}base_url = \"http://127.0.0.1:9\"\n", twilio(5000)),
    )
    .unwrap();
    let double = check_config(&config, &[]);
    assert_eq!(double.status.code(), Some(0), "{}", stderr(&double));
    assert!(
        stdout(&double).contains("routes.sms: base_url is on loopback")
            && stdout(&double).contains("at least 150000"),
        "{}",
        stdout(&double)
    );

    // A translation that needs data the default does not is refused before it is needed.
    std::fs::write(
        &config,
        "[templates.code]\nsubject = \"Your code\"\ntext = \"{{ code }}\"\n\
         [templates.code.locales.fr]\nsubject = \"Votre code\"\ntext = \"{{ code }} ({{ name }})\"\n",
    )
    .unwrap();
    let translated = check_config(&config, &[]);
    assert_eq!(translated.status.code(), Some(1));
    assert!(
        stderr(&translated).contains(
            "templates: template `code` locale `fr`: uses `name`, which the default does not"
        ),
        "{}",
        stderr(&translated)
    );

    // `--connect` reaches the database and each vendor, and says which cannot be reached.
    let mut missing_db = url::Url::parse(&support::postgres_admin_url()).unwrap();
    missing_db.set_path(&format!("herald_missing_{}", uuid::Uuid::new_v4().simple()));
    let closed_port = support::binary::free_port();
    std::fs::write(
        &config,
        format!(
            "[database]\nurl = \"{missing_db}\"\n[routes.box]\nprovider = \"sandbox\"\nbase_url = \"http://127.0.0.1:{closed_port}\"\n"
        ),
    )
    .unwrap();
    let offline = check_config(&config, &[]);
    assert_eq!(
        stdout(&offline).trim(),
        "config is valid",
        "{}",
        stderr(&offline)
    );
    let connected = check_config_with(&["--connect"], &config, &[]);
    let problems = stderr(&connected);
    assert_eq!(connected.status.code(), Some(1), "{problems}");
    assert!(problems.contains("config: 2 problems"), "{problems}");
    assert!(
        problems.contains("routes.box: cannot ask the sandbox its profile")
            && problems.contains("Connection refused"),
        "{problems}"
    );
    let db_name = missing_db.path().trim_start_matches('/');
    if !support::must_run()
        && problems.contains("database.url: cannot open database")
        && !problems.contains("does not exist")
    {
        eprintln!(
            "\n*** POSTGRESQL PART SKIPPED: no server at {}\n",
            support::postgres_admin_url()
        );
    } else {
        assert!(
            problems.contains(&format!(
                "database \"{db_name}\" does not exist (create it first, e.g. `createdb {db_name}`"
            )),
            "{problems}"
        );
        assert_eq!(problems.matches("does not exist").count(), 1, "{problems}");
    }
}

/// A route with a bad key is named once, with every key a route may have; what refers to it is
/// not "unknown" too; a bad `[channels]` entry does not hide the secrets' problems; and
/// `--connect` dials webhook sinks.
#[test]
fn check_config_names_a_broken_route_once_and_lists_everything_in_one_run() {
    let dir = support::TempDir::new("herald-cli");
    let config = dir.path().join("herald.toml");
    let closed_port = support::binary::free_port();
    std::fs::write(
        &config,
        format!(
            "[database]\nurl = \"sqlite://{}/h.db\"\n\
             [[tokens]]\nname = \"a\"\ntenant = \"t\"\nscopes = [\"send\"]\nroutes = [\"mail\"]\n\
             secret = {{ env = \"HERALD_TEST_MISSING_TOKEN\" }}\n\
             [routes.mail]\nprovider = \"sandbox\"\nrate_limit_per_secnd = 2\n\
             [routes.backup]\nprovider = \"sandbox\"\nfallback = \"mail\"\n\
             [channels]\nemail = \"mail\"\nsms = \"nowhere\"\n\
             [sinks.hook]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:{closed_port}/events\"\n\
             allow_private_networks = true\nsecret = {{ env = \"HOOK_SECRET\" }}\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let secret = (
        "HOOK_SECRET",
        "whsec_YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE=",
    );
    let output = check_config(&config, &[secret]);
    let problems = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{problems}");
    assert!(
        problems.contains(
            "routes.mail.rate_limit_per_secnd: unknown field `rate_limit_per_secnd`, \
             did you mean `rate_limit_per_second`?"
        ),
        "{problems}"
    );
    assert!(!problems.contains("unknown route `mail`"), "{problems}");
    assert!(
        problems.contains("channels.sms: names unknown route `nowhere`"),
        "{problems}"
    );
    assert!(
        problems.contains(
            "tokens[0].secret: environment variable HERALD_TEST_MISSING_TOKEN is not set"
        ),
        "the secrets in the same run: {problems}"
    );
    assert!(problems.contains("config: 3 problems"), "{problems}");

    let connected = check_config_with(&["--connect"], &config, &[secret]);
    let problems = stderr(&connected);
    assert!(
        problems.contains(&format!(
            "sinks.hook.url: cannot reach http://127.0.0.1:{closed_port}/events"
        )),
        "{problems}"
    );
    assert!(problems.contains("config: 4 problems"), "{problems}");
}

/// The benchmark runs end to end (tiny here; `herald bench` alone runs the real size) and its
/// summary holds every figure, each one measured.
#[test]
fn bench_runs_every_phase_and_reports_each_figure() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["bench", "--notifications", "60", "--concurrency", "4"])
        .args(["--batch-size", "20", "--latency-seconds", "1"])
        .env_remove("HERALD_CONFIG")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for figure in [
        "/accepted_per_second/single",
        "/accepted_per_second/batch",
        "/delivered_per_second",
        "/latency_accept_to_delivered_ms/p50",
        "/latency_accept_to_delivered_ms/p99",
        "/rss_mib/peak",
        "/rss_mib/vendor_peak",
        "/database_bytes_per_1000_notifications",
    ] {
        let value = summary.pointer(figure).and_then(serde_json::Value::as_f64);
        assert!(value.is_some_and(|v| v > 0.0), "{figure} in {summary:#}");
    }
    // Read from `/proc`, in 10 ms ticks: a short drain may round to none, so the figure may be
    // 0, but never negative, and never a second of CPU for one delivery (a figure in the
    // wrong unit, or divided by the wrong count, would be).
    let cpu = summary["cpu_us_per_delivered"].as_f64();
    assert!(
        cpu.is_some_and(|us| (0.0..1_000_000.0).contains(&us)),
        "{summary:#}"
    );
    assert_eq!(summary["database"], "sqlite");
    assert!(
        stderr(&output).contains("drain: 120 in"),
        "{}",
        stderr(&output)
    );
    let latency = summary["latency_accept_to_delivered_ms"]["notifications"].as_u64();
    assert_eq!(
        summary["delivered_by_process"],
        serde_json::json!([120 + latency.unwrap()])
    );

    let several = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["bench", "--processes", "2"])
        .env_remove("HERALD_CONFIG")
        .output()
        .unwrap();
    assert!(!several.status.success());
    assert!(
        stderr(&several).contains("--processes above 1 needs a PostgreSQL --database-url"),
        "{}",
        stderr(&several)
    );
}

/// On PostgreSQL, `--processes 2` runs two dispatching `herald serve` on the one database, and
/// the summary accounts for every delivery, process by process.
#[tokio::test]
async fn bench_runs_several_processes_on_postgresql() {
    let Some(db) = support::TestDb::new(Backend::Postgres).await else {
        return;
    };
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["bench", "--notifications", "60", "--concurrency", "4"])
        .args([
            "--batch-size",
            "20",
            "--latency-seconds",
            "1",
            "--processes",
            "2",
        ])
        .args(["--database-url", &db.url])
        .env_remove("HERALD_CONFIG")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (&summary["database"], &summary["processes"]),
        (&serde_json::json!("postgres"), &serde_json::json!(2))
    );
    let by_process: Vec<u64> = summary["delivered_by_process"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    let latency = summary["latency_accept_to_delivered_ms"]["notifications"].as_u64();
    assert_eq!(by_process.len(), 2, "{summary:#}");
    assert_eq!(
        by_process.iter().sum::<u64>(),
        120 + latency.unwrap(),
        "{summary:#}"
    );
}
