//! The application layer's one error type. Each adapter maps it exhaustively to its own output
//! (an HTTP status and envelope, an admin page, a CLI message); every lower crate's error is
//! classified here, variant by variant, so a new kind of failure can never silently become an
//! internal error, and an internal error never carries its cause outward (it is logged).

use quire_ingest::{IngestError, StageError};
use quire_search::SearchError;
use quire_store::StoreError;

use crate::answers::QueueFull;
use crate::rate_limit::RateLimitState;

/// A service outside the process that a request needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dependency {
    /// The database behind the store.
    Database,
    /// The storage of originals (a directory or an S3-compatible bucket).
    Files,
}

impl std::fmt::Display for Dependency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Database => "the database",
            Self::Files => "the storage of originals",
        })
    }
}

/// Why a use case refused or failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AppError {
    /// The input is malformed or a parameter is invalid.
    #[error("{0}")]
    Invalid(String),
    /// The caller sent no usable API key (missing, malformed, unknown or revoked).
    #[error("{0}")]
    Unauthorized(String),
    /// The caller's key may not do this (its permission is too low, or its scope forbids it).
    #[error("{0}")]
    Forbidden(String),
    /// The resource does not exist or is outside the caller's scope (the two look alike).
    #[error("{0}")]
    NotFound(String),
    /// The resource is not in a state that allows the request.
    #[error("{0}")]
    Conflict(String),
    /// An upload is larger than allowed.
    #[error("{0}")]
    TooLarge(String),
    /// The server has no room for an upload now (its staging budget is in use, or its disk is
    /// nearly full); a later attempt may succeed.
    #[error("{0}")]
    InsufficientStorage(String),
    /// The key's rate limit is used up.
    #[error("rate limit of {} requests per minute exceeded", .0.limit)]
    RateLimited(RateLimitState),
    /// The generation queue is full, or the key holds its share of it.
    #[error("{0}")]
    QueueFull(QueueFull),
    /// A service Quire depends on is unreachable or failing; the request may succeed later.
    /// The cause has been logged.
    #[error("{0} is unavailable; try again later")]
    Unavailable(Dependency),
    /// Something failed inside; the cause has been logged.
    #[error("an internal error occurred; it has been logged")]
    Internal,
}

impl AppError {
    /// Logs `cause` and returns [`AppError::Internal`].
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::Internal
    }
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid(message) => Self::Invalid(message),
            _ if e.is_unavailable() => {
                tracing::error!(error = %e, "the database is unavailable");
                Self::Unavailable(Dependency::Database)
            }
            StoreError::Database(_) | StoreError::Corrupt(_) | StoreError::Open(_) => {
                Self::internal(&e)
            }
        }
    }
}

impl From<SearchError> for AppError {
    fn from(e: SearchError) -> Self {
        match e {
            SearchError::Index(_)
            | SearchError::Open(_)
            | SearchError::Corrupt(_)
            | SearchError::Commit(_) => Self::internal(&e),
        }
    }
}

impl From<StageError> for AppError {
    fn from(e: StageError) -> Self {
        match e {
            StageError::TooLarge { limit } => Self::TooLarge(format!(
                "the file is larger than the upload limit of {limit} bytes"
            )),
            StageError::Full(message) => Self::InsufficientStorage(message),
            StageError::Io(_) => Self::internal(&e),
        }
    }
}

impl From<IngestError> for AppError {
    fn from(e: IngestError) -> Self {
        match e {
            IngestError::SourceNotFound => Self::NotFound("data source not found".into()),
            IngestError::Store(e) => e.into(),
            IngestError::Index(e) => e.into(),
            IngestError::Stage(e) => e.into(),
            IngestError::FilesUnavailable(_) => {
                tracing::error!(error = %e, "the storage of originals is unavailable");
                Self::Unavailable(Dependency::Files)
            }
            IngestError::Files(_)
            | IngestError::Io(_)
            | IngestError::Task(_)
            | IngestError::Finish(_)
            | IngestError::Vectors(_)
            | IngestError::Embedding(_) => Self::internal(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_never_carry_their_cause() {
        let from_store: AppError = StoreError::Corrupt("row 7 of documents".into()).into();
        assert_eq!(from_store, AppError::Internal);
        assert!(!from_store.to_string().contains("row 7"));
    }

    #[test]
    fn a_lost_database_is_unavailable_not_internal() {
        let lost: AppError = StoreError::Database(sqlx_like_pool_timeout()).into();
        assert_eq!(lost, AppError::Unavailable(Dependency::Database));
    }

    fn sqlx_like_pool_timeout() -> quire_store::SqlxError {
        quire_store::SqlxError::PoolTimedOut
    }

    #[test]
    fn lower_errors_are_classified() {
        let invalid: AppError = StoreError::Invalid("unknown source".into()).into();
        assert_eq!(invalid, AppError::Invalid("unknown source".into()));
        let missing: AppError = IngestError::SourceNotFound.into();
        assert!(matches!(missing, AppError::NotFound(_)));
        let large: AppError = StageError::TooLarge { limit: 10 }.into();
        assert!(matches!(large, AppError::TooLarge(m) if m.contains("10 bytes")));
    }

    #[test]
    fn unreachable_file_storage_is_unavailable_without_its_address() {
        let e: AppError =
            IngestError::FilesUnavailable("connect to 10.0.0.7:9000 refused".into()).into();
        assert_eq!(e, AppError::Unavailable(Dependency::Files));
        assert!(!e.to_string().contains("10.0.0.7"));
    }
}
