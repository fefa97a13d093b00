//! Documents. Creating one also enqueues its processing job in the same transaction, so a
//! document can never exist without the work that will finish it.

use quire_core::{
    DocumentCursor, DocumentId, DocumentRecord, DocumentStatus, ExternalId, JobId, Metadata,
    NewDocument, PageSize, SourceId, SourceScope, VersionRecord, VersionStatus, WebhookEvent,
};

use super::records::{self, DOCUMENT_COLUMNS, VERSION_COLUMNS};
use super::sql::{Arg, Cells, Query, Sql};
use super::webhooks;
use super::{Backend, Conn};
use crate::{Created, DeletedDocument, DocumentHit, DocumentPage, StoreError, StoreResult};

/// Creates `docs` in order in one transaction (a write transaction costs SQLite far more than
/// the few statements each document adds to it), with one wake-up for the workers.
pub(crate) async fn create_all<B: Backend>(
    store: &B,
    docs: Vec<NewDocument>,
) -> StoreResult<Vec<Created>> {
    let mut tx = store.begin_write().await?;
    let mut created = Vec::with_capacity(docs.len());
    for doc in docs {
        created.push(insert::<B>(&mut *tx, doc).await?);
    }
    if created.iter().any(|c| !matches!(c, Created::Existing(_))) {
        B::jobs_queued(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(created)
}

/// [`crate::Store::add_version`].
pub(crate) async fn add_version_to<B: Backend>(
    store: &B,
    scope: &SourceScope,
    id: DocumentId,
    doc: NewDocument,
) -> StoreResult<Option<Created>> {
    if !scope.allows(doc.source_id) {
        return Ok(None);
    }
    let mut tx = store.begin_write().await?;
    lock_source::<B>(&mut *tx, doc.source_id).await?;
    let Some(existing) = fetch::<B>(&mut *tx, id, doc.source_id).await? else {
        tx.rollback().await?;
        return Ok(None);
    };
    let created = add_version::<B>(&mut *tx, existing, doc).await?;
    if matches!(created, Created::Version(_)) {
        B::jobs_queued(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(Some(created))
}

/// Serialises the uploads into one source (PostgreSQL; SQLite has one writer), so the checks
/// for the same bytes and the same external id below cannot both pass for two at once.
async fn lock_source<B: Backend>(conn: &mut Conn<B>, source: SourceId) -> StoreResult<()> {
    conn.fetch_optional(
        Query::new(format!(
            "SELECT 1 FROM sources WHERE id = $1 {}",
            B::lock("FOR UPDATE")
        ))
        .bind(source),
    )
    .await?;
    Ok(())
}

/// A document of `source`, locked for the rest of the transaction.
async fn fetch<B: Backend>(
    conn: &mut Conn<B>,
    id: DocumentId,
    source: SourceId,
) -> StoreResult<Option<DocumentRecord>> {
    let row = conn
        .fetch_optional(
            Query::new(format!(
                "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.id = $1 AND d.source_id = $2 {}",
                B::lock("FOR UPDATE")
            ))
            .bind(id)
            .bind(source),
        )
        .await?;
    row.as_ref().map(records::document).transpose()
}

/// Inserts `doc` with its first version and its job; or, when the source holds its external
/// id, adds it to that document as a new version; or, without an external id, when the source
/// already holds its bytes, answers that document.
async fn insert<B: Backend>(conn: &mut Conn<B>, doc: NewDocument) -> StoreResult<Created> {
    lock_source::<B>(conn, doc.source_id).await?;
    let same = match &doc.external_id {
        Some(external_id) => Query::new(format!(
            "SELECT {DOCUMENT_COLUMNS} FROM documents d
             WHERE d.source_id = $1 AND d.external_id = $2 {}",
            B::lock("FOR UPDATE")
        ))
        .bind(doc.source_id)
        .bind(external_id.as_str()),
        None => Query::new(format!(
            "SELECT {DOCUMENT_COLUMNS} FROM documents d
             WHERE d.source_id = $1 AND d.sha256 = $2 AND d.status <> 'failed'
             ORDER BY d.created_at, d.{} LIMIT 1",
            B::SEQ
        ))
        .bind(doc.source_id)
        .bind(&doc.sha256),
    };
    if let Some(row) = conn.fetch_optional(same).await? {
        let existing = records::document(&row)?;
        return if doc.external_id.is_some() {
            add_version::<B>(conn, existing, doc).await
        } else {
            Ok(Created::Existing(existing))
        };
    }
    let metadata = doc.metadata.clone().unwrap_or_default();
    conn.execute(
        Query::new(
            "INSERT INTO documents (id, source_id, name, status, size, content_type, sha256,
                                    created_at, updated_at, metadata, external_id, version,
                                    index_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, 1, $1)",
        )
        .bind(doc.id)
        .bind(doc.source_id)
        .bind(&doc.name)
        .bind(DocumentStatus::Queued.as_str())
        .bind(doc.size)
        .bind(&doc.content_type)
        .bind(&doc.sha256)
        .bind(doc.created_at)
        .bind(metadata.to_json().as_str())
        .bind(doc.external_id.as_ref().map(ExternalId::as_str)),
    )
    .await?;
    insert_version::<B>(conn, doc.id, 1, &doc).await?;
    conn.execute(
        Query::new(
            "INSERT INTO jobs (id, document_id, kind, state, run_after, created_at, updated_at,
                               version)
             VALUES ($1, $2, 'process_document', 'queued', $3, $3, $3, 1)",
        )
        .bind(JobId::new())
        .bind(doc.id)
        .bind(doc.created_at),
    )
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
        metadata,
        external_id: doc.external_id,
        version: 1,
        index_id: doc.id,
        previous_index_id: None,
        next_version: None,
        created_at: doc.created_at,
        updated_at: doc.created_at,
    }))
}

