//! The SQLite dialect: the embedded default for one herald process. WAL lets readers run beside
//! the one writer; all writes go through a pool of exactly one connection, so they queue in
//! the pool (in order) instead of spinning in SQLite's busy handler. `synchronous = FULL`: an
//! acknowledged notification survives a power cut, not only a crash.
//!
//! SQLite has no arrays: a list is bound as a JSON array and read with `json_each`. Ids are
//! 16-byte blobs, so a list of ids goes as their text and comes back through `unhex`.

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
use sqlx::{SqlitePool, Transaction};
use tokio_util::sync::CancellationToken;

use super::sql::{
    Dialect, RelayStatements, attempt_columns, notification_columns, relay_statements,
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
];

const READERS: u32 = 4;

pub struct Sqlite {
    writer: SqlitePool,
    reader: SqlitePool,
    /// Held for the life of the process: a second herald on the same file refuses to start,
    /// because two dispatchers without `SKIP LOCKED` would claim the same rows.
    _lock: Option<std::fs::File>,
}

impl Sqlite {
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let lock = Self::lock(options.get_filename())?;
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.clone())
            .await?;
        super::migrator(MIGRATIONS).run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(READERS)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.read_only(true))
            .await?;
        Ok(Sqlite {
            writer,
            reader,
            _lock: lock,
        })
    }

    fn lock(database: &std::path::Path) -> anyhow::Result<Option<std::fs::File>> {
        if database.as_os_str() == ":memory:" {
            return Ok(None);
        }
        let mut path = database.as_os_str().to_owned();
        path.push(".lock");
        let path = std::path::PathBuf::from(path);
        let file = std::fs::File::create(&path)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
                "another herald process is using {}: SQLite serves one process; use PostgreSQL to run several",
                database.display()
            ),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(anyhow::anyhow!("cannot lock {}: {e}", path.display()))
            }
        }
    }
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

    // The write lock, taken by `BEGIN IMMEDIATE`, makes this transaction the only claimer.
    const CLAIM_DUE: &'static str = "SELECT id, state FROM notifications
         WHERE state IN ('queued', 'sending') AND due_at <= $1
           AND route IN (SELECT value FROM json_each($3))
         ORDER BY due_at LIMIT $2";
    const CLAIM_TAKE: &'static str = concat!(
        "UPDATE notifications
         SET state = 'sending', generation = generation + 1, due_at = $2, updated_at = $1,
             attempt_count = attempt_count + (id IN ",
        ids_in!(4),
        "
         ) WHERE id IN ",
        ids_in!(3),
        " RETURNING generation, attempt_count, provider_request, ",
        notification_columns!()
    );
    const CLAIM_EXPIRE: &'static str = concat!(
        "UPDATE attempts SET result = 'ambiguous', finished_at = $2,
             evidence = json_patch(evidence, $3)
         WHERE result = 'in_flight' AND notification_id IN ",
        ids_in!(1)
    );
    const ATTEMPTS_OF_MANY: &'static str = concat!(
        "SELECT notification_id, ",
        attempt_columns!(),
        " FROM attempts WHERE notification_id IN ",
        ids_in!(1),
        " ORDER BY notification_id, n"
    );

    // The one writer makes each claim the only one: no row locks.
    const RELAY: RelayStatements = relay_statements!(in_ids, has, append, count_in, "");

    /// `BEGIN IMMEDIATE` takes the write lock up front: a deferred transaction that reads first
    /// and writes later could find the lock taken by another process and fail mid-way.
    async fn begin(&self) -> StoreResult<Transaction<'static, sqlx::Sqlite>> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }

    async fn read(&self) -> StoreResult<PoolConnection<sqlx::Sqlite>> {
        Ok(self.reader.acquire().await?)
    }

    /// One process writes an SQLite database, and it wakes its own dispatcher.
    async fn wake_others(_tx: &mut SqliteConnection) -> StoreResult<()> {
        Ok(())
    }

    async fn listen_for_work(&self, _wake: Arc<tokio::sync::Notify>, _shutdown: CancellationToken) {
    }

    /// The one writer serialises every transaction: nothing collides.
    fn retryable(_err: &StoreError) -> bool {
        false
    }
}

// Lists go as JSON arrays, for `json_each`.
super::sql::conn!(SqliteConnection, SqliteArguments, |list| Json(list));
