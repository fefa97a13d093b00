//! Documents held for review: holding one (the job ends, the document waits in
//! `pending_review`, `document.pii_detected` goes to the outbox, all in one transaction),
//! listing them, and an administrator's decision, which sends the document back to processing.

use chrono::{DateTime, Utc};
use quire_core::{DocumentId, DocumentStatus, VersionStatus, WebhookEvent};
use serde_json::{Map, Value};

use super::records::{self, DOCUMENT_COLUMNS, REVIEW_COLUMNS};
use super::sql::{Cells, Query, Sql};
use super::{Backend, jobs, webhooks};
use crate::{
    ClaimedJob, DecidedReview, FinishOutcome, HeldDocument, ReviewDecision, ReviewRecord,
    StoreError, StoreResult,
};

/// Ends `job` with its document in `pending_review`, records why, and announces it.
pub(crate) async fn hold<B: Backend>(
    store: &B,
    job: &ClaimedJob,
    held: HeldDocument,
    now: DateTime<Utc>,
) -> StoreResult<FinishOutcome> {
    let doc = job.document_id;
    let types = serde_json::to_string(&held.pii_types)
        .map_err(|e| StoreError::Invalid(format!("personal-data types: {e}")))?;
    let mut tx = store.begin_write().await?;
    if !jobs::release_lease::<B>(&mut *tx, job, "done", None, now).await? {
        let outcome = jobs::lost_or_gone(&mut *tx, job).await?;
        tx.rollback().await?;
        return Ok(outcome);
    }
    let Some((live, _)) = jobs::live_version::<B>(&mut *tx, doc).await? else {
        tx.rollback().await?;
        return Ok(FinishOutcome::DocumentGone);
    };
    let held_version = (job.document_id, job.version);
    jobs::set_version_status(
        &mut *tx,
        held_version,
        VersionStatus::PendingReview,
        None,
        now,
    )
    .await?;
    // A newer version held for review leaves the live one searchable.
    if live == job.version {
        tx.execute(
            Query::new(
                "UPDATE documents SET status = $1, error = NULL, chunk_count = 0, page_count = $2,
                                      updated_at = $3
                 WHERE id = $4",
            )
            .bind(DocumentStatus::PendingReview.as_str())
            .bind(held.page_count)
            .bind(now)
            .bind(doc),
        )
        .await?;
    }
    // The real name is kept for the reviewer when the document shows a masked one meanwhile; a
    // document held again while masked keeps the real name recorded the first time.
    tx.execute(
        Query::new(
            "INSERT INTO document_reviews (document_id, pii_types, findings, held_at, held_name)
             VALUES ($1, $2, $3, $4,
                     CASE WHEN CAST($5 AS TEXT) IS NULL THEN NULL
                          ELSE (SELECT name FROM document_versions
                                WHERE document_id = $1 AND version = $6) END)
             ON CONFLICT (document_id) DO UPDATE SET
                 pii_types = excluded.pii_types, findings = excluded.findings,
                 held_at = excluded.held_at,
                 held_name = COALESCE(excluded.held_name,
                                      CASE WHEN document_reviews.decision IS NULL
                                           THEN document_reviews.held_name END),
                 decision = NULL, decided_at = NULL",
        )
        .bind(doc)
        .bind(types.as_str())
        .bind(&held.findings)
        .bind(now)
        .bind(held.shown_name.as_deref())
        .bind(job.version),
    )
    .await?;
    if let Some(shown) = &held.shown_name {
        rename(&mut *tx, doc, job.version, shown).await?;
    }
    let mut extra = Map::new();
    extra.insert(
        "piiTypes".into(),
        Value::Array(held.pii_types.iter().cloned().map(Value::String).collect()),
    );
    webhooks::enqueue::<B>(
        &mut *tx,
        job.document_id,
        WebhookEvent::DocumentPiiDetected,
        extra,
        now,
    )
    .await?;
    tx.commit().await?;
    Ok(FinishOutcome::Stored)
}

/// Gives one version of a document another name, and the document too when it is live.
async fn rename(conn: &mut impl Sql, id: DocumentId, version: u32, name: &str) -> StoreResult<()> {
    conn.execute(
        Query::new("UPDATE documents SET name = $1 WHERE id = $2 AND version = $3")
            .bind(name)
            .bind(id)
            .bind(version),
    )
    .await?;
    conn.execute(
        Query::new(
            "UPDATE document_versions SET name = $1 WHERE document_id = $2 AND version = $3",
        )
        .bind(name)
        .bind(id)
        .bind(version),
    )
    .await?;
    Ok(())
}

