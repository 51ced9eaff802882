//! The SQLite dialect: the embedded default for one herald process. WAL lets readers run beside
//! the one writer; all writes go through a pool of exactly one connection, so they queue in
//! the pool (in order) instead of spinning in SQLite's busy handler. `synchronous = FULL`: an
//! acknowledged notification survives a power cut, not only a crash.
//!
//! SQLite has no arrays: a list is bound as a JSON array and read with `json_each`. Ids are
//! 16-byte blobs, so a list of ids goes as their text and comes back through `unhex`.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::pool::PoolConnection;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::types::Json;
use sqlx::{Connection, SqlitePool, Transaction};
use tokio_util::sync::CancellationToken;

use super::rows::{attempt_columns, claimed_columns, resolution_columns};
use super::rows::{
    cancel_statements, due_tenants, list_statement, relay_statements, retention_statements,
};
use super::seam::{
    CancelStatements, Dialect, RelayStatements, RetentionStatements, STATEMENT_CACHE,
};
use super::{StoreError, StoreResult};

const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "initial",
        include_str!("../../migrations/sqlite/0001_initial.sql"),
    ),
    (
        2,
        "provider_requests",
        include_str!("../../migrations/sqlite/0002_provider_requests.sql"),
    ),
    (
        3,
        "json_patch",
        include_str!("../../migrations/sqlite/0003_json_patch.sql"),
    ),
    (
        4,
        "relay",
        include_str!("../../migrations/sqlite/0004_relay.sql"),
    ),
    (
        5,
        "review",
        include_str!("../../migrations/sqlite/0005_review.sql"),
    ),
    (
        6,
        "readiness",
        include_str!("../../migrations/sqlite/0006_readiness.sql"),
    ),
    (
        7,
        "key_owner_index",
        include_str!("../../migrations/sqlite/0007_key_owner_index.sql"),
    ),
    (
        8,
        "retention",
        include_str!("../../migrations/sqlite/0008_retention.sql"),
    ),
    (
        9,
        "failover",
        include_str!("../../migrations/sqlite/0009_failover.sql"),
    ),
    (
        10,
        "callbacks",
        include_str!("../../migrations/sqlite/0010_callbacks.sql"),
    ),
    (
        11,
        "deadlines",
        include_str!("../../migrations/sqlite/0011_deadlines.sql"),
    ),
    (
        12,
        "review previews",
        include_str!("../../migrations/sqlite/0012_review_previews.sql"),
    ),
    (
        13,
        "reported messages",
        include_str!("../../migrations/sqlite/0013_reported_messages.sql"),
    ),
    (
        14,
        "cancellation keys",
        include_str!("../../migrations/sqlite/0014_cancellation_keys.sql"),
    ),
    (
        15,
        "expiry",
        include_str!("../../migrations/sqlite/0015_expiry.sql"),
    ),
    (
        16,
        "categories",
        include_str!("../../migrations/sqlite/0016_categories.sql"),
    ),
    (
        17,
        "route pauses",
        include_str!("../../migrations/sqlite/0017_route_pauses.sql"),
    ),
    (
        18,
        "attachments",
        include_str!("../../migrations/sqlite/0018_attachments.sql"),
    ),
    (
        19,
        "pause to fallback",
        include_str!("../../migrations/sqlite/0019_pause_to_fallback.sql"),
    ),
    (
        20,
        "traceparent",
        include_str!("../../migrations/sqlite/0020_traceparent.sql"),
    ),
    (
        21,
        "chat",
        include_str!("../../migrations/sqlite/0021_chat.sql"),
    ),
    (
        22,
        "certainty",
        include_str!("../../migrations/sqlite/0022_certainty.sql"),
    ),
    (
        23,
        "attachments by tenant",
        include_str!("../../migrations/sqlite/0023_attachments_by_tenant.sql"),
    ),
];

const READERS: u32 = 4;

