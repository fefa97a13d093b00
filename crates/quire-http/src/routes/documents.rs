//! `GET /api/v1/sources/{id}/documents`, and `GET`/`DELETE` of one document.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use quire_core::DocumentStatus;

use super::{DocumentPath, SourcePath};
use crate::auth::{Read, ReadWrite, Require};
use crate::error::ErrorBody;
use crate::extract::ApiPath;
use crate::wire::DocumentJson;
use crate::{ApiError, AppState};

/// The documents of a source, newest first.
#[utoipa::path(get, path = "/api/v1/sources/{id}/documents", tag = "documents", params(SourcePath),
    responses(
        (status = 200, description = "Its documents", body = [DocumentJson]),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 404, description = "No such source in the key's scope", body = ErrorBody),
    ))]
pub(super) async fn list(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
    ApiPath(SourcePath { id }): ApiPath<SourcePath>,
) -> Result<Json<Vec<DocumentJson>>, ApiError> {
    let documents = state
        .store
        .list_documents(caller.scope(), id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("data source {id} not found")))?;
    Ok(Json(documents.iter().map(DocumentJson::from).collect()))
}

/// One document: poll it to follow processing.
#[utoipa::path(get, path = "/api/v1/sources/{id}/documents/{doc_id}", tag = "documents",
    params(DocumentPath),
    responses(
        (status = 200, description = "The document", body = DocumentJson),
        (status = 400, description = "An id is not a UUID", body = ErrorBody),
        (status = 404, description = "No such document in this source and the key's scope", body = ErrorBody),
    ))]
pub(super) async fn get(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
    ApiPath(DocumentPath { id, doc_id }): ApiPath<DocumentPath>,
) -> Result<Json<DocumentJson>, ApiError> {
    let document = state
        .store
        .get_document(caller.scope(), id, doc_id)
        .await?
        .ok_or_else(|| document_not_found(doc_id))?;
    // Only a document being processed has progress; the others save the query.
    let progress = match document.status {
        DocumentStatus::Processing => state.store.document_progress(doc_id).await?,
        _ => None,
    };
    Ok(Json(
        DocumentJson::from(&document).with_progress(progress.as_ref()),
    ))
}

/// Deletes a document, its passages and its original file; needs `read-write`.
#[utoipa::path(delete, path = "/api/v1/sources/{id}/documents/{doc_id}", tag = "documents",
    params(DocumentPath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "An id is not a UUID", body = ErrorBody),
        (status = 403, description = "Permission too low", body = ErrorBody),
        (status = 404, description = "No such document in this source and the key's scope", body = ErrorBody),
    ))]
pub(super) async fn delete(
    State(state): State<AppState>,
    Require(caller, _): Require<ReadWrite>,
    ApiPath(DocumentPath { id, doc_id }): ApiPath<DocumentPath>,
) -> Result<StatusCode, ApiError> {
    state
        .ingest
        .delete(caller.scope(), id, doc_id)
        .await?
        .ok_or_else(|| document_not_found(doc_id))?;
    Ok(StatusCode::NO_CONTENT)
}

fn document_not_found(id: quire_core::DocumentId) -> ApiError {
    ApiError::NotFound(format!("document {id} not found in this data source"))
}
