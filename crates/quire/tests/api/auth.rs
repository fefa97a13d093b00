//! Authentication (401) and the permission matrix (403).

use quire_core::{Permission, SourceScope};
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestServer, assert_error, body};

#[tokio::test]
async fn missing_malformed_unknown_and_revoked_keys_are_401() {
    let server = TestServer::start().await;
    let url = server.url("/api/v1/sources");

    let missing = server.client.get(&url).send().await.unwrap();
    assert_eq!(missing.headers().get("www-authenticate").unwrap(), "Bearer");
    // Every response carries the rate-limit headers; without a key, the default limit.
    assert_eq!(missing.headers()["x-ratelimit-limit"], "100");
    assert_eq!(missing.headers()["x-ratelimit-remaining"], "100");
    assert!(missing.headers().contains_key("x-ratelimit-reset"));
    assert_error(missing, StatusCode::UNAUTHORIZED, "unauthorized").await;

    for header in [
        "Bearer",
        "Bearer not-a-key",
        "Basic dXNlcjpwYXNz",
        "qk_abc",
        "Bearer  ",
    ] {
        let response = server
            .client
            .get(&url)
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        assert_error(response, StatusCode::UNAUTHORIZED, "unauthorized").await;
    }

    let unknown = format!("qk_{}", "0".repeat(48));
    assert_error(
        server.get(&unknown, "/api/v1/sources").await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;

    let key = server.key(Permission::Admin).await;
    assert_eq!(
        server.get(&key, "/api/v1/sources").await.status(),
        StatusCode::OK
    );
    let keys = server.store_keys().await;
    server
        .store
        .revoke_key(keys[0], server.clock_now())
        .await
        .unwrap();
    let revoked = assert_error(
        server.get(&key, "/api/v1/sources").await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    assert!(revoked["message"].as_str().unwrap().contains("revoked"));
}

#[tokio::test]
async fn bearer_scheme_is_case_insensitive() {
    let server = TestServer::start().await;
    let key = server.key(Permission::Read).await;
    let response = server
        .client
        .get(server.url("/api/v1/sources"))
        .header("authorization", format!("bearer {key}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_version_endpoint_needs_no_key() {
    let server = TestServer::start().await;
    let response = server
        .client
        .get(server.url("/api/health/version"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let version = body(response).await;
    let text = version["version"].as_str().unwrap();
    assert!(
        text.split('.').all(|part| part.parse::<u32>().is_ok()),
        "{text}"
    );
    // Without an admin key: whether semantic search is on, nothing about why or with what.
    assert_eq!(
        version["semanticSearch"],
        json!({"enabled": false}),
        "{version}"
    );
    let reader = server.key(Permission::Read).await;
    let read = body(server.get(&reader, "/api/health/version").await).await;
    assert_eq!(read["semanticSearch"], json!({"enabled": false}), "{read}");
    let admin = server.key(Permission::Admin).await;
    let detailed = body(server.get(&admin, "/api/health/version").await).await;
    assert!(
        detailed["semanticSearch"]["reason"].is_string(),
        "{detailed}"
    );
}

/// Each permission level against each endpoint: reads need `read`, writes need `read-write`.
#[tokio::test]
async fn permission_matrix() {
    let server = TestServer::start().await;
    let admin = server.key(Permission::Admin).await;
    let source = server.create_source(&admin, "Matrix").await;
    let doc = server
        .upload_ok(&admin, &source, "a.md", b"# A\n\nalpha")
        .await;
    server.wait_for_status(&admin, &source, &doc, "ready").await;

    for level in [Permission::Read, Permission::ReadWrite, Permission::Admin] {
        let key = server.key(level).await;
        let can_write = level >= Permission::ReadWrite;
        let expect = |ok: StatusCode| if can_write { ok } else { StatusCode::FORBIDDEN };

        let reads = [
            server.get(&key, "/api/v1/sources").await,
            server.get(&key, &format!("/api/v1/sources/{source}")).await,
            server
                .get(&key, &format!("/api/v1/sources/{source}/documents"))
                .await,
            server
                .get(&key, &format!("/api/v1/sources/{source}/documents/{doc}"))
                .await,
            server.search(&key, json!({"query": "alpha"})).await,
        ];
        for response in reads {
            assert_eq!(
                response.status(),
                StatusCode::OK,
                "{level} read {}",
                response.url()
            );
        }

        let create = server
            .post_json(&key, "/api/v1/sources", &json!({"name": "x"}))
            .await;
        assert_eq!(
            create.status(),
            expect(StatusCode::CREATED),
            "{level} create source"
        );

        let upload = server
            .upload(&key, &source, "b.md", format!("beta {level}").as_bytes())
            .await;
        assert_eq!(
            upload.status(),
            expect(StatusCode::ACCEPTED),
            "{level} upload"
        );

        let form = reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(format!("gamma {level}").into_bytes())
                .file_name("c.md"),
        );
        let bulk = server.upload_bulk(&key, &source, form).await;
        assert_eq!(
            bulk.status(),
            expect(StatusCode::ACCEPTED),
            "{level} bulk upload"
        );

        let victim = server
            .upload_ok(
                &admin,
                &source,
                "victim.md",
                format!("victim {level}").as_bytes(),
            )
            .await;
        let delete = server
            .delete(
                &key,
                &format!("/api/v1/sources/{source}/documents/{victim}"),
            )
            .await;
        assert_eq!(
            delete.status(),
            expect(StatusCode::NO_CONTENT),
            "{level} delete"
        );
        if !can_write {
            let denied = server
                .delete(
                    &key,
                    &format!("/api/v1/sources/{source}/documents/{victim}"),
                )
                .await;
            let envelope = assert_error(denied, StatusCode::FORBIDDEN, "forbidden").await;
            assert!(envelope["message"].as_str().unwrap().contains("read-write"));
        }
    }
}

#[tokio::test]
async fn a_key_scoped_to_sources_cannot_create_sources() {
    let server = TestServer::start().await;
    let admin = server.key(Permission::Admin).await;
    let source = server.create_source(&admin, "Only").await;
    let scoped = server
        .key_with(
            Permission::ReadWrite,
            SourceScope::only([crate::helpers::source_id(&source)]),
            None,
        )
        .await;
    let response = server
        .post_json(&scoped, "/api/v1/sources", &json!({"name": "new"}))
        .await;
    assert_error(response, StatusCode::FORBIDDEN, "forbidden").await;
}

#[tokio::test]
async fn unknown_api_paths_ask_for_a_key_first_and_every_answer_has_rate_headers() {
    let server = TestServer::start().await;
    let anonymous = server
        .client
        .get(server.url("/api/v1/no-such-thing"))
        .send()
        .await
        .unwrap();
    assert!(anonymous.headers().contains_key("x-ratelimit-limit"));
    assert_error(anonymous, StatusCode::UNAUTHORIZED, "unauthorized").await;
    let key = server.key(Permission::Read).await;
    let unknown = server.get(&key, "/api/v1/no-such-thing").await;
    assert!(unknown.headers().contains_key("x-ratelimit-limit"));
    assert_error(unknown, StatusCode::NOT_FOUND, "not_found").await;
    let version = server
        .client
        .get(server.url("/api/health/version"))
        .send()
        .await
        .unwrap();
    assert_eq!(version.status(), StatusCode::OK);
    assert!(version.headers().contains_key("x-ratelimit-limit"));
    let wrong_method = server
        .client
        .delete(server.url("/api/health/version"))
        .send()
        .await
        .unwrap();
    assert!(wrong_method.headers().contains_key("x-ratelimit-remaining"));
    assert_error(
        wrong_method,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    )
    .await;
}
