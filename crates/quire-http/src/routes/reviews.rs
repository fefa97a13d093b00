//! The personal-data review queue, for administrators: `GET /api/v1/reviews`,
//! `GET /api/v1/reviews/{docId}`, and `POST /api/v1/reviews/{docId}/approve|redact|reject`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use quire_app::reviews;
use quire_core::DocumentId;
use quire_core::wire_timestamp as iso;
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
    /// While waiting, each finding: `type`, `in` (`text`, `section` or `name`), `page`,
    /// `text`, `confidence` and `context` (the text around it). Once decided, one entry per
    /// type: `type`, `count`, `in` and `excerpt` (masked); the found text is gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    findings: Option<serde_json::Value>,
    finding_count: u64,
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
            finding_count: review.finding_count(),
            findings: with_findings.then_some(findings),
        }
    }
}

pub(super) async fn list(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
) -> Result<Json<Vec<ReviewJson>>, ApiError> {
    let waiting = reviews::pending(&state, caller.scope()).await?;
    Ok(Json(
        waiting.iter().map(|r| ReviewJson::of(r, false)).collect(),
    ))
}

pub(super) async fn get(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
    ApiPath(path): ApiPath<ReviewPath>,
) -> Result<Json<ReviewJson>, ApiError> {
    let review = reviews::get(&state, caller.scope(), path.doc_id).await?;
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
    Require(caller, _): Require<Admin>,
    ApiPath(path): ApiPath<ReviewPath>,
    decision: ReviewDecision,
) -> Result<Json<DocumentJson>, ApiError> {
    let review = reviews::decide(&state, caller.scope(), path.doc_id, decision).await?;
    Ok(Json(DocumentJson::from(&review.document)))
}

/// Deletes the document and its original file.
pub(super) async fn reject(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
    ApiPath(path): ApiPath<ReviewPath>,
) -> Result<StatusCode, ApiError> {
    reviews::reject(&state, caller.scope(), path.doc_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
