//! The origins a syncing source reads (issue 35): a directory on the server
//! ([`FolderOrigin`]) or a prefix of an S3-compatible bucket ([`S3Origin`]), both behind one
//! small trait, [`Origin`]; the [`Patterns`] that choose their items; and the [`SecretBox`]
//! that seals a source's credentials at rest.
//!
//! An origin only lists and reads. Turning new, changed and gone items into documents,
//! versions and deletions is the caller's work, keyed by [`Item::external_id`] and
//! [`Item::fingerprint`].

mod error;
mod folder;
mod patterns;
mod s3;
mod secret;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;

pub use error::SyncError;
pub use folder::FolderOrigin;
pub use patterns::Patterns;
pub use s3::{S3Origin, S3Spec};
pub use secret::SecretBox;

/// One item of an origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The document's external id: the path under the folder with `/` separators
    /// ("reports/q1.pdf"), or the S3 object key (the full key, e.g. "prefix/reports/q1.pdf").
    pub external_id: String,
    /// The file name to upload it as (last path component).
    pub name: String,
    /// What tells a change: folder: "size:<bytes>;mtime:<unix nanos>"; S3: "etag:<etag>"
    /// (or "size:<bytes>;mtime:<unix nanos>" when there is no etag).
    pub fingerprint: String,
    /// Size in bytes.
    pub size: u64,
    /// When the item was last modified, as the origin says.
    pub modified: Option<chrono::DateTime<chrono::Utc>>,
    /// Metadata from the origin, a JSON object of string values with keys of letters,
    /// digits, `_`, `-`, `.` (at most 64 characters): folder: {"modifiedAt": "<RFC 3339>"};
    /// S3: the object's user metadata (x-amz-meta-* keys, lower-cased and sanitised) plus
    /// "modifiedAt".
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// Where a sync reads from.
#[async_trait]
pub trait Origin: Send + Sync {
    /// Every item the patterns take, in external-id order. A listing failure fails the run.
    async fn list(&self) -> Result<Vec<Item>, SyncError>;

    /// The item's bytes, streamed (never held whole in memory).
    async fn open(
        &self,
        item: &Item,
    ) -> Result<BoxStream<'static, Result<Bytes, SyncError>>, SyncError>;
}

/// The metadata key every origin sets: when the item was last modified (RFC 3339).
const MODIFIED_AT: &str = "modifiedAt";

/// `time` as whole nanoseconds since the Unix epoch, the unit fingerprints use.
fn unix_nanos(time: chrono::DateTime<chrono::Utc>) -> i128 {
    i128::from(time.timestamp()) * 1_000_000_000 + i128::from(time.timestamp_subsec_nanos())
}

/// The fingerprint of an item known only by size and modification time.
fn size_mtime_fingerprint(size: u64, modified: Option<chrono::DateTime<chrono::Utc>>) -> String {
    match modified {
        Some(time) => format!("size:{size};mtime:{}", unix_nanos(time)),
        None => format!("size:{size};mtime:unknown"),
    }
}
