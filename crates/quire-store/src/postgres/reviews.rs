//! Documents held for review: holding one (the job ends, the document waits in
//! `pending_review`, `document.pii_detected` goes to the outbox, all in one transaction),
//! listing them, and an administrator's decision, which sends the document back to processing.

use chrono::{DateTime, Utc};
use quire_core::{DocumentId, DocumentStatus, WebhookEvent};
use serde_json::{Map, Value};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::codec::{self, DOCUMENT_COLUMNS};
use super::{jobs, wakeups, webhooks};
use crate::{
    ClaimedJob, DecidedReview, FinishOutcome, HeldDocument, ReviewDecision, ReviewRecord,
    StoreError, StoreResult,
};

/// Ends `job` with its document in `pending_review`, records why, and announces it.
pub(super) async fn hold(
    pool: &PgPool,
    job: &ClaimedJob,
    held: HeldDocument,
    now: DateTime<Utc>,
) -> StoreResult<FinishOutcome> {
    let doc = job.document_id.0;
    let types = serde_json::to_string(&held.pii_types)
        .map_err(|e| StoreError::Invalid(format!("personal-data types: {e}")))?;
    let mut tx = pool.begin().await?;
    if !jobs::release_lease(&mut tx, job, "done", None, now).await? {
        tx.rollback().await?;
        return jobs::lost_or_gone(pool, job).await;
    }
    let updated = sqlx::query(
        "UPDATE documents SET status = $1, error = NULL, chunk_count = 0, page_count = $2,
                              updated_at = $3
         WHERE id = $4",
    )
    .bind(DocumentStatus::PendingReview.as_str())
    .bind(i64::from(held.page_count))
    .bind(now)
    .bind(doc)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if updated == 0 {
        tx.rollback().await?;
        return Ok(FinishOutcome::DocumentGone);
    }
    // The real name is kept for the reviewer when the document shows a masked one meanwhile; a
    // document held again while masked keeps the real name recorded the first time.
    sqlx::query(
        "INSERT INTO document_reviews (document_id, pii_types, findings, held_at, held_name)
         VALUES ($1, $2, $3, $4,
                 CASE WHEN $5::text IS NULL THEN NULL
                      ELSE (SELECT name FROM documents WHERE id = $1) END)
         ON CONFLICT (document_id) DO UPDATE SET
             pii_types = excluded.pii_types, findings = excluded.findings,
             held_at = excluded.held_at,
             held_name = COALESCE(excluded.held_name,
                                  CASE WHEN document_reviews.decision IS NULL
                                       THEN document_reviews.held_name END),
             decision = NULL, decided_at = NULL",
    )
    .bind(doc)
    .bind(&types)
    .bind(&held.findings)
    .bind(now)
    .bind(held.shown_name.as_deref())
    .execute(&mut *tx)
    .await?;
    if let Some(shown) = &held.shown_name {
        sqlx::query("UPDATE documents SET name = $1 WHERE id = $2")
            .bind(shown)
            .bind(doc)
            .execute(&mut *tx)
            .await?;
    }
    let mut extra = Map::new();
    extra.insert(
        "piiTypes".into(),
        Value::Array(held.pii_types.iter().cloned().map(Value::String).collect()),
    );
    webhooks::enqueue(
        &mut tx,
        job.document_id,
        WebhookEvent::DocumentPiiDetected,
        extra,
        now,
    )
    .await?;
    tx.commit().await?;
    Ok(FinishOutcome::Stored)
}

const REVIEW_COLUMNS: &str =
    "r.pii_types, r.findings, r.held_at, r.decision, r.decided_at, r.held_name";

fn review_from_row(row: &PgRow) -> StoreResult<ReviewRecord> {
    let types: String = row.try_get("pii_types")?;
    let decision: Option<String> = row.try_get("decision")?;
    Ok(ReviewRecord {
        document: codec::document_from_row(row)?,
        pii_types: serde_json::from_str(&types)
            .map_err(|e| StoreError::Corrupt(format!("review types: {e}")))?,
        findings: row.try_get("findings")?,
        held_at: row.try_get("held_at")?,
        decision: decision.as_deref().map(ReviewDecision::parse).transpose()?,
        decided_at: row.try_get("decided_at")?,
        held_name: row.try_get("held_name")?,
    })
}

