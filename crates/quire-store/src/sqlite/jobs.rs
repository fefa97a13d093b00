//! The durable job queue. A job is leased to one worker at a time; a lease that runs out
//! (the worker died or hung) makes the job runnable again, and every state change of a job and
//! its document happens in one transaction.

use chrono::{DateTime, Utc};
use quire_core::{ChunkId, DocumentStatus, WebhookEvent};
use serde_json::Map;
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool};

use super::{codec, webhooks};
use crate::{ClaimedJob, FinishOutcome, ProcessedDocument, StoreError, StoreResult};

/// Chunk rows per `INSERT`: 7 parameters each stays far below SQLite's 32,766 parameters a
/// statement, and a document of the largest allowed size is written in a few hundred statements.
const CHUNK_ROWS_PER_INSERT: usize = 500;

/// The oldest runnable job (`?3`: now): queued and due, or running with its lease run out.
/// Read in `jobs_by_age` order (schema v11), so the first runnable row ends the search; left to
/// itself, SQLite finds the two kinds of row through `jobs_runnable` and sorts every queued job
/// (`bench/job-claim` times both).
const NEXT_JOB: &str = "SELECT id FROM jobs INDEXED BY jobs_by_age
     WHERE state IN ('queued', 'running')
       AND ((state = 'queued' AND run_after <= ?3)
            OR (state = 'running' AND lease_expires_at < ?3))
     ORDER BY created_at, rowid
     LIMIT 1";

/// Claims the oldest runnable job for `worker`: a read on `readers` first, as idle workers
/// poll often and should not queue for the `writer` for nothing, then the claim on `writer`.
pub(super) async fn claim(
    readers: &SqlitePool,
    writer: &SqlitePool,
    worker: &str,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
) -> StoreResult<Option<ClaimedJob>> {
    let now_ms = codec::millis(now);
    let runnable = sqlx::query(
        "SELECT 1 FROM jobs
         WHERE (state = 'queued' AND run_after <= ?1) OR (state = 'running' AND lease_expires_at < ?1)
         LIMIT 1",
    )
    .bind(now_ms)
    .fetch_optional(readers)
    .await?;
    if runnable.is_none() {
        return Ok(None);
    }
    let mut tx = writer.begin().await?;
    let row = sqlx::query(&format!(
        "UPDATE jobs
         SET state = 'running', attempts = attempts + 1, lease_owner = ?1,
             lease_expires_at = ?2, updated_at = ?3
         WHERE id = ({NEXT_JOB})
         RETURNING id, document_id, attempts"
    ))
    .bind(worker)
    .bind(codec::millis(lease_until))
    .bind(now_ms)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        tx.rollback().await?;
        return Ok(None);
    };
    let document_id: String = row.try_get("document_id")?;
    let doc = sqlx::query(
        "UPDATE documents SET status = ?, updated_at = ? WHERE id = ?
         RETURNING source_id, name, content_type",
    )
    .bind(DocumentStatus::Processing.as_str())
    .bind(now_ms)
    .bind(&document_id)
    .fetch_one(&mut *tx)
    .await?;
    let job = ClaimedJob {
        id: codec::id(&row.try_get::<String, _>("id")?)?,
        document_id: codec::id(&document_id)?,
        source_id: codec::id(&doc.try_get::<String, _>("source_id")?)?,
        document_name: doc.try_get("name")?,
        content_type: doc.try_get("content_type")?,
        attempts: u32::try_from(row.try_get::<i64, _>("attempts")?).unwrap_or(u32::MAX),
        worker: worker.to_owned(),
    };
    tx.commit().await?;
    Ok(Some(job))
}

