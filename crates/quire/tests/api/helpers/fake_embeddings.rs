//! A stand-in for an OpenAI-compatible `/v1/embeddings` server: each text becomes a hashed
//! bag of its words (so texts sharing words are close), and `failing` makes it answer 500.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use serde_json::{Value, json};

pub const DIMS: usize = 16;

pub struct Fake {
    pub base_url: String,
    pub failing: Arc<AtomicBool>,
}

pub async fn start() -> Fake {
    let failing = Arc::new(AtomicBool::new(false));
    let app = axum::Router::new()
        .route("/v1/embeddings", post(embeddings))
        .with_state(Arc::clone(&failing));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Fake {
        base_url: format!("http://{addr}/v1"),
        failing,
    }
}

async fn embeddings(
    State(failing): State<Arc<AtomicBool>>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    if failing.load(Ordering::Relaxed) {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": {"message": "model crashed"}})),
        );
    }
    let data: Vec<Value> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, text)| json!({"index": i, "embedding": bag_of_words(text.as_str().unwrap())}))
        .collect();
    (StatusCode::OK, Json(json!({"data": data})))
}

fn bag_of_words(text: &str) -> Vec<f32> {
    let mut v = vec![0.01f32; DIMS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 3)
    {
        let h = word
            .to_lowercase()
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        v[(h % DIMS as u64) as usize] += 1.0;
    }
    v
}
