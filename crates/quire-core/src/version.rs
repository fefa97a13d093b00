//! A document's versions and the caller's own key for it: uploading new bytes under the same
//! external id (or to the same document) gives the document a new version, processed while the
//! live one stays searchable, and made live in one step once it is ready.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

use crate::{DocumentId, InputError};

/// Most characters of an external id.
pub const MAX_EXTERNAL_ID_CHARS: usize = 512;

/// The caller's own key for a document (a path, URL or CMS id): 1 to
/// [`MAX_EXTERNAL_ID_CHARS`] characters, no control characters, unique within a source.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExternalId(String);

impl ExternalId {
    /// Validates `raw`.
    pub fn parse(raw: &str) -> Result<Self, InputError> {
        let chars = raw.chars().count();
        if chars == 0 {
            return Err(InputError("externalId must not be empty".into()));
        }
        if chars > MAX_EXTERNAL_ID_CHARS {
            return Err(InputError(format!(
                "externalId is {chars} characters long; at most {MAX_EXTERNAL_ID_CHARS} are allowed"
            )));
        }
        if raw.chars().any(char::is_control) {
            return Err(InputError(
                "externalId must not contain control characters".into(),
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The id as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ExternalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where one version of a document is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VersionStatus {
    /// Uploaded, waiting for a worker.
    Queued,
    /// A worker is processing it.
    Processing,
    /// Personal data was found in it; waiting for an administrator.
    PendingReview,
    /// Processed; the live version (or the one before it, kept until the next switch).
    Ready,
    /// Processing failed; its `error` says why.
    Failed,
    /// A newer version took its place.
    Superseded,
}

impl VersionStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Processing => "processing",
            Self::PendingReview => "pending_review",
            Self::Ready => "ready",
            Self::Failed => "failed",
            Self::Superseded => "superseded",
        }
    }
}

impl fmt::Display for VersionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for VersionStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "queued" => Self::Queued,
            "processing" => Self::Processing,
            "pending_review" => Self::PendingReview,
            "ready" => Self::Ready,
            "failed" => Self::Failed,
            "superseded" => Self::Superseded,
            other => return Err(format!("unknown version status {other:?}")),
        })
    }
}

/// One version of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRecord {
    /// 1 for the first upload, then 2, 3, …
    pub version: u32,
    /// The id this version's chunks are indexed and its original stored under (the document's
    /// own id for version 1).
    pub index_id: DocumentId,
    /// File name as uploaded.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Media type.
    pub content_type: String,
    /// Hex SHA-256 of the bytes.
    pub sha256: String,
    /// Where it is in its life.
    pub status: VersionStatus,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// Upload time.
    pub created_at: DateTime<Utc>,
}

/// A version newer than the live one that is not live (yet): being processed, waiting for
/// review, or failed. The live version stays searchable meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextVersion {
    /// Its number.
    pub version: u32,
    /// Where it is.
    pub status: VersionStatus,
    /// Why it failed, when it did.
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_ids_are_one_to_512_characters_without_control_characters() {
        assert!(ExternalId::parse("docs/policy.pdf").is_ok());
        assert!(ExternalId::parse(&"é".repeat(512)).is_ok());
        assert!(ExternalId::parse("").is_err());
        assert!(ExternalId::parse(&"a".repeat(513)).is_err());
        assert!(ExternalId::parse("a\nb").is_err());
    }

    #[test]
    fn version_statuses_round_trip() {
        for status in [
            VersionStatus::Queued,
            VersionStatus::Processing,
            VersionStatus::PendingReview,
            VersionStatus::Ready,
            VersionStatus::Failed,
            VersionStatus::Superseded,
        ] {
            assert_eq!(status.as_str().parse::<VersionStatus>(), Ok(status));
        }
    }
}
