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
    (8, include_str!("schema_v8.sql")),
    (9, include_str!("schema_v9.sql")),
    (10, include_str!("schema_v10.sql")),
    (11, include_str!("schema_v11.sql")),
    (12, include_str!("schema_v12.sql")),
    (13, include_str!("schema_v13.sql")),
    (14, include_str!("schema_v14.sql")),
    (15, include_str!("schema_v15.sql")),
    (16, include_str!("schema_v16.sql")),
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

/// An empty in-memory database for the tests of the schema: one connection, since each
/// connection to `sqlite::memory:` has a database of its own.
#[cfg(test)]
pub(super) async fn empty_database() -> SqlitePool {
    sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect("sqlite::memory:")
        .await
        .unwrap()
}

#[cfg(test)]
mod tests {
    use sqlx::Row;

    use super::{MIGRATIONS, empty_database};

    /// Rows claimed under the old rule (v4 to v6: a claim was forever) and never logged come
    /// out of v7 as claims that have run out, so they are attempted again; unclaimed rows stay
    /// unclaimed.
    #[tokio::test]
    async fn v7_turns_old_claims_into_expired_ones() {
        let pool = empty_database().await;
        let (before, after): (Vec<_>, Vec<_>) = MIGRATIONS.iter().partition(|(v, _)| *v < 7);
        for (_, sql) in before {
            sqlx::raw_sql(sql).execute(&pool).await.unwrap();
        }
        sqlx::raw_sql(
            "INSERT INTO webhooks (id, url, events, secret, created_at)
                 VALUES ('w', 'https://h.example', '[\"document.ready\"]', 's', 0);
             INSERT INTO webhook_outbox (event_id, webhook_id, event, body, created_at, claimed_at)
                 VALUES ('lost', 'w', 'document.ready', '{}', 1, 1000),
                        ('waiting', 'w', 'document.ready', '{}', 2, NULL);",
        )
        .execute(&pool)
        .await
        .unwrap();
        for (_, sql) in after {
            sqlx::raw_sql(sql).execute(&pool).await.unwrap();
        }
        let rows = sqlx::query(
            "SELECT event_id, claimed_by, claimed_until FROM webhook_outbox ORDER BY seq",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        let rows: Vec<(String, Option<String>, Option<i64>)> = rows
            .iter()
            .map(|r| {
                (
                    r.get("event_id"),
                    r.get("claimed_by"),
                    r.get("claimed_until"),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (
                    "lost".to_owned(),
                    Some("before-schema-v7".to_owned()),
                    Some(1000)
                ),
                ("waiting".to_owned(), None, None),
            ]
        );
    }
}
