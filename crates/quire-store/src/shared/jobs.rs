//! The durable job queue. A job is leased to one worker at a time; a lease that runs out
//! (the worker died or hung) makes the job runnable again, and every state change of a job and
//! its document happens in one transaction.

use chrono::{DateTime, Utc};
use quire_core::{DocumentStatus, SourceId, WebhookEvent};
use serde_json::Map;

use super::sql::{Cells, Query, Sql};
use super::{Backend, Conn, webhooks};
use crate::{ClaimedJob, FinishOutcome, ProcessedDocument, StoreError, StoreResult};

/// Claims the oldest runnable job for `worker` and marks its document `processing`.
pub(crate) async fn claim<B: Backend>(
    store: &B,
    worker: &str,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
) -> StoreResult<Option<ClaimedJob>> {
    if !store.job_may_be_runnable(now).await? {
        return Ok(None);
    }
    let mut tx = store.begin_write().await?;
    let claimed = Query::new(B::CLAIM_JOB)
        .bind(worker)
        .bind(lease_until)
        .bind(now);
    let Some(row) = tx.fetch_optional(claimed).await? else {
        tx.rollback().await?;
        return Ok(None);
    };
    let document_id = row.uuid("document_id")?;
    let doc = tx
        .fetch_one(
            Query::new(
                "UPDATE documents SET status = $1, updated_at = $2 WHERE id = $3
                 RETURNING source_id, name, content_type",
            )
            .bind(DocumentStatus::Processing.as_str())
            .bind(now)
            .bind(document_id),
        )
        .await?;
    let job = ClaimedJob {
        id: row.id("id")?,
        document_id: document_id.into(),
        source_id: doc.id("source_id")?,
        document_name: doc.text("name")?,
        content_type: doc.text("content_type")?,
        attempts: row.small("attempts")?,
        worker: worker.to_owned(),
    };
    tx.commit().await?;
    Ok(Some(job))
}

/// Moves the lease's end if `job.worker` still holds this claim (same attempt): a claim by
/// another worker counts an attempt, so a late renewal matches nothing.
pub(crate) async fn renew<B: Backend>(
    store: &B,
    job: &ClaimedJob,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
) -> StoreResult<bool> {
    let query = Query::new(
        "UPDATE jobs SET lease_expires_at = $1, updated_at = $2
         WHERE id = $3 AND state = 'running' AND lease_owner = $4 AND attempts = $5",
    )
    .bind(lease_until)
    .bind(now)
    .bind(job.id)
    .bind(&job.worker)
    .bind(job.attempts);
    Ok(store.write().await?.execute(query).await? == 1)
}

/// Finishes each of `finished` ([`finish_one`]): all in one transaction where the dialect's
/// commits cost most (SQLite), else one transaction each, stopping at the first error.
pub(crate) async fn finish_all<B: Backend>(
    store: &B,
    finished: &[(ClaimedJob, ProcessedDocument)],
    now: DateTime<Utc>,
) -> StoreResult<Vec<FinishOutcome>> {
    let mut outcomes = Vec::with_capacity(finished.len());
    if B::FINISH_IN_ONE_TRANSACTION {
        let mut tx = store.begin_write().await?;
        for (job, processed) in finished {
            outcomes.push(finish_one::<B>(&mut *tx, job, processed, now).await?);
        }
        tx.commit().await?;
    } else {
        for (job, processed) in finished {
            let mut tx = store.begin_write().await?;
            outcomes.push(finish_one::<B>(&mut *tx, job, processed, now).await?);
            tx.commit().await?;
        }
    }
    Ok(outcomes)
}

/// In the caller's transaction: makes the document ready with its chunks, ends its job and
/// writes its `document.ready` events, if `job.worker` still holds the job; otherwise writes
/// nothing (so a batch need not roll back) and says whether the lease was lost or the document
/// is gone.
async fn finish_one<B: Backend>(
    conn: &mut Conn<B>,
    job: &ClaimedJob,
    processed: &ProcessedDocument,
    now: DateTime<Utc>,
) -> StoreResult<FinishOutcome> {
    // The job first, and only while it is this claim's: it locks the job's row, so the
    // document (whose deletion takes that lock first) cannot go before the commit.
    if !release_lease::<B>(conn, job, "done", None, now).await? {
        return lost_or_gone(conn, job).await;
    }
    let updated = Query::new(
        "UPDATE documents SET status = $1, error = NULL, chunk_count = $2, page_count = $3,
                              updated_at = $4
         WHERE id = $5
         RETURNING source_id",
    )
    .bind(DocumentStatus::Ready.as_str())
    .bind(processed.chunks.len())
    .bind(processed.page_count)
    .bind(now)
    .bind(job.document_id);
    let Some(row) = conn.fetch_optional(updated).await? else {
        return Err(StoreError::Corrupt(format!(
            "document {} went inside its finishing transaction",
            job.document_id
        )));
    };
    let source: SourceId = row.id("source_id")?;
    // A retried job may have stored chunks before; replace them.
    conn.execute(Query::new("DELETE FROM chunks WHERE document_id = $1").bind(job.document_id))
        .await?;
    B::insert_chunks(conn, job.document_id, source, &processed.chunks).await?;
    webhooks::enqueue::<B>(
        conn,
        job.document_id,
        WebhookEvent::DocumentReady,
        Map::new(),
        now,
    )
    .await?;
    B::document_ready(conn, job, source, processed).await?;
    Ok(FinishOutcome::Stored)
}