/// Records version `version` of `document` from `doc` (whose id is the version's index id),
/// queued.
async fn insert_version<B: Backend>(
    conn: &mut Conn<B>,
    document: DocumentId,
    version: u32,
    doc: &NewDocument,
) -> StoreResult<()> {
    conn.execute(
        Query::new(
            "INSERT INTO document_versions (document_id, version, index_id, name, size,
                                            content_type, sha256, status, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)",
        )
        .bind(document)
        .bind(version)
        .bind(doc.id)
        .bind(&doc.name)
        .bind(doc.size)
        .bind(&doc.content_type)
        .bind(&doc.sha256)
        .bind(VersionStatus::Queued.as_str())
        .bind(doc.created_at),
    )
    .await?;
    Ok(())
}

/// Gives `existing` a new version from `doc`, unless its newest version that has not failed
/// has the same bytes: then only the metadata given (if any) replaces the document's. A newer
/// version not yet live is superseded. While the live version is ready it stays live until the
/// new one is ready; otherwise (nothing searchable yet) the new version is live at once.
async fn add_version<B: Backend>(
    conn: &mut Conn<B>,
    existing: DocumentRecord,
    doc: NewDocument,
) -> StoreResult<Created> {
    let id = existing.id;
    let newest = conn
        .fetch_one(
            Query::new(
                "SELECT version, sha256, status FROM document_versions
                 WHERE document_id = $1 ORDER BY version DESC LIMIT 1",
            )
            .bind(id),
        )
        .await?;
    let newest_version = records::version_number(newest.int("version")?)?;
    let newest_status = records::version_status(&newest.text("status")?)?;
    if newest.text("sha256")? == doc.sha256
        && !matches!(
            newest_status,
            VersionStatus::Failed | VersionStatus::Superseded
        )
    {
        if let Some(metadata) = &doc.metadata {
            set_metadata::<B>(conn, id, metadata).await?;
        }
        let current = fetch::<B>(conn, id, existing.source_id).await?;
        return current
            .map(Created::Existing)
            .ok_or_else(|| StoreError::Corrupt(format!("document {id} went while locked")));
    }
    let version = newest_version + 1;
    let now = doc.created_at;
    // A version on its way is dropped for this one; a failed one keeps its record.
    conn.execute(
        Query::new(
            "UPDATE document_versions SET status = $1, updated_at = $2
             WHERE document_id = $3 AND version > $4
               AND status IN ('queued', 'processing', 'pending_review')",
        )
        .bind(VersionStatus::Superseded.as_str())
        .bind(now)
        .bind(id)
        .bind(existing.version),
    )
    .await?;
    insert_version::<B>(conn, id, version, &doc).await?;
    if existing.status != DocumentStatus::Ready {
        // Nothing of it is searchable: the new version takes the live one's place now.
        conn.execute(
            Query::new(
                "UPDATE document_versions SET status = $1, updated_at = $2
                 WHERE document_id = $3 AND version = $4
                   AND status IN ('queued', 'processing', 'pending_review')",
            )
            .bind(VersionStatus::Superseded.as_str())
            .bind(now)
            .bind(id)
            .bind(existing.version),
        )
        .await?;
        conn.execute(
            Query::new(
                "UPDATE documents SET version = $1, index_id = $2, previous_index_id = NULL,
                                      name = $3, size = $4, content_type = $5, sha256 = $6,
                                      status = $7, error = NULL, chunk_count = 0,
                                      page_count = 0, updated_at = $8
                 WHERE id = $9",
            )
            .bind(version)
            .bind(doc.id)
            .bind(&doc.name)
            .bind(doc.size)
            .bind(&doc.content_type)
            .bind(&doc.sha256)
            .bind(DocumentStatus::Queued.as_str())
            .bind(now)
            .bind(id),
        )
        .await?;
    }
    if let Some(metadata) = &doc.metadata {
        set_metadata::<B>(conn, id, metadata).await?;
    }
    // A decision on personal data found in earlier bytes does not apply to these.
    conn.execute(Query::new("DELETE FROM document_reviews WHERE document_id = $1").bind(id))
        .await?;
    let requeued = conn
        .execute(
            Query::new(
                "UPDATE jobs SET version = $1, state = 'queued', attempts = 0, run_after = $2,
                                 lease_owner = NULL, lease_expires_at = NULL, last_error = NULL,
                                 updated_at = $2
                 WHERE document_id = $3",
            )
            .bind(version)
            .bind(now)
            .bind(id),
        )
        .await?;
    if requeued == 0 {
        conn.execute(
            Query::new(
                "INSERT INTO jobs (id, document_id, kind, state, run_after, created_at,
                                   updated_at, version)
                 VALUES ($1, $2, 'process_document', 'queued', $3, $3, $3, $4)",
            )
            .bind(JobId::new())
            .bind(id)
            .bind(now)
            .bind(version),
        )
        .await?;
    }
    let current = fetch::<B>(conn, id, existing.source_id).await?;
    current
        .map(Created::Version)
        .ok_or_else(|| StoreError::Corrupt(format!("document {id} went while locked")))
}

