//! The personal-data review queue: held documents, read and decided by administrators (over
//! REST with an admin key, in the admin interface, or with `quire review`). Every call takes
//! the caller's scope: a review of a document in a source outside it answers exactly like one
//! that does not exist. Decisions are recorded in the audit log.

use quire_core::{DocumentId, DocumentStatus, SourceScope};
use quire_store::{ReviewDecision, ReviewRecord};

use crate::{Actor, AppError, Ledger, audit};

/// Documents waiting for a decision in `scope`, oldest first.
pub async fn pending(ledger: &Ledger, scope: &SourceScope) -> Result<Vec<ReviewRecord>, AppError> {
    let waiting = ledger.store().pending_reviews().await?;
    Ok(waiting
        .into_iter()
        .filter(|r| scope.allows(r.document.source_id))
        .collect())
}

/// One document's review (waiting or decided); [`AppError::NotFound`] when it was never held
/// or lies outside `scope`.
pub async fn get(
    ledger: &Ledger,
    scope: &SourceScope,
    id: DocumentId,
) -> Result<ReviewRecord, AppError> {
    ledger
        .store()
        .get_review(id)
        .await?
        .filter(|r| scope.allows(r.document.source_id))
        .ok_or_else(|| not_held(id))
}

/// Sends a held document back to processing with `decision` (approve keeps the text, redact
/// replaces the findings); it becomes `ready`, and `document.ready` is sent, when that is
/// done. The recorded findings are reduced to types, counts and masked excerpts, and a redact
/// decision also takes the findings out of the document's name, in the same store call.
/// [`AppError::Conflict`] when it is no longer waiting.
pub async fn decide(
    ledger: &Ledger,
    actor: &Actor,
    id: DocumentId,
    decision: ReviewDecision,
) -> Result<ReviewRecord, AppError> {
    let scope = actor.scope();
    let review = get(ledger, scope, id).await?;
    let decided = ledger.screening().decided(&review, decision);
    if !ledger
        .store()
        .decide_review(id, decided, ledger.now())
        .await?
    {
        let review = get(ledger, scope, id).await?;
        return Err(AppError::Conflict(format!(
            "document {id} is not waiting for review (it is {})",
            review.document.status.as_str()
        )));
    }
    ledger.wake_workers();
    let action = match decision {
        ReviewDecision::Approve => "review.approved",
        ReviewDecision::Redact => "review.redacted",
    };
    audit::record(ledger, actor, action, describe(&review)).await?;
    get(ledger, scope, id).await
}

/// Deletes a held document with its original file and records it in the audit log; returns
/// the review as it was. [`AppError::NotFound`] when the document is not waiting for review.
pub async fn reject(
    ledger: &Ledger,
    actor: &Actor,
    id: DocumentId,
) -> Result<ReviewRecord, AppError> {
    let not_waiting = || AppError::NotFound(format!("document {id} is not waiting for review"));
    let review = match get(ledger, actor.scope(), id).await {
        Ok(review) => review,
        Err(AppError::NotFound(_)) => return Err(not_waiting()),
        Err(e) => return Err(e),
    };
    if review.decision.is_some() || review.document.status != DocumentStatus::PendingReview {
        return Err(not_waiting());
    }
    ledger
        .remove_document(&SourceScope::All, review.document.source_id, id)
        .await?
        .ok_or_else(not_waiting)?;
    audit::record(ledger, actor, "review.rejected", describe(&review)).await?;
    Ok(review)
}

/// How the audit log names a reviewed document.
fn describe(review: &ReviewRecord) -> String {
    format!("{} ({})", review.document.name, review.document.id)
}

fn not_held(id: DocumentId) -> AppError {
    AppError::NotFound(format!("document {id} was never held for review"))
}
