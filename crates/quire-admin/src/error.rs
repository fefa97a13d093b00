//! The admin interface's error type and its one mapping to an HTML response.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use quire_app::AppError;
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
    /// A use case refused or failed.
    #[error(transparent)]
    App(#[from] AppError),
    /// Hashing or checking a password failed (not a wrong password: a broken hash or setup).
    #[error("password hashing failed: {0}")]
    Hashing(String),
    /// The operating system gave no random bytes.
    #[error("no randomness: {0}")]
    Randomness(String),
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        // A refusal the pages did not handle themselves is shown with its reason; every other
        // variant is a fault of the service, whose details go to the log only.
        let refused = |status: StatusCode, message: &str| {
            html::bare_page(status, "Request refused", maud::html! { p { (message) } })
        };
        match &self {
            AdminError::App(AppError::Invalid(m)) => {
                return refused(StatusCode::BAD_REQUEST, m);
            }
            AdminError::App(AppError::Unauthorized(m)) => {
                return refused(StatusCode::UNAUTHORIZED, m);
            }
            AdminError::App(AppError::Forbidden(m)) => return refused(StatusCode::FORBIDDEN, m),
            AdminError::App(AppError::NotFound(m)) => return refused(StatusCode::NOT_FOUND, m),
            AdminError::App(AppError::Conflict(m)) => return refused(StatusCode::CONFLICT, m),
            AdminError::App(AppError::TooLarge(m)) => {
                return refused(StatusCode::PAYLOAD_TOO_LARGE, m);
            }
            AdminError::App(AppError::InsufficientStorage(m)) => {
                return refused(StatusCode::INSUFFICIENT_STORAGE, m);
            }
            AdminError::App(e @ (AppError::RateLimited(_) | AppError::QueueFull(_))) => {
                return refused(StatusCode::TOO_MANY_REQUESTS, &e.to_string());
            }
            AdminError::App(e @ AppError::Unavailable(_)) => {
                return refused(StatusCode::SERVICE_UNAVAILABLE, &e.to_string());
            }
            AdminError::App(AppError::Internal) => {}
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
            maud::html! { p { "The request could not be completed. The error was logged." } },
        )
    }
}

/// Fills `bytes` from the operating system's generator.
pub(crate) fn random_hex(bytes: usize) -> Result<String, AdminError> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| AdminError::Randomness(e.to_string()))?;
    Ok(hex::encode(buf))
}
