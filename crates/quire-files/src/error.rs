//! The one error type of the crate. Callers decide what to do by kind: an unavailable store
//! is worth retrying later, a missing object or an invalid setting is not.

use std::io;

/// Why a file operation failed. Messages never carry credentials.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// The original (or the bucket) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The location or a setting is malformed, or the storage refused the request as invalid.
    #[error("invalid file storage setting or request: {0}")]
    Invalid(String),
    /// The storage refused the credentials or their permissions.
    #[error("the file storage refused access: {0}")]
    Denied(String),
    /// The storage could not be reached, timed out or failed on its side (5xx): try later.
    #[error("the file storage is unavailable: {0}")]
    Unavailable(String),
    /// Reading or writing a local file failed.
    #[error("file system error: {0}")]
    Io(#[from] io::Error),
}

impl FilesError {
    /// Whether the same call may succeed later without any change (the storage was down).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

impl From<object_store::Error> for FilesError {
    fn from(e: object_store::Error) -> Self {
        use object_store::Error as E;
        let message = e.to_string();
        match e {
            E::NotFound { .. } => Self::NotFound(message),
            E::PermissionDenied { .. } | E::Unauthenticated { .. } => Self::Denied(message),
            E::InvalidPath { .. }
            | E::UnknownConfigurationKey { .. }
            | E::NotSupported { .. }
            | E::NotImplemented { .. }
            | E::AlreadyExists { .. }
            | E::Precondition { .. }
            | E::NotModified { .. } => Self::Invalid(message),
            // object_store gives 401, 403, 404, 409 and 412 their own variants above; what
            // reaches `Generic` is a transport failure (refused connection, timeout, reset) or
            // a status it retried until giving up (5xx, 429): the storage is down for now.
            // Answering "try later" for the rare other status keeps documents rather than
            // failing them for a passing fault.
            E::Generic { .. } | E::JoinError { .. } => Self::Unavailable(message),
            _ => Self::Unavailable(message),
        }
    }
}
