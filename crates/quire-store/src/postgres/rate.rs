//! Fixed rate-limit windows, counted in the database so every node sees the same counts. A hit
//! is one atomic upsert: concurrent hits from any number of nodes each get their own count.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::codec;
use crate::{RateWindow, StoreResult};

pub(super) async fn hit(pool: &PgPool, window: &RateWindow) -> StoreResult<u64> {
    let n: i64 = sqlx::query_scalar(
        "INSERT INTO rate_windows (key_id, bucket, window_start, count) VALUES ($1, $2, $3, 1)
         ON CONFLICT (key_id, bucket, window_start)
         DO UPDATE SET count = rate_windows.count + 1
         RETURNING count",
    )
    .bind(window.key.0)
    .bind(window.bucket.as_str())
    .bind(window.start)
    .fetch_one(pool)
    .await?;
    Ok(codec::count(n))
}

pub(super) async fn peek(pool: &PgPool, window: &RateWindow) -> StoreResult<u64> {
    let n: Option<i64> = sqlx::query_scalar(
        "SELECT count FROM rate_windows WHERE key_id = $1 AND bucket = $2 AND window_start = $3",
    )
    .bind(window.key.0)
    .bind(window.bucket.as_str())
    .bind(window.start)
    .fetch_optional(pool)
    .await?;
    Ok(n.map(codec::count).unwrap_or(0))
}

pub(super) async fn prune(pool: &PgPool, before: DateTime<Utc>) -> StoreResult<u64> {
    Ok(
        sqlx::query("DELETE FROM rate_windows WHERE window_start < $1")
            .bind(before)
            .execute(pool)
            .await?
            .rows_affected(),
    )
}
