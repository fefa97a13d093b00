//! Schema migrations, applied in order, each once. Every node of a cluster runs them when it
//! starts, possibly at the same moment, so they run in one transaction holding a
//! transaction-scoped advisory lock: the first node applies what is missing, the others wait
//! for it and then find nothing left to do. The lock key is per database; the version table
//! lives in the connection's schema, so databases with several Quire schemas work too.

use sqlx::{Connection, PgConnection};

use crate::StoreResult;

const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("schema_v1.sql")),
    (2, include_str!("schema_v2.sql")),
    (3, include_str!("schema_v3.sql")),
    (4, include_str!("schema_v4.sql")),
    (5, include_str!("schema_v5.sql")),
    (6, include_str!("schema_v6.sql")),
    (7, include_str!("schema_v7.sql")),
    (8, include_str!("schema_v8.sql")),
    (9, include_str!("schema_v9.sql")),
    (10, include_str!("schema_v10.sql")),
    (11, include_str!("schema_v11.sql")),
    (12, include_str!("schema_v12.sql")),
    (13, include_str!("schema_v13.sql")),
];

/// The advisory lock's key: any constant no other application on the database uses
/// (the bytes of "quire-mg").
const LOCK_KEY: i64 = 0x7175_6972_652d_6d67;

pub(super) async fn run(conn: &mut PgConnection) -> StoreResult<()> {
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(LOCK_KEY)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    BIGINT PRIMARY KEY,
            applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )",
    )
    .execute(&mut *tx)
    .await?;
    let applied: Vec<i64> = sqlx::query_scalar("SELECT version FROM schema_migrations")
        .fetch_all(&mut *tx)
        .await?;
    for (version, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        sqlx::raw_sql(sql).execute(&mut *tx).await?;
        sqlx::query("INSERT INTO schema_migrations (version) VALUES ($1)")
            .bind(version)
            .execute(&mut *tx)
            .await?;
        tracing::info!(version, "applied database migration");
    }
    tx.commit().await?;
    Ok(())
}
