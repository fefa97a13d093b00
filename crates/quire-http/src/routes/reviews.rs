//! The personal-data review queue, for administrators: `GET /api/v1/reviews`,
//! `GET /api/v1/reviews/{docId}`, and `POST /api/v1/reviews/{docId}/approve|redact|reject`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use quire_app::records::{ReviewDecision, ReviewRecord};
use quire_app::reviews;
use quire_core::DocumentId;
use quire_core::wire_timestamp as iso;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::{Admin, Require};
use crate::error::ErrorBody;
use crate::extract::ApiPath;
use crate::wire::DocumentJson;
use crate::{ApiError, AppState};

/// `/reviews/{doc_id}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub(super) struct ReviewPath {
    /// The held document's id.
    #[param(value_type = String, format = Uuid)]
    doc_id: DocumentId,
}

/// A held document and why.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Review)]
pub(super) struct ReviewJson {
    /// The document (status `pending_review` while waiting).
    document: DocumentJson,
    /// Kinds of personal data found, such as `email` or `iban`.
    pii_types: Vec<String>,
    /// When it was held.
    #[schema(format = DateTime)]
    held_at: String,
    /// `approve`, `redact` or `reject` once decided.
    #[schema(value_type = Option<String>)]
    decision: Option<&'static str>,
    /// When it was decided.
    #[schema(format = DateTime)]
    decided_at: Option<String>,
    /// While waiting, each finding: `type`, `in` (`text`, `section` or `name`), `page`,
    /// `text`, `confidence` and `context` (the text around it). Once decided, one entry per
    /// type: `type`, `count`, `in` and `excerpt` (masked); the found text is gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    findings: Option<serde_json::Value>,
    /// How many findings there are.
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

/// The documents waiting for a decision; admin keys only.
#[utoipa::path(get, path = "/api/v1/reviews", tag = "reviews",
    responses(
        (status = 200, description = "Held documents, without their findings", body = [ReviewJson]),
        (status = 403, description = "Not an admin key", body = ErrorBody),
    ))]
pub(super) async fn list(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
) -> Result<Json<Vec<ReviewJson>>, ApiError> {
    let waiting = reviews::pending(&state, caller.scope()).await?;
    Ok(Json(
        waiting.iter().map(|r| ReviewJson::of(r, false)).collect(),
    ))
}

/// A held (or decided) document with its findings; admin keys only.
#[utoipa::path(get, path = "/api/v1/reviews/{doc_id}", tag = "reviews", params(ReviewPath),
    responses(
        (status = 200, description = "The review with its findings", body = ReviewJson),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No review of this document in the key's scope", body = ErrorBody),
    ))]
pub(super) async fn get(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
    ApiPath(path): ApiPath<ReviewPath>,
) -> Result<Json<ReviewJson>, ApiError> {
    let review = reviews::get(&state, caller.scope(), path.doc_id).await?;
    Ok(Json(ReviewJson::of(&review, true)))
}

/// Indexes the document as it is; admin keys only.
#[utoipa::path(post, path = "/api/v1/reviews/{doc_id}/approve", tag = "reviews", params(ReviewPath),
    responses(
        (status = 200, description = "The document, queued for processing again", body = DocumentJson),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No review of this document in the key's scope", body = ErrorBody),
        (status = 409, description = "The document is not waiting for review", body = ErrorBody),
    ))]
pub(super) async fn approve(
    state: State<AppState>,
    admin: Require<Admin>,
    path: ApiPath<ReviewPath>,
) -> Result<Json<DocumentJson>, ApiError> {
    decide(state, admin, path, ReviewDecision::Approve).await
}

/// Indexes the document with the personal data masked; admin keys only.
#[utoipa::path(post, path = "/api/v1/reviews/{doc_id}/redact", tag = "reviews", params(ReviewPath),
    responses(
        (status = 200, description = "The document, queued for processing again", body = DocumentJson),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No review of this document in the key's scope", body = ErrorBody),
        (status = 409, description = "The document is not waiting for review", body = ErrorBody),
    ))]
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
    let review = reviews::decide(&state, &caller.actor(), path.doc_id, decision).await?;
    Ok(Json(DocumentJson::from(&review.document)))
}

/// Deletes the document and its original file; admin keys only.
#[utoipa::path(post, path = "/api/v1/reviews/{doc_id}/reject", tag = "reviews", params(ReviewPath),
    responses(
        (status = 204, description = "The document and its file are deleted"),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No review of this document in the key's scope", body = ErrorBody),
        (status = 409, description = "The document is not waiting for review", body = ErrorBody),
    ))]
pub(super) async fn reject(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
    ApiPath(path): ApiPath<ReviewPath>,
) -> Result<StatusCode, ApiError> {
    reviews::reject(&state, &caller.actor(), path.doc_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
