//! A stand-in for an OpenAI-compatible chat server (`/v1/chat/completions`): streams a
//! scripted answer, or fails in the ways [`Upstream`] names, and records what it was asked.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::response::IntoResponse;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

/// How the fake chat server behaves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Upstream {
    /// Streams the scripted answer in pieces.
    Answer,
    /// Answers 500 with an OpenAI-style error.
    ServerError,
    /// Sends a non-JSON data line.
    Garbage,
    /// Sends a piece, then closes without finishing.
    DiesMidStream,
    /// Never sends its headers.
    Silent,
    /// Waits for `release` before each answer (for queue tests).
    Gated,
}

#[derive(Clone)]
pub(crate) struct Fake {
    mode: Upstream,
    answer: &'static str,
    /// Every request body, in arrival order.
    requests: Arc<Mutex<Vec<Value>>>,
    /// Notified once per answer a [`Upstream::Gated`] server may start.
    pub(crate) release: Arc<Notify>,
    /// Streaming requests whose client went away before the end.
    cancelled: Arc<Mutex<usize>>,
}

impl Fake {
    pub(crate) async fn start(mode: Upstream, answer: &'static str) -> (Self, String) {
        let fake = Fake {
            mode,
            answer,
            requests: Arc::default(),
            release: Arc::new(Notify::new()),
            cancelled: Arc::default(),
        };
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(chat))
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (fake, format!("http://{addr}/v1"))
    }

    /// Every request body (streaming or condensing), in arrival order.
    pub(crate) fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// Streaming requests whose client went away before the end.
    pub(crate) fn cancelled(&self) -> usize {
        *self.cancelled.lock().unwrap()
    }

    pub(crate) fn streaming_requests(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["stream"] == true)
            .collect()
    }
}

/// Counts a streaming response dropped before its end (the client cancelled).
struct CancelGuard {
    cancelled: Arc<Mutex<usize>>,
    finished: bool,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if !self.finished {
            *self.cancelled.lock().unwrap() += 1;
        }
    }
}

fn chunk(content: &str) -> String {
    format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]})
    )
}

async fn chat(
    State(fake): State<Fake>,
    axum::Json(request): axum::Json<Value>,
) -> axum::response::Response {
    fake.requests.lock().unwrap().push(request.clone());
    if request["stream"] != true {
        // The condensing call.
        return axum::Json(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "How is the circulation pump's mechanical seal replaced?"}, "finish_reason": "stop"}]})).into_response();
    }
    match fake.mode {
        Upstream::ServerError => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(json!({"error": {"message": "model not loaded"}})),
            )
                .into_response();
        }
        Upstream::Silent => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        _ => {}
    }
    let (tx, rx) = mpsc::channel::<Result<String, std::io::Error>>(4);
    tokio::spawn(async move {
        let mut guard = CancelGuard {
            cancelled: fake.cancelled.clone(),
            finished: false,
        };
        if fake.mode == Upstream::Gated {
            // Keep the stream open (and watch for the client leaving) until released.
            let _ = tx.send(Ok(": waiting\n\n".into())).await;
            tokio::select! {
                () = fake.release.notified() => {}
                () = tx.closed() => return,
            }
        }
        if fake.mode == Upstream::Garbage {
            let _ = tx.send(Ok("data: {not json\n\n".into())).await;
            guard.finished = true;
            return;
        }
        let words: Vec<&str> = fake.answer.split_inclusive(' ').collect();
        for word in &words {
            if tx.send(Ok(chunk(word))).await.is_err() {
                return;
            }
            if fake.mode == Upstream::DiesMidStream {
                let _ = tx
                    .send(Err(std::io::Error::other("connection reset")))
                    .await;
                guard.finished = true;
                return;
            }
        }
        let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
        let _ = tx
            .send(Ok(format!("data: {end}\n\ndata: [DONE]\n\n")))
            .await;
        guard.finished = true;
    });
    let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }));
    ([("content-type", "text/event-stream")], body).into_response()
}

pub(crate) fn with_llm(url: String) -> impl FnOnce(&mut quire::Config) {
    move |c| {
        c.llm.base_url = Some(url);
        c.llm.model = Some("fake-model".into());
        c.llm.timeout_seconds = 2;
    }
}
