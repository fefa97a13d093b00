//! The origins a syncing source reads (issue 35): a directory on the server
//! ([`FolderOrigin`]), a prefix of an S3-compatible bucket ([`S3Origin`]) or a web site
//! ([`WebOrigin`]), all behind one small trait, [`Origin`]; the [`Patterns`] that choose their
//! items; and the [`SecretBox`] that seals a source's credentials at rest.
//!
//! An origin only lists and reads. Turning new, changed and gone items into documents,
//! versions and deletions is the caller's work, keyed by [`Item::external_id`] and
//! [`Item::fingerprint`].

mod error;
mod folder;
mod patterns;
mod s3;
mod secret;
pub mod web;

use std::collections::HashMap;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;

pub use error::SyncError;
pub use folder::FolderOrigin;
pub use patterns::Patterns;
pub use s3::{S3Origin, S3Spec};
pub use secret::SecretBox;
pub use web::{WebOrigin, WebSpec};

/// One item of an origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The document's external id: the path under the folder with `/` separators
    /// ("reports/q1.pdf"), the S3 object key (the full key, e.g. "prefix/reports/q1.pdf"), or
    /// the page's URL without its fragment.
    pub external_id: String,
    /// The file name to upload it as (last path component).
    pub name: String,
    /// What tells a change: folder: "size:<bytes>;mtime:<unix nanos>"; S3: "etag:<etag>"
    /// (or "size:<bytes>;mtime:<unix nanos>" when there is no etag); web: "web:" and a JSON
    /// object of the page's validators, SHA-256, metadata and links.
    pub fingerprint: String,
    /// Size in bytes.
    pub size: u64,
    /// When the item was last modified, as the origin says.
    pub modified: Option<chrono::DateTime<chrono::Utc>>,
    /// Metadata from the origin, a JSON object of string values with keys of letters,
    /// digits, `_`, `-`, `.` (at most 64 characters): folder: {"modifiedAt": "<RFC 3339>"};
    /// S3: the object's user metadata (x-amz-meta-* keys, lower-cased and sanitised) plus
    /// "modifiedAt"; web: "title", "language" and "modifiedAt" when the page tells them.
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// Where a sync reads from.
#[async_trait]
pub trait Origin: Send + Sync {
    /// Every item the patterns take, in external-id order. A listing failure fails the run.
    async fn list(&self) -> Result<Vec<Item>, SyncError>;

    /// [`list`](Origin::list), knowing the fingerprints the previous run recorded (external
    /// id → fingerprint): an origin that can ask whether an item changed (a web site's
    /// conditional requests) does, and gives an unchanged item its previous fingerprint back.
    async fn list_since(&self, previous: &HashMap<String, String>) -> Result<Vec<Item>, SyncError> {
        let _ = previous;
        self.list().await
    }

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
