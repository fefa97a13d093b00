//! Schema migrations, applied in order, each once. Several processes may open the database at
//! the same moment (the server and the CLI), so each migration claims its version row first:
//! that write takes SQLite's lock, and a process that finds the row already there skips it.

use sqlx::SqlitePool;

use crate::StoreResult;

const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("schema_v1.sql")),
    (
        2,
        "CREATE INDEX documents_by_content ON documents (source_id, sha256);",
    ),
    (3, include_str!("schema_v3.sql")),
    (4, include_str!("schema_v4.sql")),
    (5, include_str!("schema_v5.sql")),
    (6, include_str!("schema_v6.sql")),
    (7, include_str!("schema_v7.sql")),
];

pub(super) async fn run(pool: &SqlitePool) -> StoreResult<()> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY,
            applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
        )",
    )
    .execute(pool)
    .await?;
    for (version, sql) in MIGRATIONS {
        let mut tx = pool.begin().await?;
        let claimed = sqlx::query("INSERT OR IGNORE INTO schema_migrations (version) VALUES (?)")
            .bind(version)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if claimed == 0 {
            tx.rollback().await?;
            continue;
        }
        sqlx::raw_sql(sql).execute(&mut *tx).await?;
        tx.commit().await?;
        tracing::info!(version, "applied database migration");
    }
    Ok(())
}
