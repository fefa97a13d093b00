//! `POST /api/v1/sources/{id}/documents/upload` and `.../upload-bulk`. Parts are streamed to
//! staging files on disk, never held whole in memory; nothing is stored until the whole
//! request has been read, so a malformed request leaves nothing behind.

use axum::Json;
use axum::extract::State;
use axum::extract::multipart::{Field, MultipartError};
use axum::http::{HeaderMap, StatusCode, header};
use quire_app::records::Created;
use quire_app::uploads::{self, PartError, Upload, clean_file_name};
use quire_core::{ExternalId, Metadata, SourceId};
use utoipa::ToSchema;

use super::{DocumentPath, SourcePath};
use crate::auth::{Principal, ReadWrite, Require};
use crate::error::ErrorBody;
use crate::extract::{ApiMultipart, ApiPath};
use crate::wire::{BulkEntryJson, BulkUploadJson, DocumentJson};
use crate::{ApiError, AppState};

/// The multipart field that carries a file.
const FILE_FIELD: &str = "file";
/// The multipart text field that carries the documents' metadata (a JSON object).
const METADATA_FIELD: &str = "metadata";
/// The multipart text field that carries the caller's own key for a document.
const EXTERNAL_ID_FIELD: &str = "externalId";
/// Largest `metadata` field read, in bytes (the metadata itself is bounded tighter).
const MAX_METADATA_FIELD_BYTES: usize = 64 * 1024;
/// Largest `externalId` field read, in bytes (the id itself is bounded in characters).
const MAX_EXTERNAL_ID_FIELD_BYTES: usize = 4 * 1024;

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
    /// Optional: the caller's own key for the document (a path, URL or CMS id; 1 to 512
    /// characters), unique within the source. When the source already holds it, the file
    /// becomes a new version of that document (same id); without a `metadata` field the
    /// document keeps its metadata.
    #[schema(value_type = Option<String>, example = "policies/travel.pdf")]
    external_id: Option<String>,
}

/// The body of `PUT …/documents/{doc_id}`.
#[derive(ToSchema)]
#[expect(dead_code, reason = "describes the multipart form; never constructed")]
pub(super) struct VersionForm {
    /// The new version's file: its name is the part's `filename`.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    /// Optional: metadata (a JSON object) replacing the document's; without it the document
    /// keeps its metadata.
    #[schema(value_type = Option<String>)]
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
    /// Optional, repeatable: an `externalId` field gives its id to the `file` part that
    /// follows it (see the single upload).
    #[schema(value_type = Option<Vec<String>>)]
    external_id: Option<Vec<String>>,
}

/// Uploads one file; it is processed in the background (poll the document). Needs
/// `read-write`.
#[utoipa::path(post, path = "/api/v1/sources/{id}/documents/upload", tag = "documents",
    params(SourcePath),
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 202, description = "Stored and queued for processing: a new document, or a new version of the document with this `externalId`", body = DocumentJson),
        (status = 200, description = "The source already holds these bytes (without `externalId`), or the document with this `externalId` has them as its newest version: the existing document", body = DocumentJson),
        (status = 400, description = "No `file` part, several, an empty or malformed one, an unsupported format, malformed `metadata` or `externalId`", body = ErrorBody),
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
    let form = read_single(&state, &mut multipart, true).await?;
    let mut upload = form.upload;
    upload.metadata = form.metadata;
    upload.external_id = form.external_id;
    let created = uploads::accept(&state, &caller.actor(), id, upload).await?;
    Ok(created_response(&created))
}

/// Uploads a new version of a document: it keeps its id, and its live version stays
/// searchable until the new one is ready, then the switch is one transaction. Needs
/// `read-write`.
#[utoipa::path(put, path = "/api/v1/sources/{id}/documents/{doc_id}", tag = "documents",
    params(DocumentPath),
    request_body(content = VersionForm, content_type = "multipart/form-data"),
    responses(
        (status = 202, description = "Stored and queued for processing as the document's next version", body = DocumentJson),
        (status = 200, description = "The document's newest version has these bytes: nothing new (a `metadata` field given still replaces the metadata)", body = DocumentJson),
        (status = 400, description = "An id is not a UUID; no `file` part, several, an empty or malformed one; malformed `metadata`; an `externalId` field (it cannot change)", body = ErrorBody),
        (status = 403, description = "Permission too low", body = ErrorBody),
        (status = 404, description = "No such document in this source and the key's scope", body = ErrorBody),
        (status = 413, description = "The file is over `limits.max_upload_bytes`", body = ErrorBody),
        (status = 507, description = "No room now; retry later", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait"))),
        (status = 415, description = "Not `multipart/form-data`", body = ErrorBody),
    ))]
