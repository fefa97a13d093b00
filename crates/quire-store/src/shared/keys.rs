//! API keys. Only a hash of each secret is stored.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, TimeDelta, Utc};
use quire_core::{ApiKeyRecord, KeyId, NewApiKey, SourceId, SourceScope};
use uuid::Uuid;

use super::Backend;
use super::records::{self, KEY_COLUMNS};
use super::sql::{Arg, Cells, Query, Sql};
use crate::{StoreError, StoreResult};

/// [`crate::Store::create_key`].
pub(crate) async fn create<B: Backend>(store: &B, key: NewApiKey) -> StoreResult<ApiKeyRecord> {
    let mut tx = store.begin_write().await?;
    tx.execute(
        Query::new(
            "INSERT INTO api_keys (id, name, permission, all_sources, rate_limit, key_hash,
                                   created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(key.id)
        .bind(&key.name)
        .bind(key.permission.as_str())
        .bind(matches!(key.scope, SourceScope::All))
        .bind(Arg::Int(key.rate_limit.map(i64::from)))
        .bind(&key.key_hash)
        .bind(key.created_at),
    )
    .await?;
    if let Some(ids) = key.scope.source_ids() {
        let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        // FOR KEY SHARE: a named source cannot be deleted before this key is committed.
        let known = tx
            .fetch_all(
                Query::new(format!(
                    "SELECT id FROM sources WHERE {} {}",
                    B::in_ids("id", "$1"),
                    B::lock("FOR KEY SHARE")
                ))
                .bind(Arg::ids(ids.iter().copied())),
            )
            .await?
            .iter()
            .map(|row| row.uuid("id"))
            .collect::<StoreResult<Vec<_>>>()?;
        if let Some(unknown) = ids.iter().find(|id| !known.contains(id)) {
            tx.rollback().await?;
            return Err(StoreError::Invalid(format!(
                "source {} does not exist",
                SourceId::from(*unknown)
            )));
        }
        tx.execute(
            Query::new(format!(
                "INSERT INTO api_key_sources (key_id, source_id) SELECT $1, k.id FROM ({}) k",
                B::each_id("$2")
            ))
            .bind(key.id)
            .bind(Arg::Ids(ids)),
        )
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

/// [`crate::Store::find_key_by_hash`].
pub(crate) async fn find_by_hash<B: Backend>(
    store: &B,
    key_hash: &str,
) -> StoreResult<Option<ApiKeyRecord>> {
    let mut conn = store.read().await?;
    let query = Query::new(format!(
        "SELECT {KEY_COLUMNS} FROM api_keys WHERE key_hash = $1"
    ))
    .bind(key_hash);
    let Some(row) = conn.fetch_optional(query).await? else {
        return Ok(None);
    };
    let sources = conn
        .fetch_all(
            Query::new("SELECT source_id FROM api_key_sources WHERE key_id = $1")
                .bind(row.uuid("id")?),
        )
        .await?
        .iter()
        .map(|r| r.id("source_id"))
        .collect::<StoreResult<BTreeSet<SourceId>>>()?;
    records::key(&row, sources).map(Some)
}

/// [`crate::Store::list_keys`].
pub(crate) async fn list<B: Backend>(store: &B) -> StoreResult<Vec<ApiKeyRecord>> {
    let mut conn = store.read().await?;
    let rows = conn
        .fetch_all(Query::new(format!(
            "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, {}",
            B::SEQ
        )))
        .await?;
    let mut scopes: HashMap<Uuid, BTreeSet<SourceId>> = HashMap::new();
    for row in conn
        .fetch_all(Query::new("SELECT key_id, source_id FROM api_key_sources"))
        .await?
    {
        scopes
            .entry(row.uuid("key_id")?)
            .or_default()
            .insert(row.id("source_id")?);
    }
    rows.iter()
        .map(|row| records::key(row, scopes.remove(&row.uuid("id")?).unwrap_or_default()))
        .collect()
}

/// [`crate::Store::revoke_key`].
pub(crate) async fn revoke<B: Backend>(
    store: &B,
    id: KeyId,
    now: DateTime<Utc>,
) -> StoreResult<Option<ApiKeyRecord>> {
    let revoked = Query::new(
        "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2
         RETURNING key_hash",
    )
    .bind(now)
    .bind(id);
    match store.write().await?.fetch_optional(revoked).await? {
        Some(row) => find_by_hash(store, &row.text("key_hash")?).await,
        None => Ok(None),
    }
}

/// Records that a key was used, at most once a minute.
pub(crate) async fn touch<B: Backend>(store: &B, id: KeyId, now: DateTime<Utc>) -> StoreResult<()> {
    let query = Query::new(
        "UPDATE api_keys SET last_used_at = $1
         WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)",
    )
    .bind(now)
    .bind(id)
    .bind(now - TimeDelta::minutes(1));
    store.write().await?.execute(query).await?;
    Ok(())
}