pub struct Sqlite {
    writer: SqlitePool,
    reader: SqlitePool,
    /// Held until the store is closed (or the process ends): a second herald on the same file
    /// refuses to start, because two dispatchers without `SKIP LOCKED` would claim the same
    /// rows; and one that reached the file by another name (a hard link) would not see this
    /// one's write-ahead log, whose name follows the name opened.
    lock: std::sync::Mutex<Option<std::fs::File>>,
}

impl Sqlite {
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5))
            .statement_cache_capacity(STATEMENT_CACHE);
        Self::private(options.get_filename())?;
        let lock = Self::lock(options.get_filename())?;
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(10))
            // A COMMIT that fails (a full disk) ends SQLite's transaction, but sqlx still counts
            // it open and the rollback it queues fails: that connection would refuse every
            // later BEGIN, and it is the only writer. The ping runs after the queued rollback;
            // a connection still counting a transaction then is closed, and the next write
            // opens a fresh one.
            .after_release(|conn, _| {
                Box::pin(async move {
                    conn.ping().await?;
                    Ok(!conn.is_in_transaction())
                })
            })
            .connect_with(options.clone())
            .await?;
        super::seam::migrator(MIGRATIONS).run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(READERS)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.read_only(true))
            .await?;
        Ok(Sqlite {
            writer,
            reader,
            lock: std::sync::Mutex::new(lock),
        })
    }

    /// Whether the database can be opened, touching nothing: its directory exists.
    pub fn reach(url: &str) -> anyhow::Result<()> {
        let options = SqliteConnectOptions::from_str(url)?;
        if options.get_filename().as_os_str() != ":memory:" {
            canonical(options.get_filename())?;
        }
        Ok(())
    }

    /// The database's file and its write-ahead log, in bytes; 0 before they exist.
    pub fn size_bytes(url: &str) -> anyhow::Result<u64> {
        let options = SqliteConnectOptions::from_str(url)?;
        let file = options.get_filename();
        let mut wal = file.as_os_str().to_owned();
        wal.push("-wal");
        Ok([file.to_path_buf(), PathBuf::from(wal)]
            .iter()
            .filter_map(|path| std::fs::metadata(path).ok())
            .map(|meta| meta.len())
            .sum())
    }

    /// The lock that keeps a second process off this database: an exclusive `flock` on the
    /// database file itself, so that whatever names the file (a symlink, a hard link, another
    /// spelling) finds the same lock. SQLite's own locks are `fcntl` record locks, which
    /// `flock` neither takes nor waits for.
    fn lock(database: &Path) -> anyhow::Result<Option<std::fs::File>> {
        if database.as_os_str() == ":memory:" {
            return Ok(None);
        }
        let file = std::fs::File::open(database)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", database.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
                "another herald process is using {}: SQLite serves one process; use PostgreSQL to run several",
                canonical(database)?.display()
            ),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(anyhow::anyhow!("cannot lock {}: {e}", database.display()))
            }
        }
    }

    /// The database holds message content: a new file is readable by its owner only (SQLite
    /// gives its WAL and shared-memory files the same mode). An existing one keeps its mode,
    /// with a warning if others can read it.
    fn private(database: &Path) -> anyhow::Result<()> {
        if database.as_os_str() == ":memory:" {
            return Ok(());
        }
        match std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(database)
        {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let mode = std::fs::metadata(database)?.permissions().mode();
                if mode & 0o077 != 0 {
                    tracing::warn!(
                        path = %database.display(),
                        mode = format!("{:o}", mode & 0o777),
                        "the database file is readable by others; it holds message content (chmod 600)"
                    );
                }
                Ok(())
            }
            Err(e) => Err(anyhow::anyhow!("cannot create {}: {e}", database.display())),
        }
    }
}

/// `database` with every symlink resolved; for a file not created yet, its directory's.
fn canonical(database: &Path) -> anyhow::Result<PathBuf> {
    if let Ok(path) = std::fs::canonicalize(database) {
        return Ok(path);
    }
    let dir = match database.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = database
        .file_name()
        .ok_or_else(|| anyhow::anyhow!("{} names no file", database.display()))?;
    let dir = std::fs::canonicalize(dir)
        .map_err(|e| anyhow::anyhow!("cannot open the directory of {}: {e}", database.display()))?;
    Ok(dir.join(name))
}

