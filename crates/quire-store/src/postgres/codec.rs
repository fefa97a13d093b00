//! Conversions between stored columns and domain values, and the scope filter.

use std::str::FromStr;

use quire_core::{DocumentRecord, DocumentStatus, SourceRecord, SourceScope};
use sqlx::Row;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use crate::{StoreError, StoreResult};

/// A stored count or size; never negative, so the conversion cannot lose anything real.
pub(super) fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

pub(super) fn small(n: i64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A limit as a bind value.
pub(super) fn limit(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// The scope as a bind value for `($n::uuid[] IS NULL OR column = ANY($n))`: `None` for every
/// source; an empty list (an empty scope) matches nothing.
pub(super) fn scope_ids(scope: &SourceScope) -> Option<Vec<Uuid>> {
    scope
        .source_ids()
        .map(|ids| ids.iter().map(|id| id.as_uuid()).collect())
}

pub(super) const SOURCE_COLUMNS: &str = "s.id, s.name, s.description, s.source_type, s.created_at, \
     (SELECT COUNT(*) FROM documents d WHERE d.source_id = s.id) AS document_count";

pub(super) fn source_from_row(row: &PgRow) -> StoreResult<SourceRecord> {
    Ok(SourceRecord {
        id: row.try_get::<Uuid, _>("id")?.into(),
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        source_type: row.try_get("source_type")?,
        document_count: count(row.try_get("document_count")?),
        created_at: row.try_get("created_at")?,
    })
}

pub(super) const DOCUMENT_COLUMNS: &str = "d.id, d.source_id, d.name, d.status, d.error, \
     d.chunk_count, d.page_count, d.size, d.content_type, d.sha256, d.created_at, d.updated_at";

pub(super) fn document_from_row(row: &PgRow) -> StoreResult<DocumentRecord> {
    let status: String = row.try_get("status")?;
    Ok(DocumentRecord {
        id: row.try_get::<Uuid, _>("id")?.into(),
        source_id: row.try_get::<Uuid, _>("source_id")?.into(),
        name: row.try_get("name")?,
        status: DocumentStatus::from_str(&status).map_err(StoreError::Corrupt)?,
        error: row.try_get("error")?,
        chunk_count: count(row.try_get("chunk_count")?),
        page_count: count(row.try_get("page_count")?),
        size: count(row.try_get("size")?),
        content_type: row.try_get("content_type")?,
        sha256: row.try_get("sha256")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}
