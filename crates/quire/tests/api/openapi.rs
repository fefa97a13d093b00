//! The OpenAPI document (served without a key, the same as `docs/openapi.json`), Schemathesis
//! fuzzing the live server against it, and request ids.

use std::process::Stdio;
use std::time::Duration;

use quire_core::Permission;
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestServer, assert_error, body};

#[tokio::test]
async fn the_openapi_document_is_public_and_is_the_committed_one() {
    let server = TestServer::start().await;
    let response = server
        .client
        .get(server.url("/api/v1/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/json");
    let served = response.text().await.unwrap();
    assert_eq!(served, quire_http::openapi_json());
    let document: serde_json::Value = serde_json::from_str(&served).unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    // Other unknown paths under /api/v1 still ask for a key first.
    let other = server
        .client
        .get(server.url("/api/v1/openapi.yaml"))
        .send()
        .await
        .unwrap();
    assert_error(other, StatusCode::UNAUTHORIZED, "unauthorized").await;
}

#[tokio::test]
async fn every_response_has_a_request_id_and_errors_repeat_it() {
    let server = TestServer::start().await;
    let key = server.key(Permission::Read).await;
    // Generated when the client sends none: a UUID, different each time.
    let first = server.get(&key, "/api/v1/sources").await;
    assert_eq!(first.status(), StatusCode::OK);
    let id = first.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    let second = server.get(&key, "/api/v1/sources").await;
    assert_ne!(second.headers()["x-request-id"], id.as_str());
    // Echoed when the client sends a sane one, on success and in error bodies.
    let sent = "client-req_42.7:a";
    let ok = server
        .client
        .get(server.url("/api/health/version"))
        .header("x-request-id", sent)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(ok.headers()["x-request-id"], sent);
    let missing = server
        .client
        .get(server.url("/api/v1/sources/00000000-0000-4000-8000-000000000000"))
        .bearer_auth(&key)
        .header("x-request-id", sent)
        .send()
        .await
        .unwrap();
    let envelope = assert_error(missing, StatusCode::NOT_FOUND, "not_found").await;
    assert_eq!(envelope["requestId"], sent);
    // Also on the 401 the key check answers and on unknown paths outside /api/v1.
    for (path, status, error) in [
        ("/api/v1/sources", StatusCode::UNAUTHORIZED, "unauthorized"),
        ("/nope", StatusCode::NOT_FOUND, "not_found"),
    ] {
        let response = server
            .client
            .get(server.url(path))
            .header("x-request-id", sent)
            .send()
            .await
            .unwrap();
        let envelope = assert_error(response, status, error).await;
        assert_eq!(envelope["requestId"], sent);
    }
    // Also on the admin interface and the MCP endpoint, which are not the Agent API's routes:
    // the sign-in page, and an MCP call refused for want of a key.
    for (path, method) in [("/admin/login", "GET"), ("/mcp", "POST")] {
        let response = server
            .client
            .request(method.parse().unwrap(), server.url(path))
            .header("x-request-id", sent)
            .send()
            .await
            .unwrap();
        assert_eq!(response.headers()["x-request-id"], sent, "{method} {path}");
    }
    // Replaced when it is not sane: too long, or with characters that could forge log lines.
    for insane in ["x".repeat(129), "two words".into(), "a\"b".into()] {
        let response = server
            .client
            .get(server.url("/api/health/version"))
            .header("x-request-id", &insane)
            .send()
            .await
            .unwrap();
        let id = response.headers()["x-request-id"].to_str().unwrap();
        assert!(uuid::Uuid::parse_str(id).is_ok(), "{insane:?} gave {id}");
    }
}

/// How many cases Schemathesis generates per operation and phase: enough to reach odd inputs
/// (empty, huge, wrongly typed, non-UUID ids, missing fields), few enough that the run stays
/// under about two minutes on a shared machine.
const EXAMPLES_PER_OPERATION: &str = "25";

/// The checks the run makes. `not_a_server_error`: no 5xx. `status_code_conformance`: every
/// status is documented for its operation. `content_type_conformance`: every response has a
/// documented media type. `response_schema_conformance`: every JSON body matches its schema.
const CHECKS: &str = "not_a_server_error,status_code_conformance,\
                      content_type_conformance,response_schema_conformance";

/// Schemathesis (`scripts/schemathesis` installs it; `scripts/test` exports the path of its `st`
/// in `QUIRE_TEST_SCHEMATHESIS`) fuzzes every operation of the served OpenAPI document on a
/// live server, with an admin key and a source holding a document, and must find nothing.
#[tokio::test(flavor = "multi_thread")]
async fn schemathesis_finds_nothing() {
    let st = std::env::var("QUIRE_TEST_SCHEMATHESIS").expect(
        "QUIRE_TEST_SCHEMATHESIS must name Schemathesis' `st` executable: \
         export QUIRE_TEST_SCHEMATHESIS=$(scripts/schemathesis)",
    );
    // Rate limits high enough that the fuzzer measures the API, not the limiter (a 429 would
    // still be documented and so accepted).
    let server = TestServer::start_with(|c| {
        c.limits.search_per_minute = 100_000;
        c.limits.generate_per_minute = 100_000;
    })
    .await;
    let admin = server.key(Permission::Admin).await;
    let source = server.create_source(&admin, "fuzzed").await;
    let uploaded = server
        .upload(
            &admin,
            &source,
            "notes.md",
            b"# Notes\n\nThe fuzzer reads this.",
        )
        .await;
    assert_eq!(uploaded.status(), StatusCode::ACCEPTED);
    let found = server
        .post_json(&admin, "/api/v1/search", &json!({"query": "fuzzer"}))
        .await;
    assert_eq!(found.status(), StatusCode::OK, "{}", body(found).await);

    let report = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(&st);
    command
        .arg("run")
        .arg(server.url("/api/v1/openapi.json"))
        .args(["--checks", CHECKS])
        .args(["--max-examples", EXAMPLES_PER_OPERATION])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--header", &format!("Authorization: Bearer {admin}")])
        .args(["--seed", "16"])
        .args(["--request-timeout", "20"])
        // One worker: with two, Hypothesis sometimes fails in its own code (a race in its
        // lambda-description cache: "AST constructor recursion depth mismatch").
        .args(["--workers", "1"])
        .args(["--generation-database", "none"])
        .arg("--no-color")
        // Its reports and caches go to a scratch directory, not into the clone.
        .current_dir(report.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let run = tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .expect("Schemathesis ran for more than 5 minutes")
        .expect("run Schemathesis");
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        run.status.success(),
        "Schemathesis found problems (fix the server or its documentation):\n{output}"
    );
}
