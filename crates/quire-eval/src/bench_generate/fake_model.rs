//! A fake OpenAI-compatible chat server that streams scripted answers: it notes when each
//! streaming request arrives and when each piece leaves, and can hold an answer back.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

/// Interval between the pieces the fake model streams.
const PIECE_INTERVAL: Duration = Duration::from_millis(2);

/// What the fake model does with the next streaming requests.
#[derive(Debug, Clone, Copy)]
pub(super) struct Script {
    /// Pieces streamed, [`PIECE_INTERVAL`] apart.
    pub(super) pieces: usize,
    /// Wait for [`FakeModel::release`] before the first piece.
    pub(super) gated: bool,
}

impl Script {
    /// One piece at once: the answer costs next to nothing.
    pub(super) const SHORT: Self = Self {
        pieces: 1,
        gated: false,
    };
}

/// State the fake model's handler shares with the bench.
struct FakeShared {
    script: Mutex<Script>,
    /// When each streaming request arrived.
    arrivals: mpsc::UnboundedSender<Instant>,
    /// When each piece (a unique word) was handed to the response body.
    sent: Mutex<HashMap<String, Instant>>,
    gate: Notify,
    next_word: AtomicU64,
}

impl FakeShared {
    fn sent(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        self.sent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn script(&self) -> Script {
        *self.script.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A fake OpenAI-compatible chat server on 127.0.0.1:0.
pub(super) struct FakeModel {
    /// Its base URL (`…/v1`).
    pub(super) url: String,
    shared: Arc<FakeShared>,
    pub(super) arrivals: mpsc::UnboundedReceiver<Instant>,
    task: JoinHandle<()>,
}

impl FakeModel {
    pub(super) async fn start() -> anyhow::Result<Self> {
        let (sender, arrivals) = mpsc::unbounded_channel();
        let shared = Arc::new(FakeShared {
            script: Mutex::new(Script::SHORT),
            arrivals: sender,
            sent: Mutex::default(),
            gate: Notify::new(),
            next_word: AtomicU64::new(0),
        });
        let router = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(fake_chat))
            .with_state(Arc::clone(&shared));
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("could not listen on 127.0.0.1 for the fake model")?;
        let addr = listener.local_addr()?;
        // Like the servers it stands for (Go's, which Ollama uses, sets it on every
        // connection): without it, Nagle's algorithm holds small pieces back for an ACK.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                eprintln!("the fake model stopped: {e}");
            }
        });
        Ok(Self {
            url: format!("http://{addr}/v1"),
            shared,
            arrivals,
            task,
        })
    }

    pub(super) fn set_script(&self, script: Script) {
        *self
            .shared
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = script;
    }

    /// Lets the gated answer go on (and answers later requests at once).
    pub(super) fn release(&self) {
        self.set_script(Script::SHORT);
        self.shared.gate.notify_one();
    }

    /// When the piece `text` was sent, forgetting it.
    pub(super) fn take_sent(&self, text: &str) -> Option<Instant> {
        self.shared.sent().remove(text)
    }

    pub(super) fn drain_arrivals(&mut self) {
        while self.arrivals.try_recv().is_ok() {}
        self.shared.sent().clear();
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `POST /v1/chat/completions`: notes the arrival and streams the current script.
async fn fake_chat(
    State(shared): State<Arc<FakeShared>>,
    axum::Json(request): axum::Json<Value>,
) -> Response {
    let arrived = Instant::now();
    if request["stream"] != true {
        // Only follow-ups are condensed (without streaming), and the bench asks none.
        return (
            StatusCode::BAD_REQUEST,
            "the bench's fake model only streams",
        )
            .into_response();
    }
    let _ = shared.arrivals.send(arrived);
    let script = shared.script();
    let frames = futures_util::stream::unfold(0, move |n| {
        let shared = Arc::clone(&shared);
        async move {
            let frame = fake_frame(&shared, script, n).await?;
            Some((Ok::<_, Infallible>(frame), n + 1))
        }
    });
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(frames),
    )
        .into_response()
}

/// The `n`th frame of a scripted answer: a unique word per piece, then the finish.
async fn fake_frame(shared: &FakeShared, script: Script, n: usize) -> Option<String> {
    if n == 0 && script.gated {
        shared.gate.notified().await;
    }
    if n < script.pieces {
        if n > 0 {
            tokio::time::sleep(PIECE_INTERVAL).await;
        }
        let word = format!("w{} ", shared.next_word.fetch_add(1, Ordering::Relaxed));
        let piece =
            json!({"choices": [{"index": 0, "delta": {"content": word}, "finish_reason": null}]});
        let frame = format!("data: {piece}\n\n");
        shared.sent().insert(word, Instant::now());
        return Some(frame);
    }
    let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    (n == script.pieces).then(|| format!("data: {end}\n\ndata: [DONE]\n\n"))
}
