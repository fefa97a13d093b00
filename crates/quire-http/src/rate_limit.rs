//! The rate-limit middleware of the REST API: the limiter itself is the application layer's
//! (`quire_app::rate_limit`); here a limited request becomes a 429 and every answer carries the
//! `X-RateLimit-*` headers.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use quire_app::rate_limit::RateLimitState;
use quire_app::records::RateBucket;

use crate::{ApiError, AppState, Principal};

/// Writes the `X-RateLimit-*` headers.
pub fn apply_headers(state: &RateLimitState, headers: &mut HeaderMap) {
    headers.insert("x-ratelimit-limit", HeaderValue::from(state.limit));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(state.remaining));
    headers.insert("x-ratelimit-reset", HeaderValue::from(state.reset));
}

/// Middleware for a rate-limited route: counts the request in `bucket`, answers 429 when the
/// key is over its limit, and adds the headers to the response.
pub(crate) async fn enforce(
    State((state, bucket)): State<(AppState, RateBucket)>,
    request: Request,
    next: Next,
) -> Response {
    let Some(principal) = request.extensions().get::<Principal>().cloned() else {
        return ApiError::Unauthorized("missing API key".into()).into_response();
    };
    match quire_app::rate_limit::admit(state.limiter(), &principal.key, bucket).await {
        Ok(limit) => {
            let mut response = next.run(request).await;
            apply_headers(&limit, response.headers_mut());
            response
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}
