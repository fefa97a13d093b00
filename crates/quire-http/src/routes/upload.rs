//! `POST /api/v1/sources/{id}/documents/upload` and `.../upload-bulk`. Parts are streamed to
//! staging files on disk, never held whole in memory; nothing is stored until the whole
//! request has been read, so a malformed request leaves nothing behind.

use axum::Json;
use axum::extract::State;
use axum::extract::multipart::{Field, MultipartError};
use axum::http::{HeaderMap, StatusCode, header};
use quire_core::SourceId;
use quire_ingest::{StageError, Upload, clean_file_name};
use quire_store::Created;

use super::SourcePath;
use crate::auth::{Principal, ReadWrite, Require};
use crate::error::ErrorBody;
use crate::extract::{ApiMultipart, ApiPath};
use crate::wire::{BulkEntryJson, BulkUploadJson, DocumentJson};
use crate::{ApiError, AppState};

/// Room for multipart boundaries and part headers on top of the file bytes, per part.
const PART_OVERHEAD_BYTES: u64 = 64 * 1024;
/// The multipart field that carries a file.
const FILE_FIELD: &str = "file";

/// Why one file part was not staged.
enum PartError {
    TooLarge(u64),
    Empty,
    Request(ApiError),
}

impl PartError {
    fn into_api(self) -> ApiError {
        match self {
            Self::TooLarge(limit) => ApiError::PayloadTooLarge(format!(
                "the file is larger than the upload limit of {limit} bytes"
            )),
            Self::Empty => ApiError::BadRequest("the `file` part is empty".into()),
            Self::Request(e) => e,
        }
    }
}

pub(super) async fn single(
    State(state): State<AppState>,
    Require(caller, _): Require<ReadWrite>,
    ApiPath(SourcePath { id }): ApiPath<SourcePath>,
    headers: HeaderMap,
    ApiMultipart(mut multipart): ApiMultipart,
) -> Result<(StatusCode, Json<DocumentJson>), ApiError> {
    let max = state.ingest.settings().max_upload_bytes;
    check_declared_length(&headers, max.saturating_add(PART_OVERHEAD_BYTES))?;
    state.ingest.source(caller.scope(), id).await?;
    let mut upload = None;
    while let Some(field) = next_field(&mut multipart).await? {
        if field.name() != Some(FILE_FIELD) {
            continue;
        }
        if upload.is_some() {
            return Err(ApiError::BadRequest(
                "send one `file` part per upload; use upload-bulk for several files".into(),
            ));
        }
        upload = Some(receive(&state, field).await.map_err(PartError::into_api)?);
    }
    let upload = upload
        .ok_or_else(|| ApiError::BadRequest("the multipart body has no `file` part".into()))?;
    let created = state.ingest.accept(caller.scope(), id, upload).await?;
    let status = match created {
        Created::New(_) => StatusCode::ACCEPTED,
        Created::Existing(_) => StatusCode::OK,
    };
    Ok((status, Json(DocumentJson::from(created.document()))))
}

pub(super) async fn bulk(
    State(state): State<AppState>,
    Require(caller, _): Require<ReadWrite>,
    ApiPath(SourcePath { id }): ApiPath<SourcePath>,
    headers: HeaderMap,
    ApiMultipart(mut multipart): ApiMultipart,
) -> Result<(StatusCode, Json<BulkUploadJson>), ApiError> {
    let max = state.ingest.settings().max_upload_bytes;
    let max_files = state.settings.max_bulk_files;
    check_declared_length(
        &headers,
        max.saturating_add(PART_OVERHEAD_BYTES)
            .saturating_mul(max_files as u64),
    )?;
    state.ingest.source(caller.scope(), id).await?;
    let mut parts: Vec<(String, Result<Upload, ApiError>)> = Vec::new();
    while let Some(field) = next_field(&mut multipart).await? {
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
            Err(PartError::Request(e)) => return Err(e),
            Err(e) => parts.push((name, Err(e.into_api()))),
        }
    }
    if parts.is_empty() {
        return Err(ApiError::BadRequest(
            "the multipart body has no `file` part".into(),
        ));
    }
    let mut results = Vec::with_capacity(parts.len());
    for (index, (name, part)) in parts.into_iter().enumerate() {
        results.push(accept_part(&state, &caller, id, index, name, part).await);
    }
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

async fn accept_part(
    state: &AppState,
    caller: &Principal,
    source: SourceId,
    index: usize,
    name: String,
    part: Result<Upload, ApiError>,
) -> BulkEntryJson {
    let outcome = match part {
        Ok(upload) => state
            .ingest
            .accept(caller.scope(), source, upload)
            .await
            .map_err(ApiError::from),
        Err(e) => Err(e),
    };
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

/// Streams one file part into a staging file. On an oversized part the rest of the part is
/// read and discarded, so a bulk upload can go on with the next part.
async fn receive(state: &AppState, mut field: Field<'_>) -> Result<Upload, PartError> {
    let name = field.file_name().unwrap_or("upload").to_owned();
    let content_type = field.content_type().map(str::to_owned);
    let mut staged = state
        .ingest
        .stage()
        .await
        .map_err(|e| PartError::Request(e.into()))?;
    let mut too_large = None;
    while let Some(bytes) = field
        .chunk()
        .await
        .map_err(|e| PartError::Request(multipart_error(e)))?
    {
        if too_large.is_some() {
            continue;
        }
        match staged.write(&bytes).await {
            Ok(()) => {}
            Err(StageError::TooLarge { limit }) => too_large = Some(limit),
            Err(e) => return Err(PartError::Request(e.into())),
        }
    }
    if let Some(limit) = too_large {
        return Err(PartError::TooLarge(limit));
    }
    if staged.size() == 0 {
        return Err(PartError::Empty);
    }
    let staged = staged
        .finish()
        .await
        .map_err(|e| PartError::Request(e.into()))?;
    Ok(Upload {
        name,
        content_type,
        staged,
    })
}
