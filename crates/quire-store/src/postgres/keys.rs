//! API keys. Only a hash of each secret is stored.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use quire_core::{ApiKeyRecord, KeyId, NewApiKey, Permission, SourceId, SourceScope};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::codec;
use crate::{StoreError, StoreResult};

const KEY_COLUMNS: &str =
    "id, name, permission, all_sources, rate_limit, created_at, last_used_at, revoked_at";

pub(super) async fn create(pool: &PgPool, key: NewApiKey) -> StoreResult<ApiKeyRecord> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO api_keys (id, name, permission, all_sources, rate_limit, key_hash, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(key.id.0)
    .bind(&key.name)
    .bind(key.permission.as_str())
    .bind(matches!(key.scope, SourceScope::All))
    .bind(key.rate_limit.map(i64::from))
    .bind(&key.key_hash)
    .bind(key.created_at)
    .execute(&mut *tx)
    .await?;
    if let Some(ids) = key.scope.source_ids() {
        let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        // FOR KEY SHARE: a named source cannot be deleted before this key is committed.
        let known: Vec<Uuid> =
            sqlx::query_scalar("SELECT id FROM sources WHERE id = ANY($1) FOR KEY SHARE")
                .bind(&ids)
                .fetch_all(&mut *tx)
                .await?;
        if let Some(unknown) = ids.iter().find(|id| !known.contains(id)) {
            tx.rollback().await?;
            return Err(StoreError::Invalid(format!(
                "source {} does not exist",
                SourceId::from(*unknown)
            )));
        }
        sqlx::query(
            "INSERT INTO api_key_sources (key_id, source_id) SELECT $1, UNNEST($2::uuid[])",
        )
        .bind(key.id.0)
        .bind(&ids)
        .execute(&mut *tx)
        .await?;
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
    pool: &PgPool,
    key_hash: &str,
) -> StoreResult<Option<ApiKeyRecord>> {
    let Some(row) = sqlx::query(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys WHERE key_hash = $1"
    ))
    .bind(key_hash)
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let id: Uuid = row.try_get("id")?;
    let sources: Vec<Uuid> =
        sqlx::query_scalar("SELECT source_id FROM api_key_sources WHERE key_id = $1")
            .bind(id)
            .fetch_all(pool)
            .await?;
    key_from_row(&row, sources.into_iter().map(SourceId::from).collect()).map(Some)
}

pub(super) async fn list(pool: &PgPool) -> StoreResult<Vec<ApiKeyRecord>> {
    let rows = sqlx::query(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, seq"
    ))
    .fetch_all(pool)
    .await?;
    let mut scopes: HashMap<Uuid, BTreeSet<SourceId>> = HashMap::new();
    for row in sqlx::query("SELECT key_id, source_id FROM api_key_sources")
        .fetch_all(pool)
        .await?
    {
        scopes
            .entry(row.try_get("key_id")?)
            .or_default()
            .insert(row.try_get::<Uuid, _>("source_id")?.into());
    }
    rows.iter()
        .map(|row| {
            let id: Uuid = row.try_get("id")?;
            key_from_row(row, scopes.remove(&id).unwrap_or_default())
        })
        .collect()
}

pub(super) async fn revoke(
    pool: &PgPool,
    id: KeyId,
    now: DateTime<Utc>,
) -> StoreResult<Option<ApiKeyRecord>> {
    let hash: Option<String> = sqlx::query_scalar(
        "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2
         RETURNING key_hash",
    )
    .bind(now)
    .bind(id.0)
    .fetch_optional(pool)
    .await?;
    match hash {
        Some(hash) => find_by_hash(pool, &hash).await,
        None => Ok(None),
    }
}

pub(super) async fn touch(pool: &PgPool, id: KeyId, now: DateTime<Utc>) -> StoreResult<()> {
    sqlx::query(
        "UPDATE api_keys SET last_used_at = $1
         WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1 - INTERVAL '1 minute')",
    )
    .bind(now)
    .bind(id.0)
    .execute(pool)
    .await?;
    Ok(())
}

fn key_from_row(row: &PgRow, sources: BTreeSet<SourceId>) -> StoreResult<ApiKeyRecord> {
    let permission: String = row.try_get("permission")?;
    let all_sources: bool = row.try_get("all_sources")?;
    Ok(ApiKeyRecord {
        id: row.try_get::<Uuid, _>("id")?.into(),
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
            .map(codec::small),
        created_at: row.try_get("created_at")?,
        last_used_at: row.try_get("last_used_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}
