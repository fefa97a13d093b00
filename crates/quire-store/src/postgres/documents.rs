//! Documents. Creating one also enqueues its processing job in the same transaction, so a
//! document can never exist without the work that will finish it.

use quire_core::{
    DocumentId, DocumentRecord, DocumentStatus, JobId, NewDocument, SourceId, SourceScope,
};
use sqlx::{PgPool, Postgres, Row, Transaction};
use uuid::Uuid;

use super::codec::{self, DOCUMENT_COLUMNS};
use super::{feed, wakeups};
use crate::{Created, DocumentHit, IndexChangeKind, StoreResult};

/// Creates `docs` in order in one transaction, with one wake-up for the workers.
pub(super) async fn create_all(pool: &PgPool, docs: Vec<NewDocument>) -> StoreResult<Vec<Created>> {
    let mut tx = pool.begin().await?;
    let mut created = Vec::with_capacity(docs.len());
    for doc in docs {
        created.push(insert(&mut tx, doc).await?);
    }
    if created.iter().any(|c| matches!(c, Created::New(_))) {
        wakeups::notify_runnable(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(created)
}

/// Inserts `doc` and its job in `tx`, unless the source already holds its bytes.
async fn insert(tx: &mut Transaction<'_, Postgres>, doc: NewDocument) -> StoreResult<Created> {
    // The partial unique index on (source_id, sha256) decides between two nodes storing the
    // same bytes at once: the second insert waits for the first and then does nothing. If the
    // document it collided with is deleted before it can be read, the insert is tried again
    // (each statement sees what was committed before it began).
    loop {
        let inserted = sqlx::query(
            "INSERT INTO documents (id, source_id, name, status, size, content_type, sha256,
                                    created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
             ON CONFLICT (source_id, sha256) WHERE status <> 'failed' DO NOTHING",
        )
        .bind(doc.id.0)
        .bind(doc.source_id.0)
        .bind(&doc.name)
        .bind(DocumentStatus::Queued.as_str())
        .bind(codec::limit(doc.size))
        .bind(&doc.content_type)
        .bind(&doc.sha256)
        .bind(doc.created_at)
        .execute(&mut **tx)
        .await?
        .rows_affected();
        if inserted == 0 {
            let existing = sqlx::query(&format!(
                "SELECT {DOCUMENT_COLUMNS} FROM documents d
                 WHERE d.source_id = $1 AND d.sha256 = $2 AND d.status <> 'failed'"
            ))
            .bind(doc.source_id.0)
            .bind(&doc.sha256)
            .fetch_optional(&mut **tx)
            .await?;
            match existing {
                Some(row) => return Ok(Created::Existing(codec::document_from_row(&row)?)),
                None => continue,
            }
        }
        sqlx::query(
            "INSERT INTO jobs (id, document_id, kind, state, run_after, created_at, updated_at)
             VALUES ($1, $2, 'process_document', 'queued', $3, $3, $3)",
        )
        .bind(JobId::new().0)
        .bind(doc.id.0)
        .bind(doc.created_at)
        .execute(&mut **tx)
        .await?;
        return Ok(Created::New(DocumentRecord {
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
        }));
    }
}

pub(super) async fn list(
    pool: &PgPool,
    scope: &SourceScope,
    source: SourceId,
) -> StoreResult<Option<Vec<DocumentRecord>>> {
    if !scope.allows(source) || !source_exists(pool, source).await? {
        return Ok(None);
    }
    let rows = sqlx::query(&format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.source_id = $1
         ORDER BY d.created_at DESC, d.seq DESC"
    ))
    .bind(source.0)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(codec::document_from_row)
        .collect::<StoreResult<Vec<_>>>()
        .map(Some)
}

pub(super) async fn get(
    pool: &PgPool,
    scope: &SourceScope,
    source: SourceId,
    id: DocumentId,
) -> StoreResult<Option<DocumentRecord>> {
    if !scope.allows(source) {
        return Ok(None);
    }
    let row = sqlx::query(&format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.id = $1 AND d.source_id = $2"
    ))
    .bind(id.0)
    .bind(source.0)
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(codec::document_from_row).transpose()
}

/// A document by its id alone, whatever its source (administrators see every source).
pub(super) async fn find(pool: &PgPool, id: DocumentId) -> StoreResult<Option<DocumentRecord>> {
    let row = sqlx::query(&format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.id = $1"
    ))
    .bind(id.0)
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(codec::document_from_row).transpose()
}

pub(super) async fn delete(
    pool: &PgPool,
    scope: &SourceScope,
    source: SourceId,
    id: DocumentId,
) -> StoreResult<Option<DocumentRecord>> {
    if !scope.allows(source) {
        return Ok(None);
    }
    let mut tx = pool.begin().await?;
    // Workers lock a job's row before its document's (claim, finish, fail, hold); the cascade
    // below would lock them the other way round and deadlock with a worker ending this very
    // document. Taking the job's row first keeps one order: the deletion waits for the worker.
    sqlx::query("SELECT 1 FROM jobs WHERE document_id = $1 FOR UPDATE")
        .bind(id.0)
        .fetch_optional(&mut *tx)
        .await?;
    // Chunks, the job and any review go with it through ON DELETE CASCADE.
    let row = sqlx::query(&format!(
        "DELETE FROM documents d WHERE d.id = $1 AND d.source_id = $2 RETURNING {DOCUMENT_COLUMNS}"
    ))
    .bind(id.0)
    .bind(source.0)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        tx.rollback().await?;
        return Ok(None);
    };
    let document = codec::document_from_row(&row)?;
    // Every node removes the document's entries from its own indexes.
    feed::append(&mut tx, id, source, IndexChangeKind::Removed).await?;
    tx.commit().await?;
    Ok(Some(document))
}

pub(super) async fn ready(
    pool: &PgPool,
    scope: &SourceScope,
    ids: &[DocumentId],
) -> StoreResult<Vec<DocumentHit>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = sqlx::query(
        "SELECT d.id, d.name, d.source_id, s.name AS source_name
         FROM documents d JOIN sources s ON s.id = d.source_id
         WHERE d.status = 'ready' AND d.id = ANY($1)
           AND ($2::uuid[] IS NULL OR d.source_id = ANY($2))",
    )
    .bind(ids.iter().map(|id| id.0).collect::<Vec<_>>())
    .bind(codec::scope_ids(scope))
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(DocumentHit {
                id: row.try_get::<Uuid, _>("id")?.into(),
                name: row.try_get("name")?,
                source_id: row.try_get::<Uuid, _>("source_id")?.into(),
                source_name: row.try_get("source_name")?,
            })
        })
        .collect()
}

async fn source_exists(pool: &PgPool, source: SourceId) -> StoreResult<bool> {
    let row = sqlx::query("SELECT 1 FROM sources WHERE id = $1")
        .bind(source.0)
        .fetch_optional(pool)
        .await?;
    Ok(row.is_some())
}

pub(super) async fn existing(pool: &PgPool, ids: &[DocumentId]) -> StoreResult<Vec<DocumentId>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let found: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM documents WHERE id = ANY($1)")
        .bind(ids.iter().map(|id| id.0).collect::<Vec<_>>())
        .fetch_all(pool)
        .await?;
    Ok(found.into_iter().map(DocumentId::from).collect())
}
