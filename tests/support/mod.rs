//! Test harness: a real herald over real HTTP, on a fresh SQLite file or a fresh PostgreSQL
//! database that is dropped afterwards, so that two test runs never see each other's rows.
//!
//! PostgreSQL tests need `HERALD_TEST_POSTGRES_URL` (default: the local server). Without a
//! reachable server they fail, or, where `HERALD_ALLOW_SKIP=1` asks for it, say loudly that
//! they were skipped.
#![allow(dead_code)] // each test binary uses a different part of the harness

pub mod binary;
pub mod nats;
pub mod pg_cluster;
pub mod witness;

use std::path::PathBuf;
use std::sync::Once;
use std::time::Duration;

use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use herald::app::App;
use herald::config::Config;
use herald::dispatch::Dispatcher;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Runs each named `async fn(Backend)` as two tests, `sqlite::NAME` and `postgres::NAME`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
              async fn $name() { super::$name($crate::support::Backend::Sqlite).await })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
              async fn $name() { super::$name($crate::support::Backend::Postgres).await })*
        }
    };
}

/// The tokens every test app accepts.
pub const ACME: &str = "test-acme-send-read-0123456789abcdef";
pub const ACME_READER: &str = "test-acme-read-only-0123456789abcdef";
pub const ACME_REVIEWER: &str = "test-acme-review-0123456789abcdef";
pub const GLOBEX: &str = "test-globex-send-read-0123456789abcdef";
pub const ACME_ADMIN: &str = "test-acme-admin-0123456789abcdef";

const TOKENS: &str = r#"
[[tokens]]
name = "acme-app"
tenant = "acme"
scopes = ["send", "read"]
secret = "test-acme-send-read-0123456789abcdef"
routes = ["*"]

[[tokens]]
name = "acme-dashboard"
tenant = "acme"
scopes = ["read"]
secret = "test-acme-read-only-0123456789abcdef"
routes = ["*"]

[[tokens]]
name = "acme-oncall"
tenant = "acme"
scopes = ["review", "read"]
secret = "test-acme-review-0123456789abcdef"
routes = ["*"]

[[tokens]]
name = "acme-admin"
tenant = "acme"
scopes = ["admin"]
secret = "test-acme-admin-0123456789abcdef"
routes = ["*"]

[[tokens]]
name = "globex-app"
tenant = "globex"
scopes = ["send", "read"]
secret = "test-globex-send-read-0123456789abcdef"
routes = ["*"]
"#;

pub fn install_crypto() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

