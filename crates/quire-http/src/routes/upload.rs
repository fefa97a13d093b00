//! `POST /api/v1/sources/{id}/documents/upload` and `.../upload-bulk`. Parts are streamed to
//! staging files on disk, never held whole in memory; nothing is stored until the whole
//! request has been read, so a malformed request leaves nothing behind.

use axum::Json;
use axum::extract::State;
use axum::extract::multipart::{Field, MultipartError};
use axum::http::{HeaderMap, StatusCode, header};
use quire_app::records::Created;
use quire_app::uploads::{self, PartError, Upload, clean_file_name};
use quire_core::{Metadata, SourceId};
use utoipa::ToSchema;

use super::SourcePath;
use crate::auth::{Principal, ReadWrite, Require};
use crate::error::ErrorBody;
use crate::extract::{ApiMultipart, ApiPath};
use crate::wire::{BulkEntryJson, BulkUploadJson, DocumentJson};
use crate::{ApiError, AppState};

/// The multipart field that carries a file.
const FILE_FIELD: &str = "file";
/// The multipart text field that carries the documents' metadata (a JSON object).
const METADATA_FIELD: &str = "metadata";
/// Largest `metadata` field read, in bytes (the metadata itself is bounded tighter).
const MAX_METADATA_FIELD_BYTES: usize = 64 * 1024;

/// The body of a single upload (for the OpenAPI document; parts are streamed, not parsed into
/// this).
#[derive(ToSchema)]
#[expect(dead_code, reason = "describes the multipart form; never constructed")]
pub(super) struct UploadForm {
    /// The file: its name is the part's `filename`. Other parts are ignored.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    /// Optional: the document's metadata, a JSON object of keys (letters, digits, `_`, `-`,
    /// `.`; at most 64 characters) and values (a string, a number, a boolean or an array of
    /// strings); see docs/api.md for the limits.
    #[schema(value_type = Option<String>, example = r#"{"department": "legal", "year": 2024}"#)]
    metadata: Option<String>,
}

/// The body of a bulk upload.
#[derive(ToSchema)]
#[expect(dead_code, reason = "describes the multipart form; never constructed")]
pub(super) struct BulkUploadForm {
    /// One part named `file` per file, at most `uploads.max_bulk_files`.
    #[schema(value_type = Vec<String>, format = Binary)]
    file: Vec<Vec<u8>>,
    /// Optional: metadata (a JSON object) given to every document of the request.
    #[schema(value_type = Option<String>)]
    metadata: Option<String>,
}

/// Uploads one file; it is processed in the background (poll the document). Needs
/// `read-write`.
#[utoipa::path(post, path = "/api/v1/sources/{id}/documents/upload", tag = "documents",
    params(SourcePath),
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 202, description = "Stored and queued for processing", body = DocumentJson),
        (status = 200, description = "The source already holds these bytes: the existing document", body = DocumentJson),
        (status = 400, description = "No `file` part, several, an empty or malformed one, an unsupported format", body = ErrorBody),
        (status = 403, description = "Permission too low", body = ErrorBody),
        (status = 404, description = "No such source in the key's scope", body = ErrorBody),
        (status = 413, description = "The file is over `limits.max_upload_bytes`", body = ErrorBody),
        (status = 507, description = "No room now: the staging budget (`limits.max_staging_bytes`) is in use or the disk is nearly full; retry later", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait"))),
        (status = 415, description = "Not `multipart/form-data`", body = ErrorBody),
    ))]
