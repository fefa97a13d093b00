//! The personal-data review queue: held documents, read and decided by administrators. Every
//! call takes the caller's scope: a review of a document in a source outside it answers
//! exactly like one that does not exist.

use quire_core::{DocumentId, DocumentStatus, SourceScope};
use quire_ingest::Review;
use quire_store::{ReviewDecision, ReviewRecord};

use crate::{AppError, Services};

/// Documents waiting for a decision in `scope`, oldest first.
pub async fn pending(
    services: &Services,
    scope: &SourceScope,
) -> Result<Vec<ReviewRecord>, AppError> {
    let waiting = services.store.pending_reviews().await?;
    Ok(waiting
        .into_iter()
        .filter(|r| scope.allows(r.document.source_id))
        .collect())
}

/// One document's review (waiting or decided); [`AppError::NotFound`] when it was never held
/// or lies outside `scope`.
pub async fn get(
    services: &Services,
    scope: &SourceScope,
    id: DocumentId,
) -> Result<ReviewRecord, AppError> {
    services
        .store
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
    services: &Services,
    scope: &SourceScope,
    id: DocumentId,
    decision: ReviewDecision,
) -> Result<ReviewRecord, AppError> {
    let review = get(services, scope, id).await?;
    let decided = match services.ingest.review() {
        Some(screening) => screening.decided(&review, decision),
        // Screening was turned off after the document was held: the decision still stands,
        // with the default policy's idea of what to redact in the name.
        None => Review::new(Default::default()).decided(&review, decision),
    };
    if !services
        .store
        .decide_review(id, decided, services.clock.now())
        .await?
    {
        let review = get(services, scope, id).await?;
        return Err(AppError::Conflict(format!(
            "document {id} is not waiting for review (it is {})",
            review.document.status.as_str()
        )));
    }
    services.ingest.notify_worker();
    get(services, scope, id).await
}

/// Deletes a held document with its original file; returns the review as it was.
/// [`AppError::NotFound`] when the document is not waiting for review.
pub async fn reject(
    services: &Services,
    scope: &SourceScope,
    id: DocumentId,
) -> Result<ReviewRecord, AppError> {
    let not_waiting = || AppError::NotFound(format!("document {id} is not waiting for review"));
    let review = match get(services, scope, id).await {
        Ok(review) => review,
        Err(AppError::NotFound(_)) => return Err(not_waiting()),
        Err(e) => return Err(e),
    };
    if review.decision.is_some() || review.document.status != DocumentStatus::PendingReview {
        return Err(not_waiting());
    }
    services
        .ingest
        .delete(&SourceScope::All, review.document.source_id, id)
        .await?;
    Ok(review)
}

fn not_held(id: DocumentId) -> AppError {
    AppError::NotFound(format!("document {id} was never held for review"))
}