pub fn postgres_admin_url() -> String {
    std::env::var("HERALD_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// Whether a test that cannot run here (a service or tool it needs is missing) must fail rather
/// than skip: always, unless `HERALD_ALLOW_SKIP=1` says skipping is wanted — and never under
/// `CI=true`. A skip that passes silently would hide half the suite on a laptop.
pub fn must_run() -> bool {
    let set = |name: &str, values: &[&str]| {
        std::env::var(name).is_ok_and(|v| values.contains(&v.as_str()))
    };
    set("CI", &["true", "1"]) || !set("HERALD_ALLOW_SKIP", &["1"])
}

/// A database of the test's own, removed when dropped.
pub struct TestDb {
    pub backend: Backend,
    pub url: String,
    cleanup: Cleanup,
}

enum Cleanup {
    Dir(PathBuf),
    PgDatabase { admin_url: String, name: String },
}

impl TestDb {
    /// `None` when PostgreSQL is unreachable outside CI: the caller returns (a loud skip).
    pub async fn new(backend: Backend) -> Option<TestDb> {
        let unique = uuid::Uuid::new_v4().simple().to_string();
        match backend {
            Backend::Sqlite => {
                let dir = std::env::temp_dir().join(format!("herald-test-{unique}"));
                std::fs::create_dir_all(&dir).expect("create a temp dir");
                Some(TestDb {
                    backend,
                    url: format!("sqlite://{}", dir.join("herald.db").display()),
                    cleanup: Cleanup::Dir(dir),
                })
            }
            Backend::Postgres => {
                let admin_url = postgres_admin_url();
                let admin = match sqlx::PgPool::connect(&admin_url).await {
                    Ok(pool) => pool,
                    Err(err) if !must_run() => {
                        eprintln!(
                            "\n*** POSTGRESQL TEST SKIPPED: cannot reach {admin_url}: {err}\n*** set HERALD_TEST_POSTGRES_URL or start PostgreSQL; without HERALD_ALLOW_SKIP=1 this fails\n"
                        );
                        return None;
                    }
                    Err(err) => {
                        panic!(
                            "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips) and PostgreSQL is unreachable at {admin_url}: {err}"
                        )
                    }
                };
                let name = format!("herald_test_{unique}");
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .execute(&admin)
                    .await
                    .expect("create the test database");
                admin.close().await;
                let mut url = url::Url::parse(&admin_url).expect("a PostgreSQL URL");
                url.set_path(&name);
                Some(TestDb {
                    backend,
                    url: url.to_string(),
                    cleanup: Cleanup::PgDatabase { admin_url, name },
                })
            }
        }
    }

    /// Rows in `table`, read straight from the database as ground truth.
    pub async fn count(&self, table: &str) -> i64 {
        self.scalar(&format!("SELECT count(*) FROM {table}")).await
    }

    /// The outbox event types of one notification, oldest first, straight from the database.
    /// The notification's state events, oldest first: its events less the receipt moves.
    pub async fn state_event_types(&self, notification: uuid::Uuid) -> Vec<String> {
        let mut types = self.event_types(notification).await;
        types.retain(|t| t != "dev.herald.notification.receipt");
        types
    }

    pub async fn event_types(&self, notification: uuid::Uuid) -> Vec<String> {
        const SQL: &str = "SELECT type FROM outbox WHERE notification_id = $1 ORDER BY seq";
        match self.backend {
            Backend::Sqlite => {
                let pool = sqlx::SqlitePool::connect(&self.url)
                    .await
                    .expect("open sqlite");
                let types = sqlx::query_scalar(SQL)
                    .bind(notification)
                    .fetch_all(&pool)
                    .await
                    .expect("events");
                pool.close().await;
                types
            }
            Backend::Postgres => {
                let pool = sqlx::PgPool::connect(&self.url)
                    .await
                    .expect("open postgres");
                let types = sqlx::query_scalar(SQL)
                    .bind(notification)
                    .fetch_all(&pool)
                    .await
                    .expect("events");
                pool.close().await;
                types
            }
        }
    }

    pub async fn scalar(&self, sql: &str) -> i64 {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self.backend {
            Backend::Sqlite => {
                let pool = sqlx::SqlitePool::connect(&self.url)
                    .await
                    .expect("open sqlite");
                let n = sqlx::query_scalar(sql)
                    .fetch_one(&pool)
                    .await
                    .expect("count");
                pool.close().await;
                n
            }
            Backend::Postgres => {
                let pool = sqlx::PgPool::connect(&self.url)
                    .await
                    .expect("open postgres");
                let n = sqlx::query_scalar(sql)
                    .fetch_one(&pool)
                    .await
                    .expect("count");
                pool.close().await;
                n
            }
        }
    }

    /// Runs one statement straight on the database, e.g. to arrange a fault herald must meet.
    pub async fn execute(&self, sql: &str) {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self.backend {
            Backend::Sqlite => {
                let pool = sqlx::SqlitePool::connect(&self.url)
                    .await
                    .expect("open sqlite");
                sqlx::query(sql).execute(&pool).await.expect("execute");
                pool.close().await;
            }
            Backend::Postgres => {
                let pool = sqlx::PgPool::connect(&self.url)
                    .await
                    .expect("open postgres");
                sqlx::query(sql).execute(&pool).await.expect("execute");
                pool.close().await;
            }
        }
    }

    /// The first column of every row `sql` returns, as text, read straight from the database.
    pub async fn texts(&self, sql: &str) -> Vec<String> {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self.backend {
            Backend::Sqlite => {
                let pool = sqlx::SqlitePool::connect(&self.url)
                    .await
                    .expect("open sqlite");
                let rows = sqlx::query_scalar(sql)
                    .fetch_all(&pool)
                    .await
                    .expect("read");
                pool.close().await;
                rows
            }
            Backend::Postgres => {
                let pool = sqlx::PgPool::connect(&self.url)
                    .await
                    .expect("open postgres");
                let rows = sqlx::query_scalar(sql)
                    .fetch_all(&pool)
                    .await
                    .expect("read");
                pool.close().await;
                rows
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::Dir(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Cleanup::PgDatabase { admin_url, name } => {
                let (admin_url, name) = (admin_url.clone(), name.clone());
                // Drop may run inside a runtime, so the async clean-up gets a thread of its own.
                let dropped = std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    rt.block_on(async {
                        let admin = sqlx::PgPool::connect(&admin_url).await?;
                        sqlx::query(sqlx::AssertSqlSafe(format!(
                            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                        )))
                        .execute(&admin)
                        .await?;
                        admin.close().await;
                        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
                    })
                })
                .join();
                if !matches!(dropped, Ok(Ok(()))) {
                    eprintln!("warning: could not drop a test database");
                }
            }
        }
    }
}

/// A herald built in-process with [`App::build`], served on an ephemeral port.
pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    pub db: TestDb,
    pub store: std::sync::Arc<dyn herald::store::Store>,
    server: Server,
}

/// The served app's task; cancelled when dropped, so a test that panics leaves nothing running.
struct Server {
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl Server {
    async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.await.expect("server task").expect("server ran");
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// An API-only herald: nothing is dispatched, so what the API stored stays as it was.
pub async fn spawn_app(backend: Backend) -> Option<TestApp> {
    spawn_app_with(backend, "[dispatch]\nenabled = false\n").await
}

/// `extra` is appended to the test config (routes, dispatch settings, templates…).
pub async fn spawn_app_with(backend: Backend, extra: &str) -> Option<TestApp> {
    let db = TestDb::new(backend).await?;
    let app = App::build(test_config(&db, extra))
        .await
        .expect("herald builds");
    Some(serve(app, db))
}

/// Builds a herald on `db` with `extra` appended to the test config, without serving it: for
/// tests of what refuses to start.
pub async fn build_app(db: &TestDb, extra: &str) -> anyhow::Result<App> {
    App::build(try_test_config(db, extra)?).await
}

/// A herald whose dispatcher the test steps with [`Dispatcher::drain`] instead of letting it
/// run: what happens between steps is then the test's to arrange.
pub async fn spawn_stepped(backend: Backend, extra: &str) -> Option<(TestApp, Dispatcher)> {
    let db = TestDb::new(backend).await?;
    let mut app = App::build(test_config(&db, extra))
        .await
        .expect("herald builds");
    let dispatcher = app
        .take_dispatcher()
        .expect("the test config enables dispatch");
    Some((serve(app, db), dispatcher))
}

fn serve(app: App, db: TestDb) -> TestApp {
    let base = format!("http://{}", app.local_addr());
    let store = app.store();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(app.run(shutdown.clone()));
    TestApp {
        base,
        http: http_client(),
        db,
        store,
        server: Server {
            shutdown,
            task: Some(task),
        },
    }
}

pub fn http_client() -> reqwest::Client {
    install_crypto();
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client")
}

/// The config text every test app starts from. `extra` may open with a `[server]` section of
/// its own: its keys join the test's listen address.
pub fn test_config_text(db_url: &str, listen: &str, extra: &str) -> String {
    let (server, rest) = match extra.trim_start().strip_prefix("[server]") {
        Some(after) => match after.find("\n[") {
            Some(end) => (&after[..end], &after[end..]),
            None => (after, ""),
        },
        None => ("", extra),
    };
    format!(
        "[server]\nlisten = \"{listen}\"\n{server}\n\n[database]\nurl = \"{db_url}\"\n{TOKENS}\n{rest}\n"
    )
}

fn test_config(db: &TestDb, extra: &str) -> Config {
    try_test_config(db, extra).expect("test config loads")
}

fn try_test_config(db: &TestDb, extra: &str) -> anyhow::Result<Config> {
    install_crypto();
    let path = std::env::temp_dir().join(format!("herald-test-{}.toml", uuid::Uuid::new_v4()));
    // The relay's default sink prints every event on stdout, where a failing test's output
    // would bury its panic under them: the outbox keeps every event for the tests to read.
    let quiet = if extra.contains("[sinks.") {
        ""
    } else {
        "\n[sinks.log]\nkind = \"log\"\npath = \"/dev/null\"\n"
    };
    let text = test_config_text(&db.url, "127.0.0.1:0", extra) + quiet;
    std::fs::write(&path, text).expect("write config");
    let config = Config::load(Some(&path), std::iter::empty()).map_err(anyhow::Error::from);
    let _ = std::fs::remove_file(path);
    config
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn enqueue(&self, token: &str, key: &str, body: &Value) -> Response {
        self.http
            .post(self.url("/v1/notifications"))
            .bearer_auth(token)
            .header("Idempotency-Key", key)
            .json(body)
            .send()
            .await
            .expect("POST /v1/notifications")
    }

    pub async fn get(&self, token: &str, path: &str) -> Response {
        self.http
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .expect("GET")
    }

    /// Enqueues `body` as acme, which must be accepted, and answers the new notification's id.
    pub async fn enqueue_id(&self, key: &str, body: &Value) -> String {
        let response = self.enqueue(ACME, key, body).await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        let created: Value = response.json().await.expect("a JSON body");
        created["id"].as_str().expect("an id").to_owned()
    }

    /// `GET /v1/notifications/{id}` as acme.
    pub async fn show(&self, id: &str) -> Value {
        self.get(ACME, &format!("/v1/notifications/{id}"))
            .await
            .json()
            .await
            .expect("a JSON body")
    }

    /// The JSON body of an unauthenticated GET (`/openapi.json`, `/readyz`), which must be one.
    pub async fn public_json(&self, path: &str) -> Value {
        self.http
            .get(self.url(path))
            .send()
            .await
            .expect("GET")
            .json()
            .await
            .expect("a JSON body")
    }

    pub async fn post_json(&self, token: &str, path: &str, body: &Value) -> Response {
        self.http
            .post(self.url(path))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .expect("POST")
    }

    /// Stops the server and waits for it.
    pub async fn stop(self) {
        self.server.stop().await;
    }

    /// Stops this herald and starts another, stepped, on the same database with `extra` as its
    /// config: a restart, e.g. after an operator changed a route. Drop the old dispatcher
    /// first: it holds the database (on SQLite, its one-process lock).
    pub async fn restart_stepped(self, extra: &str) -> (TestApp, Dispatcher) {
        let TestApp {
            db, store, server, ..
        } = self;
        server.stop().await;
        // A killed worker's tasks let go of the database a moment after they are aborted; the
        // new process starts once the old one is gone, as a real restart would.
        eventually(
            "the old herald to let go of its database",
            Duration::from_secs(10),
            || async { (std::sync::Arc::strong_count(&store) == 1).then_some(()) },
        )
        .await;
        drop(store);
        let mut app = App::build(test_config(&db, extra))
            .await
            .expect("herald builds again");
        let dispatcher = app
            .take_dispatcher()
            .expect("the test config enables dispatch");
        (serve(app, db), dispatcher)
    }
}

/// Steps a dispatcher until nothing is left to do within 15 s (see [`Dispatcher::drain`]).
pub async fn drain(dispatcher: &Dispatcher) {
    dispatcher
        .drain(Duration::from_secs(15))
        .await
        .expect("dispatch runs");
}

/// A stand-in vendor with the plain profile (no idempotency key, no look-up) that injects
/// `faults` (`herald sandbox --faults` syntax); it runs until the handle is dropped.
pub async fn plain_vendor(faults: &str) -> herald_sandbox::SandboxHandle {
    install_crypto();
    herald_sandbox::spawn(herald_sandbox::SandboxConfig {
        profile: herald_sandbox::Profile::Plain,
        faults: herald_sandbox::parse_faults(faults).expect("fault syntax"),
        ..herald_sandbox::SandboxConfig::default()
    })
    .await
    .expect("the sandbox vendor starts")
}

/// Each attempt's result, oldest first, from a notification as the API shows it.
pub fn results(n: &Value) -> Vec<String> {
    n["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["result"].as_str().unwrap().to_owned())
        .collect()
}

/// A notification body that passes validation.
pub fn email(to: &str) -> Value {
    json!({
        "channel": "email",
        "to": to,
        "subject": "Your export is ready",
        "text": "Download it at https://example.com/exports/42",
        "metadata": {"export": "export-intent-7"}
    })
}

/// Reads a problem+json answer, checking its content type.
pub async fn problem(response: Response, status: StatusCode) -> Value {
    assert_eq!(response.status(), status, "status");
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(content_type, "application/problem+json");
    let body: Value = response.json().await.expect("a JSON problem");
    assert_eq!(body["status"], status.as_u16());
    body
}

/// Polls `check` until it returns `Some`, or panics after `timeout` naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A directory of the test's own under the system temp dir, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("create a temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
