//! Progress of documents being processed.

use std::str::FromStr;

use quire_core::DocumentId;

use super::Backend;
use super::sql::{Cells, Query, Sql};
use crate::{DocumentProgress, ProcessingStage, StoreError, StoreResult};

/// [`crate::Store::set_document_progress`].
pub(crate) async fn set<B: Backend>(
    store: &B,
    id: DocumentId,
    progress: &DocumentProgress,
) -> StoreResult<()> {
    // Through a SELECT guarded by EXISTS: a document deleted while its worker ran gets no row
    // (and no foreign-key error).
    let query = Query::new(
        "INSERT INTO document_progress (document_id, stage, done, total, updated_at)
         SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM documents WHERE id = $1)
         ON CONFLICT (document_id) DO UPDATE SET
             stage = excluded.stage, done = excluded.done, total = excluded.total,
             updated_at = excluded.updated_at",
    )
    .bind(id)
    .bind(progress.stage.as_str())
    .bind(progress.done)
    .bind(progress.total)
    .bind(progress.updated_at);
    store.write().await?.execute(query).await?;
    Ok(())
}

/// What a processing document shows: its worker's report when one was written since the claim,
/// else the parsing stage since the claim (a worker writes nothing for a document it finishes
/// within its first report interval, and a report from an earlier attempt is stale).
pub(crate) async fn get<B: Backend>(
    store: &B,
    id: DocumentId,
) -> StoreResult<Option<DocumentProgress>> {
    let query = Query::new(
        "SELECT p.stage, p.done, p.total, p.updated_at, d.updated_at AS claimed_at
         FROM documents d
         LEFT JOIN document_progress p
             ON p.document_id = d.id AND p.updated_at >= d.updated_at
         WHERE d.id = $1 AND d.status = 'processing'",
    )
    .bind(id);
    let Some(row) = store.read().await?.fetch_optional(query).await? else {
        return Ok(None);
    };
    let Some(stage) = row.opt_text("stage")? else {
        return Ok(Some(DocumentProgress::claimed(row.time("claimed_at")?)));
    };
    Ok(Some(DocumentProgress {
        stage: ProcessingStage::from_str(&stage).map_err(StoreError::Corrupt)?,
        done: row.opt_int("done")?.map(super::sql::count),
        total: row.opt_int("total")?.map(super::sql::count),
        updated_at: row.time("updated_at")?,
    }))
}
