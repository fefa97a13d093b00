//! Sources.

use quire_core::{NewSource, SourceId, SourceRecord, SourceScope};
use sqlx::PgPool;
use uuid::Uuid;

use super::codec::{self, SOURCE_COLUMNS};
use crate::StoreResult;

pub(super) async fn create(pool: &PgPool, source: NewSource) -> StoreResult<SourceRecord> {
    sqlx::query(
        "INSERT INTO sources (id, name, description, source_type, created_at)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(source.id.0)
    .bind(source.name.as_str())
    .bind(source.description.as_str())
    .bind(source.source_type.as_str())
    .bind(source.created_at)
    .execute(pool)
    .await?;
    Ok(SourceRecord {
        id: source.id,
        name: source.name.as_str().to_owned(),
        description: source.description.as_str().to_owned(),
        source_type: source.source_type.as_str().to_owned(),
        document_count: 0,
        created_at: source.created_at,
    })
}

pub(super) async fn list(pool: &PgPool, scope: &SourceScope) -> StoreResult<Vec<SourceRecord>> {
    let rows = sqlx::query(&format!(
        "SELECT {SOURCE_COLUMNS} FROM sources s
         WHERE ($1::uuid[] IS NULL OR s.id = ANY($1))
         ORDER BY s.created_at, s.seq"
    ))
    .bind(codec::scope_ids(scope))
    .fetch_all(pool)
    .await?;
    rows.iter().map(codec::source_from_row).collect()
}

pub(super) async fn get(
    pool: &PgPool,
    scope: &SourceScope,
    id: SourceId,
) -> StoreResult<Option<SourceRecord>> {
    if !scope.allows(id) {
        return Ok(None);
    }
    let row = sqlx::query(&format!(
        "SELECT {SOURCE_COLUMNS} FROM sources s WHERE s.id = $1"
    ))
    .bind(id.0)
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(codec::source_from_row).transpose()
}

pub(super) async fn existing(pool: &PgPool, ids: &[SourceId]) -> StoreResult<Vec<SourceId>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let found: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM sources WHERE id = ANY($1)")
        .bind(ids.iter().map(|id| id.0).collect::<Vec<_>>())
        .fetch_all(pool)
        .await?;
    Ok(found.into_iter().map(SourceId::from).collect())
}
