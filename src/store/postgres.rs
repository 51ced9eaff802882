//! The PostgreSQL dialect: any number of herald processes share one database. Claims use
//! `FOR UPDATE SKIP LOCKED`, so processes never wait on each other's rows; a commit that makes
//! work due is announced with `NOTIFY`, which every process `LISTEN`s for.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgArguments, PgConnectOptions, PgConnection, PgListener, PgPoolOptions};
use sqlx::{PgPool, Transaction};
use tokio_util::sync::CancellationToken;

use super::rows::{attempt_columns, claimed_columns, resolution_columns};
use super::rows::{
    cancel_statements, due_tenants, list_statement, relay_statements, retention_statements,
};
use super::seam::{
    Arg, CancelStatements, Conn, Dialect, RelayStatements, RetentionStatements, STATEMENT_CACHE,
};
use super::{StoreError, StoreResult};

const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "initial",
        include_str!("../../migrations/postgres/0001_initial.sql"),
    ),
    (
        2,
        "provider_requests",
        include_str!("../../migrations/postgres/0002_provider_requests.sql"),
    ),
    (
        3,
        "json_patch",
        include_str!("../../migrations/postgres/0003_json_patch.sql"),
    ),
    (
        4,
        "relay",
        include_str!("../../migrations/postgres/0004_relay.sql"),
    ),
    (
        5,
        "review",
        include_str!("../../migrations/postgres/0005_review.sql"),
    ),
    (
        6,
        "readiness",
        include_str!("../../migrations/postgres/0006_readiness.sql"),
    ),
    (
        7,
        "key_owner_index",
        include_str!("../../migrations/postgres/0007_key_owner_index.sql"),
    ),
    (
        8,
        "retention",
        include_str!("../../migrations/postgres/0008_retention.sql"),
    ),
    (
        9,
        "failover",
        include_str!("../../migrations/postgres/0009_failover.sql"),
    ),
    (
        10,
        "callbacks",
        include_str!("../../migrations/postgres/0010_callbacks.sql"),
    ),
    (
        11,
        "deadlines",
        include_str!("../../migrations/postgres/0011_deadlines.sql"),
    ),
    (
        12,
        "review previews",
        include_str!("../../migrations/postgres/0012_review_previews.sql"),
    ),
    (
        13,
        "reported messages",
        include_str!("../../migrations/postgres/0013_reported_messages.sql"),
    ),
    (
        14,
        "cancellation keys",
        include_str!("../../migrations/postgres/0014_cancellation_keys.sql"),
    ),
    (
        15,
        "expiry",
        include_str!("../../migrations/postgres/0015_expiry.sql"),
    ),
    (
        16,
        "categories",
        include_str!("../../migrations/postgres/0016_categories.sql"),
    ),
    (
        17,
        "route pauses",
        include_str!("../../migrations/postgres/0017_route_pauses.sql"),
    ),
    (
        18,
        "attachments",
        include_str!("../../migrations/postgres/0018_attachments.sql"),
    ),
    (
        19,
        "pause to fallback",
        include_str!("../../migrations/postgres/0019_pause_to_fallback.sql"),
    ),
    (
        20,
        "traceparent",
        include_str!("../../migrations/postgres/0020_traceparent.sql"),
    ),
    (
        21,
        "chat",
        include_str!("../../migrations/postgres/0021_chat.sql"),
    ),
    (
        22,
        "certainty",
        include_str!("../../migrations/postgres/0022_certainty.sql"),
    ),
    (
        23,
        "attachments by tenant",
        include_str!("../../migrations/postgres/0023_attachments_by_tenant.sql"),
    ),
];

/// The channel on which a commit that made work due wakes every herald process.
const WAKE_CHANNEL: &str = "herald_due";

/// PostgreSQL reports these when two transactions collide; the whole transaction may be retried.
const RETRYABLE_CODES: [&str; 2] = ["40001", "40P01"];

pub struct Postgres {
    pool: PgPool,
}

impl Postgres {
    pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<Self> {
        // One direct connection first: a pool would report only "timed out", not the cause.
        Self::reach(url).await?;
        let options = url
            .parse::<PgConnectOptions>()?
            .statement_cache_capacity(STATEMENT_CACHE);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            // A request waiting on a dead database answers 503 promptly instead of hanging.
            .acquire_timeout(Duration::from_secs(3))
            .connect_with(options)
            .await?;
        super::seam::migrator(MIGRATIONS).run(&pool).await?;
        Ok(Postgres { pool })
    }

    /// One direct connection, opened and closed: the server, the credentials and the database
    /// are there.
    pub async fn reach(url: &str) -> anyhow::Result<()> {
        use sqlx::Connection;
        Self::direct(url).await?.close().await?;
        Ok(())
    }

