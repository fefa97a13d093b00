//! The personal-data review queue, for administrators: `GET /api/v1/reviews`,
//! `GET /api/v1/reviews/{docId}`, and `POST /api/v1/reviews/{docId}/approve|redact|reject`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use quire_core::wire_timestamp as iso;
use quire_core::{DocumentId, SourceScope};
use quire_store::{ReviewDecision, ReviewRecord};
use serde::{Deserialize, Serialize};

use crate::auth::{Admin, Require};
use crate::extract::ApiPath;
use crate::wire::DocumentJson;
use crate::{ApiError, AppState};

/// `/reviews/{doc_id}`.
#[derive(Debug, Deserialize)]
pub(super) struct ReviewPath {
    doc_id: DocumentId,
}

/// A held document and why.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ReviewJson {
    document: DocumentJson,
    pii_types: Vec<String>,
    held_at: String,
    decision: Option<&'static str>,
    decided_at: Option<String>,
    /// Each finding: `type`, `page`, `text`, `confidence` and `context` (the text around it).
    #[serde(skip_serializing_if = "Option::is_none")]
    findings: Option<serde_json::Value>,
    finding_count: usize,
}

impl ReviewJson {
    fn of(review: &ReviewRecord, with_findings: bool) -> Self {
        let findings: serde_json::Value =
            serde_json::from_str(&review.findings).unwrap_or(serde_json::Value::Array(Vec::new()));
        Self {
            document: DocumentJson::from(&review.document),
            pii_types: review.pii_types.clone(),
            held_at: iso(review.held_at),
            decision: review.decision.map(ReviewDecision::as_str),
            decided_at: review.decided_at.map(iso),
            finding_count: findings.as_array().map_or(0, Vec::len),
            findings: with_findings.then_some(findings),
        }
    }
}

pub(super) async fn list(
    State(state): State<AppState>,
    Require(_, _): Require<Admin>,
) -> Result<Json<Vec<ReviewJson>>, ApiError> {
    let waiting = state.store.pending_reviews().await?;
    Ok(Json(
        waiting.iter().map(|r| ReviewJson::of(r, false)).collect(),
    ))
}

pub(super) async fn get(
    State(state): State<AppState>,
    Require(_, _): Require<Admin>,
    ApiPath(path): ApiPath<ReviewPath>,
) -> Result<Json<ReviewJson>, ApiError> {
    let review = state
        .store
        .get_review(path.doc_id)
        .await?
        .ok_or_else(|| not_held(path.doc_id))?;
    Ok(Json(ReviewJson::of(&review, true)))
}

pub(super) async fn approve(
    state: State<AppState>,
    admin: Require<Admin>,
    path: ApiPath<ReviewPath>,
) -> Result<Json<DocumentJson>, ApiError> {
    decide(state, admin, path, ReviewDecision::Approve).await
}

pub(super) async fn redact(
    state: State<AppState>,
    admin: Require<Admin>,
    path: ApiPath<ReviewPath>,
) -> Result<Json<DocumentJson>, ApiError> {
    decide(state, admin, path, ReviewDecision::Redact).await
}

/// Sends the document back to processing with the decision; it becomes `ready` (and
/// `document.ready` is sent) when that is done.
async fn decide(
    State(state): State<AppState>,
    Require(_, _): Require<Admin>,
    ApiPath(path): ApiPath<ReviewPath>,
    decision: ReviewDecision,
) -> Result<Json<DocumentJson>, ApiError> {
    let id = path.doc_id;
    if !state
        .store
        .decide_review(id, decision, state.clock.now())
        .await?
    {
        return Err(not_waiting(&state, id).await);
    }
    state.ingest.notify_worker();
    let review = state
        .store
        .get_review(id)
        .await?
        .ok_or_else(|| not_held(id))?;
    Ok(Json(DocumentJson::from(&review.document)))
}

/// Deletes the document and its original file.
pub(super) async fn reject(
    State(state): State<AppState>,
    Require(_, _): Require<Admin>,
    ApiPath(path): ApiPath<ReviewPath>,
) -> Result<StatusCode, ApiError> {
    let id = path.doc_id;
    let review = state
        .store
        .get_review(id)
        .await?
        .filter(|r| r.decision.is_none())
        .ok_or_else(|| ApiError::NotFound(format!("document {id} is not waiting for review")))?;
    state
        .ingest
        .delete(&SourceScope::All, review.document.source_id, id)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    Ok(StatusCode::NO_CONTENT)
}

fn not_held(id: DocumentId) -> ApiError {
    ApiError::NotFound(format!("document {id} was never held for review"))
}

async fn not_waiting(state: &AppState, id: DocumentId) -> ApiError {
    match state.store.get_review(id).await {
        Ok(Some(review)) => ApiError::Conflict(format!(
            "document {id} is not waiting for review (it is {})",
            review.document.status.as_str()
        )),
        Ok(None) => not_held(id),
        Err(e) => ApiError::from(e),
    }
}
