//! `GET /api/v1/sources/{id}/documents`, and `GET`/`DELETE` of one document.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use quire_app::documents;

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
    let documents = documents::list(&state, caller.scope(), id).await?;
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
    let (document, progress) = documents::get(&state, caller.scope(), id, doc_id).await?;
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
    documents::delete(&state, &caller.actor(), id, doc_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