/// `(SELECT … FROM json_each($n))` for a bound list of ids.
macro_rules! ids_in {
    ($n:literal) => {
        concat!(
            "(SELECT unhex(replace(value, '-', '')) FROM json_each($",
            $n,
            "))"
        )
    };
}

/// `column IN` a bound list of ids.
macro_rules! in_ids {
    ($column:literal, $n:literal) => {
        concat!($column, " IN ", ids_in!($n))
    };
}

/// Whether the JSON list in `column` holds the text bound as `$n`.
macro_rules! has {
    ($column:literal, $n:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM json_each(",
            $column,
            ") WHERE value = $",
            $n,
            ")"
        )
    };
}

/// The JSON list in `column` with the text bound as `$n` added.
macro_rules! append {
    ($column:literal, $n:literal) => {
        concat!("json_insert(", $column, ", '$[#]', $", $n, ")")
    };
}

/// How many texts of the JSON list in `column` are in the list bound as `$n`.
macro_rules! count_in {
    ($column:literal, $n:literal) => {
        concat!(
            "(SELECT count(*) FROM json_each(",
            $column,
            ") WHERE value IN (SELECT value FROM json_each($",
            $n,
            ")))"
        )
    };
}

#[async_trait]
impl Dialect for Sqlite {
    type Db = sqlx::Sqlite;

    const LATEST_MIGRATION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;
    /// One writer connection: a second transaction would only wait for it.
    const WRITERS: usize = 1;

