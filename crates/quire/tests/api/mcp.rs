//! The MCP server at `/mcp`, driven by a real peer: the official Python SDK's Streamable HTTP
//! client (`mcp_client.py` beside this file, run with the interpreter `scripts/mcp-client`
//! installs, named by `QUIRE_TEST_MCP_PYTHON`). The script asserts what it sees; this test
//! prepares the server, revokes a key when the script asks, and checks the effects on the REST
//! side.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use quire_core::{Permission, SourceScope};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::helpers::sse::json_rpc_answer;
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

/// A relay to `target` that counts the connections made through it: which calls of a client
/// shared one connection.
async fn counting_relay(target: std::net::SocketAddr) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut outbound = tokio::net::TcpStream::connect(target).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    (address, connections)
}

/// A refused call leaves its connection fit for the next one: the server reads the refused
/// request's body before answering, so a client that keeps one pooled connection sends every
/// call on it and reads each refusal, never a broken connection, and then a valid call works.
#[tokio::test]
async fn a_revoked_key_is_refused_call_after_call_on_one_connection() {
    let server = TestServer::start().await;
    let revoked = server.key(Permission::Read).await;
    let valid = server.key(Permission::Read).await;
    let record = server
        .store
        .find_key_by_hash(&quire_app::keys::hash_key(&revoked))
        .await
        .unwrap()
        .unwrap();
    quire_app::keys::revoke(&server.ledger, &quire_app::Actor::Operator, record.id)
        .await
        .unwrap();

    let (relay, connections) = counting_relay(server.addr).await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let list_tools = |key: &str, body: reqwest::Body| {
        client
            .post(format!("http://{relay}/mcp"))
            .bearer_auth(key)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let request = |id: u32| json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}).to_string();
    for call in 1..=5 {
        // The body arrives a moment after the headers, as a client's body often does: the key
        // check refuses the call before it has all been read.
        let late = futures_util::stream::once(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, std::io::Error>(request(call))
        });
        let response = list_tools(&revoked, reqwest::Body::wrap_stream(late))
            .await
            .unwrap_or_else(|e| panic!("call {call} with the revoked key could not be sent: {e}"));
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "call {call}");
        // The body was read, so the server keeps the connection open for the next call.
        assert_eq!(
            response.headers().get("connection"),
            None,
            "call {call}: the server closes the connection"
        );
        let error = body(response).await;
        assert_eq!(error["error"]["code"], -32001, "call {call}: {error}");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("revoked"),
            "call {call}: {error}"
        );
    }
    let response = list_tools(&valid, request(6).into())
        .await
        .expect("the call with a valid key is sent on the same client");
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    let answer = json_rpc_answer(&text).unwrap_or_else(|| panic!("no JSON-RPC answer: {text}"));
    let tools: Vec<&str> = answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools listed: {answer}"))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"search"), "{tools:?}");
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "the six calls shared one connection"
    );
}

/// `list_sources` over MCP, called as a client without a session would.
async fn list_sources_over_mcp(server: &TestServer, key: &str) -> Vec<Value> {
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "list_sources", "arguments": {}}});
    let response = reqwest::Client::new()
        .post(server.url("/mcp"))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    let answer = json_rpc_answer(&text).unwrap_or_else(|| panic!("no JSON-RPC answer: {text}"));
    answer["result"]["structuredContent"]["sources"]
        .as_array()
        .unwrap_or_else(|| panic!("no sources: {answer}"))
        .clone()
}

#[tokio::test]
async fn list_sources_shows_each_sources_type_and_a_syncing_sources_last_run() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("pumps.md"), "# Pumps\n\nPrime the pump.\n").unwrap();
    let roots = vec![root.path().to_path_buf()];
    let server = TestServer::start_with(move |c| c.connectors.folder_roots = roots).await;
    let admin = server.key(Permission::Admin).await;
    let network = server.create_source(&admin, "Uploads").await;
    let created = server
        .post_json(
            &admin,
            "/api/v1/sources",
            &json!({"name": "Handbook", "type": "folder",
                "sync": {"path": root.path(), "intervalSeconds": 3600}}),
        )
        .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let folder = body(created).await["id"].as_str().unwrap().to_owned();
    let reader = server.key(Permission::Read).await;

    let listed = crate::helpers::poll(Duration::from_secs(30), "the first run's end", || async {
        let sources = list_sources_over_mcp(&server, &reader).await;
        let synced = sources
            .iter()
            .find(|s| s["id"] == folder.as_str())
            .is_some_and(|s| s["sync"]["lastRun"]["status"] == "succeeded");
        synced.then_some(sources)
    })
    .await;
    let by_id = |id: &str| listed.iter().find(|s| s["id"] == id).unwrap().clone();
    let uploads = by_id(&network);
    assert_eq!(uploads["type"], "network", "{uploads}");
    assert!(uploads.get("sync").is_none(), "{uploads}");
    let handbook = by_id(&folder);
    assert_eq!(handbook["type"], "folder", "{handbook}");
    let run = &handbook["sync"]["lastRun"];
    assert_eq!(
        (run["added"].clone(), run["failed"].clone()),
        (json!(1), json!(0)),
        "{run}"
    );
    assert!(run["finishedAt"].is_string(), "{run}");
    assert!(handbook["sync"]["nextRunAt"].is_string(), "{handbook}");
    // Nothing of the origin's settings is shown over MCP.
    assert!(handbook["sync"].get("settings").is_none(), "{handbook}");
}
