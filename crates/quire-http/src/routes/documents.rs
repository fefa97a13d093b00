//! `GET /api/v1/sources/{id}/documents` (whole, or page by page), and `GET`/`DELETE` of one
//! document and the download of its original.

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use quire_app::documents;
use quire_core::ExternalId;
use serde::Deserialize;
use tokio_util::io::ReaderStream;
use utoipa::{IntoParams, ToSchema};

use super::paging::{PageQuery, next_link};
use super::{DocumentPath, SourcePath};
use crate::auth::{Read, ReadWrite, Require};
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath};
use crate::wire::DocumentJson;
use crate::{ApiError, AppState};

/// `?externalId=`: only the document with this external id.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ExternalIdQuery {
    /// The uploader's own key of the one document wanted: the answer lists it, or nothing.
    #[serde(rename = "externalId")]
    #[param(rename = "externalId")]
    external_id: Option<String>,
}

/// The documents of a source, newest first: all of them, or with `limit` one page and a
/// `Link` header to the next; with `externalId`, the one document that has it.
#[utoipa::path(get, path = "/api/v1/sources/{id}/documents", tag = "documents",
    params(SourcePath, PageQuery, ExternalIdQuery),
    responses(
        (status = 200, description = "Its documents (one page of them with `limit`)", body = [DocumentJson],
            headers(("Link" = String, description = "`<…>; rel=\"next\"`: the next page, when `limit` was given and more follow"))),
        (status = 400, description = "The id is not a UUID, or `limit`, `cursor` or `externalId` is malformed", body = ErrorBody),
        (status = 404, description = "No such source in the key's scope", body = ErrorBody),
    ))]
pub(super) async fn list(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
    ApiPath(SourcePath { id }): ApiPath<SourcePath>,
    Query(query): Query<PageQuery>,
    Query(wanted): Query<ExternalIdQuery>,
) -> Result<Response, ApiError> {
    if let Some(raw) = &wanted.external_id {
        let external_id = ExternalId::parse(raw).map_err(|e| ApiError::BadRequest(e.0))?;
        let found =
            documents::find_by_external_id(&state, caller.scope(), id, &external_id).await?;
        let body: Vec<DocumentJson> = found.iter().map(DocumentJson::from).collect();
        return Ok(Json(body).into_response());
    }
    let Some(request) = query.parse()? else {
        let documents = documents::list(&state, caller.scope(), id).await?;
        let all: Vec<DocumentJson> = documents.iter().map(DocumentJson::from).collect();
        return Ok(Json(all).into_response());
    };
    let page =
        documents::list_page(&state, caller.scope(), id, request.after, request.size).await?;
    let body: Vec<DocumentJson> = page.documents.iter().map(DocumentJson::from).collect();
    let path = format!("/api/v1/sources/{id}/documents");
    Ok(match next_link(&path, request, &page) {
        Some(link) => ([link], Json(body)).into_response(),
        None => Json(body).into_response(),
    })
}

/// The body of `PATCH …/documents/{doc_id}`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct DocumentPatch {
    /// A JSON merge patch (RFC 7396) of the document's metadata: each key given replaces the
    /// document's, a key set to `null` is removed, keys left out stay.
    #[schema(value_type = Object, required = true)]
    metadata: Option<serde_json::Value>,
}

/// Changes a document's metadata without processing it again; searches see the change at
/// once. Needs `read-write`.
#[utoipa::path(patch, path = "/api/v1/sources/{id}/documents/{doc_id}", tag = "documents",
    params(DocumentPath), request_body = DocumentPatch,
    responses(
        (status = 200, description = "The document with its new metadata", body = DocumentJson),
        (status = 400, description = "An id is not a UUID, malformed JSON, no `metadata`, or metadata that breaks the rules", body = ErrorBody),
        (status = 403, description = "Permission too low", body = ErrorBody),
        (status = 404, description = "No such document in this source and the key's scope", body = ErrorBody),
        (status = 413, description = "Body over `limits.max_json_bytes`", body = ErrorBody),
        (status = 415, description = "Not `application/json`", body = ErrorBody),
    ))]
