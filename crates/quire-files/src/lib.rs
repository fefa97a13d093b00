//! Originals (the files people upload) behind one small trait, [`OriginalStore`]: on local
//! disk ([`LocalFiles`], the data directory's `files/` layout) or in S3-compatible object
//! storage ([`S3Files`]), so a cluster of stateless nodes can share them.
//!
//! Uploads are staged on local disk by the caller first (size limit, checksum); a store only
//! ever receives complete files, and an object becomes visible only once it is whole.

mod error;
mod local;
mod location;
mod s3;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use quire_core::DocumentId;
use tempfile::TempPath;

pub use error::FilesError;
pub use local::LocalFiles;
pub use location::{FilesLocation, S3Settings};
pub use s3::S3Files;

/// Where the originals of documents are kept, keyed by document id.
#[async_trait]
pub trait OriginalStore: std::fmt::Debug + Send + Sync {
    /// Stores the complete file at `staged` as the original of `id`, replacing any earlier
    /// one. The original becomes visible only once it is whole; on failure nothing of it is
    /// left. The staged file is consumed: moved into place or removed.
    async fn put(&self, id: DocumentId, staged: TempPath) -> Result<(), FilesError>;

    /// Streams the original of `id` into a new file at `dest` (overwritten if it exists). A
    /// missing original is [`FilesError::NotFound`]; on failure `dest` is removed.
    async fn fetch_to(&self, id: DocumentId, dest: &Path) -> Result<(), FilesError>;

    /// Deletes the original of `id`; one that does not exist is not an error.
    async fn remove(&self, id: DocumentId) -> Result<(), FilesError>;

    /// The ids of every stored original, in no particular order: what a sweep for originals
    /// whose documents are gone walks. Names that are not document ids are left out.
    async fn list(&self) -> Result<Vec<DocumentId>, FilesError>;

    /// The original's path when it is already a local file that can be read in place (so the
    /// caller need not fetch a copy); `None` for remote stores.
    fn local_path(&self, id: DocumentId) -> Option<PathBuf>;
}

/// Opens the store `location` names; `s3` applies only to S3 locations.
pub fn open(
    location: &FilesLocation,
    s3: &S3Settings,
) -> Result<Arc<dyn OriginalStore>, FilesError> {
    Ok(match location {
        FilesLocation::Local(dir) => Arc::new(LocalFiles::open(dir)?),
        FilesLocation::S3 { bucket, prefix } => Arc::new(S3Files::new(bucket, prefix, s3)?),
    })
}
