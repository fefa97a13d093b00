//! Records as stored and returned: sources, documents, API keys and chunks.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{
    DocumentId, KeyId, Permission, SourceDescription, SourceId, SourceName, SourceScope, SourceType,
};

/// A data source with its document count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRecord {
    /// Identifier.
    pub id: SourceId,
    /// Display name.
    pub name: String,
    /// Free text description (may be empty).
    pub description: String,
    /// Source kind (`network`).
    pub source_type: String,
    /// Number of documents in the source, whatever their status.
    pub document_count: u64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// A source about to be created.
#[derive(Debug, Clone)]
pub struct NewSource {
    /// Identifier chosen by the caller.
    pub id: SourceId,
    /// Validated name.
    pub name: SourceName,
    /// Validated description.
    pub description: SourceDescription,
    /// Kind of source.
    pub source_type: SourceType,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// Where a document is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocumentStatus {
    /// Uploaded, waiting for a worker.
    Queued,
    /// A worker is extracting, chunking and indexing it.
    Processing,
    /// Personal data was found; waiting for an administrator.
    PendingReview,
    /// Processed and searchable.
    Ready,
    /// Processing failed; `error` says why.
    Failed,
}

impl DocumentStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Processing => "processing",
            Self::PendingReview => "pending_review",
            Self::Ready => "ready",
            Self::Failed => "failed",
        }
    }
}

impl fmt::Display for DocumentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DocumentStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "queued" => Self::Queued,
            "processing" => Self::Processing,
            "pending_review" => Self::PendingReview,
            "ready" => Self::Ready,
            "failed" => Self::Failed,
            other => return Err(format!("unknown document status {other:?}")),
        })
    }
}

/// A document and what processing made of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentRecord {
    /// Identifier.
    pub id: DocumentId,
    /// The source it belongs to.
    pub source_id: SourceId,
    /// File name as uploaded; after a redact decision on personal data found in it, with
    /// placeholders in place of what was found (see `docs/pii.md`).
    pub name: String,
    /// Processing status.
    pub status: DocumentStatus,
    /// Why processing failed, when it did.
    pub error: Option<String>,
    /// Number of indexed chunks.
    pub chunk_count: u64,
    /// Number of pages found (0 until processed).
    pub page_count: u64,
    /// Size of the original file in bytes.
    pub size: u64,
    /// Media type, as sent by the client or detected.
    pub content_type: String,
    /// Hex SHA-256 of the original bytes.
    pub sha256: String,
    /// What the caller says the document is (empty when none was given).
    pub metadata: crate::Metadata,
    /// The caller's own key for it, unique within its source, when one was given.
    pub external_id: Option<crate::ExternalId>,
    /// The live version: the one searched and cited (name, size, media type and SHA-256
    /// above are its).
    pub version: u32,
    /// The id the live version's chunks are indexed under (the document's id for version 1).
    pub index_id: DocumentId,
    /// The id the version before the live one was indexed under, kept until the next switch
    /// so that a node whose indexes have not caught up with the switch still finds the
    /// document.
    pub previous_index_id: Option<DocumentId>,
    /// A newer version being processed, waiting for review, or failed, when there is one.
    pub next_version: Option<crate::NextVersion>,
    /// Upload time.
    pub created_at: DateTime<Utc>,
    /// Time of the last status change.
    pub updated_at: DateTime<Utc>,
}

/// A document about to be created, its original already on disk.
#[derive(Debug, Clone)]
pub struct NewDocument {
    /// Identifier chosen by the caller: the original file is stored under it, and it is the
    /// new document's id or, for a new version of an existing document, the version's index id.
    pub id: DocumentId,
    /// Owning source.
    pub source_id: SourceId,
    /// File name.
    pub name: String,
    /// Media type.
    pub content_type: String,
    /// Size in bytes.
    pub size: u64,
    /// Hex SHA-256.
    pub sha256: String,
    /// The caller's metadata. For a new version of an existing document, `None` keeps the
    /// document's metadata; for a new document it is the same as empty.
    pub metadata: Option<crate::Metadata>,
    /// The caller's own key: bytes uploaded under an external id the source already holds
    /// become a new version of that document.
    pub external_id: Option<crate::ExternalId>,
    /// Upload time.
    pub created_at: DateTime<Utc>,
}

/// A stored API key (never the secret itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRecord {
    /// Identifier, shown to administrators and used to revoke.
    pub id: KeyId,
    /// Free label.
    pub name: String,
    /// Permission level.
    pub permission: Permission,
    /// Which sources the key sees.
    pub scope: SourceScope,
    /// Requests per minute for search and for generate; `None` uses the configured default.
    pub rate_limit: Option<u32>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last time the key authenticated a request.
    pub last_used_at: Option<DateTime<Utc>>,
    /// When it was revoked; a revoked key authenticates nothing.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// An API key about to be stored.
#[derive(Debug, Clone)]
pub struct NewApiKey {
    /// Identifier.
    pub id: KeyId,
    /// Free label.
    pub name: String,
    /// Permission level.
    pub permission: Permission,
    /// Source scope.
    pub scope: SourceScope,
    /// Per-key rate limit override.
    pub rate_limit: Option<u32>,
    /// Hex SHA-256 of the secret; the secret itself is never stored.
    pub key_hash: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// A passage cut from a document, ready to be stored and indexed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkDraft {
    /// Position in the document, from 0.
    pub ordinal: u32,
    /// Page the passage comes from, from 1.
    pub page: u32,
    /// Heading path, such as `Chapter 2 > Safety`; empty before the first heading.
    pub section: String,
    /// The passage text.
    pub content: String,
}
