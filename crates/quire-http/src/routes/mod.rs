//! The router: every route of the Agent API with its layers, and the fallbacks that keep even
//! unknown paths and wrong methods inside the error envelope.

mod documents;
mod generate;
mod health;
mod openapi;
mod paging;
mod reviews;
mod search;
mod sources;
mod upload;
mod webhooks;

pub use openapi::openapi_json;

use axum::Router;
use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::{HeaderValue, Response, StatusCode, header};
use axum::middleware::{from_fn_with_state, map_response, map_response_with_state};
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use quire_app::records::RateBucket;
use serde::Deserialize;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa::IntoParams;

use crate::{ApiError, AppState, auth, rate_limit};

/// `/sources/{id}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct SourcePath {
    /// The source's id.
    #[param(value_type = String, format = Uuid)]
    id: quire_core::SourceId,
}

/// `/sources/{id}/documents/{doc_id}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct DocumentPath {
    /// The source's id.
    #[param(value_type = String, format = Uuid)]
    id: quire_core::SourceId,
    /// The document's id.
    #[param(value_type = String, format = Uuid)]
    doc_id: quire_core::DocumentId,
}

/// Builds the Agent API (the binary merges the admin interface and the MCP server into it, and
/// wraps the whole in [`crate::request_id::traced`] so every response has a request id).
pub fn router(state: AppState) -> Router {
    let limited =
        |bucket: RateBucket| from_fn_with_state((state.clone(), bucket), rate_limit::enforce);
    let v1 = Router::new()
        .route("/sources", get(sources::list).post(sources::create))
        .route("/sources/{id}", get(sources::get))
        .route("/sources/{id}/documents", get(documents::list))
        .route(
            "/sources/{id}/sync",
            post(sources::sync_now).patch(sources::change_sync),
        )
        .route("/sources/{id}/syncs", get(sources::sync_runs))
        .route(
            "/sources/{id}/documents/upload",
            // Uploads stream to disk under their own size limit.
            post(upload::single).layer(DefaultBodyLimit::disable()),
        )
        .route(
            "/sources/{id}/documents/upload-bulk",
            post(upload::bulk).layer(DefaultBodyLimit::disable()),
        )
        .route(
            "/sources/{id}/documents/{doc_id}",
            get(documents::get)
                .patch(documents::patch)
                .delete(documents::delete)
                .merge(put(upload::version).layer(DefaultBodyLimit::disable())),
        )
        .route(
            "/sources/{id}/documents/{doc_id}/original",
            get(documents::original),
        )
        .route(
            "/search",
            post(search::search).route_layer(limited(RateBucket::Search)),
        )
        .route("/reviews", get(reviews::list))
        .route("/reviews/{doc_id}", get(reviews::get))
        .route("/reviews/{doc_id}/approve", post(reviews::approve))
        .route("/reviews/{doc_id}/redact", post(reviews::redact))
        .route("/reviews/{doc_id}/reject", post(reviews::reject))
        .route("/webhooks", get(webhooks::list).post(webhooks::create))
        .route(
            "/webhooks/{id}",
            get(webhooks::get).delete(webhooks::delete),
        )
        .route("/webhooks/{id}/deliveries", get(webhooks::deliveries))
        .route(
            "/generate",
            post(generate::generate).route_layer(limited(RateBucket::Generate)),
        )
        .route_layer(from_fn_with_state(state.clone(), auth::authenticate))
        // Added after the key check so that it is public: clients fetch it before they have a
        // key, to generate their code.
        .route("/openapi.json", get(openapi::serve))
        // An unknown path under /api/v1 asks for a key first, like every known one.
        .fallback(v1_not_found);
    Router::new()
        .route("/api/health/version", get(health::version))
        .nest("/api/v1", v1)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.settings.max_json_bytes))
        .layer(map_response(ensure_error_envelope))
        .layer(map_response_with_state(state.clone(), default_rate_headers))
        .layer(CatchPanicLayer::custom(panic_response))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such endpoint".into())
}

async fn v1_not_found(State(state): State<AppState>, headers: HeaderMap) -> ApiError {
    match auth::find_key(&state, &headers).await {
        Ok(_) => ApiError::NotFound("no such endpoint".into()),
        Err(refused) => refused,
    }
}

/// The specification puts the rate-limit headers on every response: those that no key's
/// window described (a 401, an unknown path, the version endpoint) get the default limit with
/// nothing counted.
async fn default_rate_headers(
    State(state): State<AppState>,
    mut response: Response<Body>,
) -> Response<Body> {
    if !response.headers().contains_key("x-ratelimit-limit") {
        crate::apply_headers(&state.limiter().unauthenticated(), response.headers_mut());
    }
    response
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

fn panic_response(_panic: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    tracing::error!("a request handler panicked");
    ApiError::Internal.into_response()
}

/// Safety net: an error response produced outside our handlers (a layer, a framework default)
/// gets the envelope too.
async fn ensure_error_envelope(response: Response<Body>) -> Response<Body> {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let error = match status {
        StatusCode::NOT_FOUND => ApiError::NotFound("no such endpoint".into()),
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed,
        StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::PayloadTooLarge("the request body is too large".into())
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            ApiError::UnsupportedMediaType("unsupported content type".into())
        }
        s if s.is_server_error() => ApiError::Internal,
        s => ApiError::BadRequest(s.canonical_reason().unwrap_or("bad request").to_lowercase()),
    };
    let (parts, _) = response.into_parts();
    let mut fixed = error.into_response();
    *fixed.status_mut() = status;
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            fixed.headers_mut().insert(name.clone(), value.clone());
        }
    }
    fixed.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    fixed
}
