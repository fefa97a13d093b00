//! The MCP server at `/mcp`, driven by a real peer: the official Python SDK's Streamable HTTP
//! client (`mcp_client.py` beside this file, run with the interpreter `scripts/mcp-client`
//! installs, named by `QUIRE_TEST_MCP_PYTHON`). The script asserts what it sees; this test
//! prepares the server, revokes a key when the script asks, and checks the effects on the REST
//! side.

use std::process::Stdio;
use std::time::Duration;

use quire_core::{Permission, SourceScope};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::helpers::{TestServer, assert_error, body, source_id};

const PYTHON_VARIABLE: &str = "QUIRE_TEST_MCP_PYTHON";
const MAX_UPLOAD_BYTES: u64 = 64 * 1024;
const LIMITED_PER_MINUTE: u32 = 2;

/// The Python with the MCP SDK; the test fails without it (`scripts/test` sets it).
fn python() -> String {
    std::env::var(PYTHON_VARIABLE).unwrap_or_else(|_| {
        panic!("{PYTHON_VARIABLE} is not set: export {PYTHON_VARIABLE}=\"$(scripts/mcp-client)\"")
    })
}

#[tokio::test]
async fn a_real_client_uses_every_tool_within_its_key() {
    let server = TestServer::start_with(|c| c.limits.max_upload_bytes = MAX_UPLOAD_BYTES).await;
    let admin = server.key(Permission::Admin).await;
    let a = server.create_source(&admin, "Airships").await;
    let b = server.create_source(&admin, "Secrets").await;
    let airships = b"# Airships\n\nThe zeppelin is kept in a hangar at Friedrichshafen.\n";
    let doc_a = server.upload_ok(&admin, &a, "airships.md", airships).await;
    let doc_b = server
        .upload_ok(
            &admin,
            &b,
            "secret.md",
            b"# Secret\n\nThe zeppelin plans are here.\n",
        )
        .await;
    server.wait_for_status(&admin, &a, &doc_a, "ready").await;
    server.wait_for_status(&admin, &b, &doc_b, "ready").await;
    let only_a = || SourceScope::only([source_id(&a)]);
    let read_write = server.key_with(Permission::ReadWrite, only_a(), None).await;
    let read = server.key_with(Permission::Read, only_a(), None).await;
    let limited = server
        .key_with(Permission::Read, only_a(), Some(LIMITED_PER_MINUTE))
        .await;
    let revoked = server.key(Permission::Read).await;

    let setup = json!({
        "url": server.url("/mcp"),
        "readWrite": read_write,
        "read": read,
        "limited": limited,
        "limitedPerMinute": LIMITED_PER_MINUTE,
        "revoked": revoked,
        "sourceA": a,
        "sourceB": b,
        "documentA": doc_a,
        "documentB": doc_b,
        "maxUploadBytes": MAX_UPLOAD_BYTES,
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/mcp_client.py");
    let mut child = tokio::process::Command::new(python())
        .arg(script)
        .arg(setup.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the MCP client script starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut report: Option<Value> = None;
    let run = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line == "revoke" {
                let key = server
                    .store
                    .find_key_by_hash(&quire_app::keys::hash_key(&revoked))
                    .await
                    .unwrap()
                    .unwrap();
                server
                    .store
                    .revoke_key(key.id, server.clock_now())
                    .await
                    .unwrap();
                stdin.write_all(b"revoked\n").await.unwrap();
                stdin.flush().await.unwrap();
            } else {
                report = Some(serde_json::from_str(&line).expect("the script's report is JSON"));
            }
        }
        child.wait().await.unwrap()
    };
    let status = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the MCP client script finished within 3 minutes");
    assert!(status.success(), "the MCP client script failed: {status}");
    let report = report.expect("the script reported what it uploaded");

    // What the MCP upload stored is the REST API's document too.
    let uploaded = report["uploaded"].as_str().unwrap();
    let document = server.wait_for_status(&admin, &a, uploaded, "ready").await;
    assert_eq!(document["name"], "balloons.md");
    // The MCP searches used up the limited key's window for REST as well.
    let limited_rest = server.search(&limited, json!({"query": "zeppelin"})).await;
    assert_error(limited_rest, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    // And the revoked key is refused there as well.
    let refused = server.get(&revoked, "/api/v1/sources").await;
    let refused = assert_error(refused, StatusCode::UNAUTHORIZED, "unauthorized").await;
    assert!(refused["message"].as_str().unwrap().contains("revoked"));
}

#[tokio::test]
async fn requests_without_a_valid_key_are_refused_over_http() {
    let server = TestServer::start().await;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}
    });
    let response = server
        .client
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let error = body(response).await;
    assert_eq!(error["jsonrpc"], "2.0");
    assert_eq!(error["error"]["code"], -32001);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Authorization")
    );

    // With a key, the same request is answered.
    let key = server.key(Permission::Read).await;
    let response = server
        .client
        .post(server.url("/mcp"))
        .bearer_auth(&key)
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    assert!(text.contains("\"quire\""), "{text}");
}
