//! `POST /api/v1/generate` against a real OpenAI-compatible model server: llama.cpp's own HTTP
//! server with SmolLM2-135M-Instruct (`llama_server.py` beside this file, run with the
//! interpreter `scripts/llama-server` installs, named by `QUIRE_TEST_LLAMA`), configured
//! through the ordinary `llm.*` settings. Streaming with citations, a follow-up the model
//! rewrites, the model server dying mid-answer, and a client leaving mid-answer: each against
//! the real server's wire format and timing rather than a fake's.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::response::IntoResponse;
use futures_util::StreamExt;
use quire_core::Permission;
use quire_parse::fixtures::pdf;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::generate::{PUMP_PAGES, start_generate};
use crate::helpers::TestServer;
use crate::helpers::sse::{Sse, sse_events};

const LLAMA_VARIABLE: &str = "QUIRE_TEST_LLAMA";

/// The name `llama_server.py` serves the model under.
const MODEL: &str = "smollm2";

/// Long enough for a loaded machine to load the model, process a prompt or finish a short
/// answer; a wait this long means something is broken.
const PATIENCE: Duration = Duration::from_secs(60);

/// Asks for a marker outright: the model is too small to follow the prompt's instructions to
/// cite, but names the passage when asked which one it is.
const PRIME_QUESTION: &str = "Which passage, [1], [2] or [3], says how the pump is primed?";

/// A question the model answers at length: it rambles on to `max_tokens` at temperature 0.
const LONG_QUESTION: &str = "Write a very long and detailed report about the pump, its operation \
     and its maintenance, at least 2000 words.";

/// The Python with xllamacpp and SmolLM2; the tests fail without it (`scripts/test` sets it).
fn python() -> String {
    std::env::var(LLAMA_VARIABLE)
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "{LLAMA_VARIABLE} is not set: export {LLAMA_VARIABLE}=\"$(scripts/llama-server)\""
            )
        })
}

/// A running llama.cpp server, killed when dropped (and gone when this process is: it exits
/// when its stdin closes).
struct Llama {
    child: Child,
    _stdin: ChildStdin,
    /// The API root, `http://127.0.0.1:PORT/v1`.
    url: String,
    port: u16,
}

impl Llama {
    /// A server on a free port, once it answers.
    async fn start() -> Self {
        Self::start_on(0).await
    }

    async fn start_on(port: u16) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/llama_server.py");
        let mut child = tokio::process::Command::new(python())
            .arg(script)
            .arg("--port")
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("llama_server.py starts");
        let stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = tokio::time::timeout(PATIENCE, lines.next_line())
            .await
            .expect("llama.cpp's server is ready within a minute")
            .unwrap()
            .expect("llama_server.py prints the server's URL (its error is above)");
        let port = url
            .trim_end_matches("/v1")
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {url}"));
        Self {
            child,
            _stdin: stdin,
            url,
            port,
        }
    }

    /// Kills the server as a crash would (SIGKILL) and waits for it to be gone.
    async fn kill(&mut self) {
        self.child.kill().await.unwrap();
    }
}

/// The real model with deterministic sampling and short answers; tests lengthen them.
fn with_llama(url: String) -> impl FnOnce(&mut quire::Config) {
    move |c| {
        c.llm.base_url = Some(url);
        c.llm.model = Some(MODEL.into());
        c.llm.temperature = 0.0;
        c.llm.max_tokens = 96;
        c.llm.max_concurrent = 1;
        c.llm.timeout_seconds = 30;
        // Far longer than any test: leaving is noticed without a keep-alive write failing.
        c.llm.keep_alive_seconds = 600;
    }
}

async fn server_with_manual(adjust: impl FnOnce(&mut quire::Config)) -> (TestServer, String) {
    let server = TestServer::start_with(adjust).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Manuals").await;
    let id = server
        .upload_ok(&key, &source, "pump-manual.pdf", &pdf(&PUMP_PAGES))
        .await;
    server.wait_for_status(&key, &source, &id, "ready").await;
    (server, key)
}

/// The next event, however long the model takes to get there (within [`PATIENCE`]).
async fn next_event(events: &mut UnboundedReceiver<Sse>) -> Sse {
    tokio::time::timeout(PATIENCE, events.recv())
        .await
        .expect("an event within a minute")
        .expect("the stream is open")
}

