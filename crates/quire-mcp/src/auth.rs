//! The key check in front of the MCP endpoint: every HTTP request is authenticated by
//! `quire_app::auth` (the same function the REST API uses) and the key rides in the request's
//! extensions, where the SDK hands it to the tools with the rest of the request's parts.

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use quire_app::{AppError, Services};
use quire_core::ApiKeyRecord;
use rmcp::RoleServer;
use rmcp::service::RequestContext;

use crate::error::rpc_error;

/// The authenticated key of the current HTTP request.
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub(crate) ApiKeyRecord);

/// Middleware: refuses a request without a valid, unrevoked key with 401 and a JSON-RPC error
/// body (which MCP clients report as the failed call's error), and passes the key on otherwise.
pub(crate) async fn authenticate(
    State(services): State<Services>,
    mut request: Request,
    next: Next,
) -> Response {
    let header = request.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
    match quire_app::auth::authenticate(&services, header).await {
        Ok(key) => {
            request.extensions_mut().insert(Caller(key));
            next.run(request).await
        }
        Err(refused) => refusal(refused),
    }
}

/// An HTTP response for a refused request: the status REST would give, and the JSON-RPC error
/// in the body.
fn refusal(error: AppError) -> Response {
    let status = match &error {
        AppError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
        AppError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": rpc_error(error),
    });
    let mut response = (status, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if status == StatusCode::UNAUTHORIZED {
        headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// The key of the request a tool or resource call came in, put there by [`authenticate`].
pub(crate) fn caller(context: &RequestContext<RoleServer>) -> Result<ApiKeyRecord, AppError> {
    context
        .extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .map(|caller| caller.0.clone())
        .ok_or_else(|| AppError::Unauthorized("missing API key".into()))
}