/// Marks the document `failed` with `error` and the job failed, and announces it.
pub(crate) async fn fail<B: Backend>(
    store: &B,
    job: &ClaimedJob,
    error: &str,
    now: DateTime<Utc>,
) -> StoreResult<FinishOutcome> {
    let mut tx = store.begin_write().await?;
    if !release_lease::<B>(&mut *tx, job, "failed", Some(error), now).await? {
        let outcome = lost_or_gone(&mut *tx, job).await?;
        tx.rollback().await?;
        return Ok(outcome);
    }
    let updated = tx
        .execute(
            Query::new(
                "UPDATE documents SET status = $1, error = $2, chunk_count = 0, updated_at = $3
                 WHERE id = $4",
            )
            .bind(DocumentStatus::Failed.as_str())
            .bind(error)
            .bind(now)
            .bind(job.document_id),
        )
        .await?;
    if updated == 0 {
        tx.rollback().await?;
        return Ok(FinishOutcome::DocumentGone);
    }
    tx.execute(Query::new("DELETE FROM chunks WHERE document_id = $1").bind(job.document_id))
        .await?;
    webhooks::enqueue::<B>(
        &mut *tx,
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
pub(crate) async fn release_lease<B: Backend>(
    conn: &mut Conn<B>,
    job: &ClaimedJob,
    state: &str,
    error: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let query = Query::new(
        "UPDATE jobs SET state = $1, last_error = $2, lease_owner = NULL, lease_expires_at = NULL,
                         updated_at = $3
         WHERE id = $4 AND state = 'running' AND lease_owner = $5 AND attempts = $6",
    )
    .bind(state)
    .bind(error)
    .bind(now)
    .bind(job.id)
    .bind(&job.worker)
    .bind(job.attempts);
    Ok(conn.execute(query).await? == 1)
}

/// Why a job could not be ended: its lease was lost, or its document is gone.
pub(crate) async fn lost_or_gone(
    conn: &mut impl Sql,
    job: &ClaimedJob,
) -> StoreResult<FinishOutcome> {
    let exists = conn
        .exists(Query::new("SELECT 1 FROM documents WHERE id = $1").bind(job.document_id))
        .await?;
    Ok(if exists {
        FinishOutcome::LeaseLost
    } else {
        FinishOutcome::DocumentGone
    })
}

/// [`crate::Store::requeue_running_jobs`].
pub(crate) async fn requeue_running<B: Backend>(
    store: &B,
    owner_prefix: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let mut tx = store.begin_write().await?;
    let requeued = tx
        .execute(
            Query::new(
                "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_expires_at = NULL,
                                 updated_at = $1
                 WHERE state = 'running'
                   AND (CAST($2 AS TEXT) IS NULL
                        OR substr(lease_owner, 1, length(CAST($2 AS TEXT))) = CAST($2 AS TEXT))",
            )
            .bind(now)
            .bind(owner_prefix),
        )
        .await?;
    tx.execute(
        Query::new(
            "UPDATE documents SET status = $1, updated_at = $2
             WHERE status = $3 AND id IN (SELECT document_id FROM jobs WHERE state = 'queued')",
        )
        .bind(DocumentStatus::Queued.as_str())
        .bind(now)
        .bind(DocumentStatus::Processing.as_str()),
    )
    .await?;
    if requeued > 0 {
        B::jobs_queued(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(requeued)
}

/// [`crate::Store::pending_job_count`].
pub(crate) async fn pending_count<B: Backend>(store: &B) -> StoreResult<u64> {
    let row = store
        .read()
        .await?
        .fetch_one(Query::new(
            "SELECT COUNT(*) AS n FROM jobs WHERE state IN ('queued', 'running')",
        ))
        .await?;
    row.count("n")
}
