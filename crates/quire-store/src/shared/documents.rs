//! Documents. Creating one also enqueues its processing job in the same transaction, so a
//! document can never exist without the work that will finish it.

use quire_core::{
    DocumentCursor, DocumentId, DocumentRecord, DocumentStatus, JobId, NewDocument, PageSize,
    SourceId, SourceScope,
};

use super::records::{self, DOCUMENT_COLUMNS, DOCUMENT_COLUMNS_UNQUALIFIED};
use super::sql::{Arg, Cells, Query, Sql};
use super::{Backend, Conn};
use crate::{Created, DocumentHit, DocumentPage, StoreError, StoreResult};

/// Creates `docs` in order in one transaction (a write transaction costs SQLite far more than
/// the two statements each document adds to it), with one wake-up for the workers.
pub(crate) async fn create_all<B: Backend>(
    store: &B,
    docs: Vec<NewDocument>,
) -> StoreResult<Vec<Created>> {
    let mut tx = store.begin_write().await?;
    let mut created = Vec::with_capacity(docs.len());
    for doc in docs {
        created.push(insert::<B>(&mut *tx, doc).await?);
    }
    if created.iter().any(|c| matches!(c, Created::New(_))) {
        B::jobs_queued(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(created)
}

/// Inserts `doc` and its job, unless the source already holds its bytes. If the document it
/// collided with is deleted before it can be read (another PostgreSQL node), the insert is
/// tried again: each statement sees what was committed before it began.
async fn insert<B: Backend>(conn: &mut Conn<B>, doc: NewDocument) -> StoreResult<Created> {
    loop {
        let inserted = conn
            .execute(
                Query::new(format!(
                    "INSERT INTO documents (id, source_id, name, status, size, content_type, sha256,
                                            created_at, updated_at, metadata) {}",
                    B::NEW_DOCUMENT_ROW
                ))
                .bind(doc.id)
                .bind(doc.source_id)
                .bind(&doc.name)
                .bind(DocumentStatus::Queued.as_str())
                .bind(doc.size)
                .bind(&doc.content_type)
                .bind(&doc.sha256)
                .bind(doc.created_at)
                .bind(doc.metadata.to_json().as_str()),
            )
            .await?;
        if inserted == 0 {
            let existing = Query::new(format!(
                "SELECT {DOCUMENT_COLUMNS} FROM documents d
                 WHERE d.source_id = $1 AND d.sha256 = $2 AND d.status <> 'failed'
                 ORDER BY d.created_at, d.{} LIMIT 1",
                B::SEQ
            ))
            .bind(doc.source_id)
            .bind(&doc.sha256);
            match conn.fetch_optional(existing).await? {
                Some(row) => return Ok(Created::Existing(records::document(&row)?)),
                None => continue,
            }
        }
        conn.execute(
            Query::new(
                "INSERT INTO jobs (id, document_id, kind, state, run_after, created_at, updated_at)
                 VALUES ($1, $2, 'process_document', 'queued', $3, $3, $3)",
            )
            .bind(JobId::new())
            .bind(doc.id)
            .bind(doc.created_at),
        )
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
            metadata: doc.metadata,
            created_at: doc.created_at,
            updated_at: doc.created_at,
        }));
    }
}

/// [`crate::Store::list_documents`].
pub(crate) async fn list<B: Backend>(
    store: &B,
    scope: &SourceScope,
    source: SourceId,
) -> StoreResult<Option<Vec<DocumentRecord>>> {
    let mut conn = store.read().await?;
    if !scope.allows(source)
        || !conn
            .exists(Query::new("SELECT 1 FROM sources WHERE id = $1").bind(source))
            .await?
    {
        return Ok(None);
    }
    let query = Query::new(format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.source_id = $1
         ORDER BY d.created_at DESC, d.{} DESC",
        B::SEQ
    ))
    .bind(source);
    let rows = conn.fetch_all(query).await?;
    rows.iter()
        .map(records::document)
        .collect::<StoreResult<Vec<_>>>()
        .map(Some)
}

/// [`crate::Store::ready_documents_in_scope`].
pub(crate) async fn ready_in_scope<B: Backend>(
    store: &B,
    scope: &SourceScope,
) -> StoreResult<Vec<DocumentRecord>> {
    let query = Query::new(format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.status = 'ready' AND {}
         ORDER BY d.created_at DESC, d.{} DESC",
        B::in_scope("d.source_id", "$1"),
        B::SEQ
    ))
    .bind(Arg::scope(scope));
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(records::document).collect()
}

/// [`crate::Store::list_documents_page`].
pub(crate) async fn list_page<B: Backend>(
    store: &B,
    scope: &SourceScope,
    source: SourceId,
    after: Option<DocumentCursor>,
    size: PageSize,
) -> StoreResult<Option<DocumentPage>> {
    let mut conn = store.read().await?;
    if !scope.allows(source)
        || !conn
            .exists(Query::new("SELECT 1 FROM sources WHERE id = $1").bind(source))
            .await?
    {
        return Ok(None);
    }
    // One row more than the page tells whether another page follows.
    let wanted = i64::from(size.get()) + 1;
    let query = match after {
        None => Query::new(format!(
            "SELECT {DOCUMENT_COLUMNS}, d.{seq} AS seq FROM documents d WHERE d.source_id = $1
             ORDER BY d.created_at DESC, d.{seq} DESC LIMIT $2",
            seq = B::SEQ
        ))
        .bind(source)
        .bind(wanted),
        Some(cursor) => Query::new(format!(
            "SELECT {DOCUMENT_COLUMNS}, d.{seq} AS seq FROM documents d WHERE d.source_id = $1
             AND (d.created_at < $2 OR (d.created_at = $3 AND d.{seq} < $4))
             ORDER BY d.created_at DESC, d.{seq} DESC LIMIT $5",
            seq = B::SEQ
        ))
        .bind(source)
        .bind(cursor.created_at)
        .bind(cursor.created_at)
        .bind(cursor.seq)
        .bind(wanted),
    };
    let rows = conn.fetch_all(query).await?;
    let mut documents = Vec::with_capacity(rows.len());
    let mut next = None;
    for (i, row) in rows.iter().enumerate() {
        if i as u32 == size.get() {
            break;
        }
        let document = records::document(row)?;
        if i + 1 == size.get() as usize && rows.len() > size.get() as usize {
            next = Some(DocumentCursor {
                created_at: document.created_at,
                seq: row.int("seq")?,
            });
        }
        documents.push(document);
    }
    Ok(Some(DocumentPage { documents, next }))
}

