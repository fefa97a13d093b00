//! Every non-2xx answer carries the `{"error","message"}` envelope.

use quire_core::Permission;
use reqwest::StatusCode;

use crate::helpers::{TestServer, assert_error};

#[tokio::test]
async fn unknown_routes_and_wrong_methods() {
    let server = TestServer::start().await;
    let key = server.key(Permission::Admin).await;
    for path in ["/nope", "/api/v2/sources", "/api/v1/nope"] {
        let response = server.get(&key, path).await;
        assert_error(response, StatusCode::NOT_FOUND, "not_found").await;
    }
    let put = server
        .client
        .put(server.url("/api/v1/sources"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_error(put, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed").await;
    let post = server
        .client
        .post(server.url("/api/health/version"))
        .send()
        .await
        .unwrap();
    assert_error(post, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed").await;
    let get_search = server.get(&key, "/api/v1/search").await;
    assert_error(
        get_search,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    )
    .await;
}

#[tokio::test]
async fn malformed_json_wrong_media_type_and_oversized_bodies() {
    let server = TestServer::start_with(|c| c.limits.max_json_bytes = 2048).await;
    let key = server.key(Permission::ReadWrite).await;
    let url = server.url("/api/v1/sources");
    let send = |content_type: &'static str, body: String| {
        server
            .client
            .post(&url)
            .bearer_auth(&key)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let broken = send("application/json", "{\"name\": ".into())
        .await
        .unwrap();
    let envelope = assert_error(broken, StatusCode::BAD_REQUEST, "invalid_body").await;
    assert!(
        envelope["message"]
            .as_str()
            .unwrap()
            .contains("malformed JSON")
    );
    let text = send("text/plain", "{\"name\": \"x\"}".into())
        .await
        .unwrap();
    assert_error(
        text,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
    let big = send(
        "application/json",
        format!("{{\"name\": \"{}\"}}", "x".repeat(4096)),
    )
    .await
    .unwrap();
    assert_error(big, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large").await;
}
