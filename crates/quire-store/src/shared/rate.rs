//! Fixed rate-limit windows, counted in the database so every process (and, with a shared
//! database, every node) sees the same counts. A hit is one atomic upsert: concurrent hits
//! each get their own count.

use chrono::{DateTime, Utc};

use super::Backend;
use super::sql::{Cells, Query, Sql};
use crate::{RateWindow, StoreResult};

/// [`crate::Store::hit_rate_window`].
pub(crate) async fn hit<B: Backend>(store: &B, window: &RateWindow) -> StoreResult<u64> {
    let query = Query::new(
        "INSERT INTO rate_windows (key_id, bucket, window_start, count) VALUES ($1, $2, $3, 1)
         ON CONFLICT (key_id, bucket, window_start)
         DO UPDATE SET count = rate_windows.count + 1
         RETURNING count",
    )
    .bind(window.key)
    .bind(window.bucket.as_str())
    .bind(window.start);
    store.write().await?.fetch_one(query).await?.count("count")
}

/// [`crate::Store::peek_rate_window`].
pub(crate) async fn peek<B: Backend>(store: &B, window: &RateWindow) -> StoreResult<u64> {
    let query = Query::new(
        "SELECT count FROM rate_windows WHERE key_id = $1 AND bucket = $2 AND window_start = $3",
    )
    .bind(window.key)
    .bind(window.bucket.as_str())
    .bind(window.start);
    match store.read().await?.fetch_optional(query).await? {
        Some(row) => row.count("count"),
        None => Ok(0),
    }
}

/// [`crate::Store::prune_rate_windows`].
pub(crate) async fn prune<B: Backend>(store: &B, before: DateTime<Utc>) -> StoreResult<u64> {
    let query = Query::new("DELETE FROM rate_windows WHERE window_start < $1").bind(before);
    store.write().await?.execute(query).await
}
