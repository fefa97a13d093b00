//! `HttpReranker` against a fake reranking server on loopback that records every request and
//! answers as each test scripts it: Cohere's `{"results": …}`, text-embeddings-inference's bare
//! list (and its wish for `texts`), errors, garbage, or not at all.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use quire_models::{HttpReranker, ModelError, RerankSettings, Reranker};
use serde_json::{Value, json};

/// One recorded request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    authorization: Option<String>,
    body: Value,
}

/// How the fake answers.
#[derive(Clone, Copy)]
enum Reply {
    /// `{"results": [{"index", "relevance_score"}]}`, best first, scored by [`score`].
    Cohere,
    /// `[{"index", "score"}]`, scored by [`score`]; a request without `texts` is refused with
    /// 422, as text-embeddings-inference refuses it.
    Tei,
    /// This status and JSON body.
    Error(u16),
    /// This body with status 200.
    Raw(&'static str),
    /// Nothing, ever.
    Hang,
}

#[derive(Clone)]
struct Fake {
    seen: Arc<Mutex<Vec<Seen>>>,
    reply: Reply,
}

struct Server {
    root: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    async fn start(reply: Reply) -> Self {
        let fake = Fake {
            seen: Arc::default(),
            reply,
        };
        let seen = fake.seen.clone();
        let app = axum::Router::new()
            .route("/rerank", post(rerank))
            .route("/v1/rerank", post(rerank))
            .with_state(fake);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let root = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { root, seen }
    }

    fn settings(&self, base_url: String) -> RerankSettings {
        RerankSettings {
            base_url,
            model: Some("fake-reranker".into()),
            api_key: None,
            timeout: Duration::from_secs(10),
        }
    }

    fn reranker(&self) -> HttpReranker {
        HttpReranker::new(self.settings(format!("{}/v1", self.root))).unwrap()
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// The fake model's relevance: 1.0 for a passage naming "pump", else shorter is better.
fn score(text: &str) -> f32 {
    if text.contains("pump") {
        1.0
    } else {
        1.0 / (2.0 + text.len() as f32)
    }
}

async fn rerank(
    State(fake): State<Fake>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Json<Value>,
) -> Response {
    fake.seen.lock().unwrap().push(Seen {
        path: uri.path().to_owned(),
        authorization: headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_owned()),
        body: body.0.clone(),
    });
    let passages = |field: &str| -> Option<Vec<String>> {
        serde_json::from_value(body.get(field)?.clone()).ok()
    };
    let ranked = |texts: Vec<String>, key: &str| -> Vec<Value> {
        let mut scored: Vec<(usize, f32)> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (i, score(t)))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored
            .into_iter()
            .map(|(index, s)| json!({"index": index, key: s}))
            .collect()
    };
    match fake.reply {
        Reply::Cohere => {
            let results = ranked(passages("documents").unwrap(), "relevance_score");
            Json(json!({"id": "x", "results": results, "meta": {}})).into_response()
        }
        Reply::Tei => match passages("texts") {
            Some(texts) => Json(Value::Array(ranked(texts, "score"))).into_response(),
            None => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "Failed to deserialize the JSON body into the target type: missing field `texts`",
            )
                .into_response(),
        },
        Reply::Error(status) => (
            StatusCode::from_u16(status).unwrap(),
            Json(json!({"error": {"message": "reranker crashed"}})),
        )
            .into_response(),
        Reply::Raw(text) => (StatusCode::OK, text).into_response(),
        Reply::Hang => std::future::pending().await,
    }
}

fn passages() -> Vec<String> {
    vec![
        "a long passage about valves and seals".into(),
        "short one".into(),
        "prime the pump first".into(),
    ]
}

#[tokio::test]
async fn the_request_has_the_shared_shape_and_scores_come_back_in_document_order() {
    let server = Server::start(Reply::Cohere).await;
    let mut settings = server.settings(format!("{}/v1/", server.root));
    settings.api_key = Some("rr-secret".into());
    let reranker = HttpReranker::new(settings.clone()).unwrap();
    assert_eq!(reranker.endpoint(), format!("{}/v1/rerank", server.root));
    let scores = reranker.rerank("how to prime", &passages()).await.unwrap();
    let expected: Vec<f32> = passages().iter().map(|p| score(p)).collect();
    assert_eq!(scores, expected);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/rerank");
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer rr-secret"));
    assert_eq!(
        seen[0].body,
        json!({
            "model": "fake-reranker",
            "query": "how to prime",
            "documents": passages(),
            "top_n": 3,
        })
    );
    assert!(!format!("{settings:?}").contains("rr-secret"));
}

