//! Chunks read back: by key for search results that come from the vector index (which holds
//! only ids), and a document at a time for re-embedding.

use quire_core::{ChunkDraft, DocumentId, SourceId};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::codec;
use crate::{StoreResult, StoredChunk};

pub(super) async fn by_keys(
    pool: &PgPool,
    keys: &[(DocumentId, u32)],
) -> StoreResult<Vec<StoredChunk>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    // The keys travel as two arrays, so any number of them is one statement.
    let (documents, ordinals): (Vec<Uuid>, Vec<i64>) = keys
        .iter()
        .map(|(document, ordinal)| (document.0, i64::from(*ordinal)))
        .unzip();
    let rows = sqlx::query(
        "SELECT c.document_id, c.ordinal, c.page, c.section, c.content
         FROM chunks c
         JOIN UNNEST($1::uuid[], $2::bigint[]) AS k (document_id, ordinal)
           ON c.document_id = k.document_id AND c.ordinal = k.ordinal",
    )
    .bind(documents)
    .bind(ordinals)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(StoredChunk {
                document_id: row.try_get::<Uuid, _>("document_id")?.into(),
                chunk: chunk_from_row(row)?,
            })
        })
        .collect()
}

pub(super) async fn of_document(
    pool: &PgPool,
    document: DocumentId,
) -> StoreResult<Vec<ChunkDraft>> {
    let rows = sqlx::query(
        "SELECT ordinal, page, section, content FROM chunks
         WHERE document_id = $1 ORDER BY ordinal",
    )
    .bind(document.0)
    .fetch_all(pool)
    .await?;
    rows.iter().map(chunk_from_row).collect()
}

pub(super) async fn ready_document_ids(
    pool: &PgPool,
    after: Option<DocumentId>,
    limit: usize,
) -> StoreResult<Vec<(DocumentId, SourceId)>> {
    let rows = sqlx::query(
        "SELECT id, source_id FROM documents
         WHERE status = 'ready' AND ($1::uuid IS NULL OR id > $1) ORDER BY id LIMIT $2",
    )
    .bind(after.map(|id| id.0))
    .bind(codec::limit(limit))
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|row| {
            Ok((
                row.try_get::<Uuid, _>("id")?.into(),
                row.try_get::<Uuid, _>("source_id")?.into(),
            ))
        })
        .collect()
}

fn chunk_from_row(row: &PgRow) -> StoreResult<ChunkDraft> {
    Ok(ChunkDraft {
        ordinal: codec::small(row.try_get("ordinal")?),
        page: codec::small(row.try_get("page")?),
        section: row.try_get("section")?,
        content: row.try_get("content")?,
    })
}