/// Every event until the stream ends.
async fn all_events(events: &mut UnboundedReceiver<Sse>) -> Vec<Sse> {
    let mut all = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while let Some(e) = events.recv().await {
            all.push(e);
        }
    })
    .await
    .expect("the stream ends within a minute");
    all
}

async fn ask(server: &TestServer, key: &str, body: Value) -> UnboundedReceiver<Sse> {
    let response = start_generate(server, key, body).await;
    assert_eq!(response.status(), StatusCode::OK);
    sse_events(response)
}

async fn generate(server: &TestServer, key: &str, body: Value) -> Vec<Sse> {
    all_events(&mut ask(server, key, body).await).await
}

fn answer_text(events: &[Sse]) -> String {
    events
        .iter()
        .filter(|e| e.event == "delta")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect()
}

/// The `done` event ending `events`, every event before it a delta.
fn done(events: &[Sse]) -> &Value {
    let (last, before) = events.split_last().expect("events");
    assert_eq!(last.event, "done", "{events:?}");
    assert!(before.iter().all(|e| e.event == "delta"), "{events:?}");
    &last.data
}

#[tokio::test]
async fn a_real_model_streams_deltas_then_done_with_citations() {
    let llama = Llama::start().await;
    let (server, key) = server_with_manual(with_llama(llama.url.clone())).await;
    let events = generate(&server, &key, json!({"query": PRIME_QUESTION})).await;
    let done = done(&events);
    let deltas = events.iter().filter(|e| e.event == "delta").count();
    assert!(deltas > 5, "the answer streams in pieces: {events:?}");
    assert_eq!(done["extractive"], false, "{done}");
    assert_eq!(
        done["generator"],
        format!("{MODEL} at 127.0.0.1:{}", llama.port),
        "{done}"
    );
    let text = answer_text(&events);
    let citations = done["citations"].as_array().unwrap();
    assert!(!citations.is_empty(), "no citations for {text:?}");
    // The marker names the passage about priming, as the prompt numbered it.
    assert_eq!(citations[0]["page"], 2, "{text:?}: {done}");
    assert_eq!(citations[0]["section"], "Operation", "{done}");
    for citation in citations {
        assert!(
            text.contains(&format!("[{}]", citation["index"])),
            "{citation} is not in {text:?}"
        );
        assert_eq!(citation["documentName"], "pump-manual.pdf", "{citation}");
        assert!(!citation["content"].as_str().unwrap().is_empty());
    }
}

/// What a [`Recorder`] saw: each request to the model, whether it asked for a stream, and the
/// status the model answered.
#[derive(Clone, Default)]
struct Recorder {
    upstream: String,
    client: reqwest::Client,
    seen: Arc<Mutex<Vec<(Value, u16)>>>,
}

impl Recorder {
    /// A pass-through to `upstream` (`…/v1`) on a free port; its own `…/v1`.
    async fn start(upstream: String) -> (Self, String) {
        let recorder = Recorder {
            upstream,
            ..Recorder::default()
        };
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(pass_through))
            .with_state(recorder.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (recorder, format!("http://{addr}/v1"))
    }

    fn seen(&self) -> Vec<(Value, u16)> {
        self.seen.lock().unwrap().clone()
    }
}

async fn pass_through(
    State(recorder): State<Recorder>,
    axum::Json(request): axum::Json<Value>,
) -> axum::response::Response {
    let response = recorder
        .client
        .post(format!("{}/chat/completions", recorder.upstream))
        .json(&request)
        .send()
        .await
        .unwrap();
    let status = response.status();
    recorder
        .seen
        .lock()
        .unwrap()
        .push((request, status.as_u16()));
    let content_type = response.headers()["content-type"].clone();
    let body = Body::from_stream(response.bytes_stream());
    (status, [("content-type", content_type)], body).into_response()
}

