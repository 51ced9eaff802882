//! Migrations that change a database in use keep what it holds.

use super::*;

on_both_backends!(the_attachments_by_tenant_migration_keeps_every_named_file_once_per_tenant,);

/// `db` as an earlier herald left it: migrated up to, not including, `version`.
async fn migrated_before(db: &TestDb, version: i64) {
    let backend = match db.backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    let mut migrator = sqlx::migrate::Migrator::new(dir).await.unwrap();
    let older: Vec<_> = migrator
        .migrations
        .iter()
        .filter(|m| m.version < version)
        .cloned()
        .collect();
    migrator.migrations = older.into();
    match db.backend {
        Backend::Sqlite => {
            let options = format!("{}?mode=rwc", db.url)
                .parse::<sqlx::sqlite::SqliteConnectOptions>()
                .unwrap()
                .foreign_keys(true);
            let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
            migrator.run(&pool).await.unwrap();
            pool.close().await;
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
            migrator.run(&pool).await.unwrap();
            pool.close().await;
        }
    }
}

/// Migration 0021 rebuilds SQLite's `notifications` and `suppressions` (a CHECK cannot change
/// in place) while attempts refer to the first: a database in use keeps every row and every
/// reference, and takes the chat channel afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_migration_keeps_a_database_in_use_whole() {
    let Some(db) = TestDb::new(Backend::Sqlite).await else {
        return;
    };
    migrated_before(&db, 21).await;
    let pool = sqlx::SqlitePool::connect(&db.url).await.unwrap();
    sqlx::raw_sql(
        "INSERT INTO notifications (id, tenant, channel, recipient, route, delivery, content,
             metadata, state, due_at, created_at, updated_at, traceparent)
         VALUES (x'01', 'acme', 'sms', '+14155550100', 'sms', 'at_most_once', '{}', '{}',
             'queued', '2026-12-04T00:00:00Z', '2026-12-04T00:00:00Z', '2026-12-04T00:00:00Z',
             '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
         INSERT INTO attempts (notification_id, n, generation, route, provider_idempotency_key,
             started_at, result, evidence)
         VALUES (x'01', 1, 1, 'sms', 'k', '2026-12-04T00:00:00Z', 'in_flight', '{}');
         INSERT INTO suppressions (tenant, channel, recipient, reason, source, evidence,
             created_at)
         VALUES ('acme', 'sms', '+14155550100', 'manual', 'ops', '{}', '2026-12-04T00:00:00Z');",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let store = herald::store::connect(&db.url, 2).await.unwrap();
    let pool = sqlx::SqlitePool::connect(&db.url).await.unwrap();
    let count = |table: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM {table}"
            )))
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(
        (
            count("notifications").await,
            count("attempts").await,
            count("suppressions").await
        ),
        (1, 1, 1)
    );
    let orphans: Vec<(String,)> = sqlx::query_as("SELECT \"table\" FROM pragma_foreign_key_check")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(orphans.is_empty(), "{orphans:?}");
    let kept: String = sqlx::query_scalar("SELECT traceparent FROM notifications")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(kept.starts_with("00-0af7651916cd43dd"));
    let chat = Notification {
        channel: Channel::Chat,
        ..notification(
            "acme",
            "sandbox",
            "C0OPS",
            "Deploy done",
            OffsetDateTime::now_utc(),
        )
    };
    accepted(store.as_ref(), chat).await;
    assert_eq!(count("notifications").await, 2);
}

/// Migration 0023 gives each tenant its own rows of the files its notifications name (stored
/// once across tenants, a repeat enqueue was faster, which told one tenant what another sent):
/// a database in use keeps every named file, once for each tenant that names it, and the
/// references to them; a file no notification names is left behind, as retention would.
async fn the_attachments_by_tenant_migration_keeps_every_named_file_once_per_tenant(
    backend: Backend,
) {
    let Some(db) = TestDb::new(backend).await else {
        return;
    };
    let (ids, content) = match backend {
        Backend::Sqlite => (["x'01'", "x'02'"], "x'cafe'"),
        Backend::Postgres => (
            [
                "'00000000-0000-7000-8000-000000000001'",
                "'00000000-0000-7000-8000-000000000002'",
            ],
            "'\\xcafe'",
        ),
    };
    migrated_before(&db, 23).await;
    for (id, tenant) in ids.iter().zip(["acme", "globex"]) {
        db.execute(&format!(
            "INSERT INTO notifications (id, tenant, channel, recipient, route, delivery, content,
                 metadata, state, due_at, created_at, updated_at)
             VALUES ({id}, '{tenant}', 'email', 'ada@example.com', 'mail', 'at_most_once', '{{}}',
                 '{{}}', 'queued', '2026-12-04T00:00:00Z', '2026-12-04T00:00:00Z',
                 '2026-12-04T00:00:00Z')"
        ))
        .await;
    }
    db.execute(&format!(
        "INSERT INTO attachments (sha256, content, last_used_at) VALUES
             ('aa', {content}, '2026-12-04T00:00:00Z'), ('bb', {content}, '2026-12-04T00:00:00Z')"
    ))
    .await;
    db.execute(&format!(
        "INSERT INTO notification_attachments (notification_id, sha256)
         VALUES ({}, 'aa'), ({}, 'aa')",
        ids[0], ids[1]
    ))
    .await;

    herald::store::connect(&db.url, 2).await.unwrap();
    assert_eq!(
        db.texts("SELECT tenant || ' ' || sha256 FROM attachments ORDER BY tenant")
            .await,
        ["acme aa", "globex aa"]
    );
    assert_eq!(
        db.texts(
            "SELECT n.tenant || ' ' || a.tenant || ' ' || a.sha256 FROM notification_attachments a
             JOIN notifications n ON n.id = a.notification_id ORDER BY n.tenant"
        )
        .await,
        ["acme acme aa", "globex globex aa"]
    );
    if backend == Backend::Sqlite {
        let orphans = db
            .texts("SELECT \"table\" FROM pragma_foreign_key_check")
            .await;
        assert!(orphans.is_empty(), "{orphans:?}");
    }
}
