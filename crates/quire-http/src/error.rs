//! The one place where failures become HTTP responses. Every variant is classified by an
//! exhaustive `match`, so a new kind of failure cannot silently become a 500, and a 500 never
//! carries internal detail (the cause is logged instead).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use quire_app::answers::QueueFull;
use quire_app::rate_limit::RateLimitState;
use quire_app::{AppError, Dependency};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};

/// A failed request, as the client will see it.
#[derive(Debug)]
pub enum ApiError {
    /// 400: the request is malformed or a parameter is invalid.
    BadRequest(String),
    /// 400: the body is not valid JSON or has fields of the wrong type.
    InvalidBody(String),
    /// 401: the API key is missing, malformed, unknown or revoked.
    Unauthorized(String),
    /// 403: the key's permission level is too low.
    Forbidden(String),
    /// 404: the resource does not exist or is outside the key's scope.
    NotFound(String),
    /// 409: the resource is not in a state that allows the request.
    Conflict(String),
    /// 405: the path exists but not with this method.
    MethodNotAllowed,
    /// 413: the body is larger than allowed.
    PayloadTooLarge(String),
    /// 507: no room for an upload now (staging budget in use, or the disk nearly full).
    InsufficientStorage(String),
    /// 415: the body is not of the media type the endpoint takes.
    UnsupportedMediaType(String),
    /// 429: the key's rate limit is used up.
    RateLimited(RateLimitState),
    /// 429: the generation queue is full, or the key holds its share of it.
    QueueFull(QueueFull),
    /// 500: something failed inside; the cause has been logged.
    Internal,
    /// 503: a service Quire depends on (the database, the storage of originals) is down; the
    /// cause has been logged.
    Unavailable(Dependency),
}

/// What a client refused for a full generation queue is told to wait: about one answer's
/// time.
const QUEUE_RETRY_SECONDS: u64 = 10;

/// What a client refused because the storage of originals is down is told to wait: long
/// enough for a restarting storage service, short enough not to lose the upload.
const UNAVAILABLE_RETRY_SECONDS: u64 = 30;

/// The error envelope every non-2xx response carries.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Error)]
pub struct ErrorBody {
    /// Short machine-readable name.
    #[schema(schema_with = error_codes)]
    pub error: &'static str,
    /// Human-readable detail.
    pub message: String,
    /// The request's id (also in the `X-Request-Id` response header): quote it to an operator,
    /// who finds the request in the server log by it. Absent only on the per-file errors inside
    /// a bulk upload's answer, whose response carries it once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// Every `error` code [`ApiError::parts`] can produce, for the OpenAPI document.
const ERROR_CODES: [&str; 13] = [
    "bad_request",
    "invalid_body",
    "unauthorized",
    "forbidden",
    "not_found",
    "conflict",
    "method_not_allowed",
    "payload_too_large",
    "unsupported_media_type",
    "rate_limited",
    "queue_full",
    "unavailable",
    "internal_error",
];

/// The schema of `error`: a string from [`ERROR_CODES`].
fn error_codes() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(ERROR_CODES))
        .description(Some("Short machine-readable name of the failure."))
        .build()
}

