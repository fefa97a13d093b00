//! Quire's MCP server: the Model Context Protocol over Streamable HTTP at `/mcp`, for agents
//! that speak MCP rather than the REST API (see `docs/mcp.md`). It is an adapter like
//! `quire-http`: each tool authorises the caller, calls one use case of `quire-app` and turns
//! the result into a tool result. The protocol itself is the official SDK's (`rmcp`).
//!
//! Every HTTP request to `/mcp` is authenticated with the same Bearer keys as the REST API,
//! before the SDK sees it (so a key revoked a moment ago is refused at its next call, whatever
//! the client still believes); the tools then apply the key's permission, source scope and
//! rate limits exactly as the REST endpoints do.

mod auth;
mod error;
mod resources;
mod server;
mod tools;
mod wire;

use std::sync::Arc;

use axum::Router;
use axum::middleware::from_fn_with_state;
use quire_app::Services;
use quire_app::uploads::PART_OVERHEAD_BYTES;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub use server::QuireMcp;

/// Where the server is mounted.
pub const PATH: &str = "/mcp";

/// The MCP endpoint as a router to merge into the service's: `POST`/`GET`/`DELETE` on
/// [`PATH`], every request authenticated by its Bearer key.
pub fn router(services: Services) -> Router {
    let config = StreamableHttpServerConfig::default()
        // Stateless: every request stands alone and carries its key, so nothing is kept
        // between calls and any node of a cluster can answer any call.
        .with_legacy_session_mode(false)
        // The SDK's default accepts only loopback `Host` names, against DNS rebinding of
        // servers that trust the local network. Quire trusts only the Bearer key, which a
        // rebound page cannot send, and is reached under whatever name its operator gives it.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(max_request_bytes(&services));
    let factory = services.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(QuireMcp::new(factory.clone())),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service(PATH, mcp)
        .layer(from_fn_with_state(services, auth::authenticate))
}

/// The largest JSON-RPC request worth reading: an `upload_document` of the largest file the
/// upload limit allows, base64 being 4/3 of the bytes, with room for the rest of the message.
/// A larger body is refused before it is read; a file just over the limit still arrives and
/// is refused by the upload use case with the same message as on the REST API.
fn max_request_bytes(services: &Services) -> usize {
    let file = services.max_upload_bytes();
    let encoded = file.saturating_add(2) / 3 * 4;
    usize::try_from(encoded.saturating_add(PART_OVERHEAD_BYTES)).unwrap_or(usize::MAX)
}
