//! Opening a database by its URL: the backend it names, its migrations, and the checks
//! the CLI makes of it before it serves.

use std::sync::Arc;

use super::{Store, postgres, seam, sqlite};

/// Opens the database named by `url` (`sqlite:` or `postgres:`), applying migrations.
pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<Arc<dyn Store>> {
    use anyhow::Context;
    Ok(match Backend::of(url)? {
        Backend::Sqlite => Arc::new(seam::SqlStore::new(
            sqlite::Sqlite::connect(url)
                .await
                .with_context(|| opening(url))?,
        )),
        Backend::Postgres => Arc::new(seam::SqlStore::new(
            postgres::Postgres::connect(url, max_connections)
                .await
                .with_context(|| opening(url))?,
        )),
    })
}

/// Whether the database named by `url` can be opened, without migrating or creating anything.
pub async fn reach(url: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    match Backend::of(url)? {
        Backend::Sqlite => sqlite::Sqlite::reach(url),
        Backend::Postgres => postgres::Postgres::reach(url).await,
    }
    .with_context(|| opening(url))
}

/// How many bytes the database named by `url` takes on disk (for `herald bench`).
pub async fn database_bytes(url: &str) -> anyhow::Result<u64> {
    match Backend::of(url)? {
        Backend::Sqlite => sqlite::Sqlite::size_bytes(url),
        Backend::Postgres => postgres::Postgres::size_bytes(url).await,
    }
}

/// PostgreSQL's execution time over every statement so far, from `pg_stat_statements` (for
/// `herald bench`, where the server's processes are not on this machine); `None` where the
/// extension is not installed, and on SQLite, which runs inside herald's own process.
pub async fn statement_time(url: &str) -> anyhow::Result<Option<std::time::Duration>> {
    match Backend::of(url)? {
        Backend::Sqlite => Ok(None),
        Backend::Postgres => postgres::Postgres::statement_time(url).await,
    }
}

/// Brings the planner's statistics up to date, as autovacuum does on PostgreSQL within a minute
/// of a table filling (SQLite plans without them): `herald bench` measures a deployment whose
/// planner knows its tables, not the first minute of a new database.
pub async fn analyze(url: &str) -> anyhow::Result<()> {
    match Backend::of(url)? {
        Backend::Sqlite => Ok(()),
        Backend::Postgres => postgres::Postgres::analyze(url).await,
    }
}

enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn of(url: &str) -> anyhow::Result<Backend> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Ok(Backend::Postgres)
        } else {
            anyhow::bail!(
                "database.url must start with sqlite: or postgres: (got `{}`)",
                redact_url(url)
            )
        }
    }
}

fn opening(url: &str) -> String {
    format!("cannot open database {}", redact_url(url))
}

/// A database URL fit for an error message: any password replaced.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}