    /// The database's size on disk, as PostgreSQL counts it.
    pub async fn size_bytes(url: &str) -> anyhow::Result<u64> {
        use sqlx::Connection;
        let mut connection = Self::direct(url).await?;
        let (bytes,): (i64,) = sqlx::query_as("SELECT pg_database_size(current_database())")
            .fetch_one(&mut connection)
            .await?;
        connection.close().await?;
        Ok(u64::try_from(bytes).unwrap_or_default())
    }

    /// The server's execution time over every statement so far, where `pg_stat_statements`
    /// is installed and readable; `None` where it is not.
    pub async fn statement_time(url: &str) -> anyhow::Result<Option<Duration>> {
        use sqlx::Connection;
        let mut connection = Self::direct(url).await?;
        let total: Result<(Option<f64>,), _> =
            sqlx::query_as("SELECT sum(total_exec_time)::float8 FROM pg_stat_statements")
                .fetch_one(&mut connection)
                .await;
        connection.close().await?;
        Ok(total
            .ok()
            .and_then(|(ms,)| ms)
            .map(|ms| Duration::from_secs_f64(ms / 1000.0)))
    }

    pub async fn analyze(url: &str) -> anyhow::Result<()> {
        use sqlx::Connection;
        let mut connection = Self::direct(url).await?;
        sqlx::query("ANALYZE").execute(&mut connection).await?;
        connection.close().await?;
        Ok(())
    }

    /// One connection outside any pool, its failure said in words a user can act on.
    async fn direct(url: &str) -> anyhow::Result<sqlx::PgConnection> {
        use sqlx::Connection;
        let options: PgConnectOptions = url.parse()?;
        let connection = sqlx::PgConnection::connect_with(&options)
            .await
            .map_err(|err| match err.as_database_error() {
                // sqlx prints the server's message twice, each with a line of the server's own
                // source; the message and its code are what a user can act on.
                Some(db) if db.code().as_deref() == Some("3D000") => anyhow::anyhow!(
                    "{} (create it first, e.g. `createdb {}`; `herald migrate` or `serve` then creates the tables)",
                    db.message(),
                    options.get_database().unwrap_or("herald")
                ),
                Some(db) => anyhow::anyhow!(
                    "{} (SQLSTATE {})",
                    db.message(),
                    db.code().unwrap_or_default()
                ),
                None => err.into(),
            })?;
        Ok(connection)
    }
}

/// `column = ANY` a bound array.
macro_rules! in_list {
    ($column:literal, $n:literal) => {
        concat!($column, " = ANY($", $n, ")")
    };
}

/// Whether the array in `column` holds the text bound as `$n`.
macro_rules! has {
    ($column:literal, $n:literal) => {
        concat!("($", $n, " = ANY(", $column, "))")
    };
}

/// The array in `column` with the text bound as `$n` added.
macro_rules! append {
    ($column:literal, $n:literal) => {
        concat!("array_append(", $column, ", $", $n, ")")
    };
}

/// How many texts of the array in `column` are in the array bound as `$n`.
macro_rules! count_in {
    ($column:literal, $n:literal) => {
        concat!(
            "(SELECT count(*) FROM unnest(",
            $column,
            ") s WHERE s = ANY($",
            $n,
            "))"
        )
    };
}

#[async_trait]
impl Dialect for Postgres {
    type Db = sqlx::Postgres;

    const LATEST_MIGRATION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;
    /// A few transactions in flight let PostgreSQL flush their commits together, while the
    /// pool keeps connections for reads and dispatch.
    const WRITERS: usize = 4;

