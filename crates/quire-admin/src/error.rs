//! The admin interface's error type and its one mapping to an HTML response.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use quire_store::StoreError;

use crate::html;

/// Why an admin page could not be served.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Staging, accepting or deleting a document failed.
    #[error(transparent)]
    Ingest(#[from] quire_ingest::IngestError),
    /// Hashing or checking a password failed (not a wrong password: a broken hash or setup).
    #[error("password hashing failed: {0}")]
    Hashing(String),
    /// The operating system gave no random bytes.
    #[error("no randomness: {0}")]
    Randomness(String),
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        // Every variant is a fault of the service, not of the request; the details go to the
        // log only.
        match &self {
            AdminError::Store(_)
            | AdminError::Ingest(_)
            | AdminError::Hashing(_)
            | AdminError::Randomness(_) => {
                tracing::error!(error = %self, "admin page failed");
            }
        }
        html::bare_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Something went wrong",
            "<p>The request could not be completed. The error was logged.</p>",
        )
    }
}

/// Fills `bytes` from the operating system's generator.
pub(crate) fn random_hex(bytes: usize) -> Result<String, AdminError> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| AdminError::Randomness(e.to_string()))?;
    Ok(hex::encode(buf))
}
