//! Fixed rate-limit windows, counted in the database so every process (and, with a shared
//! database, every node) sees the same counts.

use chrono::{DateTime, Utc};
use sqlx::{Row, SqlitePool};

use super::codec;
use crate::{RateWindow, StoreResult};

pub(super) async fn hit(pool: &SqlitePool, window: &RateWindow) -> StoreResult<u64> {
    let n: i64 = sqlx::query(
        "INSERT INTO rate_windows (key_id, bucket, window_start, count) VALUES (?, ?, ?, 1)
         ON CONFLICT (key_id, bucket, window_start) DO UPDATE SET count = count + 1
         RETURNING count",
    )
    .bind(window.key.to_string())
    .bind(window.bucket.as_str())
    .bind(codec::millis(window.start))
    .fetch_one(pool)
    .await?
    .try_get("count")?;
    Ok(codec::count(n))
}

pub(super) async fn peek(pool: &SqlitePool, window: &RateWindow) -> StoreResult<u64> {
    let n: Option<i64> = sqlx::query(
        "SELECT count FROM rate_windows WHERE key_id = ? AND bucket = ? AND window_start = ?",
    )
    .bind(window.key.to_string())
    .bind(window.bucket.as_str())
    .bind(codec::millis(window.start))
    .fetch_optional(pool)
    .await?
    .map(|row| row.try_get("count"))
    .transpose()?;
    Ok(n.map(codec::count).unwrap_or(0))
}

pub(super) async fn prune(pool: &SqlitePool, before: DateTime<Utc>) -> StoreResult<u64> {
    Ok(
        sqlx::query("DELETE FROM rate_windows WHERE window_start < ?")
            .bind(codec::millis(before))
            .execute(pool)
            .await?
            .rows_affected(),
    )
}