pub(super) async fn version(
    State(state): State<AppState>,
    Require(caller, _): Require<ReadWrite>,
    ApiPath(DocumentPath { id, doc_id }): ApiPath<DocumentPath>,
    headers: HeaderMap,
    ApiMultipart(mut multipart): ApiMultipart,
) -> Result<(StatusCode, Json<DocumentJson>), ApiError> {
    check_declared_length(&headers, uploads::max_request_bytes(&state, 1))?;
    uploads::check_source(&state, caller.scope(), id).await?;
    let form = read_single(&state, &mut multipart, false).await?;
    let mut upload = form.upload;
    upload.metadata = form.metadata;
    let created = uploads::accept_version(&state, &caller.actor(), id, doc_id, upload).await?;
    Ok(created_response(&created))
}

/// 202 with the document when work was queued (a new document or version), 200 when nothing
/// new was stored.
fn created_response(created: &Created) -> (StatusCode, Json<DocumentJson>) {
    let status = match created {
        Created::New(_) | Created::Version(_) => StatusCode::ACCEPTED,
        Created::Existing(_) => StatusCode::OK,
    };
    (status, Json(DocumentJson::from(created.document())))
}

/// What a single-file form holds.
struct SingleForm {
    upload: Upload,
    metadata: Option<Metadata>,
    external_id: Option<ExternalId>,
}

/// Reads a form of one `file` part with optional `metadata` (and, where `external_ids`
/// allows, `externalId`) fields.
async fn read_single(
    state: &AppState,
    multipart: &mut axum::extract::Multipart,
    external_ids: bool,
) -> Result<SingleForm, ApiError> {
    let mut upload = None;
    let mut metadata = None;
    let mut external_id = None;
    while let Some(field) = next_field(multipart).await? {
        if field.name() == Some(METADATA_FIELD) {
            metadata = Some(read_metadata(field, metadata.is_some()).await?);
            continue;
        }
        if field.name() == Some(EXTERNAL_ID_FIELD) {
            if !external_ids {
                return Err(ApiError::BadRequest(
                    "a document's `externalId` cannot change; upload without it".into(),
                ));
            }
            if external_id.is_some() {
                return Err(ApiError::BadRequest(
                    "send one `externalId` field per upload".into(),
                ));
            }
            external_id = Some(read_external_id(field).await?);
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
        upload = Some(receive(state, field).await.map_err(part_error)?);
    }
    let upload = upload
        .ok_or_else(|| ApiError::BadRequest("the multipart body has no `file` part".into()))?;
    Ok(SingleForm {
        upload,
        metadata,
        external_id,
    })
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
    // An `externalId` field names the `file` part that follows it.
    let mut external_id = None;
    while let Some(field) = next_field(&mut multipart).await? {
        if field.name() == Some(METADATA_FIELD) {
            metadata = Some(read_metadata(field, metadata.is_some()).await?);
            continue;
        }
        if field.name() == Some(EXTERNAL_ID_FIELD) {
            if external_id.is_some() {
                return Err(ApiError::BadRequest(
                    "two `externalId` fields in a row: each names the `file` part after it".into(),
                ));
            }
            external_id = Some(read_external_id(field).await?);
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
        let part_external_id = external_id.take();
        match receive(&state, field).await {
            Ok(mut upload) => {
                upload.external_id = part_external_id;
                parts.push((name, Ok(upload)));
            }
            Err(PartError::Request(e)) => return Err(multipart_error(e)),
            Err(e) => parts.push((name, Err(part_error(e)))),
        }
    }
    if parts.is_empty() {
        return Err(ApiError::BadRequest(
            "the multipart body has no `file` part".into(),
        ));
    }
    if external_id.is_some() {
        return Err(ApiError::BadRequest(
            "the last `externalId` field has no `file` part after it".into(),
        ));
    }
    if let Some(metadata) = metadata {
        for (_, part) in &mut parts {
            if let Ok(upload) = part {
                upload.metadata = Some(metadata.clone());
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
                Created::New(_) | Created::Version(_) => "accepted",
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

/// The `externalId` field's id; 400 when it is not UTF-8 or breaks the rules.
async fn read_external_id(field: Field<'_>) -> Result<ExternalId, ApiError> {
    let mut field = field;
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if bytes.len() + chunk.len() > MAX_EXTERNAL_ID_FIELD_BYTES {
            return Err(ApiError::BadRequest(
                "the `externalId` field is longer than 512 characters".into(),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| ApiError::BadRequest("the `externalId` field is not UTF-8 text".into()))?;
    ExternalId::parse(text).map_err(|e| ApiError::BadRequest(e.0))
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
