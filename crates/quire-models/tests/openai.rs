//! `OpenAiEmbedder` against a fake OpenAI-compatible server on loopback that records every
//! request and answers as each test scripts it: in order or shuffled, with errors, garbage,
//! the wrong number of vectors, or not at all.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use quire_models::{Embedder, ModelError, OpenAiEmbedder, OpenAiSettings, Purpose};
use serde_json::{Value, json};

/// Width the fake model answers with when the request names none.
const NATIVE_WIDTH: usize = 8;

/// One recorded request.
#[derive(Debug, Clone)]
struct Seen {
    authorization: Option<String>,
    body: Value,
}

/// How the fake answers request number `n` (0 is the connect probe).
enum Reply {
    /// Embeddings of the inputs (see [`fake_vector`]), `data` reversed when `shuffled`.
    Embeddings { shuffled: bool },
    /// The first `n` embeddings only.
    Truncated(usize),
    /// Embeddings `width` wide whatever was asked.
    Width(usize),
    /// This status and JSON body.
    Error(u16, Value),
    /// This body with status 200.
    Raw(&'static str),
    /// Nothing, ever.
    Hang,
}

type Script = Arc<dyn Fn(usize) -> Reply + Send + Sync>;

#[derive(Clone)]
struct Fake {
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Script,
}

struct Server {
    base_url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    async fn start(script: impl Fn(usize) -> Reply + Send + Sync + 'static) -> Self {
        let fake = Fake {
            seen: Arc::default(),
            script: Arc::new(script),
        };
        let seen = fake.seen.clone();
        let app = axum::Router::new()
            .route("/v1/embeddings", post(embeddings))
            .with_state(fake);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { base_url, seen }
    }

    fn settings(&self) -> OpenAiSettings {
        let mut settings = OpenAiSettings::new(&self.base_url, "fake-embed");
        settings.retry_backoff = Duration::from_millis(1);
        settings
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The `input` arrays of all requests after the probe.
    fn inputs(&self) -> Vec<Vec<String>> {
        self.seen()[1..]
            .iter()
            .map(|s| serde_json::from_value(s.body["input"].clone()).unwrap())
            .collect()
    }
}

/// The fake model: `[n + 1, 1, 1, …]` for a text ending in the number `n` (0 otherwise), so
/// after normalisation the ratio of the first two values tells which text a vector belongs
/// to. Never unit length, so the client's normalisation is visible.
fn fake_vector(text: &str, width: usize) -> Vec<f32> {
    let n: f32 = text
        .rsplit(' ')
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or(0.0);
    let mut v = vec![1.0; width];
    v[0] = n + 1.0;
    v
}

/// Which text a normalised vector came from (inverse of [`fake_vector`]).
fn text_number(vector: &[f32]) -> usize {
    (vector[0] / vector[1] - 1.0).round() as usize
}

async fn embeddings(State(fake): State<Fake>, headers: HeaderMap, body: Json<Value>) -> Response {
    let n = {
        let mut seen = fake.seen.lock().unwrap();
        seen.push(Seen {
            authorization: headers
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_owned()),
            body: body.0.clone(),
        });
        seen.len() - 1
    };
    let inputs: Vec<String> = serde_json::from_value(body["input"].clone()).unwrap();
    let asked = body["dimensions"]
        .as_u64()
        .map_or(NATIVE_WIDTH, |d| d as usize);
    let data = |width: usize| -> Vec<Value> {
        inputs
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": fake_vector(t, width)}))
            .collect()
    };
    let answer = |data: Vec<Value>| {
        Json(
            json!({"object": "list", "model": body["model"], "data": data,
                    "usage": {"prompt_tokens": 1, "total_tokens": 1}}),
        )
        .into_response()
    };
    match (fake.script)(n) {
        Reply::Embeddings { shuffled } => {
            let mut data = data(asked);
            if shuffled {
                data.reverse();
            }
            answer(data)
        }
        Reply::Truncated(keep) => answer(data(asked).into_iter().take(keep).collect()),
        Reply::Width(width) => answer(data(width)),
        Reply::Error(status, body) => {
            (StatusCode::from_u16(status).unwrap(), Json(body)).into_response()
        }
        Reply::Raw(text) => (StatusCode::OK, text).into_response(),
        Reply::Hang => std::future::pending().await,
    }
}

fn ok(_: usize) -> Reply {
    Reply::Embeddings { shuffled: false }
}

fn texts(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("chunk number {i}")).collect()
}

