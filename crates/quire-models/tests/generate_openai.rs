//! `OpenAiChat` against a fake chat-completions server on loopback that records every request
//! and answers as each test scripts it: an event stream written part by part (so the test
//! decides where the network splits it and how long each part takes), an error status, one
//! JSON document, or nothing at all.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::{StreamExt, stream};
use quire_models::generate::{
    GenerateError, Generator, Grounding, OpenAiChat, OpenAiChatSettings, Passage, TextStream, Turn,
};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// One piece of a scripted response body.
enum Part {
    /// These bytes, as one chunk.
    Bytes(Vec<u8>),
    /// A pause before the next part.
    Wait(Duration),
    /// No more parts, and no end either.
    Hang,
    /// The body fails: the server drops the connection mid-response.
    Fail,
}

/// How the fake answers one request.
enum Reply {
    /// Status 200, `text/event-stream`, this body.
    Sse(Vec<Part>),
    /// This status and JSON body.
    Status(u16, Value),
    /// Status 200 and this JSON body.
    Json(Value),
    /// Never send even the headers.
    Hang,
}

/// One recorded request.
#[derive(Debug, Clone)]
struct Seen {
    authorization: Option<String>,
    accept: Option<String>,
    body: Value,
}

type Script = Arc<dyn Fn() -> Reply + Send + Sync>;

#[derive(Clone)]
struct Fake {
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Script,
    /// Notified when a response body is dropped before all its parts were sent: the client
    /// went away.
    abandoned: Arc<Notify>,
}

struct Server {
    base_url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    abandoned: Arc<Notify>,
}

impl Server {
    async fn start(script: impl Fn() -> Reply + Send + Sync + 'static) -> Self {
        let fake = Fake {
            seen: Arc::default(),
            script: Arc::new(script),
            abandoned: Arc::default(),
        };
        let (seen, abandoned) = (fake.seen.clone(), fake.abandoned.clone());
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(fake);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            base_url,
            seen,
            abandoned,
        }
    }

    /// A client of this server with `timeout`.
    fn client(&self, timeout: Duration) -> OpenAiChat {
        OpenAiChat::new(settings(&self.base_url, timeout)).unwrap()
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn settings(base_url: &str, timeout: Duration) -> OpenAiChatSettings {
    OpenAiChatSettings {
        base_url: base_url.to_owned(),
        model: "fake-chat".to_owned(),
        api_key: Some("sk-test".to_owned()),
        timeout,
        temperature: 0.2,
        max_tokens: 256,
    }
}

async fn chat(State(fake): State<Fake>, headers: HeaderMap, body: Json<Value>) -> Response {
    let header = |name| {
        headers
            .get(name)
            .map(|v: &axum::http::HeaderValue| v.to_str().unwrap().to_owned())
    };
    fake.seen.lock().unwrap().push(Seen {
        authorization: header(header::AUTHORIZATION),
        accept: header(header::ACCEPT),
        body: body.0,
    });
    match (fake.script)() {
        Reply::Sse(parts) => {
            let body = ScriptedBody {
                parts: parts.into(),
                abandoned: fake.abandoned.clone(),
            };
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(body.into_stream()))
                .unwrap()
        }
        Reply::Status(status, body) => {
            (StatusCode::from_u16(status).unwrap(), Json(body)).into_response()
        }
        Reply::Json(body) => Json(body).into_response(),
        Reply::Hang => std::future::pending().await,
    }
}

/// A response body sent part by part; it tells when it is dropped before its end.
struct ScriptedBody {
    parts: VecDeque<Part>,
    abandoned: Arc<Notify>,
}

impl ScriptedBody {
    fn into_stream(self) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
        stream::unfold(self, |mut body| async move {
            loop {
                match body.parts.pop_front()? {
                    Part::Bytes(bytes) => return Some((Ok(bytes), body)),
                    Part::Wait(pause) => tokio::time::sleep(pause).await,
                    Part::Hang => std::future::pending::<()>().await,
                    Part::Fail => {
                        let error = std::io::Error::other("the fake server drops the connection");
                        return Some((Err(error), body));
                    }
                }
            }
        })
    }
}

impl Drop for ScriptedBody {
    fn drop(&mut self) {
        if !self.parts.is_empty() {
            self.abandoned.notify_one();
        }
    }
}

fn event(value: Value) -> Part {
    Part::Bytes(format!("data: {value}\n\n").into_bytes())
}

fn role() -> Part {
    event(json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}))
}

fn content(text: &str) -> Part {
    event(json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}))
}