/// Documents waiting for a decision, oldest first.
pub(super) async fn waiting(pool: &PgPool) -> StoreResult<Vec<ReviewRecord>> {
    let rows = sqlx::query(&format!(
        "SELECT {DOCUMENT_COLUMNS}, {REVIEW_COLUMNS}
         FROM document_reviews r JOIN documents d ON d.id = r.document_id
         WHERE r.decision IS NULL AND d.status = $1
         ORDER BY r.held_at, d.seq"
    ))
    .bind(DocumentStatus::PendingReview.as_str())
    .fetch_all(pool)
    .await?;
    rows.iter().map(review_from_row).collect()
}

/// One document's review, decided or not.
pub(super) async fn get(pool: &PgPool, id: DocumentId) -> StoreResult<Option<ReviewRecord>> {
    let row = sqlx::query(&format!(
        "SELECT {DOCUMENT_COLUMNS}, {REVIEW_COLUMNS}
         FROM document_reviews r JOIN documents d ON d.id = r.document_id
         WHERE r.document_id = $1"
    ))
    .bind(id.0)
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(review_from_row).transpose()
}

/// Records the decision and queues the document again; false when it is not waiting.
pub(super) async fn decide(
    pool: &PgPool,
    id: DocumentId,
    decided: DecidedReview,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let doc = id.0;
    let mut tx = pool.begin().await?;
    // The row lock this update takes makes a second decision wait, then find nothing to do.
    let updated = sqlx::query(
        "UPDATE documents SET status = $1, updated_at = $2 WHERE id = $3 AND status = $4",
    )
    .bind(DocumentStatus::Queued.as_str())
    .bind(now)
    .bind(doc)
    .bind(DocumentStatus::PendingReview.as_str())
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if updated == 0 {
        tx.rollback().await?;
        return Ok(false);
    }
    // The found text goes with the decision: only the reduced findings are kept.
    sqlx::query(
        "UPDATE document_reviews SET decision = $1, decided_at = $2, findings = $3,
                                     held_name = NULL
         WHERE document_id = $4 AND decision IS NULL",
    )
    .bind(decided.decision.as_str())
    .bind(now)
    .bind(&decided.findings)
    .bind(doc)
    .execute(&mut *tx)
    .await?;
    if let Some(name) = &decided.name {
        sqlx::query("UPDATE documents SET name = $1 WHERE id = $2")
            .bind(name)
            .bind(doc)
            .execute(&mut *tx)
            .await?;
    }
    // The document's job runs again from the start, with the decision to apply.
    sqlx::query(
        "UPDATE jobs SET state = 'queued', attempts = 0, run_after = $1, lease_owner = NULL,
                         lease_expires_at = NULL, last_error = NULL, updated_at = $1
         WHERE document_id = $2",
    )
    .bind(now)
    .bind(doc)
    .execute(&mut *tx)
    .await?;
    wakeups::notify_runnable(&mut tx).await?;
    tx.commit().await?;
    Ok(true)
}

/// The decision a document was sent back to processing with, if any.
pub(super) async fn decision(pool: &PgPool, id: DocumentId) -> StoreResult<Option<ReviewDecision>> {
    let decision: Option<Option<String>> =
        sqlx::query_scalar("SELECT decision FROM document_reviews WHERE document_id = $1")
            .bind(id.0)
            .fetch_optional(pool)
            .await?;
    decision
        .flatten()
        .as_deref()
        .map(ReviewDecision::parse)
        .transpose()
}

/// Rewrites the findings of decided reviews with `reduce`, one row at a time (there are few,
/// and this runs once at start); returns how many changed.
pub(super) async fn reduce_decided(pool: &PgPool, reduce: fn(&str) -> String) -> StoreResult<u64> {
    let decided: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT document_id, findings FROM document_reviews WHERE decision IS NOT NULL",
    )
    .fetch_all(pool)
    .await?;
    let mut changed = 0;
    for (doc, findings) in decided {
        let reduced = reduce(&findings);
        if reduced != findings {
            // Only if nobody rewrote it meanwhile.
            changed += sqlx::query(
                "UPDATE document_reviews SET findings = $1 WHERE document_id = $2 AND findings = $3",
            )
            .bind(&reduced)
            .bind(doc)
            .bind(&findings)
            .execute(pool)
            .await?
            .rows_affected();
        }
    }
    Ok(changed)
}
