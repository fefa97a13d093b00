//! The durable job queue. A job is leased to one worker at a time; a lease that runs out
//! (the worker died or hung) makes the job runnable again, and every state change of a job and
//! its document happens in one transaction. Workers on several nodes claim with
//! `FOR UPDATE SKIP LOCKED`: each takes a different row without waiting for the others.

use chrono::{DateTime, Utc};
use quire_core::{DocumentStatus, SourceId, WebhookEvent};
use serde_json::Map;
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use super::wakeups::notify_runnable;
use super::{codec, feed, webhooks};
use crate::{ClaimedJob, FinishOutcome, IndexChangeKind, ProcessedDocument, StoreResult};

/// Chunk rows per `INSERT`: a document of the largest allowed size is sent in a few dozen
/// statements of bounded size rather than one message holding all of its text.
const CHUNK_ROWS_PER_INSERT: usize = 2_000;

pub(super) async fn claim(
    pool: &PgPool,
    worker: &str,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
) -> StoreResult<Option<ClaimedJob>> {
    let mut tx = pool.begin().await?;
    let row = sqlx::query(
        "UPDATE jobs j
         SET state = 'running', attempts = j.attempts + 1, lease_owner = $1,
             lease_expires_at = $2, updated_at = $3
         FROM (SELECT id FROM jobs
               WHERE (state = 'queued' AND run_after <= $3)
                  OR (state = 'running' AND lease_expires_at < $3)
               ORDER BY created_at, seq
               LIMIT 1
               FOR UPDATE SKIP LOCKED) next
         WHERE j.id = next.id
         RETURNING j.id, j.document_id, j.attempts",
    )
    .bind(worker)
    .bind(lease_until)
    .bind(now)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        tx.rollback().await?;
        return Ok(None);
    };
    let document_id: Uuid = row.try_get("document_id")?;
    let doc = sqlx::query(
        "UPDATE documents SET status = $1, updated_at = $2 WHERE id = $3
         RETURNING source_id, name, content_type",
    )
    .bind(DocumentStatus::Processing.as_str())
    .bind(now)
    .bind(document_id)
    .fetch_one(&mut *tx)
    .await?;
    let job = ClaimedJob {
        id: row.try_get::<Uuid, _>("id")?.into(),
        document_id: document_id.into(),
        source_id: doc.try_get::<Uuid, _>("source_id")?.into(),
        document_name: doc.try_get("name")?,
        content_type: doc.try_get("content_type")?,
        attempts: codec::small(row.try_get("attempts")?),
        worker: worker.to_owned(),
    };
    tx.commit().await?;
    Ok(Some(job))
}