pub(super) async fn single(
    State(state): State<AppState>,
    Require(caller, _): Require<ReadWrite>,
    ApiPath(SourcePath { id }): ApiPath<SourcePath>,
    headers: HeaderMap,
    ApiMultipart(mut multipart): ApiMultipart,
) -> Result<(StatusCode, Json<DocumentJson>), ApiError> {
    check_declared_length(&headers, uploads::max_request_bytes(&state, 1))?;
    uploads::check_source(&state, caller.scope(), id).await?;
    let mut upload = None;
    let mut metadata = None;
    while let Some(field) = next_field(&mut multipart).await? {
        if field.name() == Some(METADATA_FIELD) {
            metadata = Some(read_metadata(field, metadata.is_some()).await?);
            continue;
        }
        if field.name() != Some(FILE_FIELD) {
            continue;
        }
        if upload.is_some() {
            return Err(ApiError::BadRequest(
                "send one `file` part per upload; use upload-bulk for several files".into(),
            ));
        }
        upload = Some(receive(&state, field).await.map_err(part_error)?);
    }
    let mut upload = upload
        .ok_or_else(|| ApiError::BadRequest("the multipart body has no `file` part".into()))?;
    upload.metadata = metadata.unwrap_or_default();
    let created = uploads::accept(&state, &caller.actor(), id, upload).await?;
    let status = match created {
        Created::New(_) => StatusCode::ACCEPTED,
        Created::Existing(_) => StatusCode::OK,
    };
    Ok((status, Json(DocumentJson::from(created.document()))))
}

/// Uploads several files; each part is accepted, recognised as a duplicate or rejected on its
/// own. Needs `read-write`.
#[utoipa::path(post, path = "/api/v1/sources/{id}/documents/upload-bulk", tag = "documents",
    params(SourcePath),
    request_body(content = BulkUploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 202, description = "What became of each part", body = BulkUploadJson),
        (status = 400, description = "No `file` part, too many, or a malformed body", body = ErrorBody),
        (status = 403, description = "Permission too low", body = ErrorBody),
        (status = 404, description = "No such source in the key's scope", body = ErrorBody),
        (status = 413, description = "The request is over the bulk size limit", body = ErrorBody),
        (status = 507, description = "No room now for any file: the disk is nearly full; retry later", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait"))),
        (status = 415, description = "Not `multipart/form-data`", body = ErrorBody),
    ))]
pub(super) async fn bulk(
    State(state): State<AppState>,
    Require(caller, _): Require<ReadWrite>,
    ApiPath(SourcePath { id }): ApiPath<SourcePath>,
    headers: HeaderMap,
    ApiMultipart(mut multipart): ApiMultipart,
) -> Result<(StatusCode, Json<BulkUploadJson>), ApiError> {
    let max_files = state.upload_settings().max_bulk_files;
    check_declared_length(&headers, uploads::max_request_bytes(&state, max_files))?;
    uploads::check_source(&state, caller.scope(), id).await?;
    let mut parts: Vec<(String, Result<Upload, ApiError>)> = Vec::new();
    let mut metadata = None;
    while let Some(field) = next_field(&mut multipart).await? {
        if field.name() == Some(METADATA_FIELD) {
            metadata = Some(read_metadata(field, metadata.is_some()).await?);
            continue;
        }
        if field.name() != Some(FILE_FIELD) {
            continue;
        }
        if parts.len() == max_files {
            return Err(ApiError::BadRequest(format!(
                "a bulk upload takes at most {max_files} files"
            )));
        }
        let name = clean_file_name(field.file_name().unwrap_or(""));
        match receive(&state, field).await {
            Ok(upload) => parts.push((name, Ok(upload))),
            Err(PartError::Request(e)) => return Err(multipart_error(e)),
            Err(e) => parts.push((name, Err(part_error(e)))),
        }
    }
    if parts.is_empty() {
        return Err(ApiError::BadRequest(
            "the multipart body has no `file` part".into(),
        ));
    }
    if let Some(metadata) = metadata {
        for (_, part) in &mut parts {
            if let Ok(upload) = part {
                upload.metadata = metadata.clone();
            }
        }
    }
    let results = accept_parts(&state, &caller, id, parts).await?;
    let count = |status: &str| results.iter().filter(|r| r.status == status).count();
    let (accepted, duplicates) = (count("accepted"), count("duplicate"));
    Ok((
        StatusCode::ACCEPTED,
        Json(BulkUploadJson {
            accepted,
            duplicates,
            rejected: results.len() - accepted - duplicates,
            results,
        }),
    ))
}