#[tokio::test]
async fn the_base_url_is_used_as_given_and_the_model_left_out_when_unset() {
    let server = Server::start(Reply::Cohere).await;
    let mut settings = server.settings(server.root.clone());
    settings.model = None;
    let reranker = HttpReranker::new(settings).unwrap();
    reranker.rerank("q", &passages()).await.unwrap();
    let seen = server.seen();
    assert_eq!(seen[0].path, "/rerank", "nothing is added to the base URL");
    assert!(seen[0].body.get("model").is_none(), "{:?}", seen[0].body);
}

#[tokio::test]
async fn a_bare_list_with_texts_is_understood_and_texts_remembered() {
    let server = Server::start(Reply::Tei).await;
    let reranker = server.reranker();
    let expected: Vec<f32> = passages().iter().map(|p| score(p)).collect();
    assert_eq!(reranker.rerank("q", &passages()).await.unwrap(), expected);
    assert_eq!(reranker.rerank("q", &passages()).await.unwrap(), expected);
    let seen = server.seen();
    assert_eq!(seen.len(), 3, "asked again once with texts, then always so");
    assert!(seen[0].body.get("documents").is_some());
    for later in &seen[1..] {
        assert_eq!(later.body["texts"], json!(passages()));
        assert!(later.body.get("documents").is_none());
    }
}

#[tokio::test]
async fn an_error_status_carries_the_servers_message() {
    let server = Server::start(Reply::Error(500)).await;
    let error = server
        .reranker()
        .rerank("q", &passages())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ModelError::Remote { status: 500, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("reranker crashed"), "{error}");
    let server = Server::start(Reply::Error(404)).await;
    let error = server
        .reranker()
        .rerank("q", &passages())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("{base_url}/rerank"), "{error}");
}

#[tokio::test]
async fn garbage_is_a_protocol_error() {
    for (body, needle) in [
        ("<html>Welcome to nginx!</html>", "not a rerank result list"),
        (
            r#"{"results": [{"index": 0, "relevance_score": 0.5}]}"#,
            "document 1 has no score",
        ),
        (
            r#"{"results": [{"index": 7, "relevance_score": 0.5}]}"#,
            "out of range",
        ),
        (
            r#"[{"index": 0, "score": 0.5}, {"index": 0, "score": 0.4}]"#,
            "appears twice",
        ),
    ] {
        let server = Server::start(Reply::Raw(body)).await;
        let error = server
            .reranker()
            .rerank("q", &passages())
            .await
            .unwrap_err();
        assert!(matches!(error, ModelError::Protocol { .. }), "{error:?}");
        assert!(error.to_string().contains(needle), "{body}: {error}");
    }
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_on_time() {
    let server = Server::start(Reply::Hang).await;
    let mut settings = server.settings(server.root.clone());
    settings.timeout = Duration::from_millis(300);
    let reranker = HttpReranker::new(settings).unwrap();
    let started = Instant::now();
    let error = reranker.rerank("q", &passages()).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(error, ModelError::Timeout { .. }), "{error:?}");
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(3),
        "gave up after {elapsed:?}"
    );
}

#[tokio::test]
async fn nothing_to_rerank_sends_nothing() {
    let server = Server::start(Reply::Cohere).await;
    assert!(server.reranker().rerank("q", &[]).await.unwrap().is_empty());
    assert!(server.seen().is_empty());
}

#[test]
fn unusable_settings_are_refused() {
    for (base_url, needle) in [
        ("localhost:8080", "http:// or https://"),
        ("not a url", "is not a URL"),
    ] {
        let settings = RerankSettings {
            base_url: base_url.into(),
            model: None,
            api_key: None,
            timeout: Duration::from_secs(1),
        };
        let error = HttpReranker::new(settings).unwrap_err();
        assert!(matches!(error, ModelError::Settings(_)), "{error:?}");
        assert!(error.to_string().contains(needle), "{base_url}: {error}");
    }
}
