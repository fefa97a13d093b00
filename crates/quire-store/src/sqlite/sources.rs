//! Sources.

use quire_core::{NewSource, SourceId, SourceRecord, SourceScope};
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool};

use super::codec::{self, SOURCE_COLUMNS};
use crate::StoreResult;

pub(super) async fn create(pool: &SqlitePool, source: NewSource) -> StoreResult<SourceRecord> {
    sqlx::query(
        "INSERT INTO sources (id, name, description, source_type, created_at)
         VALUES (?, ?, ?, ?, ?)",
    )
    .bind(source.id.to_string())
    .bind(source.name.as_str())
    .bind(source.description.as_str())
    .bind(source.source_type.as_str())
    .bind(codec::millis(source.created_at))
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

pub(super) async fn list(pool: &SqlitePool, scope: &SourceScope) -> StoreResult<Vec<SourceRecord>> {
    let mut qb =
        QueryBuilder::<Sqlite>::new(format!("SELECT {SOURCE_COLUMNS} FROM sources s WHERE 1"));
    codec::push_scope(&mut qb, "s.id", scope);
    qb.push(" ORDER BY s.created_at, s.rowid");
    let rows = qb.build().fetch_all(pool).await?;
    rows.iter().map(codec::source_from_row).collect()
}

pub(super) async fn get(
    pool: &SqlitePool,
    scope: &SourceScope,
    id: SourceId,
) -> StoreResult<Option<SourceRecord>> {
    if !scope.allows(id) {
        return Ok(None);
    }
    let row = sqlx::query(&format!(
        "SELECT {SOURCE_COLUMNS} FROM sources s WHERE s.id = ?"
    ))
    .bind(id.to_string())
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(codec::source_from_row).transpose()
}

pub(super) async fn existing(pool: &SqlitePool, ids: &[SourceId]) -> StoreResult<Vec<SourceId>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb = QueryBuilder::<Sqlite>::new("SELECT id FROM sources WHERE id IN ");
    codec::push_id_list(&mut qb, ids);
    let rows = qb.build().fetch_all(pool).await?;
    rows.iter()
        .map(|row| codec::id(&row.try_get::<String, _>("id")?))
        .collect()
}
