//! Reranking (`[search.rerank]`) against a fake reranking server that scores by a rule this
//! file knows: search, generate and MCP search come back in the reranker's order, with its
//! scores; a reranker that answers 500, garbage or nothing in time leaves the fused order,
//! answers 200 and is counted in `quire_rerank_requests_total`.
//!
//! No real reranker runs here: llama.cpp's server reranks only with a reranking model, and
//! none is available to the test suite (docs/retrieval.md, "Reranking").

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use quire_core::Permission;
use reqwest::header::ACCEPT;
use serde_json::{Value, json};

use crate::helpers::fake_llm::{Fake as FakeLlm, Upstream, with_llm};
use crate::helpers::sse::{json_rpc_answer, sse_events};
use crate::helpers::{TestServer, body};
use crate::metrics::value;

/// The word that makes a passage the reranker's favourite.
const MARKER: &str = "zeppelin";

/// The fake reranker's relevance: 1.0 for a passage naming [`MARKER`], else the shorter the
/// better (always below 1.0).
fn relevance(text: &str) -> f32 {
    if text.contains(MARKER) {
        1.0
    } else {
        1.0 / (2.0 + text.len() as f32)
    }
}

/// How the fake reranker answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum Mode {
    /// Scores by [`relevance`], Cohere's shape.
    Score = 0,
    /// HTTP 500.
    Fail = 1,
    /// 200 with a body that is no rerank answer.
    Garbage = 2,
    /// Answers long after the configured timeout.
    Sleep = 3,
}

