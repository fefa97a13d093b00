//! The durable job queue. A job is leased to one worker at a time; a lease that runs out
//! (the worker died or hung) makes the job runnable again, and every state change of a job and
//! its document happens in one transaction.

use chrono::{DateTime, Utc};
use quire_core::{DocumentId, DocumentStatus, SourceId, VersionStatus, WebhookEvent};
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
    let document_id: DocumentId = row.id("document_id")?;
    let version = row.small("version")?;
    let claimed_version = tx
        .fetch_one(
            Query::new(
                "UPDATE document_versions SET status = $1, updated_at = $2
                 WHERE document_id = $3 AND version = $4
                 RETURNING index_id, name, content_type",
            )
            .bind(VersionStatus::Processing.as_str())
            .bind(now)
            .bind(document_id)
            .bind(version),
        )
        .await?;
    // The document shows `processing` only while nothing of it is live.
    let doc = tx
        .fetch_one(
            Query::new(
                "UPDATE documents SET status = CASE WHEN version = $1 THEN $2 ELSE status END,
                                      updated_at = CASE WHEN version = $1 THEN $3
                                                        ELSE updated_at END
                 WHERE id = $4
                 RETURNING source_id, version, index_id",
            )
            .bind(version)
            .bind(DocumentStatus::Processing.as_str())
            .bind(now)
            .bind(document_id),
        )
        .await?;
    let job = ClaimedJob {
        id: row.id("id")?,
        document_id,
        version,
        index_id: claimed_version.id("index_id")?,
        replaces: if doc.small("version")? == version {
            None
        } else {
            Some(doc.id("index_id")?)
        },
        source_id: doc.id("source_id")?,
        document_name: claimed_version.text("name")?,
        content_type: claimed_version.text("content_type")?,
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
         WHERE id = $3 AND state = 'running' AND lease_owner = $4 AND attempts = $5
           AND version = $6",
    )
    .bind(lease_until)
    .bind(now)
    .bind(job.id)
    .bind(&job.worker)
    .bind(job.attempts)
    .bind(job.version);
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
    let Some((live, live_index)) = live_version::<B>(conn, job.document_id).await? else {
        return Err(StoreError::Corrupt(format!(
            "document {} went inside its finishing transaction",
            job.document_id
        )));
    };
    // The switch: the new version's chunks and index id become the document's in this one
    // transaction; the version before it stays resolvable until the next switch.
    let switch = live != job.version;
    let updated = Query::new(
        "UPDATE documents SET status = $1, error = NULL, chunk_count = $2, page_count = $3,
                              updated_at = $4, version = $5, index_id = $6,
                              previous_index_id = CASE WHEN $7 THEN documents.index_id
                                                       ELSE documents.previous_index_id END,
                              name = v.name, size = v.size, content_type = v.content_type,
                              sha256 = v.sha256
         FROM document_versions v
         WHERE documents.id = $8 AND v.document_id = documents.id AND v.version = $5
         RETURNING source_id",
    )
    .bind(DocumentStatus::Ready.as_str())
    .bind(processed.chunks.len())
    .bind(processed.page_count)
    .bind(now)
    .bind(job.version)
    .bind(job.index_id)
    .bind(switch)
    .bind(job.document_id);
    let row = conn.fetch_one(updated).await?;
    let source: SourceId = row.id("source_id")?;
    if switch {
        let replaced = (job.document_id, live);
        set_version_status(conn, replaced, VersionStatus::Superseded, None, now).await?;
    }
    let this = (job.document_id, job.version);
    set_version_status(conn, this, VersionStatus::Ready, None, now).await?;
    // A retried job may have stored chunks before; replace them. Only the previous version's
    // chunks stay beside the new ones.
    let kept = if switch { Some(live_index) } else { None };
    conn.execute(
        Query::new(
            "DELETE FROM chunks WHERE document_id = $1
             AND (CAST($2 AS TEXT) IS NULL OR index_id <> $3)",
        )
        .bind(job.document_id)
        .bind(kept.map(|id| id.to_string()).as_deref())
        .bind(kept),
    )
    .await?;
    B::insert_chunks(
        conn,
        job.document_id,
        job.index_id,
        source,
        &processed.chunks,
    )
    .await?;
    let mut extra = Map::new();
    extra.insert("version".into(), job.version.into());
    webhooks::enqueue::<B>(
        conn,
        job.document_id,
        WebhookEvent::DocumentReady,
        extra,
        now,
    )
    .await?;
    B::document_ready(conn, job, source, processed, kept).await?;
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
    let Some((live, _)) = live_version::<B>(&mut *tx, job.document_id).await? else {
        tx.rollback().await?;
        return Ok(FinishOutcome::DocumentGone);
    };
    let this = (job.document_id, job.version);
    set_version_status(&mut *tx, this, VersionStatus::Failed, Some(error), now).await?;
    // A version that fails while another is live leaves the live one searchable.
    if live == job.version {
        tx.execute(
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
        tx.execute(Query::new("DELETE FROM chunks WHERE document_id = $1").bind(job.document_id))
            .await?;
    }
    let mut extra = Map::new();
    extra.insert("version".into(), job.version.into());
    webhooks::enqueue::<B>(
        &mut *tx,
        job.document_id,
        WebhookEvent::DocumentFailed,
        extra,
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
         WHERE id = $4 AND state = 'running' AND lease_owner = $5 AND attempts = $6
           AND version = $7",
    )
    .bind(state)
    .bind(error)
    .bind(now)
    .bind(job.id)
    .bind(&job.worker)
    .bind(job.attempts)
    .bind(job.version);
    Ok(conn.execute(query).await? == 1)
}

/// Why a job could not be ended: its document is gone, a newer version took its place, or its
/// lease was lost.
pub(crate) async fn lost_or_gone(
    conn: &mut impl Sql,
    job: &ClaimedJob,
) -> StoreResult<FinishOutcome> {
    let row = conn
        .fetch_optional(
            Query::new("SELECT version FROM jobs WHERE document_id = $1").bind(job.document_id),
        )
        .await?;
    Ok(match row {
        None => FinishOutcome::DocumentGone,
        Some(row) if row.small("version")? != job.version => FinishOutcome::Superseded,
        Some(_) => FinishOutcome::LeaseLost,
    })
}

/// Sets the status (and error) of version `version` of `document`.
pub(crate) async fn set_version_status(
    conn: &mut impl Sql,
    (document, version): (DocumentId, u32),
    status: VersionStatus,
    error: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    conn.execute(
        Query::new(
            "UPDATE document_versions SET status = $1, error = $2, updated_at = $3
             WHERE document_id = $4 AND version = $5",
        )
        .bind(status.as_str())
        .bind(error)
        .bind(now)
        .bind(document)
        .bind(version),
    )
    .await?;
    Ok(())
}

/// The document's live version, locked for the rest of the transaction; `None` when it is gone.
pub(crate) async fn live_version<B: Backend>(
    conn: &mut Conn<B>,
    document: DocumentId,
) -> StoreResult<Option<(u32, DocumentId)>> {
    let row = conn
        .fetch_optional(
            Query::new(format!(
                "SELECT version, index_id FROM documents WHERE id = $1 {}",
                B::lock("FOR UPDATE")
            ))
            .bind(document),
        )
        .await?;
    row.map(|row| Ok((row.small("version")?, row.id("index_id")?)))
        .transpose()
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