    // The write lock, taken by `BEGIN IMMEDIATE`, makes this transaction the only claimer.
    // Fair across tenants: each tenant's due work takes turns (its oldest first). The limit
    // (the free sends, different from one claim to the next) is cast: SQLite compiles a bare
    // `LIMIT $n` with the bound number in it and prepares the statement again whenever the
    // number changes, which cost the dispatching process 4 % of its CPU time.
    const CLAIM_DUE: &'static str = concat!(
        due_tenants!(),
        "SELECT id, state, ",
        claimed_columns!(),
        " FROM notifications
         WHERE id IN (
             SELECT due.id FROM (
                 SELECT id, route, turn, due_at,
                        row_number() OVER (PARTITION BY route ORDER BY turn, due_at) AS place
                 FROM (
                     SELECT n.id, n.route, n.due_at,
                            row_number() OVER (PARTITION BY n.tenant ORDER BY n.due_at) AS turn
                     FROM tenants t JOIN notifications n ON n.id IN (
                         SELECT id FROM notifications
                         WHERE tenant = t.tenant AND state IN ('queued', 'sending')
                           AND due_at <= $1 AND route IN (SELECT value FROM json_each($3))
                         ORDER BY due_at LIMIT CAST($2 AS INTEGER))
                 ) turns
             ) due
             JOIN (SELECT value ->> 'route' AS route, value ->> 'take' AS take FROM json_each($4)) r
                 ON r.route = due.route
             WHERE due.place <= r.take
             ORDER BY due.turn, due.due_at LIMIT CAST($2 AS INTEGER))"
    );
    const CLAIM_EXPIRED: &'static str = concat!(
        "SELECT id, state, ",
        claimed_columns!(),
        " FROM notifications
         WHERE state = 'queued' AND expires_at <= $1
           AND route IN (SELECT value FROM json_each($3))
         ORDER BY expires_at LIMIT CAST($2 AS INTEGER)"
    );
    const CLAIM_TAKE: &'static str = concat!(
        "UPDATE notifications
         SET state = 'sending', generation = generation + 1, due_at = $2, updated_at = $1,
             attempt_count = attempt_count + (id IN ",
        ids_in!(4),
        "),
             provider_request = coalesce(provider_request,
                 (SELECT value -> 'request' FROM json_each($5)
                  WHERE unhex(replace(value ->> 'id', '-', '')) = notifications.id))
         WHERE id IN ",
        ids_in!(3),
        " RETURNING ",
        claimed_columns!()
    );
    const CLAIM_EXPIRE: &'static str = concat!(
        "UPDATE attempts SET result = 'ambiguous', finished_at = $2,
             evidence = json_patch(evidence, $3)
         WHERE result = 'in_flight' AND notification_id IN ",
        ids_in!(1)
    );
    const CLAIM_START_ATTEMPTS: &'static str = concat!(
        "INSERT INTO attempts
             (notification_id, n, generation, route, provider_idempotency_key, started_at,
              send_deadline, result, evidence)
         SELECT unhex(replace(value ->> 'id', '-', '')), value ->> 'n', value ->> 'generation',
                value ->> 'route', value ->> 'key', $2, value ->> 'send_deadline', 'in_flight',
                '{}'
         FROM json_each($1)
         RETURNING notification_id, ",
        attempt_columns!()
    );
    const CLAIM_SUPPRESSED: &'static str = "SELECT DISTINCT r.value ->> 'id'
         FROM json_each($1) r
         JOIN suppressions s ON s.tenant = r.value ->> 'tenant'
             AND s.channel = r.value ->> 'channel' AND s.recipient = r.value ->> 'recipient'
             AND (s.category = '' OR s.category = r.value ->> 'category')";
    const ATTEMPTS_OF_MANY: &'static str = concat!(
        "SELECT notification_id, ",
        attempt_columns!(),
        " FROM attempts WHERE notification_id IN ",
        ids_in!(1),
        " ORDER BY notification_id, n"
    );
    const RESOLUTIONS_OF_MANY: &'static str = concat!(
        "SELECT notification_id, ",
        resolution_columns!(),
        " FROM resolutions WHERE notification_id IN ",
        ids_in!(1),
        " ORDER BY notification_id, seq"
    );
    const RECEIPTS_OF_MANY: &'static str = concat!(
        "SELECT notification_id, status, at, source, vendor_status FROM receipts WHERE notification_id IN ",
        ids_in!(1),
        " ORDER BY notification_id, seq"
    );

    // Each wanted pair is looked up among the row's own pairs, not through a JSON path: a key
    // may hold any character, `.` and `"` included, which a path would read as syntax.
    const LIST: &'static str = list_statement!(
        "NOT EXISTS (SELECT 1 FROM json_each($8) wanted WHERE NOT EXISTS (
             SELECT 1 FROM json_each(metadata) has
             WHERE has.key = wanted.key AND has.type = 'text' AND has.value = wanted.value))"
    );

    // The one writer makes each claim the only one: no row locks.
    const RELAY: RelayStatements = relay_statements!(in_ids, has, append, count_in, "");
    const RETENTION: RetentionStatements = retention_statements!(in_ids, "");
    const CANCEL: CancelStatements = cancel_statements!("");

    /// `BEGIN IMMEDIATE` takes the write lock up front: a deferred transaction that reads first
    /// and writes later could find the lock taken by another process and fail mid-way.
    async fn begin(&self) -> StoreResult<Transaction<'static, sqlx::Sqlite>> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }

    async fn read(&self) -> StoreResult<PoolConnection<sqlx::Sqlite>> {
        Ok(self.reader.acquire().await?)
    }

    /// WAL: a deferred transaction reads the snapshot its first statement found.
    async fn snapshot(&self) -> StoreResult<Transaction<'static, sqlx::Sqlite>> {
        Ok(self.reader.begin().await?)
    }

    /// One process writes an SQLite database, and it wakes its own dispatcher.
    async fn wake_others(_tx: &mut SqliteConnection) -> StoreResult<()> {
        Ok(())
    }

    async fn listen_for_work(&self, _wake: Arc<tokio::sync::Notify>, _shutdown: CancellationToken) {
    }

    /// The lock goes only once every connection has closed and the last has checkpointed the
    /// log into the file: a process that opens the file next, by whatever name, finds it whole.
    async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
        self.lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }

    /// The one writer serialises every transaction: nothing collides.
    fn retryable(_err: &StoreError) -> bool {
        false
    }
}

// Lists go as JSON arrays, for `json_each`.
super::seam::conn!(SqliteConnection, SqliteArguments, |list| Json(list));