/// Documents waiting for a decision, oldest first.
pub(crate) async fn waiting<B: Backend>(store: &B) -> StoreResult<Vec<ReviewRecord>> {
    let query = Query::new(format!(
        "SELECT {DOCUMENT_COLUMNS}, {REVIEW_COLUMNS}
         FROM document_reviews r JOIN documents d ON d.id = r.document_id
         WHERE r.decision IS NULL
           AND EXISTS (SELECT 1 FROM document_versions v
                       WHERE v.document_id = d.id AND v.status = $1)
         ORDER BY r.held_at, d.{}",
        B::SEQ
    ))
    .bind(VersionStatus::PendingReview.as_str());
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(records::review).collect()
}

/// One document's review, decided or not.
pub(crate) async fn get<B: Backend>(
    store: &B,
    id: DocumentId,
) -> StoreResult<Option<ReviewRecord>> {
    let query = Query::new(format!(
        "SELECT {DOCUMENT_COLUMNS}, {REVIEW_COLUMNS}
         FROM document_reviews r JOIN documents d ON d.id = r.document_id
         WHERE r.document_id = $1"
    ))
    .bind(id);
    let row = store.read().await?.fetch_optional(query).await?;
    row.as_ref().map(records::review).transpose()
}

/// Records the decision and queues the document again; false when it is not waiting.
pub(crate) async fn decide<B: Backend>(
    store: &B,
    id: DocumentId,
    decided: DecidedReview,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let mut tx = store.begin_write().await?;
    // The row lock this update takes makes a second decision wait, then find nothing to do.
    let held = tx
        .fetch_optional(
            Query::new(
                "UPDATE document_versions SET status = $1, updated_at = $2
                 WHERE document_id = $3 AND status = $4
                 RETURNING version",
            )
            .bind(VersionStatus::Queued.as_str())
            .bind(now)
            .bind(id)
            .bind(VersionStatus::PendingReview.as_str()),
        )
        .await?;
    let Some(held) = held else {
        tx.rollback().await?;
        return Ok(false);
    };
    let version = held.small("version")?;
    tx.execute(
        Query::new(
            "UPDATE documents SET status = $1, updated_at = $2
             WHERE id = $3 AND status = $4 AND version = $5",
        )
        .bind(DocumentStatus::Queued.as_str())
        .bind(now)
        .bind(id)
        .bind(DocumentStatus::PendingReview.as_str())
        .bind(version),
    )
    .await?;
    // The found text goes with the decision: only the reduced findings are kept.
    tx.execute(
        Query::new(
            "UPDATE document_reviews SET decision = $1, decided_at = $2, findings = $3,
                                         held_name = NULL
             WHERE document_id = $4 AND decision IS NULL",
        )
        .bind(decided.decision.as_str())
        .bind(now)
        .bind(&decided.findings)
        .bind(id),
    )
    .await?;
    if let Some(name) = &decided.name {
        rename(&mut *tx, id, version, name).await?;
    }
    // The document's job runs again from the start, with the decision to apply.
    tx.execute(
        Query::new(
            "UPDATE jobs SET state = 'queued', attempts = 0, run_after = $1, lease_owner = NULL,
                             lease_expires_at = NULL, last_error = NULL, updated_at = $1
             WHERE document_id = $2",
        )
        .bind(now)
        .bind(id),
    )
    .await?;
    B::jobs_queued(&mut *tx).await?;
    tx.commit().await?;
    Ok(true)
}

/// The decision a document was sent back to processing with, if any.
pub(crate) async fn decision<B: Backend>(
    store: &B,
    id: DocumentId,
) -> StoreResult<Option<ReviewDecision>> {
    let query = Query::new("SELECT decision FROM document_reviews WHERE document_id = $1").bind(id);
    match store.read().await?.fetch_optional(query).await? {
        Some(row) => records::decision(row.opt_text("decision")?),
        None => Ok(None),
    }
}

/// Rewrites the findings of decided reviews with `reduce`, one row at a time (there are few,
/// and this runs once at start); returns how many changed.
pub(crate) async fn reduce_decided<B: Backend>(
    store: &B,
    reduce: fn(&str) -> String,
) -> StoreResult<u64> {
    let decided = store
        .read()
        .await?
        .fetch_all(Query::new(
            "SELECT document_id, findings FROM document_reviews WHERE decision IS NOT NULL",
        ))
        .await?;
    let mut changed = 0;
    for row in &decided {
        let findings = row.text("findings")?;
        let reduced = reduce(&findings);
        if reduced != findings {
            // Only if nobody rewrote it meanwhile.
            let query = Query::new(
                "UPDATE document_reviews SET findings = $1 WHERE document_id = $2 AND findings = $3",
            )
            .bind(reduced.as_str())
            .bind(row.uuid("document_id")?)
            .bind(findings.as_str());
            changed += store.write().await?.execute(query).await?;
        }
    }
    Ok(changed)
}
