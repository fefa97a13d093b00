//! Request ids: every request gets one (the client's `X-Request-Id` when it sent a sane one, a
//! new UUID otherwise), the response carries it back in `X-Request-Id`, error bodies carry it as
//! `requestId`, and the request's tracing span records it, so a client's failed request can be
//! found in the server log.

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::{Next, from_fn};
use axum::response::Response;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::{Level, Span};

/// The header that carries the id both ways.
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Longest client-chosen id that is kept; longer ones are replaced (log lines stay short).
pub const MAX_REQUEST_ID_LEN: usize = 128;

/// The id of one request, in the request's extensions for the tracing span and handlers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

tokio::task_local! {
    /// The id of the request being answered on this task, read where error bodies are built
    /// (`ApiError::into_response`), which has no access to the request itself.
    static CURRENT: RequestId;
}

/// The id of the request being answered on this task, if any.
pub fn current() -> Option<String> {
    CURRENT.try_with(|id| id.0.clone()).ok()
}

/// Whether a client-sent id is kept as it is: 1 to [`MAX_REQUEST_ID_LEN`] characters of
/// letters, digits and `-_.:`. Anything else (spaces, quotes, control characters, very long
/// values) could forge or bloat log lines, so it is replaced by a fresh id.
pub fn is_sane(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REQUEST_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// Wraps `router` (the Agent API, the admin interface and the MCP server, merged) so that every
/// response carries an `X-Request-Id` and every request logs one INFO line (method, path,
/// request id, status, latency) in a span with the id. Headers, and so keys and session
/// cookies, are never logged.
pub fn traced(router: Router) -> Router {
    router
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_response(DefaultOnResponse::new().level(Level::INFO)),
        )
        // Outermost, so that the span above and every response (even a panic's) have the id.
        .layer(from_fn(assign))
}

/// The span every log line of a request is in: what `DefaultMakeSpan` records, plus the request
/// id, which is what an operator searches the log for when a client reports a failure.
fn request_span(request: &Request<Body>) -> Span {
    let id = request
        .extensions()
        .get::<RequestId>()
        .map_or("-", |id| id.0.as_str());
    tracing::info_span!(
        "request",
        method = %request.method(),
        uri = %request.uri(),
        version = ?request.version(),
        request_id = %id,
    )
}

/// Middleware (outermost): settles the request's id, stores it in the request (header and
/// extensions) for the layers inside, answers the request with the id in scope, and puts it on
/// the response.
pub(crate) async fn assign(mut request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(&REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| is_sane(v))
        .map(str::to_owned);
    let id = given.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    // Sane ids are visible ASCII and UUIDs are hex and dashes, so both are valid header values.
    let value = HeaderValue::from_str(&id).unwrap_or_else(|_| HeaderValue::from_static("-"));
    request
        .headers_mut()
        .insert(REQUEST_ID_HEADER, value.clone());
    request.extensions_mut().insert(RequestId(id.clone()));
    let mut response = CURRENT.scope(RequestId(id), next.run(request)).await;
    response.headers_mut().insert(REQUEST_ID_HEADER, value);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sane_ids_are_short_and_plain() {
        assert!(is_sane("a1b2-c3d4"));
        assert!(is_sane("req_42.retry:1"));
        assert!(is_sane(&"x".repeat(MAX_REQUEST_ID_LEN)));
        assert!(!is_sane(""));
        assert!(!is_sane(&"x".repeat(MAX_REQUEST_ID_LEN + 1)));
        assert!(!is_sane("two words"));
        assert!(!is_sane("quote\"d"));
        assert!(!is_sane("line\nbreak"));
        assert!(!is_sane("caf\u{e9}"));
    }
}