impl ApiError {
    /// Logs `cause` and returns the generic 500.
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::Internal
    }

    /// Status and envelope of this error.
    pub fn parts(&self) -> (StatusCode, ErrorBody) {
        let (status, error, message) = match self {
            Self::BadRequest(m) => (StatusCode::BAD_REQUEST, "bad_request", m.clone()),
            Self::InvalidBody(m) => (StatusCode::BAD_REQUEST, "invalid_body", m.clone()),
            Self::Unauthorized(m) => (StatusCode::UNAUTHORIZED, "unauthorized", m.clone()),
            Self::Forbidden(m) => (StatusCode::FORBIDDEN, "forbidden", m.clone()),
            Self::NotFound(m) => (StatusCode::NOT_FOUND, "not_found", m.clone()),
            Self::Conflict(m) => (StatusCode::CONFLICT, "conflict", m.clone()),
            Self::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this path does not accept that HTTP method".into(),
            ),
            Self::PayloadTooLarge(m) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                m.clone(),
            ),
            Self::InsufficientStorage(m) => (
                StatusCode::INSUFFICIENT_STORAGE,
                "insufficient_storage",
                m.clone(),
            ),
            Self::UnsupportedMediaType(m) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                m.clone(),
            ),
            Self::RateLimited(state) => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!(
                    "rate limit of {} requests per minute exceeded; retry after {} seconds",
                    state.limit, state.retry_after
                ),
            ),
            Self::QueueFull(full) => (
                StatusCode::TOO_MANY_REQUESTS,
                "queue_full",
                format!("{full}; retry in {QUEUE_RETRY_SECONDS} seconds"),
            ),
            Self::Unavailable(dependency) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!(
                    "{dependency} is temporarily unavailable; retry in \
                     {UNAVAILABLE_RETRY_SECONDS} seconds"
                ),
            ),
            Self::Internal => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "an internal error occurred; it has been logged".into(),
            ),
        };
        let body = ErrorBody {
            error,
            message,
            request_id: None,
        };
        (status, body)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (status, body) = self.parts();
        write!(f, "{} {}: {}", status.as_u16(), body.error, body.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, mut body) = self.parts();
        body.request_id = crate::request_id::current();
        let mut response = (status, Json(body)).into_response();
        match &self {
            Self::RateLimited(state) => {
                crate::apply_headers(state, response.headers_mut());
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(state.retry_after));
            }
            Self::QueueFull(_) => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(QUEUE_RETRY_SECONDS));
            }
            Self::Unavailable(_) | Self::InsufficientStorage(_) => {
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(UNAVAILABLE_RETRY_SECONDS),
                );
            }
            Self::Unauthorized(_) => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        response
    }
}

/// The one mapping from the application layer's errors to HTTP.
impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        match e {
            AppError::Invalid(m) => Self::BadRequest(m),
            AppError::Unauthorized(m) => Self::Unauthorized(m),
            AppError::Forbidden(m) => Self::Forbidden(m),
            AppError::NotFound(m) => Self::NotFound(m),
            AppError::Conflict(m) => Self::Conflict(m),
            AppError::TooLarge(m) => Self::PayloadTooLarge(m),
            AppError::InsufficientStorage(m) => Self::InsufficientStorage(m),
            AppError::RateLimited(state) => Self::RateLimited(state),
            AppError::QueueFull(full) => Self::QueueFull(full),
            // The cause was logged where it was classified.
            AppError::Unavailable(dependency) => Self::Unavailable(dependency),
            AppError::Internal => Self::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_never_carry_their_cause() {
        let cause = "disk I/O error at /var/lib/quire/quire.db";
        let (status, body) = ApiError::internal(&cause).parts();
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body.error, "internal_error");
        assert!(!body.message.contains("quire.db"));
        let from_app = ApiError::from(AppError::internal(&"row 7 of documents"));
        let (status, body) = from_app.parts();
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!body.message.contains("row 7"));
    }

    #[test]
    fn every_error_code_is_documented() {
        let all = [
            ApiError::BadRequest(String::new()),
            ApiError::InvalidBody(String::new()),
            ApiError::Unauthorized(String::new()),
            ApiError::Forbidden(String::new()),
            ApiError::NotFound(String::new()),
            ApiError::Conflict(String::new()),
            ApiError::MethodNotAllowed,
            ApiError::PayloadTooLarge(String::new()),
            ApiError::UnsupportedMediaType(String::new()),
            ApiError::RateLimited(RateLimitState {
                limit: 1,
                remaining: 0,
                reset: 0,
                retry_after: 1,
            }),
            ApiError::QueueFull(QueueFull::Line { max_waiting: 1 }),
            ApiError::Unavailable(Dependency::Database),
            ApiError::Internal,
        ];
        let codes: Vec<_> = all.iter().map(|e| e.parts().1.error).collect();
        assert_eq!(codes, ERROR_CODES);
    }

    #[test]
    fn unavailable_file_storage_is_a_503_with_retry_after() {
        // How a lost storage becomes `Unavailable(Files)` without its address is quire-app's
        // (its error tests); here, what the client sees of it.
        let e = AppError::Unavailable(Dependency::Files);
        let response = ApiError::from(e).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "30");
        let (_, body) = ApiError::from(AppError::Unavailable(Dependency::Files)).parts();
        assert_eq!(body.error, "unavailable");
        assert!(body.message.contains("the storage of originals"));
    }

    #[test]
    fn rate_limited_answers_carry_retry_after() {
        let state = RateLimitState {
            limit: 5,
            remaining: 0,
            reset: 1_800_000_060,
            retry_after: 42,
        };
        let response = ApiError::RateLimited(state).into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "42");
        assert_eq!(response.headers()["x-ratelimit-remaining"], "0");
    }
}