#[tokio::test]
async fn a_follow_up_is_rewritten_by_the_model_and_answered() {
    let llama = Llama::start().await;
    let (recorder, url) = Recorder::start(llama.url.clone()).await;
    let (server, key) = server_with_manual(with_llama(url)).await;
    let first = generate(
        &server,
        &key,
        json!({"query": "What does the circulation pump do?"}),
    )
    .await;
    let conversation = done(&first)["conversationId"].as_str().unwrap().to_owned();
    let second = generate(
        &server,
        &key,
        json!({"query": "and how often is its seal replaced?", "conversationId": conversation}),
    )
    .await;
    assert_eq!(done(&second)["conversationId"], conversation.as_str());
    assert!(!answer_text(&second).trim().is_empty(), "{second:?}");

    // Three requests reached the model: the first answer, the rewrite of the follow-up (not
    // streamed, answered 200), and the second answer with the first exchange as history.
    let seen = recorder.seen();
    let streamed: Vec<bool> = seen.iter().map(|(r, _)| r["stream"] == true).collect();
    assert_eq!(streamed, [true, false, true]);
    assert!(seen.iter().all(|(_, status)| *status == 200), "{seen:?}");
    let roles: Vec<&str> = seen[2].0["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);

    let id: quire_core::ConversationId = conversation.parse().unwrap();
    let stored = server.store.recent_messages(id, 10).await.unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[1].question, "and how often is its seal replaced?");
}

#[tokio::test]
async fn a_model_server_that_dies_mid_answer_ends_the_stream_with_an_error_and_frees_the_slot() {
    let mut llama = Llama::start().await;
    let (server, key) = server_with_manual(|c| {
        with_llama(llama.url.clone())(c);
        c.llm.max_tokens = 2000;
    })
    .await;
    let mut dying = ask(&server, &key, json!({"query": LONG_QUESTION})).await;
    assert_eq!(next_event(&mut dying).await.event, "delta");
    llama.kill().await;
    let rest = all_events(&mut dying).await;
    let (last, before) = rest.split_last().expect("the stream ends with an event");
    assert!(before.iter().all(|e| e.event == "delta"), "{rest:?}");
    assert_eq!(last.event, "error", "{rest:?}");
    let message = last.data["message"].as_str().unwrap();
    assert!(
        message.contains("stopped before the answer was complete"),
        "{message}"
    );

    // The only slot is free again: the next question is not queued, and with no server it
    // fails at once with a clear error.
    let started = Instant::now();
    let refused = generate(&server, &key, json!({"query": PRIME_QUESTION})).await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].event, "error", "{refused:?}");
    let message = refused[0].data["message"].as_str().unwrap();
    assert!(
        message.contains("the language model could not be reached"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // Once the server is back at its address, questions are answered again.
    let _back = Llama::start_on(llama.port).await;
    let answered = generate(&server, &key, json!({"query": PRIME_QUESTION})).await;
    done(&answered);
}

/// With one slot, a question asked right after a client left mid-answer gets its first piece
/// within [`AFTER_A_LEAVER`]: the abandoned answer's request to the model was closed, and the
/// model stopped generating, at once. Without that the next question would wait for the rest
/// of a 2,000-token answer (figures in docs/generate.md).
const AFTER_A_LEAVER: Duration = Duration::from_secs(8);

#[tokio::test]
async fn a_client_that_leaves_mid_answer_cancels_the_model_at_once() {
    let llama = Llama::start().await;
    let (server, key) = server_with_manual(|c| {
        with_llama(llama.url.clone())(c);
        c.llm.max_tokens = 2000;
    })
    .await;
    let leaving = start_generate(&server, &key, json!({"query": LONG_QUESTION})).await;
    assert_eq!(leaving.status(), StatusCode::OK);
    let mut body = leaving.bytes_stream();
    let mut seen = String::new();
    while seen.matches("event: delta").count() < 10 {
        let bytes = tokio::time::timeout(PATIENCE, body.next())
            .await
            .expect("the answer streams")
            .expect("the stream is open")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&bytes));
    }
    // Closes the connection mid-answer.
    drop(body);
    let left = Instant::now();
    let mut next = ask(&server, &key, json!({"query": PRIME_QUESTION})).await;
    // It may be told to wait until the service has seen the other client leave.
    let mut first = next_event(&mut next).await;
    while first.event == "queued" {
        first = next_event(&mut next).await;
    }
    let waited = left.elapsed();
    eprintln!("first delta {waited:?} after the other client left");
    assert_eq!(first.event, "delta", "{first:?}");
    assert!(
        waited < AFTER_A_LEAVER,
        "the next answer began after {waited:?}"
    );
}