#[derive(Clone)]
struct Reranker {
    mode: Arc<AtomicU8>,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl Reranker {
    async fn start() -> (Self, String) {
        let fake = Self {
            mode: Arc::new(AtomicU8::new(Mode::Score as u8)),
            requests: Arc::default(),
        };
        let app = axum::Router::new()
            .route("/v1/rerank", axum::routing::post(rerank))
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (fake, format!("http://{addr}/v1"))
    }

    fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

async fn rerank(State(fake): State<Reranker>, Json(request): Json<Value>) -> Response {
    fake.requests.lock().unwrap().push(request.clone());
    match fake.mode.load(Ordering::SeqCst) {
        0 => {
            let documents = request["documents"].as_array().unwrap();
            let results: Vec<Value> = documents
                .iter()
                .enumerate()
                .map(|(index, d)| {
                    json!({"index": index, "relevance_score": relevance(d.as_str().unwrap())})
                })
                .collect();
            Json(json!({"results": results})).into_response()
        }
        1 => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": "model crashed"})),
        )
            .into_response(),
        2 => (StatusCode::OK, "<html>rerank me</html>").into_response(),
        _ => {
            // Far past the server's timeout; the test never waits for it.
            tokio::time::sleep(Duration::from_secs(60)).await;
            Json(json!({"results": []})).into_response()
        }
    }
}

/// Four one-chunk documents: BM25 on "pump" ranks `marker.md` last (one mention in a long
/// text), the reranker first.
const DOCUMENTS: [(&str, &str); 4] = [
    (
        "heavy.md",
        "# Pumps\n\npump pump pump pump, the pump of pumps.\n",
    ),
    (
        "medium.md",
        "# Notes\n\nThe pump and its pump housing, with valves, seals, gaskets and flanges.\n",
    ),
    ("short.md", "# Short\n\nA pump.\n"),
    (
        "marker.md",
        "# Airship\n\nThe zeppelin hangar keeps one pump somewhere among its hulls, gas cells, \
         mooring masts, winches, ropes, ballast tanks and the many workshops around them.\n",
    ),
];

/// A server with [`DOCUMENTS`] ready, reranking through `url` within `timeout_ms`, metrics on.
async fn server_with_documents(
    url: String,
    timeout_ms: u64,
    adjust: impl FnOnce(&mut quire::Config),
) -> (TestServer, String) {
    let server = TestServer::start_with(|c| {
        c.search.rerank.base_url = Some(url);
        c.search.rerank.model = Some("fake-reranker".into());
        c.search.rerank.timeout_ms = timeout_ms;
        c.metrics.bind = Some("127.0.0.1:0".into());
        adjust(c);
    })
    .await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Rerank").await;
    for (name, text) in DOCUMENTS {
        let id = server.upload_ok(&key, &source, name, text.as_bytes()).await;
        server.wait_for_status(&key, &source, &id, "ready").await;
    }
    (server, key)
}

/// `(document name, content, score)` of each result of `POST /api/v1/search` for "pump".
async fn search(server: &TestServer, key: &str) -> Vec<(String, String, f64)> {
    let response = server
        .search(key, json!({"query": "pump", "limit": 3}))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    triples(&body(response).await["results"])
}

fn triples(results: &Value) -> Vec<(String, String, f64)> {
    results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["document"]["name"].as_str().unwrap().to_owned(),
                r["content"].as_str().unwrap().to_owned(),
                r["score"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// The value of `quire_rerank_requests_total{outcome}` (0 before the first).
async fn rerank_count(server: &TestServer, outcome: &str) -> f64 {
    let metrics = server.metrics_addr.expect("metrics.bind is set");
    let text = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    value(
        &text,
        "quire_rerank_requests_total",
        &[("outcome", outcome)],
    )
    .unwrap_or(0.0)
}

#[tokio::test]
async fn search_generate_and_mcp_search_follow_the_rerankers_order() {
    let (reranker, url) = Reranker::start().await;
    let (llm, llm_url) = FakeLlm::start(Upstream::Answer, "Look in the hangar [1].").await;
    let (server, key) = server_with_documents(url, 10_000, with_llm(llm_url)).await;
    let ok_before = rerank_count(&server, "ok").await;

    // Search: the reranker's favourite first, then by its rule; its scores are shown.
    let results = search(&server, &key).await;
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[0].0, "marker.md", "{results:?}");
    for (_, content, score) in &results {
        assert!(
            (score - f64::from(relevance(content))).abs() < 1e-6,
            "{results:?}"
        );
    }
    assert!(
        results.windows(2).all(|w| w[0].2 >= w[1].2),
        "in the reranker's order: {results:?}"
    );
    // It was asked once, with every candidate (four, more than the limit of 3).
    let asked = &reranker.requests()[0];
    assert_eq!(asked["model"], "fake-reranker");
    assert_eq!(asked["query"], "pump");
    assert_eq!(asked["documents"].as_array().unwrap().len(), 4, "{asked}");
    assert_eq!(asked["top_n"], 4);
    assert!(rerank_count(&server, "ok").await > ok_before);

    // Generate: the first passage in the prompt and the first citation are the reranker's.
    let response = server
        .client
        .post(server.url("/api/v1/generate"))
        .bearer_auth(&key)
        .json(&json!({"query": "pump"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut events = sse_events(response);
    let mut done = None;
    while let Some(event) = events.recv().await {
        if event.event == "done" {
            done = Some(event.data);
        }
    }
    let done = done.expect("a done event");
    assert_eq!(done["citations"][0]["documentName"], "marker.md", "{done}");
    let prompt = llm.streaming_requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let first = prompt
        .split("\n[1] ")
        .nth(1)
        .expect("passage 1 in the prompt");
    assert!(first.starts_with("marker.md"), "{prompt}");

    // MCP search, the same use case.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "pump", "limit": 3}}});
    let response = server
        .client
        .post(server.url("/mcp"))
        .bearer_auth(&key)
        .header(ACCEPT, "application/json, text/event-stream")
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let answer = json_rpc_answer(&response.text().await.unwrap()).expect("a JSON-RPC answer");
    let mcp = triples(&answer["result"]["structuredContent"]["results"]);
    // The same passages, order and scores (MCP writes the f32 scores at f64 precision).
    assert_eq!(mcp.len(), results.len(), "{mcp:?}");
    for (m, r) in mcp.iter().zip(&results) {
        assert_eq!((&m.0, &m.1), (&r.0, &r.1), "{mcp:?} vs {results:?}");
        assert!((m.2 - r.2).abs() < 1e-6, "{mcp:?} vs {results:?}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_failing_slow_or_garbled_reranker_leaves_the_fused_order_and_is_counted() {
    let (reranker, url) = Reranker::start().await;
    let (server, key) = server_with_documents(url, 1_000, |_| {}).await;
    reranker.set(Mode::Score);
    let reranked: Vec<String> = search(&server, &key)
        .await
        .into_iter()
        .map(|r| r.0)
        .collect();

    let mut fused_orders = Vec::new();
    for (mode, outcome) in [
        (Mode::Fail, "error"),
        (Mode::Garbage, "error"),
        (Mode::Sleep, "timeout"),
    ] {
        reranker.set(mode);
        let before = rerank_count(&server, outcome).await;
        let results = search(&server, &key).await;
        assert_eq!(results.len(), 3, "{mode:?}: {results:?}");
        // The fused (here BM25) order and scores: best first, the long marker passage last.
        assert!(
            results.windows(2).all(|w| w[0].2 >= w[1].2),
            "{mode:?}: {results:?}"
        );
        assert!(
            results.iter().all(|r| r.0 != "marker.md"),
            "{mode:?}: {results:?}"
        );
        assert!(
            rerank_count(&server, outcome).await >= before + 1.0,
            "{mode:?} counted as {outcome}"
        );
        fused_orders.push(results.into_iter().map(|r| r.0).collect::<Vec<_>>());
    }
    assert!(
        fused_orders.windows(2).all(|w| w[0] == w[1]),
        "{fused_orders:?}"
    );
    assert_ne!(fused_orders[0], reranked, "the reranker changed the order");
    server.stop().await;
}
