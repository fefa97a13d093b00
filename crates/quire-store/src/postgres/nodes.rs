//! The running nodes of a cluster and their embedding models (see `schema_v7.sql`).

use chrono::{DateTime, Utc};
use sqlx::{PgPool, Row};

use crate::{ClusterNode, StoreResult};

pub(super) async fn join(
    pool: &PgPool,
    node: &str,
    model: Option<&str>,
    now: DateTime<Utc>,
    alive_since: DateTime<Utc>,
) -> StoreResult<Option<ClusterNode>> {
    let mut tx = pool.begin().await?;
    // Self-conflicting, so a second node joining waits for the first's commit and then sees it.
    sqlx::query("LOCK TABLE cluster_nodes IN SHARE ROW EXCLUSIVE MODE")
        .execute(&mut *tx)
        .await?;
    if let Some(model) = model {
        let other = sqlx::query(
            "SELECT node, embedding_model, seen_at FROM cluster_nodes
             WHERE node <> $1 AND seen_at >= $2
               AND embedding_model IS NOT NULL AND embedding_model <> $3
             ORDER BY seen_at DESC LIMIT 1",
        )
        .bind(node)
        .bind(alive_since)
        .bind(model)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(row) = other {
            tx.rollback().await?;
            return Ok(Some(ClusterNode {
                node: row.try_get("node")?,
                embedding_model: row.try_get("embedding_model")?,
                seen_at: row.try_get("seen_at")?,
            }));
        }
    }
    sqlx::query(
        "INSERT INTO cluster_nodes (node, embedding_model, seen_at) VALUES ($1, $2, $3)
         ON CONFLICT (node) DO UPDATE SET
             embedding_model = excluded.embedding_model, seen_at = excluded.seen_at",
    )
    .bind(node)
    .bind(model)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(None)
}

pub(super) async fn seen(pool: &PgPool, node: &str, now: DateTime<Utc>) -> StoreResult<()> {
    sqlx::query("UPDATE cluster_nodes SET seen_at = $2 WHERE node = $1")
        .bind(node)
        .bind(now)
        .execute(pool)
        .await?;
    Ok(())
}

pub(super) async fn leave(pool: &PgPool, node: &str) -> StoreResult<()> {
    sqlx::query("DELETE FROM cluster_nodes WHERE node = $1")
        .bind(node)
        .execute(pool)
        .await?;
    Ok(())
}