/// Replaces a document's metadata.
async fn set_metadata<B: Backend>(
    conn: &mut Conn<B>,
    id: DocumentId,
    metadata: &Metadata,
) -> StoreResult<()> {
    conn.execute(
        Query::new("UPDATE documents SET metadata = $1 WHERE id = $2")
            .bind(metadata.to_json().as_str())
            .bind(id),
    )
    .await?;
    Ok(())
}

/// [`crate::Store::find_document_by_external_id`].
pub(crate) async fn by_external_id<B: Backend>(
    store: &B,
    scope: &SourceScope,
    source: SourceId,
    external_id: &ExternalId,
) -> StoreResult<Option<DocumentRecord>> {
    if !scope.allows(source) {
        return Ok(None);
    }
    let query = Query::new(format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.source_id = $1 AND d.external_id = $2"
    ))
    .bind(source)
    .bind(external_id.as_str());
    let row = store.read().await?.fetch_optional(query).await?;
    row.as_ref().map(records::document).transpose()
}

/// [`crate::Store::document_versions`].
pub(crate) async fn versions<B: Backend>(
    store: &B,
    scope: &SourceScope,
    source: SourceId,
    id: DocumentId,
) -> StoreResult<Option<Vec<VersionRecord>>> {
    if !scope.allows(source) {
        return Ok(None);
    }
    let query = Query::new(format!(
        "SELECT {VERSION_COLUMNS} FROM document_versions v JOIN documents d ON d.id = v.document_id
         WHERE v.document_id = $1 AND d.source_id = $2 ORDER BY v.version"
    ))
    .bind(id)
    .bind(source);
    let rows = store.read().await?.fetch_all(query).await?;
    if rows.is_empty() {
        return Ok(None);
    }
    rows.iter()
        .map(records::version)
        .collect::<StoreResult<Vec<_>>>()
        .map(Some)
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
    now: chrono::DateTime<chrono::Utc>,
) -> StoreResult<Option<DeletedDocument>> {
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
    let Some(document) = fetch::<B>(&mut *tx, id, source).await? else {
        tx.rollback().await?;
        return Ok(None);
    };
    let rows = tx
        .fetch_all(
            Query::new("SELECT index_id FROM document_versions WHERE document_id = $1").bind(id),
        )
        .await?;
    let mut index_ids = rows
        .iter()
        .map(|row| row.id("index_id"))
        .collect::<StoreResult<Vec<DocumentId>>>()?;
    if !index_ids.contains(&document.index_id) {
        index_ids.push(document.index_id);
    }
    // The announcement reads the document's name and source: before it goes.
    let mut extra = serde_json::Map::new();
    extra.insert("version".into(), document.version.into());
    webhooks::enqueue::<B>(&mut *tx, id, WebhookEvent::DocumentDeleted, extra, now).await?;
    // Versions, chunks, the job and any review go with it through ON DELETE CASCADE.
    tx.execute(
        Query::new("DELETE FROM documents WHERE id = $1 AND source_id = $2")
            .bind(id)
            .bind(source),
    )
    .await?;
    B::document_removed(&mut *tx, &document).await?;
    tx.commit().await?;
    Ok(Some(DeletedDocument {
        document,
        index_ids,
    }))
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
        "SELECT d.id, d.index_id, d.previous_index_id, d.name, d.source_id,
                s.name AS source_name, d.metadata
         FROM documents d JOIN sources s ON s.id = d.source_id
         WHERE d.status = 'ready' AND ({} OR {}) AND {}",
        B::in_ids("d.index_id", "$1"),
        B::in_ids("d.previous_index_id", "$1"),
        B::in_scope("d.source_id", "$2")
    ))
    .bind(Arg::ids(ids.iter().map(|id| id.0)))
    .bind(Arg::scope(scope));
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter()
        .map(|row| {
            Ok(DocumentHit {
                id: row.id("id")?,
                index_id: row.id("index_id")?,
                previous_index_id: row.opt_id("previous_index_id")?,
                name: row.text("name")?,
                source_id: row.id("source_id")?,
                source_name: row.text("source_name")?,
                metadata: quire_core::Metadata::from_stored(&row.text("metadata")?)
                    .map_err(|e| StoreError::Corrupt(e.0))?,
            })
        })
        .collect()
}

/// [`crate::Store::existing_documents`]: the index ids of versions whose entries and originals
/// are still wanted: live, or on their way (queued, processing, held for review). The version
/// before the live one is not (a node's entries of it outlive the switch only when it stopped
/// in between), nor a failed or superseded one.
pub(crate) async fn existing<B: Backend>(
    store: &B,
    ids: &[DocumentId],
) -> StoreResult<Vec<DocumentId>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let query = Query::new(format!(
        "SELECT index_id AS id FROM documents WHERE {live}
         UNION SELECT index_id AS id FROM document_versions
               WHERE status IN ('queued', 'processing', 'pending_review') AND {versions}",
        live = B::in_ids("index_id", "$1"),
        versions = B::in_ids("index_id", "$1"),
    ))
    .bind(Arg::ids(ids.iter().map(|id| id.0)));
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(|row| row.id("id")).collect()
}