    // Fair across tenants: each tenant's due work takes turns (its oldest first), so that one
    // tenant's burst does not wait out another's single notification. SKIP LOCKED: rows another
    // process is claiming right now are simply not due for us.
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
                     SELECT d.id, d.route, d.due_at,
                            row_number() OVER (PARTITION BY t.tenant ORDER BY d.due_at) AS turn
                     FROM tenants t, LATERAL (
                         SELECT id, route, due_at FROM notifications
                         WHERE tenant = t.tenant AND state IN ('queued', 'sending')
                           AND due_at <= $1 AND route = ANY($3)
                         ORDER BY due_at LIMIT $2) d
                 ) turns
             ) due
             JOIN jsonb_to_recordset($4) AS r(route text, take bigint) ON r.route = due.route
             WHERE due.place <= r.take
             ORDER BY due.turn, due.due_at LIMIT $2)
         -- Chosen from the statement's snapshot, but locked as the rows are now: a row another
         -- claim leased and committed meanwhile is no longer due, and this recheck (made against
         -- the locked row) leaves it out instead of taking it as a lease that ended.
         AND state IN ('queued', 'sending') AND due_at <= $1 AND route = ANY($3)
         FOR UPDATE SKIP LOCKED"
    );
    const CLAIM_EXPIRED: &'static str = concat!(
        "SELECT id, state, ",
        claimed_columns!(),
        " FROM notifications
         WHERE state = 'queued' AND expires_at <= $1 AND route = ANY($3)
         ORDER BY expires_at LIMIT $2
         FOR UPDATE SKIP LOCKED"
    );
    const CLAIM_TAKE: &'static str = concat!(
        "UPDATE notifications
         SET state = 'sending', generation = generation + 1, due_at = $2, updated_at = $1,
             attempt_count = attempt_count + CASE WHEN id = ANY($4) THEN 1 ELSE 0 END,
             provider_request = coalesce(provider_request,
                 (SELECT r.request FROM jsonb_to_recordset($5) AS r(id uuid, request jsonb)
                  WHERE r.id = notifications.id))
         WHERE id = ANY($3)
         RETURNING ",
        claimed_columns!()
    );
    const CLAIM_EXPIRE: &'static str = "UPDATE attempts
         SET result = 'ambiguous', finished_at = $2, evidence = json_patch(evidence, $3)
         WHERE notification_id = ANY($1) AND result = 'in_flight'";
    const CLAIM_START_ATTEMPTS: &'static str = concat!(
        "INSERT INTO attempts
             (notification_id, n, generation, route, provider_idempotency_key, started_at,
              send_deadline, result, evidence)
         SELECT a.id, a.n, a.generation, a.route, a.key, $2, a.send_deadline, 'in_flight', '{}'
         FROM jsonb_to_recordset($1)
             AS a(id uuid, n integer, generation bigint, route text, key text,
                  send_deadline timestamptz)
         RETURNING notification_id, ",
        attempt_columns!()
    );
    const CLAIM_SUPPRESSED: &'static str = "SELECT DISTINCT r.id::text
         FROM jsonb_to_recordset($1)
             AS r(id uuid, tenant text, channel text, recipient text, category text)
         JOIN suppressions s ON s.tenant = r.tenant AND s.channel = r.channel
             AND s.recipient = r.recipient AND (s.category = '' OR s.category = r.category)";
    const ATTEMPTS_OF_MANY: &'static str = concat!(
        "SELECT notification_id, ",
        attempt_columns!(),
        " FROM attempts WHERE notification_id = ANY($1) ORDER BY notification_id, n"
    );
    const RESOLUTIONS_OF_MANY: &'static str = concat!(
        "SELECT notification_id, ",
        resolution_columns!(),
        " FROM resolutions WHERE notification_id = ANY($1) ORDER BY notification_id, seq"
    );
    const RECEIPTS_OF_MANY: &'static str =
        "SELECT notification_id, status, at, source, vendor_status
         FROM receipts WHERE notification_id = ANY($1) ORDER BY notification_id, seq";

    // Containment is equality here: enqueue stores only string values, and the wanted pairs
    // are strings.
    const LIST: &'static str = list_statement!("metadata @> $8");

    // SKIP LOCKED: events another relay is claiming right now are simply not due for us.
    const RELAY: RelayStatements = relay_statements!(
        in_list,
        has,
        append,
        count_in,
        "FOR UPDATE OF o SKIP LOCKED"
    );
    const RETENTION: RetentionStatements = retention_statements!(in_list, "FOR UPDATE SKIP LOCKED");
    const CANCEL: CancelStatements = cancel_statements!("FOR UPDATE");

    async fn begin(&self) -> StoreResult<Transaction<'static, sqlx::Postgres>> {
        Ok(self.pool.begin().await?)
    }

    async fn read(&self) -> StoreResult<PoolConnection<sqlx::Postgres>> {
        Ok(self.pool.acquire().await?)
    }

    async fn snapshot(&self) -> StoreResult<Transaction<'static, sqlx::Postgres>> {
        Ok(self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await?)
    }

    /// Delivered to listeners only if the transaction commits.
    async fn wake_others(tx: &mut PgConnection) -> StoreResult<()> {
        tx.execute("SELECT pg_notify($1, '')", vec![Arg::from(WAKE_CHANNEL)])
            .await?;
        Ok(())
    }

    async fn close(&self) {
        self.pool.close().await;
    }

    async fn listen_for_work(&self, wake: Arc<tokio::sync::Notify>, shutdown: CancellationToken) {
        loop {
            let listener = async {
                let mut listener = PgListener::connect_with(&self.pool).await?;
                listener.listen(WAKE_CHANNEL).await?;
                // A notification sent while no listener was connected was missed: look now.
                wake.notify_one();
                loop {
                    listener.recv().await?;
                    wake.notify_one();
                }
                #[allow(unreachable_code)]
                Ok::<(), sqlx::Error>(())
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                result = listener => {
                    if let Err(err) = result {
                        tracing::warn!(%err, "LISTEN connection lost; polling until it is back");
                    }
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    fn retryable(err: &StoreError) -> bool {
        match err {
            StoreError::Internal(e) => e
                .downcast_ref::<sqlx::Error>()
                .and_then(|e| e.as_database_error())
                .and_then(|db| db.code())
                .is_some_and(|code| RETRYABLE_CODES.contains(&code.as_ref())),
            _ => false,
        }
    }
}

// Lists go as arrays, for `= ANY`.
super::seam::conn!(PgConnection, PgArguments, |list| list);
