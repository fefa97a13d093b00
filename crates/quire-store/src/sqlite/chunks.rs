//! Chunks read back: by key for search results that come from the vector index (which holds
//! only ids), and a document at a time for re-embedding.

use quire_core::{ChunkDraft, DocumentId, SourceId};
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool};

use super::codec;
use crate::{StoreResult, StoredChunk};

/// Most keys bound in one statement (SQLite allows 32,766 parameters; two per key).
const KEYS_PER_QUERY: usize = 2_000;

pub(super) async fn by_keys(
    pool: &SqlitePool,
    keys: &[(DocumentId, u32)],
) -> StoreResult<Vec<StoredChunk>> {
    let mut out = Vec::with_capacity(keys.len());
    for batch in keys.chunks(KEYS_PER_QUERY) {
        let mut qb = QueryBuilder::<Sqlite>::new(
            "SELECT document_id, ordinal, page, section, content FROM chunks
             WHERE (document_id, ordinal) IN (VALUES ",
        );
        let mut list = qb.separated(", ");
        for (document, ordinal) in batch {
            list.push("(");
            list.push_bind_unseparated(document.to_string());
            list.push_unseparated(", ");
            list.push_bind_unseparated(i64::from(*ordinal));
            list.push_unseparated(")");
        }
        qb.push(")");
        for row in qb.build().fetch_all(pool).await? {
            out.push(StoredChunk {
                document_id: codec::id(&row.try_get::<String, _>("document_id")?)?,
                chunk: chunk_from_row(&row)?,
            });
        }
    }
    Ok(out)
}

pub(super) async fn of_document(
    pool: &SqlitePool,
    document: DocumentId,
) -> StoreResult<Vec<ChunkDraft>> {
    let rows = sqlx::query(
        "SELECT ordinal, page, section, content FROM chunks
         WHERE document_id = ? ORDER BY ordinal",
    )
    .bind(document.to_string())
    .fetch_all(pool)
    .await?;
    rows.iter().map(chunk_from_row).collect()
}

pub(super) async fn ready_document_ids(
    pool: &SqlitePool,
    after: Option<DocumentId>,
    limit: usize,
) -> StoreResult<Vec<(DocumentId, SourceId)>> {
    let rows = sqlx::query(
        "SELECT id, source_id FROM documents
         WHERE status = 'ready' AND id > ? ORDER BY id LIMIT ?",
    )
    .bind(after.map(|id| id.to_string()).unwrap_or_default())
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|row| {
            Ok((
                codec::id(&row.try_get::<String, _>("id")?)?,
                codec::id(&row.try_get::<String, _>("source_id")?)?,
            ))
        })
        .collect()
}

fn chunk_from_row(row: &sqlx::sqlite::SqliteRow) -> StoreResult<ChunkDraft> {
    Ok(ChunkDraft {
        ordinal: u32::try_from(row.try_get::<i64, _>("ordinal")?).unwrap_or(u32::MAX),
        page: u32::try_from(row.try_get::<i64, _>("page")?).unwrap_or(u32::MAX),
        section: row.try_get("section")?,
        content: row.try_get("content")?,
    })
}