pub(super) async fn patch(
    State(state): State<AppState>,
    Require(caller, _): Require<ReadWrite>,
    ApiPath(DocumentPath { id, doc_id }): ApiPath<DocumentPath>,
    ApiJson(body): ApiJson<DocumentPatch>,
) -> Result<Json<DocumentJson>, ApiError> {
    let patch = body
        .metadata
        .ok_or_else(|| ApiError::BadRequest("`metadata` is required".into()))?;
    let document = documents::patch_metadata(&state, &caller.actor(), id, doc_id, &patch).await?;
    Ok(Json(DocumentJson::from(&document)))
}

/// The document's original, as uploaded, with its content type and file name.
#[utoipa::path(get, path = "/api/v1/sources/{id}/documents/{doc_id}/original", tag = "documents",
    params(DocumentPath),
    responses(
        (status = 200, description = "The original bytes, with the document's content type and an attachment `Content-Disposition` naming its file",
            content_type = "*/*", body = Vec<u8>),
        (status = 400, description = "An id is not a UUID", body = ErrorBody),
        (status = 404, description = "No such document in this source and the key's scope", body = ErrorBody),
    ))]
pub(super) async fn original(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
    ApiPath(DocumentPath { id, doc_id }): ApiPath<DocumentPath>,
) -> Result<Response, ApiError> {
    let original = documents::original(&state, caller.scope(), id, doc_id).await?;
    let length = original
        .file
        .metadata()
        .await
        .map_err(|e| ApiError::internal(&e))?
        .len();
    let document = &original.document;
    let content_type = HeaderValue::from_str(&document.content_type)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    let mut response = Body::from_stream(ReaderStream::new(original.file)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, content_type);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    headers.insert(
        header::CONTENT_DISPOSITION,
        content_disposition(&document.name),
    );
    // Uploaded bytes are the uploader's: never sniffed or run as a page of the API's origin.
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    Ok(response)
}

/// `attachment` with the file name twice: an ASCII stand-in for old clients, and the exact
/// name in RFC 8187's `filename*` (UTF-8, percent-encoded).
fn content_disposition(name: &str) -> HeaderValue {
    let fallback: String = name
        .chars()
        .map(|c| {
            if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::new();
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    HeaderValue::from_str(&format!(
        "attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("attachment"))
}

/// One document with every version: poll it to follow processing.
#[utoipa::path(get, path = "/api/v1/sources/{id}/documents/{doc_id}", tag = "documents",
    params(DocumentPath),
    responses(
        (status = 200, description = "The document, with `versions`", body = DocumentJson),
        (status = 400, description = "An id is not a UUID", body = ErrorBody),
        (status = 404, description = "No such document in this source and the key's scope", body = ErrorBody),
    ))]
pub(super) async fn get(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
    ApiPath(DocumentPath { id, doc_id }): ApiPath<DocumentPath>,
) -> Result<Json<DocumentJson>, ApiError> {
    let (document, progress) = documents::get(&state, caller.scope(), id, doc_id).await?;
    let versions = documents::versions(&state, caller.scope(), id, doc_id).await?;
    Ok(Json(
        DocumentJson::from(&document)
            .with_progress(progress.as_ref())
            .with_versions(&versions),
    ))
}

/// Deletes a document with every version, its passages and its original files, and announces
/// `document.deleted`; needs `read-write`.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_given_twice_and_never_break_the_header() {
        let value = content_disposition("Résumé \"final\".pdf");
        assert_eq!(
            value.to_str().unwrap(),
            "attachment; filename=\"R_sum_ _final_.pdf\"; \
             filename*=UTF-8''R%C3%A9sum%C3%A9%20%22final%22.pdf"
        );
        let plain = content_disposition("report.pdf");
        assert_eq!(
            plain.to_str().unwrap(),
            "attachment; filename=\"report.pdf\"; filename*=UTF-8''report.pdf"
        );
        assert!(content_disposition("a\r\nSet-Cookie: x").to_str().is_ok());
    }
}