/// Moves the lease's end if `job.worker` still holds this claim (same attempt): a claim by
/// another worker counts an attempt, so a late renewal matches nothing.
pub(super) async fn renew(
    pool: &SqlitePool,
    job: &ClaimedJob,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
) -> StoreResult<bool> {
    let updated = sqlx::query(
        "UPDATE jobs SET lease_expires_at = ?, updated_at = ?
         WHERE id = ? AND state = 'running' AND lease_owner = ? AND attempts = ?",
    )
    .bind(codec::millis(lease_until))
    .bind(codec::millis(now))
    .bind(job.id.to_string())
    .bind(&job.worker)
    .bind(i64::from(job.attempts))
    .execute(pool)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

/// Finishes every document of `finished` in one transaction ([`store_finished`] each): the
/// transaction's commit costs SQLite far more than the few statements each document adds.
pub(super) async fn finish_all(
    pool: &SqlitePool,
    finished: &[(ClaimedJob, ProcessedDocument)],
    now: DateTime<Utc>,
) -> StoreResult<Vec<FinishOutcome>> {
    let mut tx = pool.begin().await?;
    let mut outcomes = Vec::with_capacity(finished.len());
    for (job, processed) in finished {
        outcomes.push(store_finished(&mut tx, job, processed, now).await?);
    }
    tx.commit().await?;
    Ok(outcomes)
}

/// In `tx`: makes the document ready with its chunks, ends its job and writes its
/// `document.ready` events, if `job.worker` still holds the job; otherwise changes nothing and
/// says whether the lease was lost or the document is gone.
async fn store_finished(
    tx: &mut sqlx::Transaction<'_, Sqlite>,
    job: &ClaimedJob,
    processed: &ProcessedDocument,
    now: DateTime<Utc>,
) -> StoreResult<FinishOutcome> {
    let now_ms = codec::millis(now);
    let doc = job.document_id.to_string();
    // The document first, and only while the job is this claim's: a lost lease or a deleted
    // document (whose job went with it) leaves both untouched, with nothing to undo.
    let source: Option<String> = sqlx::query_scalar(
        "UPDATE documents SET status = ?, error = NULL, chunk_count = ?, page_count = ?,
                              updated_at = ?
         WHERE id = ? AND EXISTS (SELECT 1 FROM jobs
                                  WHERE id = ? AND state = 'running' AND lease_owner = ?
                                    AND attempts = ?)
         RETURNING source_id",
    )
    .bind(DocumentStatus::Ready.as_str())
    .bind(processed.chunks.len() as i64)
    .bind(i64::from(processed.page_count))
    .bind(now_ms)
    .bind(&doc)
    .bind(job.id.to_string())
    .bind(&job.worker)
    .bind(i64::from(job.attempts))
    .fetch_optional(&mut **tx)
    .await?;
    let Some(source) = source else {
        return lost_or_gone(&mut **tx, job).await;
    };
    if !release_lease(tx, job, "done", None, now_ms).await? {
        return Err(StoreError::Corrupt(format!(
            "the job of document {doc} changed inside its finishing transaction"
        )));
    }
    // A retried job may have stored chunks before; replace them.
    sqlx::query("DELETE FROM chunks WHERE document_id = ?")
        .bind(&doc)
        .execute(&mut **tx)
        .await?;
    // Many rows a statement: one statement per chunk cost a round trip to SQLite's thread each.
    for batch in processed.chunks.chunks(CHUNK_ROWS_PER_INSERT) {
        let mut insert = QueryBuilder::<Sqlite>::new(
            "INSERT INTO chunks (id, document_id, source_id, ordinal, page, section, content) ",
        );
        insert.push_values(batch, |mut row, chunk| {
            row.push_bind(ChunkId::new().to_string())
                .push_bind(&doc)
                .push_bind(&source)
                .push_bind(i64::from(chunk.ordinal))
                .push_bind(i64::from(chunk.page))
                .push_bind(&chunk.section)
                .push_bind(&chunk.content);
        });
        insert.build().execute(&mut **tx).await?;
    }
    webhooks::enqueue(
        tx,
        job.document_id,
        WebhookEvent::DocumentReady,
        Map::new(),
        now,
    )
    .await?;
    Ok(FinishOutcome::Stored)
}

pub(super) async fn fail(
    pool: &SqlitePool,
    job: &ClaimedJob,
    error: &str,
    now: DateTime<Utc>,
) -> StoreResult<FinishOutcome> {
    let now_ms = codec::millis(now);
    let mut tx = pool.begin().await?;
    if !release_lease(&mut tx, job, "failed", Some(error), now_ms).await? {
        tx.rollback().await?;
        return lost_or_gone(pool, job).await;
    }
    let updated = sqlx::query(
        "UPDATE documents SET status = ?, error = ?, chunk_count = 0, updated_at = ? WHERE id = ?",
    )
    .bind(DocumentStatus::Failed.as_str())
    .bind(error)
    .bind(now_ms)
    .bind(job.document_id.to_string())
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if updated == 0 {
        tx.rollback().await?;
        return Ok(FinishOutcome::DocumentGone);
    }
    sqlx::query("DELETE FROM chunks WHERE document_id = ?")
        .bind(job.document_id.to_string())
        .execute(&mut *tx)
        .await?;
    webhooks::enqueue(
        &mut tx,
        job.document_id,
        WebhookEvent::DocumentFailed,
        Map::new(),
        now,
    )
    .await?;
    tx.commit().await?;
    Ok(FinishOutcome::Stored)
}

/// Ends the job if `job.worker` still holds its lease; false when it does not (or the job is
/// gone with its document).
pub(super) async fn release_lease(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    job: &ClaimedJob,
    state: &str,
    error: Option<&str>,
    now_ms: i64,
) -> StoreResult<bool> {
    let updated = sqlx::query(
        "UPDATE jobs SET state = ?, last_error = ?, lease_owner = NULL, lease_expires_at = NULL,
                         updated_at = ?
         WHERE id = ? AND state = 'running' AND lease_owner = ? AND attempts = ?",
    )
    .bind(state)
    .bind(error)
    .bind(now_ms)
    .bind(job.id.to_string())
    .bind(&job.worker)
    .bind(i64::from(job.attempts))
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

pub(super) async fn lost_or_gone<'c>(
    db: impl sqlx::SqliteExecutor<'c>,
    job: &ClaimedJob,
) -> StoreResult<FinishOutcome> {
    let exists = sqlx::query("SELECT 1 FROM documents WHERE id = ?")
        .bind(job.document_id.to_string())
        .fetch_optional(db)
        .await?
        .is_some();
    Ok(if exists {
        FinishOutcome::LeaseLost
    } else {
        FinishOutcome::DocumentGone
    })
}

pub(super) async fn requeue_running(
    pool: &SqlitePool,
    owner_prefix: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let now_ms = codec::millis(now);
    let mut tx = pool.begin().await?;
    let requeued = sqlx::query(
        "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_expires_at = NULL,
                         updated_at = ?1
         WHERE state = 'running'
           AND (?2 IS NULL OR substr(lease_owner, 1, length(?2)) = ?2)",
    )
    .bind(now_ms)
    .bind(owner_prefix)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query(
        "UPDATE documents SET status = ?, updated_at = ?
         WHERE status = ? AND id IN (SELECT document_id FROM jobs WHERE state = 'queued')",
    )
    .bind(DocumentStatus::Queued.as_str())
    .bind(now_ms)
    .bind(DocumentStatus::Processing.as_str())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(requeued)
}

pub(super) async fn pending_count(pool: &SqlitePool) -> StoreResult<u64> {
    let n: i64 = sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE state IN ('queued', 'running')")
        .fetch_one(pool)
        .await?
        .try_get("n")?;
    Ok(codec::count(n))
}

#[cfg(test)]
mod tests {
    use sqlx::Row;

    use super::super::migrations;
    use super::NEXT_JOB;

    /// A claim reads the queue in age order and stops at the first runnable job: no sort of
    /// every queued job, which made each claim cost a millisecond per 5,000 queued jobs.
    #[tokio::test]
    async fn a_claim_reads_the_queue_in_age_order_without_sorting_it() {
        let pool = migrations::empty_database().await;
        migrations::run(&pool).await.unwrap();
        let plan: Vec<String> = sqlx::query(&format!("EXPLAIN QUERY PLAN {NEXT_JOB}"))
            .bind(0)
            .bind(0)
            .bind(0)
            .fetch_all(&pool)
            .await
            .unwrap()
            .iter()
            .map(|row| row.get("detail"))
            .collect();
        assert_eq!(plan, ["SCAN jobs USING INDEX jobs_by_age"], "{plan:?}");
    }
}