fn finish(reason: &str) -> Part {
    event(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
}

fn done() -> Part {
    Part::Bytes(b"data: [DONE]\n\n".to_vec())
}

fn grounding() -> Grounding {
    Grounding {
        question: "How is the pump primed?".into(),
        history: Vec::new(),
        passages: vec![Passage {
            index: 1,
            document_name: "manual.pdf".into(),
            page: Some(4),
            section: None,
            content: "Fill the pump housing with water before starting.".into(),
            score: 1.0,
        }],
    }
}

/// Every item of `stream`, failing the test if it does not end within 10 s.
async fn collect(stream: TextStream) -> Vec<Result<String, GenerateError>> {
    tokio::time::timeout(Duration::from_secs(10), stream.collect())
        .await
        .expect("the stream did not end")
}

fn texts(items: &[Result<String, GenerateError>]) -> String {
    items
        .iter()
        .map(|item| item.as_ref().unwrap().as_str())
        .collect()
}

#[tokio::test]
async fn a_normal_stream_yields_the_pieces_in_order() {
    let server = Server::start(|| {
        Reply::Sse(vec![
            role(),
            content("The pump"),
            content(" is primed with water"),
            content(" [1]."),
            finish("stop"),
            done(),
        ])
    })
    .await;
    let chat = server.client(Duration::from_secs(5));
    let items = collect(chat.answer(&grounding()).await.unwrap()).await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert_eq!(texts(&items), "The pump is primed with water [1].");

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer sk-test"));
    assert_eq!(seen[0].accept.as_deref(), Some("text/event-stream"));
    let body = &seen[0].body;
    assert_eq!(body["model"], "fake-chat");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 256);
    assert!((body["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    assert_eq!(body["messages"][0]["role"], "system");
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("[1] manual.pdf, page 4\nFill the pump housing with water"));
    let last = body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"], "How is the pump primed?");
}

#[tokio::test]
async fn chunks_split_anywhere_give_the_same_text() {
    let pieces = ["Café ", "日本", "語", " ok [1]."];
    let mut body = String::from(": keep-alive\r\n\r\n");
    for piece in pieces {
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": piece}}]});
        body.push_str(&format!("data: {chunk}\r\n\r\n"));
    }
    body.push_str("data: [DONE]\r\n\r\n");
    let bytes = body.into_bytes();
    // Inside "é" (2 bytes) and "日" (3 bytes), between a CR and its LF, then every 7 bytes.
    let e_acute = bytes.windows(2).position(|w| w == "é".as_bytes()).unwrap();
    let nichi = bytes.windows(3).position(|w| w == "日".as_bytes()).unwrap();
    let cr = bytes.iter().position(|&b| b == b'\r').unwrap();
    let mut cuts = vec![e_acute + 1, nichi + 1, nichi + 2, cr + 1];
    cuts.extend((0..bytes.len()).step_by(7));
    cuts.sort_unstable();
    cuts.dedup();
    let server = Server::start(move || {
        let mut parts = Vec::new();
        let mut start = 0;
        for &cut in cuts.iter().chain([&bytes.len()]) {
            if cut > start {
                parts.push(Part::Bytes(bytes[start..cut].to_vec()));
                parts.push(Part::Wait(Duration::from_millis(2)));
                start = cut;
            }
        }
        Reply::Sse(parts)
    })
    .await;
    let chat = server.client(Duration::from_secs(5));
    let items = collect(chat.answer(&grounding()).await.unwrap()).await;
    assert_eq!(texts(&items), pieces.concat());
}

#[tokio::test]
async fn a_slow_but_steady_stream_is_not_cut_off() {
    let server = Server::start(|| {
        let mut parts = vec![role()];
        for word in ["slow ", "but ", "steady"] {
            parts.push(Part::Wait(Duration::from_millis(300)));
            parts.push(content(word));
        }
        parts.extend([finish("stop"), done()]);
        Reply::Sse(parts)
    })
    .await;
    let chat = server.client(Duration::from_secs(2));
    let items = collect(chat.answer(&grounding()).await.unwrap()).await;
    assert_eq!(texts(&items), "slow but steady");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = Server::start(|| Reply::Hang).await;
    let chat = server.client(Duration::from_millis(300));
    let started = Instant::now();
    let error = chat.answer(&grounding()).await.err().unwrap();
    assert!(matches!(error, GenerateError::Timeout { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(error.to_string().contains("0.3 s"), "{error}");
}

#[tokio::test]
async fn a_stream_that_stalls_ends_with_a_timeout() {
    let server = Server::start(|| Reply::Sse(vec![role(), content("first"), Part::Hang])).await;
    let chat = server.client(Duration::from_millis(300));
    let mut stream = chat.answer(&grounding()).await.unwrap();
    let started = Instant::now();
    assert_eq!(stream.next().await, Some(Ok("first".to_owned())));
    let error = stream.next().await.unwrap().unwrap_err();
    assert!(matches!(error, GenerateError::Timeout { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(stream.next().await, None);
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_an_interruption() {
    let server = Server::start(|| {
        Reply::Sse(vec![
            role(),
            content("half"),
            // Sent together, the failure would beat the headers out of the server.
            Part::Wait(Duration::from_millis(50)),
            Part::Fail,
        ])
    })
    .await;
    let chat = server.client(Duration::from_secs(5));
    let items = collect(chat.answer(&grounding()).await.unwrap()).await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0], Ok("half".to_owned()));
    assert!(
        matches!(items[1], Err(GenerateError::Interrupted { .. })),
        "{items:?}"
    );
}

#[tokio::test]
async fn a_body_ending_without_done_or_finish_reason_is_an_interruption() {
    let server = Server::start(|| Reply::Sse(vec![role(), content("half")])).await;
    let chat = server.client(Duration::from_secs(5));
    let items = collect(chat.answer(&grounding()).await.unwrap()).await;
    assert_eq!(items[0], Ok("half".to_owned()));
    assert!(
        matches!(&items[1], Err(GenerateError::Interrupted { reason, .. }) if reason.contains("[DONE]")),
        "{items:?}"
    );
    assert_eq!(items.len(), 2);
}

#[tokio::test]
async fn garbage_in_the_stream_is_a_protocol_error() {
    let server = Server::start(|| {
        Reply::Sse(vec![
            role(),
            Part::Bytes(b"data: {not json\n\n".to_vec()),
            content("never seen"),
            done(),
        ])
    })
    .await;
    let chat = server.client(Duration::from_secs(5));
    let items = collect(chat.answer(&grounding()).await.unwrap()).await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert!(
        matches!(&items[0], Err(GenerateError::Protocol { message, .. }) if message.contains("{not json")),
        "{items:?}"
    );
}

#[tokio::test]
async fn an_error_status_carries_the_servers_message() {
    let server = Server::start(|| {
        Reply::Status(
            500,
            json!({"error": {"message": "model not loaded", "type": "server_error"}}),
        )
    })
    .await;
    let error = server
        .client(Duration::from_secs(5))
        .answer(&grounding())
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&error, GenerateError::Remote { status: 500, message, .. } if message.contains("model not loaded")),
        "{error:?}"
    );

    let server = Server::start(|| Reply::Status(401, json!({"error": "invalid api key"}))).await;
    let error = server
        .client(Duration::from_secs(5))
        .answer(&grounding())
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&error, GenerateError::Remote { status: 401, message, .. }
            if message.contains("invalid api key") && message.contains("API key")),
        "{error:?}"
    );
    assert!(!error.to_string().contains("sk-test"));
}

#[tokio::test]
async fn a_closed_port_is_unreachable() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let chat = OpenAiChat::new(settings(&base_url, Duration::from_secs(5))).unwrap();
    let error = chat.answer(&grounding()).await.err().unwrap();
    assert!(
        matches!(error, GenerateError::Unreachable { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_error_event_mid_stream_ends_it_with_the_message() {
    let server = Server::start(|| {
        Reply::Sse(vec![
            role(),
            content("partial"),
            event(json!({"error": {"message": "overloaded", "type": "server_error"}})),
            content("never seen"),
        ])
    })
    .await;
    let chat = server.client(Duration::from_secs(5));
    let items = collect(chat.answer(&grounding()).await.unwrap()).await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0], Ok("partial".to_owned()));
    let error = items[1].as_ref().unwrap_err();
    assert!(error.to_string().contains("overloaded"), "{error}");
}

#[tokio::test]
async fn a_finish_reason_then_close_without_done_ends_normally() {
    let server =
        Server::start(|| Reply::Sse(vec![role(), content("complete"), finish("length")])).await;
    let chat = server.client(Duration::from_secs(5));
    let items = collect(chat.answer(&grounding()).await.unwrap()).await;
    assert_eq!(items, [Ok("complete".to_owned())]);
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let server = Server::start(|| {
        let mut parts = vec![role()];
        for _ in 0..200 {
            parts.push(content("word "));
            parts.push(Part::Wait(Duration::from_millis(50)));
        }
        parts.push(done());
        Reply::Sse(parts)
    })
    .await;
    let chat = server.client(Duration::from_secs(5));
    let mut stream = chat.answer(&grounding()).await.unwrap();
    assert_eq!(stream.next().await, Some(Ok("word ".to_owned())));
    drop(stream);
    let noticed = tokio::time::timeout(Duration::from_secs(1), server.abandoned.notified()).await;
    assert!(noticed.is_ok(), "the server did not see the client go away");
}

#[tokio::test]
async fn condense_returns_the_rewritten_question() {
    let server = Server::start(|| {
        Reply::Json(json!({
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant",
                "content": "  \"What are the side effects of ibuprofen?\"\n"
            }}]
        }))
    })
    .await;
    let chat = server.client(Duration::from_secs(5));

    assert_eq!(chat.condense(&[], "and its side effects?").await, Ok(None));
    assert!(server.seen().is_empty(), "no history must mean no request");

    let history = [Turn {
        question: "What is ibuprofen?".into(),
        answer: "A painkiller [1].".into(),
    }];
    let condensed = chat.condense(&history, "and its side effects?").await;
    assert_eq!(
        condensed,
        Ok(Some("What are the side effects of ibuprofen?".to_owned()))
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body["stream"], false);
    assert_eq!(seen[0].body["temperature"], 0.0);
    assert_eq!(seen[0].body["max_tokens"], 128);
    let transcript = seen[0].body["messages"][1]["content"].as_str().unwrap();
    assert!(transcript.ends_with("and its side effects?"));
}

#[tokio::test]
async fn condense_maps_errors_like_answer() {
    let server = Server::start(|| Reply::Status(503, json!({"error": "loading model"}))).await;
    let history = [Turn {
        question: "q".into(),
        answer: "a".into(),
    }];
    let error = server
        .client(Duration::from_secs(5))
        .condense(&history, "and?")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, GenerateError::Remote { status: 503, message, .. } if message == "loading model"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_json_answer_to_a_streaming_request_is_one_piece() {
    let server = Server::start(|| {
        Reply::Json(json!({
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "All at once [1]."}}]
        }))
    })
    .await;
    let chat = server.client(Duration::from_secs(5));
    let items = collect(chat.answer(&grounding()).await.unwrap()).await;
    assert_eq!(items, [Ok("All at once [1].".to_owned())]);
}

