//! API keys. Only a hash of each secret is stored.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use quire_core::{ApiKeyRecord, KeyId, NewApiKey, Permission, SourceId, SourceScope};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqlitePool};

use super::codec;
use crate::{StoreError, StoreResult};

const KEY_COLUMNS: &str =
    "id, name, permission, all_sources, rate_limit, created_at, last_used_at, revoked_at";

pub(super) async fn create(pool: &SqlitePool, key: NewApiKey) -> StoreResult<ApiKeyRecord> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO api_keys (id, name, permission, all_sources, rate_limit, key_hash, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(key.id.to_string())
    .bind(&key.name)
    .bind(key.permission.as_str())
    .bind(matches!(key.scope, SourceScope::All))
    .bind(key.rate_limit.map(i64::from))
    .bind(&key.key_hash)
    .bind(codec::millis(key.created_at))
    .execute(&mut *tx)
    .await?;
    if let Some(ids) = key.scope.source_ids() {
        for source in ids {
            let known = sqlx::query("SELECT 1 FROM sources WHERE id = ?")
                .bind(source.to_string())
                .fetch_optional(&mut *tx)
                .await?
                .is_some();
            if !known {
                tx.rollback().await?;
                return Err(StoreError::Invalid(format!(
                    "source {source} does not exist"
                )));
            }
            sqlx::query("INSERT INTO api_key_sources (key_id, source_id) VALUES (?, ?)")
                .bind(key.id.to_string())
                .bind(source.to_string())
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await?;
    Ok(ApiKeyRecord {
        id: key.id,
        name: key.name,
        permission: key.permission,
        scope: key.scope,
        rate_limit: key.rate_limit,
        created_at: key.created_at,
        last_used_at: None,
        revoked_at: None,
    })
}

pub(super) async fn find_by_hash(
    pool: &SqlitePool,
    key_hash: &str,
) -> StoreResult<Option<ApiKeyRecord>> {
    let Some(row) = sqlx::query(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys WHERE key_hash = ?"
    ))
    .bind(key_hash)
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let id: String = row.try_get("id")?;
    let sources = sqlx::query("SELECT source_id FROM api_key_sources WHERE key_id = ?")
        .bind(&id)
        .fetch_all(pool)
        .await?
        .iter()
        .map(|r| codec::id::<SourceId>(&r.try_get::<String, _>("source_id")?))
        .collect::<StoreResult<BTreeSet<_>>>()?;
    key_from_row(&row, sources).map(Some)
}

pub(super) async fn list(pool: &SqlitePool) -> StoreResult<Vec<ApiKeyRecord>> {
    let rows = sqlx::query(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, rowid"
    ))
    .fetch_all(pool)
    .await?;
    let mut scopes: HashMap<String, BTreeSet<SourceId>> = HashMap::new();
    for row in sqlx::query("SELECT key_id, source_id FROM api_key_sources")
        .fetch_all(pool)
        .await?
    {
        scopes
            .entry(row.try_get("key_id")?)
            .or_default()
            .insert(codec::id(&row.try_get::<String, _>("source_id")?)?);
    }
    rows.iter()
        .map(|row| {
            let id: String = row.try_get("id")?;
            key_from_row(row, scopes.remove(&id).unwrap_or_default())
        })
        .collect()
}

pub(super) async fn revoke(
    pool: &SqlitePool,
    id: KeyId,
    now: DateTime<Utc>,
) -> StoreResult<Option<ApiKeyRecord>> {
    let hash: Option<String> = sqlx::query(
        "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? RETURNING key_hash",
    )
    .bind(codec::millis(now))
    .bind(id.to_string())
    .fetch_optional(pool)
    .await?
    .map(|row| row.try_get("key_hash"))
    .transpose()?;
    match hash {
        Some(hash) => find_by_hash(pool, &hash).await,
        None => Ok(None),
    }
}

pub(super) async fn touch(pool: &SqlitePool, id: KeyId, now: DateTime<Utc>) -> StoreResult<()> {
    let now_ms = codec::millis(now);
    sqlx::query(
        "UPDATE api_keys SET last_used_at = ?1
         WHERE id = ?2 AND (last_used_at IS NULL OR last_used_at < ?1 - 60000)",
    )
    .bind(now_ms)
    .bind(id.to_string())
    .execute(pool)
    .await?;
    Ok(())
}

fn key_from_row(row: &SqliteRow, sources: BTreeSet<SourceId>) -> StoreResult<ApiKeyRecord> {
    let permission: String = row.try_get("permission")?;
    let all_sources: bool = row.try_get("all_sources")?;
    Ok(ApiKeyRecord {
        id: codec::id(&row.try_get::<String, _>("id")?)?,
        name: row.try_get("name")?,
        permission: permission
            .parse::<Permission>()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        scope: if all_sources {
            SourceScope::All
        } else {
            SourceScope::Only(sources)
        },
        rate_limit: row
            .try_get::<Option<i64>, _>("rate_limit")?
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        created_at: codec::time(row.try_get("created_at")?)?,
        last_used_at: codec::opt_time(row.try_get("last_used_at")?)?,
        revoked_at: codec::opt_time(row.try_get("revoked_at")?)?,
    })
}
