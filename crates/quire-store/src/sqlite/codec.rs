//! Conversions between stored columns and domain values, and the scope filter clause.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use quire_core::{DocumentRecord, DocumentStatus, SourceId, SourceRecord, SourceScope};
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite};

use crate::{StoreError, StoreResult};

pub(super) fn millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(super) fn time(ms: i64) -> StoreResult<DateTime<Utc>> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .ok_or_else(|| StoreError::Corrupt(format!("timestamp {ms} out of range")))
}

pub(super) fn opt_time(ms: Option<i64>) -> StoreResult<Option<DateTime<Utc>>> {
    ms.map(time).transpose()
}

pub(super) fn id<T: FromStr>(raw: &str) -> StoreResult<T> {
    raw.parse()
        .map_err(|_| StoreError::Corrupt(format!("bad id {raw:?}")))
}

pub(super) fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Appends ` AND <column> IN (...)` for a limited scope; nothing for all sources. An empty
/// scope matches nothing.
pub(super) fn push_scope(qb: &mut QueryBuilder<'_, Sqlite>, column: &str, scope: &SourceScope) {
    let Some(ids) = scope.source_ids() else {
        return;
    };
    if ids.is_empty() {
        qb.push(" AND 0");
        return;
    }
    qb.push(format_args!(" AND {column} IN "));
    push_id_list(qb, ids);
}

/// Appends `(?, ?, …)` binding each id as text. Callers make sure the list is not empty.
pub(super) fn push_id_list<T: ToString>(
    qb: &mut QueryBuilder<'_, Sqlite>,
    ids: impl IntoIterator<Item = T>,
) {
    qb.push("(");
    let mut list = qb.separated(", ");
    for id in ids {
        list.push_bind(id.to_string());
    }
    list.push_unseparated(")");
}

pub(super) const SOURCE_COLUMNS: &str = "s.id, s.name, s.description, s.source_type, s.created_at, \
     (SELECT COUNT(*) FROM documents d WHERE d.source_id = s.id) AS document_count";

pub(super) fn source_from_row(row: &SqliteRow) -> StoreResult<SourceRecord> {
    Ok(SourceRecord {
        id: id(&row.try_get::<String, _>("id")?)?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        source_type: row.try_get("source_type")?,
        document_count: count(row.try_get("document_count")?),
        created_at: time(row.try_get("created_at")?)?,
    })
}

pub(super) const DOCUMENT_COLUMNS: &str = "d.id, d.source_id, d.name, d.status, d.error, \
     d.chunk_count, d.page_count, d.size, d.content_type, d.sha256, d.created_at, d.updated_at";

/// The same columns for statements without a table alias (SQLite's `RETURNING`).
pub(super) const DOCUMENT_COLUMNS_UNQUALIFIED: &str = "id, source_id, name, status, error, \
     chunk_count, page_count, size, content_type, sha256, created_at, updated_at";

pub(super) fn document_from_row(row: &SqliteRow) -> StoreResult<DocumentRecord> {
    let status: String = row.try_get("status")?;
    Ok(DocumentRecord {
        id: id(&row.try_get::<String, _>("id")?)?,
        source_id: id::<SourceId>(&row.try_get::<String, _>("source_id")?)?,
        name: row.try_get("name")?,
        status: DocumentStatus::from_str(&status).map_err(StoreError::Corrupt)?,
        error: row.try_get("error")?,
        chunk_count: count(row.try_get("chunk_count")?),
        page_count: count(row.try_get("page_count")?),
        size: count(row.try_get("size")?),
        content_type: row.try_get("content_type")?,
        sha256: row.try_get("sha256")?,
        created_at: time(row.try_get("created_at")?)?,
        updated_at: time(row.try_get("updated_at")?)?,
    })
}