#[tokio::test]
async fn batches_in_order_and_restores_input_order_from_shuffled_answers() {
    let server = Server::start(|_| Reply::Embeddings { shuffled: true }).await;
    let mut settings = server.settings();
    settings.batch_size = 64;
    let embedder = OpenAiEmbedder::connect(settings).await.unwrap();

    let input = texts(150);
    let vectors = embedder.embed(&input, Purpose::Document).await.unwrap();

    let batches = server.inputs();
    assert_eq!(
        batches.iter().map(Vec::len).collect::<Vec<_>>(),
        [64, 64, 22]
    );
    assert_eq!(batches.concat(), input, "batches go out in input order");
    assert_eq!(vectors.len(), 150);
    for (i, vector) in vectors.iter().enumerate() {
        assert_eq!(text_number(vector), i, "vector {i} belongs to another text");
    }
    let body = &server.seen()[1].body;
    assert_eq!(body["model"], "fake-embed");
    assert_eq!(body["encoding_format"], "float");
    assert!(
        body.get("dimensions").is_none(),
        "no dimensions unless set: {body}"
    );
}

#[tokio::test]
async fn vectors_are_normalised_whatever_the_server_returns() {
    let server = Server::start(ok).await;
    let embedder = OpenAiEmbedder::connect(server.settings()).await.unwrap();
    let vectors = embedder.embed(&texts(3), Purpose::Query).await.unwrap();
    for (i, vector) in vectors.iter().enumerate() {
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "vector {i} has norm {norm}");
        let raw = fake_vector(&format!("chunk number {i}"), NATIVE_WIDTH);
        let raw_norm: f32 = raw.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((vector[0] - raw[0] / raw_norm).abs() < 1e-6);
    }
}

