//! The key check in front of the MCP endpoint: every HTTP request is authenticated by
//! `quire_app::auth` (the same function the REST API uses) and the key rides in the request's
//! extensions, where the SDK hands it to the tools with the rest of the request's parts.

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, CONNECTION, CONTENT_TYPE, WWW_AUTHENTICATE};
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

/// Most of a refused request's body read (and dropped) before the refusal is sent: enough for
/// any JSON-RPC call but a large upload.
const DRAIN_LIMIT_BYTES: usize = 64 * 1024;

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
        Err(refused) => refuse(request, refused).await,
    }
}

/// The refusal of `request`, after reading its body. Answering before the body has arrived
/// would leave it unread on the connection: the server would then close that keep-alive
/// connection, and a client that reuses it for its next call (as HTTP clients do with pooled
/// connections) would fail with a broken connection instead of reading this answer. So up to
/// [`DRAIN_LIMIT_BYTES`] of the body are read and dropped; a larger (or broken) body is not
/// worth reading, and the answer then says `Connection: close`, so the client does not reuse
/// the connection either.
pub(crate) async fn refuse(request: Request, error: AppError) -> Response {
    let drained = axum::body::to_bytes(request.into_body(), DRAIN_LIMIT_BYTES)
        .await
        .is_ok();
    let mut response = refusal(error);
    if !drained {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::Router;
    use axum::body::Body;
    use axum::routing::post;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    async fn refuse_everything(request: Request, _next: Next) -> Response {
        refuse(
            request,
            AppError::Unauthorized("this API key has been revoked".into()),
        )
        .await
    }

    /// A server that refuses every request as the key check refuses a revoked key.
    async fn refusing_server() -> std::net::SocketAddr {
        let app = Router::new()
            .route("/mcp", post(|| async { "never reached" }))
            .layer(axum::middleware::from_fn(refuse_everything));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        address
    }

    /// Sends one call whose body arrives a moment after its headers (as a client's body often
    /// does), and reads the answer: its status line and headers, lowercased.
    async fn call(stream: &mut TcpStream, body: &str) -> String {
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: quire\r\nauthorization: Bearer qk_revoked\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        stream.write_all(body.as_bytes()).await.unwrap();
        // The head, then as many body bytes as it declares.
        let mut received = Vec::new();
        let mut buffer = [0u8; 4096];
        let head_end = loop {
            if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            let read = stream.read(&mut buffer).await.unwrap();
            assert!(read > 0, "the connection was closed before an answer");
            received.extend_from_slice(&buffer[..read]);
        };
        let head = String::from_utf8_lossy(&received[..head_end]).to_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .map(|v| v.trim().parse().unwrap())
            .expect("the answer has a length");
        while received.len() < head_end + length {
            let read = stream.read(&mut buffer).await.unwrap();
            assert!(read > 0, "the connection was closed inside an answer");
            received.extend_from_slice(&buffer[..read]);
        }
        head
    }

    #[tokio::test]
    async fn refused_calls_leave_the_connection_usable() {
        let address = refusing_server().await;
        let calls = async {
            let mut stream = TcpStream::connect(address).await.unwrap();
            let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
            for _ in 0..3 {
                let head = call(&mut stream, body).await;
                assert!(head.starts_with("http/1.1 401"), "{head}");
                assert!(!head.contains("connection: close"), "{head}");
            }
        };
        tokio::time::timeout(Duration::from_secs(10), calls)
            .await
            .expect("the calls were answered in time");
    }

    #[tokio::test]
    async fn a_body_too_large_to_drain_closes_the_connection() {
        let error = || AppError::Unauthorized("invalid API key".into());
        let small = refuse(Request::new(Body::from("{}")), error()).await;
        assert_eq!(small.status(), StatusCode::UNAUTHORIZED);
        assert!(small.headers().get(CONNECTION).is_none());
        let large = Request::new(Body::from(vec![b'x'; DRAIN_LIMIT_BYTES + 1]));
        let large = refuse(large, error()).await;
        assert_eq!(large.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(large.headers()[CONNECTION], "close");
        assert_eq!(large.headers()[WWW_AUTHENTICATE], "Bearer");
    }
}
