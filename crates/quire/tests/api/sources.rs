//! Data sources: create, list, get.

use quire_core::Permission;
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestServer, assert_error, body};

fn is_iso_utc(value: &serde_json::Value) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(s).is_ok())
}

#[tokio::test]
async fn create_list_and_get_a_source() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;

    let response = server
        .post_json(
            &key,
            "/api/v1/sources",
            &json!({"name": "  Manuals ", "description": "Pump manuals", "type": "network"}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let location = response
        .headers()
        .get("location")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let created = body(response).await;
    let id = created["id"].as_str().unwrap();
    assert!(id.parse::<uuid::Uuid>().is_ok());
    assert_eq!(location, format!("/api/v1/sources/{id}"));
    assert_eq!(created["name"], "Manuals");
    assert_eq!(created["description"], "Pump manuals");
    assert_eq!(created["type"], "network");
    assert_eq!(created["documentCount"], 0);
    assert!(is_iso_utc(&created["createdAt"]), "{created}");

    // `description` and `type` are optional.
    let minimal = body(
        server
            .post_json(&key, "/api/v1/sources", &json!({"name": "Second"}))
            .await,
    )
    .await;
    assert_eq!(minimal["description"], "");
    assert_eq!(minimal["type"], "network");

    server.upload_ok(&key, id, "a.md", b"alpha").await;
    let list = body(server.get(&key, "/api/v1/sources").await).await;
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["id"], id);
    assert_eq!(list[0]["documentCount"], 1);
    assert_eq!(list[1]["documentCount"], 0);

    let detail = body(server.get(&key, &location).await).await;
    assert_eq!(detail["name"], "Manuals");
    assert_eq!(detail["documentCount"], 1);
    let documents = detail["documents"].as_array().unwrap();
    assert_eq!(documents.len(), 1);
    assert_eq!(documents[0]["name"], "a.md");
    assert_eq!(documents[0]["dataSourceId"], id);
}

#[tokio::test]
async fn invalid_sources_are_refused_with_reasons() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let cases = [
        json!({}),
        json!({"name": ""}),
        json!({"name": "   "}),
        json!({"name": "x".repeat(201)}),
        json!({"name": "ok", "type": "s3"}),
        json!({"name": "ok", "description": "d".repeat(2001)}),
    ];
    for case in cases {
        let response = server.post_json(&key, "/api/v1/sources", &case).await;
        assert_error(response, StatusCode::BAD_REQUEST, "bad_request").await;
    }
    for case in [
        json!({"name": 5}),
        json!({"name": "ok", "description": ["x"]}),
        json!([1, 2]),
    ] {
        let response = server.post_json(&key, "/api/v1/sources", &case).await;
        assert_error(response, StatusCode::BAD_REQUEST, "invalid_body").await;
    }
    let list = body(server.get(&key, "/api/v1/sources").await).await;
    assert_eq!(list.as_array().unwrap().len(), 0, "nothing was created");
}

#[tokio::test]
async fn unknown_and_malformed_source_ids() {
    let server = TestServer::start().await;
    let key = server.key(Permission::Read).await;
    let missing = uuid::Uuid::new_v4();
    for path in [
        format!("/api/v1/sources/{missing}"),
        format!("/api/v1/sources/{missing}/documents"),
        format!(
            "/api/v1/sources/{missing}/documents/{}",
            uuid::Uuid::new_v4()
        ),
    ] {
        assert_error(
            server.get(&key, &path).await,
            StatusCode::NOT_FOUND,
            "not_found",
        )
        .await;
    }
    for path in [
        "/api/v1/sources/123",
        "/api/v1/sources/not-a-uuid/documents",
    ] {
        assert_error(
            server.get(&key, path).await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        )
        .await;
    }
    let bad_doc = format!("/api/v1/sources/{missing}/documents/zzz");
    assert_error(
        server.get(&key, &bad_doc).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
}