#[tokio::test]
async fn the_probe_learns_the_width_and_names_the_model() {
    let server = Server::start(ok).await;
    let embedder = OpenAiEmbedder::connect(server.settings()).await.unwrap();
    assert_eq!(embedder.dimensions(), NATIVE_WIDTH);
    let host = server.base_url.trim_start_matches("http://");
    let host = host.trim_end_matches("/v1");
    assert_eq!(embedder.model_id(), format!("openai:fake-embed@{host}/8d"));
    assert_eq!(server.seen().len(), 1, "connect sends exactly one probe");
    assert_eq!(server.seen()[0].body["input"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn configured_dimensions_are_sent_and_required() {
    let server = Server::start(ok).await;
    let mut settings = server.settings();
    settings.dimensions = Some(5);
    let embedder = OpenAiEmbedder::connect(settings).await.unwrap();
    assert_eq!(embedder.dimensions(), 5);
    assert!(
        embedder.model_id().ends_with("/5d"),
        "{}",
        embedder.model_id()
    );
    let vectors = embedder.embed(&texts(2), Purpose::Document).await.unwrap();
    assert!(vectors.iter().all(|v| v.len() == 5));
    assert!(server.seen().iter().all(|s| s.body["dimensions"] == 5));

    // A server that ignores `dimensions` fails at connect, not at the first document.
    let ignoring = Server::start(|_| Reply::Width(NATIVE_WIDTH)).await;
    let mut settings = ignoring.settings();
    settings.dimensions = Some(5);
    let error = OpenAiEmbedder::connect(settings).await.unwrap_err();
    assert!(matches!(error, ModelError::Protocol { .. }), "{error:?}");
    assert!(
        error.to_string().contains("has 8 values, expected 5"),
        "{error}"
    );
}

#[tokio::test]
async fn the_api_key_is_sent_as_a_bearer_token_and_never_printed() {
    let server = Server::start(ok).await;
    let mut settings = server.settings();
    settings.api_key = Some("sk-very-secret".to_owned());
    let embedder = OpenAiEmbedder::connect(settings.clone()).await.unwrap();
    embedder.embed(&texts(1), Purpose::Query).await.unwrap();
    for seen in server.seen() {
        assert_eq!(seen.authorization.as_deref(), Some("Bearer sk-very-secret"));
    }
    assert!(!format!("{settings:?}").contains("sk-very-secret"));
    assert!(!format!("{embedder:?}").contains("sk-very-secret"));
    assert!(format!("{settings:?}").contains("<redacted>"));

    let anonymous = Server::start(ok).await;
    OpenAiEmbedder::connect(anonymous.settings()).await.unwrap();
    assert_eq!(anonymous.seen()[0].authorization, None);
}

#[tokio::test]
async fn prefixes_follow_the_purpose_and_change_the_model_id() {
    let server = Server::start(ok).await;
    let plain = OpenAiEmbedder::connect(server.settings()).await.unwrap();
    let mut settings = server.settings();
    settings.query_prefix = "query: ".to_owned();
    settings.document_prefix = "passage: ".to_owned();
    let prefixed = OpenAiEmbedder::connect(settings).await.unwrap();
    assert_ne!(plain.model_id(), prefixed.model_id());

    prefixed.embed(&texts(1), Purpose::Query).await.unwrap();
    prefixed.embed(&texts(1), Purpose::Document).await.unwrap();
    let seen = server.seen();
    let inputs: Vec<&str> = seen[seen.len() - 2..]
        .iter()
        .map(|s| s.body["input"][0].as_str().unwrap())
        .collect();
    assert_eq!(inputs, ["query: chunk number 0", "passage: chunk number 0"]);
}

#[tokio::test]
async fn nothing_to_embed_sends_nothing() {
    let server = Server::start(ok).await;
    let embedder = OpenAiEmbedder::connect(server.settings()).await.unwrap();
    assert!(
        embedder
            .embed(&[], Purpose::Document)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn an_error_status_carries_the_servers_message() {
    let server = Server::start(|_| {
        Reply::Error(
            401,
            json!({"error": {"message": "Incorrect API key provided: sk-wr***", "type": "invalid_request_error"}}),
        )
    })
    .await;
    let error = OpenAiEmbedder::connect(server.settings())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ModelError::Remote { status: 401, .. }),
        "{error:?}"
    );
    let text = error.to_string();
    for needle in [
        "HTTP 401",
        "Incorrect API key provided",
        "check the API key",
        server.base_url.as_str(),
    ] {
        assert!(text.contains(needle), "{needle:?} missing from {text:?}");
    }
    assert_eq!(server.seen().len(), 1, "a 401 is not retried");
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    // text-embeddings-inference words its errors as a string under `error`.
    let server = Server::start(|_| {
        Reply::Error(
            500,
            json!({"error": "model is overloaded", "error_type": "Overloaded"}),
        )
    })
    .await;
    let mut settings = server.settings();
    settings.max_retries = 2;
    let error = OpenAiEmbedder::connect(settings).await.unwrap_err();
    assert!(
        matches!(error, ModelError::Remote { status: 500, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("model is overloaded"), "{error}");
    assert_eq!(server.seen().len(), 3, "one attempt and two retries");
}

#[tokio::test]
async fn a_rate_limit_is_waited_out() {
    let server = Server::start(|n| match n {
        1 => Reply::Error(429, json!({"error": {"message": "Rate limit reached"}})),
        _ => Reply::Embeddings { shuffled: false },
    })
    .await;
    let embedder = OpenAiEmbedder::connect(server.settings()).await.unwrap();
    let vectors = embedder.embed(&texts(2), Purpose::Document).await.unwrap();
    assert_eq!(vectors.len(), 2);
    assert_eq!(server.seen().len(), 3, "probe, 429, retry");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_on_time() {
    let server = Server::start(|n| match n {
        0 => Reply::Embeddings { shuffled: false },
        _ => Reply::Hang,
    })
    .await;
    let mut settings = server.settings();
    settings.timeout = Duration::from_millis(300);
    let embedder = OpenAiEmbedder::connect(settings).await.unwrap();
    let started = Instant::now();
    let error = embedder
        .embed(&texts(1), Purpose::Document)
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(error, ModelError::Timeout { .. }), "{error:?}");
    assert!(
        error.to_string().contains("did not answer within 0.3 s"),
        "{error}"
    );
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(3),
        "gave up after {elapsed:?}"
    );
    assert_eq!(server.seen().len(), 2, "a timeout is not retried");
}

#[tokio::test]
async fn garbage_is_a_protocol_error() {
    let server = Server::start(|_| Reply::Raw("<html>Welcome to nginx!</html>")).await;
    let error = OpenAiEmbedder::connect(server.settings())
        .await
        .unwrap_err();
    assert!(matches!(error, ModelError::Protocol { .. }), "{error:?}");
    let text = error.to_string();
    assert!(text.contains("not an embeddings list"), "{text}");
    assert!(text.contains("Welcome to nginx"), "{text}");
}

#[tokio::test]
async fn the_wrong_number_of_vectors_is_refused() {
    let server = Server::start(|n| match n {
        0 => Reply::Embeddings { shuffled: false },
        _ => Reply::Truncated(2),
    })
    .await;
    let embedder = OpenAiEmbedder::connect(server.settings()).await.unwrap();
    let error = embedder
        .embed(&texts(3), Purpose::Document)
        .await
        .unwrap_err();
    assert!(matches!(error, ModelError::Protocol { .. }), "{error:?}");
    assert!(
        error.to_string().contains("asked for 3 embeddings, got 2"),
        "{error}"
    );
}

#[tokio::test]
async fn a_change_of_width_after_connect_is_refused() {
    let server = Server::start(|n| match n {
        0 => Reply::Embeddings { shuffled: false },
        _ => Reply::Width(NATIVE_WIDTH * 2),
    })
    .await;
    let embedder = OpenAiEmbedder::connect(server.settings()).await.unwrap();
    let error = embedder
        .embed(&texts(1), Purpose::Document)
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("has 16 values, expected 8"),
        "{error}"
    );
}

#[tokio::test]
async fn an_unreachable_server_is_named() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let settings = OpenAiSettings::new(format!("http://{address}/v1"), "fake-embed");
    let error = OpenAiEmbedder::connect(settings).await.unwrap_err();
    assert!(matches!(error, ModelError::Unreachable { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains(&format!("could not reach http://{address}/v1/embeddings")),
        "{text}"
    );
    assert!(text.to_lowercase().contains("refused"), "{text}");
}

#[tokio::test]
async fn unusable_settings_fail_before_any_request() {
    for (base_url, model, needle) in [
        (
            "localhost:11434",
            "m",
            "must start with http:// or https://",
        ),
        ("not a url", "m", "is not a URL"),
        ("http://localhost:11434/v1", " ", "model name is empty"),
    ] {
        let error = OpenAiEmbedder::connect(OpenAiSettings::new(base_url, model))
            .await
            .unwrap_err();
        assert!(matches!(error, ModelError::Settings(_)), "{error:?}");
        assert!(error.to_string().contains(needle), "{error}");
    }
    let mut settings = OpenAiSettings::new("http://localhost:11434/v1", "m");
    settings.batch_size = 0;
    let error = OpenAiEmbedder::connect(settings).await.unwrap_err();
    assert!(error.to_string().contains("batch_size"), "{error}");
}
