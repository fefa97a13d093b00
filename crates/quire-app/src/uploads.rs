//! Accepting uploads, for every adapter that receives files (the REST API's single and bulk
//! upload, the admin interface's upload form). A part is streamed into a staging file on disk
//! while its size is checked and its SHA-256 computed, never held whole in memory; nothing is
//! stored until the adapter has read its whole request and calls [`accept`], so a malformed
//! request leaves nothing behind.

use std::pin::pin;

use futures_util::{Stream, StreamExt};
use quire_core::{DocumentId, SourceId, SourceScope};
use quire_ingest::StageError;
pub use quire_ingest::{Upload, clean_file_name};
use quire_store::Created;

use crate::{Actor, AppError, Services, audit};

/// Room for multipart boundaries and part headers on top of the file bytes, per part.
pub const PART_OVERHEAD_BYTES: u64 = 64 * 1024;

/// Why one file part was not staged.
#[derive(Debug)]
pub enum PartError<E> {
    /// The part is larger than the upload limit (it was read to its end and dropped, so the
    /// request can go on with its next part).
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The part has no bytes.
    Empty,
    /// Reading the request failed (the adapter's own error: malformed body, cut short).
    Request(E),
    /// Staging failed on the server's side.
    Failed(AppError),
}

impl<E> PartError<E> {
    /// The refusal as an application error, or the adapter's own request error back for the
    /// adapter to map.
    pub fn into_app(self) -> Result<AppError, E> {
        match self {
            Self::TooLarge { limit } => Ok(AppError::TooLarge(format!(
                "the file is larger than the upload limit of {limit} bytes"
            ))),
            Self::Empty => Ok(AppError::Invalid("the `file` part is empty".into())),
            Self::Request(e) => Err(e),
            Self::Failed(e) => Ok(e),
        }
    }
}

/// The largest request body worth reading for `files` parts: anything declaring more is
/// refused before a byte is read.
pub fn max_request_bytes(services: &Services, files: usize) -> u64 {
    services
        .ingest
        .settings()
        .max_upload_bytes
        .saturating_add(PART_OVERHEAD_BYTES)
        .saturating_mul(files as u64)
}

/// [`AppError::NotFound`] unless `source` exists and is in `scope`: checked before a request's
/// parts are read, so an upload to a missing source costs nothing.
pub async fn check_source(
    services: &Services,
    scope: &SourceScope,
    source: SourceId,
) -> Result<(), AppError> {
    services.ingest.source(scope, source).await?;
    Ok(())
}

/// Streams one file part (`chunks`) into a staging file under the upload limit.
pub async fn receive_part<B, E>(
    services: &Services,
    name: Option<&str>,
    content_type: Option<String>,
    chunks: impl Stream<Item = Result<B, E>>,
) -> Result<Upload, PartError<E>>
where
    B: AsRef<[u8]>,
{
    let name = name.unwrap_or("upload").to_owned();
    let mut chunks = pin!(chunks);
    let mut staged = services
        .ingest
        .stage()
        .await
        .map_err(|e| PartError::Failed(e.into()))?;
    let mut too_large = None;
    while let Some(bytes) = chunks.next().await {
        let bytes = bytes.map_err(PartError::Request)?;
        if too_large.is_some() {
            continue;
        }
        match staged.write(bytes.as_ref()).await {
            Ok(()) => {}
            Err(StageError::TooLarge { limit }) => too_large = Some(limit),
            // Also when the staging budget ran out or the disk is nearly full: the rest of the
            // part is not worth reading (the adapter skips it and goes on with the next).
            Err(e) => return Err(PartError::Failed(e.into())),
        }
    }
    if let Some(limit) = too_large {
        return Err(PartError::TooLarge { limit });
    }
    if staged.size() == 0 {
        return Err(PartError::Empty);
    }
    let staged = staged
        .finish()
        .await
        .map_err(|e| PartError::Failed(e.into()))?;
    Ok(Upload {
        name,
        content_type,
        staged,
        metadata: None,
        external_id: None,
    })
}

/// Stores a staged upload as a new `queued` document of `source` (in the actor's scope),
/// wakes a worker and records the upload in the audit log; when the source already holds the
/// same bytes, the existing document is returned as [`Created::Existing`] and nothing is
/// stored.
pub async fn accept(
    services: &Services,
    actor: &Actor,
    source: SourceId,
    upload: Upload,
) -> Result<Created, AppError> {
    let created = services
        .ingest
        .accept(actor.scope(), source, upload)
        .await?;
    record_upload(services, actor, &created).await?;
    Ok(created)
}

/// Stores a staged upload as a new version of document `id` of `source` (in the actor's
/// scope): [`Created::Version`], or [`Created::Existing`] when the document's newest version
/// has these bytes (then only the metadata given, if any, replaced the document's). The live
/// version stays searchable until the new one is ready.
pub async fn accept_version(
    services: &Services,
    actor: &Actor,
    source: SourceId,
    id: DocumentId,
    upload: Upload,
) -> Result<Created, AppError> {
    let created = services
        .ingest
        .accept_version(actor.scope(), source, id, upload)
        .await?
        .ok_or_else(|| AppError::NotFound("document not found".into()))?;
    record_upload(services, actor, &created).await?;
    Ok(created)
}

/// The audit entry of an upload that created a document or a version.
async fn record_upload(
    services: &Services,
    actor: &Actor,
    created: &Created,
) -> Result<(), AppError> {
    let (action, document) = match created {
        Created::New(document) => ("document.uploaded", document),
        Created::Version(document) => ("document.version_uploaded", document),
        Created::Existing(_) => return Ok(()),
    };
    let version = match created {
        Created::Version(d) => d.next_version.as_ref().map_or(d.version, |n| n.version),
        _ => document.version,
    };
    audit::record(
        services,
        actor,
        action,
        format!(
            "{} ({}) version {version} in {}",
            document.name, document.id, document.source_id
        ),
    )
    .await?;
    Ok(())
}

/// Stores staged uploads as [`accept`] does each, in one store transaction: what became of
/// each, in order, or one error for them all when the source is gone or the store fails (then
/// nothing is stored).
pub async fn accept_all(
    services: &Services,
    actor: &Actor,
    source: SourceId,
    uploads: Vec<Upload>,
) -> Result<Vec<Result<Created, AppError>>, AppError> {
    let accepted = services
        .ingest
        .accept_all(actor.scope(), source, uploads)
        .await?;
    for created in accepted.iter().flatten() {
        record_upload(services, actor, created).await?;
    }
    Ok(accepted
        .into_iter()
        .map(|outcome| outcome.map_err(AppError::from))
        .collect())
}
