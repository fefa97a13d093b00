//! Documents. Creating one also enqueues its processing job in the same transaction, so a
//! document can never exist without the work that will finish it.

use quire_core::{
    DocumentId, DocumentRecord, DocumentStatus, JobId, NewDocument, SourceId, SourceScope,
};
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool, Transaction};

use super::codec::{self, DOCUMENT_COLUMNS, DOCUMENT_COLUMNS_UNQUALIFIED};
use crate::{Created, DocumentHit, StoreResult};

/// Creates `docs` in order in one transaction: a write transaction costs SQLite far more than
/// the two statements each document adds to it.
pub(super) async fn create_all(
    pool: &SqlitePool,
    docs: Vec<NewDocument>,
) -> StoreResult<Vec<Created>> {
    let mut tx = pool.begin().await?;
    let mut created = Vec::with_capacity(docs.len());
    for doc in docs {
        created.push(insert(&mut tx, doc).await?);
    }
    tx.commit().await?;
    Ok(created)
}

/// Inserts `doc` and its job in `tx`, unless the source already holds its bytes.
async fn insert(tx: &mut Transaction<'_, Sqlite>, doc: NewDocument) -> StoreResult<Created> {
    let now = codec::millis(doc.created_at);
    // One statement checks for the same bytes and inserts, so two concurrent uploads of one
    // file cannot both get through (SQLite runs one writer at a time).
    let inserted = sqlx::query(
        "INSERT INTO documents (id, source_id, name, status, size, content_type, sha256,
                                created_at, updated_at)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8
         WHERE NOT EXISTS (SELECT 1 FROM documents
                           WHERE source_id = ?2 AND sha256 = ?7 AND status != 'failed')",
    )
    .bind(doc.id.to_string())
    .bind(doc.source_id.to_string())
    .bind(&doc.name)
    .bind(DocumentStatus::Queued.as_str())
    .bind(i64::try_from(doc.size).unwrap_or(i64::MAX))
    .bind(&doc.content_type)
    .bind(&doc.sha256)
    .bind(now)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if inserted == 0 {
        let existing = sqlx::query(&format!(
            "SELECT {DOCUMENT_COLUMNS} FROM documents d
             WHERE d.source_id = ? AND d.sha256 = ? AND d.status != 'failed'
             ORDER BY d.created_at, d.rowid LIMIT 1"
        ))
        .bind(doc.source_id.to_string())
        .bind(&doc.sha256)
        .fetch_one(&mut **tx)
        .await?;
        return Ok(Created::Existing(codec::document_from_row(&existing)?));
    }
    sqlx::query(
        "INSERT INTO jobs (id, document_id, kind, state, run_after, created_at, updated_at)
         VALUES (?, ?, 'process_document', 'queued', ?, ?, ?)",
    )
    .bind(JobId::new().to_string())
    .bind(doc.id.to_string())
    .bind(now)
    .bind(now)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(Created::New(DocumentRecord {
        id: doc.id,
        source_id: doc.source_id,
        name: doc.name,
        status: DocumentStatus::Queued,
        error: None,
        chunk_count: 0,
        page_count: 0,
        size: doc.size,
        content_type: doc.content_type,
        sha256: doc.sha256,
        created_at: doc.created_at,
        updated_at: doc.created_at,
    }))
}

pub(super) async fn list(
    pool: &SqlitePool,
    scope: &SourceScope,
    source: SourceId,
) -> StoreResult<Option<Vec<DocumentRecord>>> {
    if !scope.allows(source) || !source_exists(pool, source).await? {
        return Ok(None);
    }
    let rows = sqlx::query(&format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.source_id = ?
         ORDER BY d.created_at DESC, d.rowid DESC"
    ))
    .bind(source.to_string())
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(codec::document_from_row)
        .collect::<StoreResult<Vec<_>>>()
        .map(Some)
}

pub(super) async fn get(
    pool: &SqlitePool,
    scope: &SourceScope,
    source: SourceId,
    id: DocumentId,
) -> StoreResult<Option<DocumentRecord>> {
    if !scope.allows(source) {
        return Ok(None);
    }
    let row = sqlx::query(&format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.id = ? AND d.source_id = ?"
    ))
    .bind(id.to_string())
    .bind(source.to_string())
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(codec::document_from_row).transpose()
}

/// A document by its id alone, whatever its source (administrators see every source).
pub(super) async fn find(pool: &SqlitePool, id: DocumentId) -> StoreResult<Option<DocumentRecord>> {
    let row = sqlx::query(&format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.id = ?"
    ))
    .bind(id.to_string())
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(codec::document_from_row).transpose()
}

pub(super) async fn delete(
    pool: &SqlitePool,
    scope: &SourceScope,
    source: SourceId,
    id: DocumentId,
) -> StoreResult<Option<DocumentRecord>> {
    if !scope.allows(source) {
        return Ok(None);
    }
    // The DELETE comes first so the transaction takes the write lock at once; chunks and the
    // job go with it through ON DELETE CASCADE.
    let row = sqlx::query(&format!(
        "DELETE FROM documents WHERE id = ? AND source_id = ? RETURNING {DOCUMENT_COLUMNS_UNQUALIFIED}"
    ))
    .bind(id.to_string())
    .bind(source.to_string())
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(codec::document_from_row).transpose()
}

pub(super) async fn ready(
    pool: &SqlitePool,
    scope: &SourceScope,
    ids: &[DocumentId],
) -> StoreResult<Vec<DocumentHit>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb = QueryBuilder::<Sqlite>::new(
        "SELECT d.id, d.name, d.source_id, s.name AS source_name
         FROM documents d JOIN sources s ON s.id = d.source_id
         WHERE d.status = 'ready' AND d.id IN ",
    );
    codec::push_id_list(&mut qb, ids);
    codec::push_scope(&mut qb, "d.source_id", scope);
    let rows = qb.build().fetch_all(pool).await?;
    rows.iter()
        .map(|row| {
            Ok(DocumentHit {
                id: codec::id(&row.try_get::<String, _>("id")?)?,
                name: row.try_get("name")?,
                source_id: codec::id(&row.try_get::<String, _>("source_id")?)?,
                source_name: row.try_get("source_name")?,
            })
        })
        .collect()
}

async fn source_exists(pool: &SqlitePool, source: SourceId) -> StoreResult<bool> {
    let row = sqlx::query("SELECT 1 FROM sources WHERE id = ?")
        .bind(source.to_string())
        .fetch_optional(pool)
        .await?;
    Ok(row.is_some())
}

pub(super) async fn existing(
    pool: &SqlitePool,
    ids: &[DocumentId],
) -> StoreResult<Vec<DocumentId>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb = QueryBuilder::<Sqlite>::new("SELECT id FROM documents WHERE id IN ");
    codec::push_id_list(&mut qb, ids);
    let rows = qb.build().fetch_all(pool).await?;
    rows.iter()
        .map(|row| codec::id(&row.try_get::<String, _>("id")?))
        .collect()
}
