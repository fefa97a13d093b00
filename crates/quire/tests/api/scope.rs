//! A key scoped to some sources never sees the others anywhere.

use quire_core::{Permission, SourceScope};
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestServer, assert_error, body, source_id};

#[tokio::test]
async fn a_key_scoped_to_a_cannot_touch_b() {
    let server = TestServer::start().await;
    let admin = server.key(Permission::Admin).await;
    let a = server.create_source(&admin, "A").await;
    let b = server.create_source(&admin, "B").await;
    let doc_a = server
        .upload_ok(&admin, &a, "a.md", b"shared term alpha")
        .await;
    let doc_b = server
        .upload_ok(&admin, &b, "b.md", b"shared term beta")
        .await;
    server.wait_for_status(&admin, &a, &doc_a, "ready").await;
    server.wait_for_status(&admin, &b, &doc_b, "ready").await;

    let key = server
        .key_with(
            Permission::ReadWrite,
            SourceScope::only([source_id(&a)]),
            None,
        )
        .await;

    let sources = body(server.get(&key, "/api/v1/sources").await).await;
    let ids: Vec<&str> = sources
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![a.as_str()]);

    for path in [
        format!("/api/v1/sources/{b}"),
        format!("/api/v1/sources/{b}/documents"),
        format!("/api/v1/sources/{b}/documents/{doc_b}"),
        // B's document through A's path is not there either.
        format!("/api/v1/sources/{a}/documents/{doc_b}"),
    ] {
        assert_error(
            server.get(&key, &path).await,
            StatusCode::NOT_FOUND,
            "not_found",
        )
        .await;
    }
    let delete = server
        .delete(&key, &format!("/api/v1/sources/{b}/documents/{doc_b}"))
        .await;
    assert_error(delete, StatusCode::NOT_FOUND, "not_found").await;
    let upload = server.upload(&key, &b, "x.md", b"intruder").await;
    assert_error(upload, StatusCode::NOT_FOUND, "not_found").await;

    let found = body(server.search(&key, json!({"query": "shared term"})).await).await;
    let results = found["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["dataSource"]["id"], a.as_str());
    let other = server
        .search(&key, json!({"query": "shared", "sourceIds": [b]}))
        .await;
    assert_error(other, StatusCode::NOT_FOUND, "not_found").await;
    let mixed = server
        .search(&key, json!({"query": "shared", "sourceIds": [a, b]}))
        .await;
    assert_error(mixed, StatusCode::NOT_FOUND, "not_found").await;

    // B's document is untouched and visible to an all-sources key.
    let still = server
        .get(&admin, &format!("/api/v1/sources/{b}/documents/{doc_b}"))
        .await;
    assert_eq!(still.status(), StatusCode::OK);
    let all = body(server.search(&admin, json!({"query": "shared term"})).await).await;
    assert_eq!(all["results"].as_array().unwrap().len(), 2);
}
