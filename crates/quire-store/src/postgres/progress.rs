//! Progress of documents being processed.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use quire_core::DocumentId;
use sqlx::{PgPool, Row};

use super::codec;
use crate::{DocumentProgress, ProcessingStage, StoreError, StoreResult};

pub(super) async fn set(
    pool: &PgPool,
    id: DocumentId,
    progress: &DocumentProgress,
) -> StoreResult<()> {
    // Through a SELECT guarded by EXISTS: a document deleted while its worker ran gets no row
    // (and no foreign-key error).
    sqlx::query(
        "INSERT INTO document_progress (document_id, stage, done, total, updated_at)
         SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM documents WHERE id = $1)
         ON CONFLICT (document_id) DO UPDATE SET
             stage = excluded.stage, done = excluded.done, total = excluded.total,
             updated_at = excluded.updated_at",
    )
    .bind(id.0)
    .bind(progress.stage.as_str())
    .bind(progress.done.map(|n| i64::try_from(n).unwrap_or(i64::MAX)))
    .bind(progress.total.map(|n| i64::try_from(n).unwrap_or(i64::MAX)))
    .bind(progress.updated_at)
    .execute(pool)
    .await?;
    Ok(())
}

/// What a processing document shows: as the SQLite store's `progress::get` says.
pub(super) async fn get(pool: &PgPool, id: DocumentId) -> StoreResult<Option<DocumentProgress>> {
    let row = sqlx::query(
        "SELECT p.stage, p.done, p.total, p.updated_at, d.updated_at AS claimed_at
         FROM documents d
         LEFT JOIN document_progress p
             ON p.document_id = d.id AND p.updated_at >= d.updated_at
         WHERE d.id = $1 AND d.status = 'processing'",
    )
    .bind(id.0)
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let Some(stage) = row.try_get::<Option<String>, _>("stage")? else {
        return Ok(Some(DocumentProgress::claimed(
            row.try_get::<DateTime<Utc>, _>("claimed_at")?,
        )));
    };
    Ok(Some(DocumentProgress {
        stage: ProcessingStage::from_str(&stage).map_err(StoreError::Corrupt)?,
        done: row.try_get::<Option<i64>, _>("done")?.map(codec::count),
        total: row.try_get::<Option<i64>, _>("total")?.map(codec::count),
        updated_at: row.try_get::<DateTime<Utc>, _>("updated_at")?,
    }))
}