/// [`crate::Store::patch_document_metadata`].
pub(crate) async fn patch_metadata<B: Backend>(
    store: &B,
    scope: &SourceScope,
    source: SourceId,
    id: DocumentId,
    patch: &serde_json::Value,
) -> StoreResult<Option<DocumentRecord>> {
    if !scope.allows(source) {
        return Ok(None);
    }
    let mut tx = store.begin_write().await?;
    let current = tx
        .fetch_optional(
            Query::new(format!(
                "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.id = $1 AND d.source_id = $2 {}",
                B::lock("FOR UPDATE")
            ))
            .bind(id)
            .bind(source),
        )
        .await?;
    let Some(current) = current else {
        return Ok(None);
    };
    let mut document = records::document(&current)?;
    document.metadata = document
        .metadata
        .merged(patch)
        .map_err(|e| StoreError::Invalid(e.0))?;
    tx.execute(
        Query::new("UPDATE documents SET metadata = $1 WHERE id = $2")
            .bind(document.metadata.to_json().as_str())
            .bind(id),
    )
    .await?;
    tx.commit().await?;
    Ok(Some(document))
}

/// [`crate::Store::get_document`].
pub(crate) async fn get<B: Backend>(
    store: &B,
    scope: &SourceScope,
    source: SourceId,
    id: DocumentId,
) -> StoreResult<Option<DocumentRecord>> {
    if !scope.allows(source) {
        return Ok(None);
    }
    let query = Query::new(format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.id = $1 AND d.source_id = $2"
    ))
    .bind(id)
    .bind(source);
    let row = store.read().await?.fetch_optional(query).await?;
    row.as_ref().map(records::document).transpose()
}

/// A document by its id alone, whatever its source (administrators see every source).
pub(crate) async fn find<B: Backend>(
    store: &B,
    id: DocumentId,
) -> StoreResult<Option<DocumentRecord>> {
    let query = Query::new(format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.id = $1"
    ))
    .bind(id);
    let row = store.read().await?.fetch_optional(query).await?;
    row.as_ref().map(records::document).transpose()
}

/// [`crate::Store::delete_document`].
pub(crate) async fn delete<B: Backend>(
    store: &B,
    scope: &SourceScope,
    source: SourceId,
    id: DocumentId,
) -> StoreResult<Option<DocumentRecord>> {
    if !scope.allows(source) {
        return Ok(None);
    }
    let mut tx = store.begin_write().await?;
    // Workers lock a job's row before its document's (claim, finish, fail, hold); the cascade
    // below would lock them the other way round and deadlock with a worker ending this very
    // document. Taking the job's row first keeps one order: the deletion waits for the worker.
    tx.fetch_optional(
        Query::new(format!(
            "SELECT 1 FROM jobs WHERE document_id = $1 {}",
            B::lock("FOR UPDATE")
        ))
        .bind(id),
    )
    .await?;
    // Chunks, the job and any review go with it through ON DELETE CASCADE.
    let query = Query::new(format!(
        "DELETE FROM documents WHERE id = $1 AND source_id = $2
         RETURNING {DOCUMENT_COLUMNS_UNQUALIFIED}"
    ))
    .bind(id)
    .bind(source);
    let Some(row) = tx.fetch_optional(query).await? else {
        tx.rollback().await?;
        return Ok(None);
    };
    let document = records::document(&row)?;
    B::document_removed(&mut *tx, id, source).await?;
    tx.commit().await?;
    Ok(Some(document))
}

/// [`crate::Store::ready_documents`].
pub(crate) async fn ready<B: Backend>(
    store: &B,
    scope: &SourceScope,
    ids: &[DocumentId],
) -> StoreResult<Vec<DocumentHit>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let query = Query::new(format!(
        "SELECT d.id, d.name, d.source_id, s.name AS source_name, d.metadata
         FROM documents d JOIN sources s ON s.id = d.source_id
         WHERE d.status = 'ready' AND {} AND {}",
        B::in_ids("d.id", "$1"),
        B::in_scope("d.source_id", "$2")
    ))
    .bind(Arg::ids(ids.iter().map(|id| id.0)))
    .bind(Arg::scope(scope));
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter()
        .map(|row| {
            Ok(DocumentHit {
                id: row.id("id")?,
                name: row.text("name")?,
                source_id: row.id("source_id")?,
                source_name: row.text("source_name")?,
                metadata: quire_core::Metadata::from_stored(&row.text("metadata")?)
                    .map_err(|e| StoreError::Corrupt(e.0))?,
            })
        })
        .collect()
}

/// [`crate::Store::existing_documents`].
pub(crate) async fn existing<B: Backend>(
    store: &B,
    ids: &[DocumentId],
) -> StoreResult<Vec<DocumentId>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let query = Query::new(format!(
        "SELECT id FROM documents WHERE {}",
        B::in_ids("id", "$1")
    ))
    .bind(Arg::ids(ids.iter().map(|id| id.0)));
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(|row| row.id("id")).collect()
}
