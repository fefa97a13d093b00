//! How the application's refusals reach an MCP client. A refusal of a tool call is a tool
//! result with `isError: true` and the message, as the MCP specification asks, so the model
//! sees it and can correct its call (arguments that do not parse are reported the same way by
//! the SDK); refusals of anything else (a resource read, a request without a valid key) are
//! JSON-RPC errors.

use quire_app::AppError;
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ErrorCode};
use serde_json::json;

/// JSON-RPC error code for a request without a valid key (implementation-defined range).
pub(crate) const UNAUTHORIZED: ErrorCode = ErrorCode(-32001);
/// JSON-RPC error code for a key whose permission is too low.
pub(crate) const FORBIDDEN: ErrorCode = ErrorCode(-32003);
/// JSON-RPC error code for a key over its rate limit or a full generation queue.
pub(crate) const RATE_LIMITED: ErrorCode = ErrorCode(-32029);
/// JSON-RPC error code for a dependency that is down (the request may succeed later).
pub(crate) const UNAVAILABLE: ErrorCode = ErrorCode(-32050);

/// The short code and the message of a refusal, as the REST API's error envelope names them.
fn describe(error: &AppError) -> (&'static str, String) {
    let message = error.to_string();
    match error {
        AppError::Invalid(_) => ("bad_request", message),
        AppError::Unauthorized(_) => ("unauthorized", message),
        AppError::Forbidden(_) => ("forbidden", message),
        AppError::NotFound(_) => ("not_found", message),
        AppError::Conflict(_) => ("conflict", message),
        AppError::TooLarge(_) => ("payload_too_large", message),
        AppError::InsufficientStorage(_) => ("insufficient_storage", message),
        AppError::RateLimited(state) => (
            "rate_limited",
            format!("{message}; try again in {} seconds", state.retry_after),
        ),
        AppError::QueueFull(_) => ("queue_full", message),
        AppError::Unavailable(_) => ("unavailable", message),
        AppError::Internal => ("internal_error", message),
    }
}

/// A refused tool call as a tool result the model reads: the message as text, and
/// `{"error": {"code", "message"}}` as structured content for programs.
pub(crate) fn tool_error(error: AppError) -> CallToolResult {
    let (code, message) = describe(&error);
    let mut result = CallToolResult::structured_error(json!({
        "error": { "code": code, "message": message }
    }));
    result.content = vec![rmcp::model::ContentBlock::text(format!(
        "{code}: {message}"
    ))];
    result
}

/// A refusal as a JSON-RPC error.
pub(crate) fn rpc_error(error: AppError) -> ErrorData {
    let (code, message) = describe(&error);
    let data = Some(json!({ "code": code }));
    match error {
        AppError::Invalid(_) | AppError::TooLarge(_) | AppError::Conflict(_) => {
            ErrorData::invalid_params(message, data)
        }
        AppError::NotFound(_) => ErrorData::resource_not_found(message, data),
        AppError::Unauthorized(_) => ErrorData::new(UNAUTHORIZED, message, data),
        AppError::Forbidden(_) => ErrorData::new(FORBIDDEN, message, data),
        AppError::RateLimited(_) | AppError::QueueFull(_) => {
            ErrorData::new(RATE_LIMITED, message, data)
        }
        AppError::Unavailable(_) | AppError::InsufficientStorage(_) => {
            ErrorData::new(UNAVAILABLE, message, data)
        }
        AppError::Internal => ErrorData::internal_error(message, data),
    }
}