#[tokio::test]
async fn json_without_an_answer_is_a_protocol_error() {
    let server = Server::start(|| Reply::Json(json!({"unexpected": true}))).await;
    let error = server
        .client(Duration::from_secs(5))
        .answer(&grounding())
        .await
        .err()
        .unwrap();
    assert!(matches!(error, GenerateError::Protocol { .. }), "{error:?}");
}

#[test]
fn bad_settings_are_rejected_with_clear_messages() {
    let rejected = |change: &dyn Fn(&mut OpenAiChatSettings)| {
        let mut settings = settings("http://localhost:11434/v1", Duration::from_secs(5));
        change(&mut settings);
        match OpenAiChat::new(settings) {
            Err(GenerateError::Settings(message)) => message,
            other => panic!("expected a settings error, got {other:?}"),
        }
    };
    let message = rejected(&|s| s.base_url = "not a url".into());
    assert!(message.contains("\"not a url\""), "{message}");
    assert!(message.contains("http://localhost:11434/v1"), "{message}");
    let message = rejected(&|s| s.base_url = "ftp://models.example/v1".into());
    assert!(message.contains("http:// or https://"), "{message}");
    let message = rejected(&|s| s.base_url = "localhost:11434/v1".into());
    assert!(message.contains("\"localhost:11434/v1\""), "{message}");
    let message = rejected(&|s| s.model = "  ".into());
    assert!(message.contains("model name is empty"), "{message}");
    let message = rejected(&|s| s.max_tokens = 0);
    assert!(message.contains("max_tokens"), "{message}");
    let message = rejected(&|s| s.timeout = Duration::ZERO);
    assert!(message.contains("timeout"), "{message}");
}

#[test]
fn the_name_shows_the_model_and_the_server() {
    let chat = OpenAiChat::new(settings(
        "http://localhost:11434/v1/",
        Duration::from_secs(5),
    ))
    .unwrap();
    assert_eq!(chat.name(), "fake-chat at localhost:11434");
    assert!(!chat.is_extractive());
    let chat = OpenAiChat::new(settings(
        "https://api.openai.com/v1",
        Duration::from_secs(5),
    ))
    .unwrap();
    assert_eq!(chat.name(), "fake-chat at api.openai.com");
    let debug = format!("{:?}", settings("http://x/v1", Duration::from_secs(1)));
    assert!(!debug.contains("sk-test"), "{debug}");
}
