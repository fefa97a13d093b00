//! Chunks read back: a document at a time for re-embedding, and the cursor over every ready
//! document. (Chunks by key are the dialects' own: [`super::Backend::chunks_by_keys`].)

use quire_core::{ChunkDraft, DocumentId, SourceId};

use super::Backend;
use super::records;
use super::sql::{Cells, Query, Sql};
use crate::StoreResult;

/// [`crate::Store::document_chunks`].
pub(crate) async fn of_document<B: Backend>(
    store: &B,
    document: DocumentId,
) -> StoreResult<Vec<ChunkDraft>> {
    let query = Query::new(
        "SELECT ordinal, page, section, content FROM chunks
         WHERE index_id = $1 ORDER BY ordinal",
    )
    .bind(document);
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(records::chunk).collect()
}

/// [`crate::Store::ready_document_ids`].
pub(crate) async fn ready_document_ids<B: Backend>(
    store: &B,
    after: Option<DocumentId>,
    limit: usize,
) -> StoreResult<Vec<(DocumentId, SourceId)>> {
    // Two statements rather than one with `$1 IS NULL OR`, which would keep SQLite from
    // starting the walk at `after` in the index-id index.
    let query = match after {
        Some(after) => Query::new(
            "SELECT index_id, source_id FROM documents
             WHERE status = 'ready' AND index_id > $1 ORDER BY index_id LIMIT $2",
        )
        .bind(after),
        None => Query::new(
            "SELECT index_id, source_id FROM documents
             WHERE status = 'ready' ORDER BY index_id LIMIT $1",
        ),
    }
    .bind(limit);
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter()
        .map(|row| Ok((row.id("index_id")?, row.id("source_id")?)))
        .collect()
}