/// Stores the parts that were staged, their documents in one store transaction, and says what
/// became of every part in order. The store failing fails the whole request: nothing was
/// stored.
async fn accept_parts(
    state: &AppState,
    caller: &Principal,
    source: SourceId,
    parts: Vec<(String, Result<Upload, ApiError>)>,
) -> Result<Vec<BulkEntryJson>, ApiError> {
    let mut names = Vec::with_capacity(parts.len());
    let mut refused = Vec::with_capacity(parts.len());
    let mut staged = Vec::with_capacity(parts.len());
    for (name, part) in parts {
        names.push(name);
        match part {
            Ok(upload) => {
                refused.push(None);
                staged.push(upload);
            }
            Err(e) => refused.push(Some(e)),
        }
    }
    let mut accepted = uploads::accept_all(state, &caller.actor(), source, staged)
        .await?
        .into_iter();
    let mut results = Vec::with_capacity(names.len());
    for (index, (name, refusal)) in names.into_iter().zip(refused).enumerate() {
        let outcome = match refusal {
            Some(e) => Err(e),
            None => match accepted.next() {
                Some(outcome) => outcome.map_err(ApiError::from),
                None => Err(ApiError::Internal),
            },
        };
        results.push(bulk_entry(index, name, outcome));
    }
    Ok(results)
}

/// One part's line in the bulk upload's answer.
fn bulk_entry(index: usize, name: String, outcome: Result<Created, ApiError>) -> BulkEntryJson {
    match outcome {
        Ok(created) => BulkEntryJson {
            index,
            name,
            status: match created {
                Created::New(_) => "accepted",
                Created::Existing(_) => "duplicate",
            },
            document: Some(DocumentJson::from(created.document())),
            error: None,
        },
        Err(e) => {
            let (_, body): (StatusCode, ErrorBody) = e.parts();
            BulkEntryJson {
                index,
                name,
                status: "rejected",
                document: None,
                error: Some(body),
            }
        }
    }
}

/// The `metadata` field's JSON object; 400 when it is malformed, breaks the metadata rules, or
/// comes twice.
async fn read_metadata(field: Field<'_>, seen: bool) -> Result<Metadata, ApiError> {
    if seen {
        return Err(ApiError::BadRequest(
            "send one `metadata` field per upload".into(),
        ));
    }
    let mut field = field;
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if bytes.len() + chunk.len() > MAX_METADATA_FIELD_BYTES {
            return Err(ApiError::BadRequest(format!(
                "the `metadata` field is larger than {MAX_METADATA_FIELD_BYTES} bytes"
            )));
        }
        bytes.extend_from_slice(&chunk);
    }
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| ApiError::BadRequest("the `metadata` field is not UTF-8 text".into()))?;
    Metadata::parse(text).map_err(|e| ApiError::BadRequest(e.0))
}

/// Refuses at once a body whose declared length is already over the limit.
fn check_declared_length(headers: &HeaderMap, limit: u64) -> Result<(), ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(length) if length > limit => Err(ApiError::PayloadTooLarge(format!(
            "the request body of {length} bytes is larger than the upload limit"
        ))),
        _ => Ok(()),
    }
}

async fn next_field<'a>(
    multipart: &'a mut axum::extract::Multipart,
) -> Result<Option<Field<'a>>, ApiError> {
    multipart.next_field().await.map_err(multipart_error)
}

fn multipart_error(e: MultipartError) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge("the request body is too large".into())
    } else {
        ApiError::BadRequest(format!("malformed multipart body: {}", e.body_text()))
    }
}

/// Streams one file part into a staging file (see `quire_app::uploads`).
async fn receive(state: &AppState, field: Field<'_>) -> Result<Upload, PartError<MultipartError>> {
    let name = field.file_name().map(str::to_owned);
    let content_type = field.content_type().map(str::to_owned);
    uploads::receive_part(state, name.as_deref(), content_type, field).await
}

fn part_error(e: PartError<MultipartError>) -> ApiError {
    match e.into_app() {
        Ok(refused) => refused.into(),
        Err(request) => multipart_error(request),
    }
}
