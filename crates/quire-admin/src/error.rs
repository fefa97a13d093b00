//! The admin interface's error type and its one mapping to an HTML response.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use quire_app::AppError;

use crate::html;

/// Why an admin page could not be served.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
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

/// The status a page answers a use case's refusal or failure with.
pub(crate) fn status_of(e: &AppError) -> StatusCode {
    match e {
        AppError::Invalid(_) => StatusCode::BAD_REQUEST,
        AppError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
        AppError::Forbidden(_) => StatusCode::FORBIDDEN,
        AppError::NotFound(_) => StatusCode::NOT_FOUND,
        AppError::Conflict(_) => StatusCode::CONFLICT,
        AppError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        AppError::InsufficientStorage(_) => StatusCode::INSUFFICIENT_STORAGE,
        AppError::RateLimited(_) | AppError::QueueFull(_) => StatusCode::TOO_MANY_REQUESTS,
        AppError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        AppError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        // A refusal the pages did not handle themselves is shown with its reason; every other
        // variant is a fault of the service, whose details go to the log only (an internal
        // error of a use case has been logged where it happened).
        match &self {
            AdminError::App(AppError::Internal) => {}
            AdminError::App(e) => {
                let message = e.to_string();
                return html::bare_page(
                    status_of(e),
                    "Request refused",
                    maud::html! { p { (message) } },
                );
            }
            AdminError::Hashing(_) | AdminError::Randomness(_) => {
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
