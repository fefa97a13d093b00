//! The index feed: the changes every node applies to its own keyword index and vector replica,
//! in commit order, and the vectors a ready document was stored with (see `schema_v6.sql`).

use quire_core::{DocumentId, SourceId};
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use super::codec;
use crate::{ChunkVectors, ClaimedJob, IndexChange, IndexChangeKind, StoreError, StoreResult};

/// A change to append to the feed.
pub(super) struct Change {
    pub(super) document: DocumentId,
    pub(super) source: SourceId,
    pub(super) kind: IndexChangeKind,
    pub(super) index_id: DocumentId,
    pub(super) replaced: Option<DocumentId>,
}

/// Appends a change to the feed, as the last step of the transaction that made it. Taking the
/// head row's lock orders the writers: positions are handed out in commit order, and the lock
/// is held only from here to the commit.
pub(super) async fn append(conn: &mut PgConnection, change: Change) -> StoreResult<()> {
    sqlx::query(
        "WITH head AS (
             UPDATE index_feed_head SET position = position + 1 RETURNING position)
         INSERT INTO index_feed (position, document_id, source_id, kind, index_id, replaced)
         SELECT position, $1, $2, $3, $4, $5 FROM head",
    )
    .bind(change.document.0)
    .bind(change.source.0)
    .bind(change.kind.as_str())
    .bind(change.index_id.0)
    .bind(change.replaced.map(|id| id.0))
    .execute(conn)
    .await?;
    Ok(())
}

pub(super) async fn changes(
    pool: &PgPool,
    after: u64,
    limit: usize,
) -> StoreResult<Vec<IndexChange>> {
    let rows = sqlx::query(
        "SELECT position, document_id, source_id, kind, index_id, replaced FROM index_feed
         WHERE position > $1 ORDER BY position LIMIT $2",
    )
    .bind(codec::limit(after))
    .bind(codec::limit(limit))
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|row| {
            let kind: String = row.try_get("kind")?;
            let document_id = DocumentId(row.try_get::<Uuid, _>("document_id")?);
            Ok(IndexChange {
                position: codec::count(row.try_get("position")?),
                document_id,
                // Changes written before versions name the document alone.
                index_id: row
                    .try_get::<Option<Uuid>, _>("index_id")?
                    .map_or(document_id, DocumentId),
                replaced: row.try_get::<Option<Uuid>, _>("replaced")?.map(DocumentId),
                source_id: SourceId(row.try_get::<Uuid, _>("source_id")?),
                kind: IndexChangeKind::parse(&kind)
                    .ok_or_else(|| StoreError::Corrupt(format!("index change kind {kind:?}")))?,
            })
        })
        .collect()
}

/// Stores a document's chunk vectors with it (replacing any from an earlier attempt).
pub(super) async fn store_vectors(
    conn: &mut PgConnection,
    job: &ClaimedJob,
    vectors: &ChunkVectors,
) -> StoreResult<()> {
    let dimensions = vectors.vectors.first().map_or(0, Vec::len);
    if dimensions == 0 || vectors.vectors.iter().any(|v| v.len() != dimensions) {
        return Err(StoreError::Invalid(
            "chunk vectors must all have the same, non-zero length".into(),
        ));
    }
    let mut data = Vec::with_capacity(vectors.vectors.len() * dimensions * 4);
    for value in vectors.vectors.iter().flatten() {
        data.extend_from_slice(&value.to_le_bytes());
    }
    sqlx::query(
        "INSERT INTO document_vectors (document_id, model, dimensions, data, index_id)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (document_id) DO UPDATE SET
             model = excluded.model, dimensions = excluded.dimensions, data = excluded.data,
             index_id = excluded.index_id",
    )
    .bind(job.document_id.0)
    .bind(&vectors.model)
    .bind(codec::limit(dimensions))
    .bind(data)
    .bind(job.index_id.0)
    .execute(conn)
    .await?;
    Ok(())
}

pub(super) async fn vectors(
    pool: &PgPool,
    document: DocumentId,
) -> StoreResult<Option<ChunkVectors>> {
    let Some(row) =
        sqlx::query("SELECT model, dimensions, data FROM document_vectors WHERE index_id = $1")
            .bind(document.0)
            .fetch_optional(pool)
            .await?
    else {
        return Ok(None);
    };
    let model: String = row.try_get("model")?;
    let dimensions = usize::try_from(row.try_get::<i32, _>("dimensions")?)
        .map_err(|_| StoreError::Corrupt("negative vector dimensions".into()))?;
    let data: Vec<u8> = row.try_get("data")?;
    if dimensions == 0 || !data.len().is_multiple_of(dimensions * 4) {
        return Err(StoreError::Corrupt(format!(
            "vectors of document {document}: {} bytes for {dimensions} dimensions",
            data.len()
        )));
    }
    let vectors = data
        .chunks_exact(dimensions * 4)
        .map(|vector| {
            vector
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
        .collect();
    Ok(Some(ChunkVectors { model, vectors }))
}