/// Moves the lease's end if `job.worker` still holds this claim (same attempt): a claim by
/// another worker counts an attempt, so a late renewal matches nothing.
pub(super) async fn renew(
    pool: &PgPool,
    job: &ClaimedJob,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
) -> StoreResult<bool> {
    let updated = sqlx::query(
        "UPDATE jobs SET lease_expires_at = $1, updated_at = $2
         WHERE id = $3 AND state = 'running' AND lease_owner = $4 AND attempts = $5",
    )
    .bind(lease_until)
    .bind(now)
    .bind(job.id.0)
    .bind(&job.worker)
    .bind(i64::from(job.attempts))
    .execute(pool)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

pub(super) async fn finish(
    pool: &PgPool,
    job: &ClaimedJob,
    processed: &ProcessedDocument,
    now: DateTime<Utc>,
) -> StoreResult<FinishOutcome> {
    let mut tx = pool.begin().await?;
    if !release_lease(&mut tx, job, "done", None, now).await? {
        tx.rollback().await?;
        return lost_or_gone(pool, job).await;
    }
    let doc = job.document_id.0;
    let source: Option<Uuid> = sqlx::query_scalar(
        "UPDATE documents SET status = $1, error = NULL, chunk_count = $2, page_count = $3,
                              updated_at = $4
         WHERE id = $5
         RETURNING source_id",
    )
    .bind(DocumentStatus::Ready.as_str())
    .bind(codec::limit(processed.chunks.len()))
    .bind(i64::from(processed.page_count))
    .bind(now)
    .bind(doc)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(source) = source else {
        tx.rollback().await?;
        return Ok(FinishOutcome::DocumentGone);
    };
    // A retried job may have stored chunks before; replace them.
    sqlx::query("DELETE FROM chunks WHERE document_id = $1")
        .bind(doc)
        .execute(&mut *tx)
        .await?;
    // Many rows a statement, as arrays, in batches that bound one statement's size.
    for batch in processed.chunks.chunks(CHUNK_ROWS_PER_INSERT) {
        let ordinals: Vec<i64> = batch.iter().map(|c| i64::from(c.ordinal)).collect();
        let pages: Vec<i64> = batch.iter().map(|c| i64::from(c.page)).collect();
        let sections: Vec<&str> = batch.iter().map(|c| c.section.as_str()).collect();
        let contents: Vec<&str> = batch.iter().map(|c| c.content.as_str()).collect();
        sqlx::query(
            "INSERT INTO chunks (document_id, source_id, ordinal, page, section, content)
             SELECT $1, $2, c.ordinal, c.page, c.section, c.content
             FROM UNNEST($3::bigint[], $4::bigint[], $5::text[], $6::text[])
                  AS c (ordinal, page, section, content)",
        )
        .bind(doc)
        .bind(source)
        .bind(ordinals)
        .bind(pages)
        .bind(sections)
        .bind(contents)
        .execute(&mut *tx)
        .await?;
    }
    match &processed.vectors {
        Some(vectors) => feed::store_vectors(&mut tx, job.document_id, vectors).await?,
        // Vectors of an earlier attempt (with a model since removed) must not outlive it.
        None => {
            sqlx::query("DELETE FROM document_vectors WHERE document_id = $1")
                .bind(doc)
                .execute(&mut *tx)
                .await?;
        }
    }
    webhooks::enqueue(
        &mut tx,
        job.document_id,
        WebhookEvent::DocumentReady,
        Map::new(),
        now,
    )
    .await?;
    feed::append(
        &mut tx,
        job.document_id,
        SourceId(source),
        IndexChangeKind::Ready,
    )
    .await?;
    tx.commit().await?;
    Ok(FinishOutcome::Stored)
}

pub(super) async fn fail(
    pool: &PgPool,
    job: &ClaimedJob,
    error: &str,
    now: DateTime<Utc>,
) -> StoreResult<FinishOutcome> {
    let mut tx = pool.begin().await?;
    if !release_lease(&mut tx, job, "failed", Some(error), now).await? {
        tx.rollback().await?;
        return lost_or_gone(pool, job).await;
    }
    let updated = sqlx::query(
        "UPDATE documents SET status = $1, error = $2, chunk_count = 0, updated_at = $3
         WHERE id = $4",
    )
    .bind(DocumentStatus::Failed.as_str())
    .bind(error)
    .bind(now)
    .bind(job.document_id.0)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if updated == 0 {
        tx.rollback().await?;
        return Ok(FinishOutcome::DocumentGone);
    }
    sqlx::query("DELETE FROM chunks WHERE document_id = $1")
        .bind(job.document_id.0)
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
    conn: &mut PgConnection,
    job: &ClaimedJob,
    state: &str,
    error: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let updated = sqlx::query(
        "UPDATE jobs SET state = $1, last_error = $2, lease_owner = NULL, lease_expires_at = NULL,
                         updated_at = $3
         WHERE id = $4 AND state = 'running' AND lease_owner = $5 AND attempts = $6",
    )
    .bind(state)
    .bind(error)
    .bind(now)
    .bind(job.id.0)
    .bind(&job.worker)
    .bind(i64::from(job.attempts))
    .execute(conn)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

pub(super) async fn lost_or_gone(pool: &PgPool, job: &ClaimedJob) -> StoreResult<FinishOutcome> {
    let exists = sqlx::query("SELECT 1 FROM documents WHERE id = $1")
        .bind(job.document_id.0)
        .fetch_optional(pool)
        .await?
        .is_some();
    Ok(if exists {
        FinishOutcome::LeaseLost
    } else {
        FinishOutcome::DocumentGone
    })
}

pub(super) async fn requeue_running(
    pool: &PgPool,
    owner_prefix: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let mut tx = pool.begin().await?;
    let requeued = sqlx::query(
        "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_expires_at = NULL,
                         updated_at = $1
         WHERE state = 'running'
           AND ($2::text IS NULL OR left(lease_owner, length($2::text)) = $2::text)",
    )
    .bind(now)
    .bind(owner_prefix)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query(
        "UPDATE documents SET status = $1, updated_at = $2
         WHERE status = $3 AND id IN (SELECT document_id FROM jobs WHERE state = 'queued')",
    )
    .bind(DocumentStatus::Queued.as_str())
    .bind(now)
    .bind(DocumentStatus::Processing.as_str())
    .execute(&mut *tx)
    .await?;
    if requeued > 0 {
        notify_runnable(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(requeued)
}

pub(super) async fn pending_count(pool: &PgPool) -> StoreResult<u64> {
    let n: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running')")
            .fetch_one(pool)
            .await?;
    Ok(codec::count(n))
}
