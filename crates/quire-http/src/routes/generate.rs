//! `POST /api/v1/generate`: the question is validated and queued by the application layer
//! (`quire_app::answers::ask`), which refuses with a JSON error before the stream starts; then
//! the event stream is returned at once and each answer event becomes one SSE event.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use quire_app::answers::Citation;
use quire_app::answers::{AnswerEvent, AskRequest, ask};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::{Read, Require};
use crate::error::ErrorBody;
use crate::extract::ApiJson;
use crate::{ApiError, AppState};

/// A question.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct GenerateBody {
    /// The question, 1 to 4000 characters.
    #[schema(min_length = 1, max_length = 4000)]
    query: String,
    /// Only these sources (all must be in the key's scope); all the key's sources when left out.
    #[schema(value_type = Vec<String>, format = Uuid)]
    source_ids: Option<Vec<String>>,
    /// Continues this conversation (one the key started).
    #[schema(value_type = String, format = Uuid)]
    conversation_id: Option<String>,
    /// Draw only on documents whose metadata match, in the filter language of `search`.
    #[schema(value_type = Option<Object>)]
    filter: Option<serde_json::Value>,
}

/// The answer's events, in this order: `queued` (zero or more, while waiting for the model),
/// `delta` (one or more), then `done` or `error`. Each event's `data` is one JSON object:
/// `queued` → `QueuedEvent`, `delta` → `DeltaEvent`, `done` → `DoneEvent`, `error` →
/// `ErrorEvent` (see the component schemas). Comment lines keep the connection alive.
#[utoipa::path(post, path = "/api/v1/generate", tag = "generate", request_body = GenerateBody,
    responses(
        (status = 200, description = "Server-Sent Events: `queued`, `delta`, then `done` or `error`",
            content_type = "text/event-stream", body = String),
        (status = 400, description = "Empty or too long query, bad source or conversation id, malformed JSON", body = ErrorBody),
        (status = 404, description = "A source or the conversation is not in the key's scope", body = ErrorBody),
        (status = 413, description = "Body over `limits.max_json_bytes`", body = ErrorBody),
        (status = 415, description = "Not `application/json`", body = ErrorBody),
        (status = 429, description = "The key's generate rate limit is used up (`rate_limited`), or the answer queue is full (`queue_full`)", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ))]
pub(super) async fn generate(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
    ApiJson(body): ApiJson<GenerateBody>,
) -> Result<Response, ApiError> {
    let request = AskRequest {
        query: body.query,
        source_ids: body.source_ids,
        conversation_id: body.conversation_id,
        filter: body.filter,
    };
    let answer = ask(&state, caller.key.id, caller.scope(), request).await?;
    let keep_alive = state.generation().settings.keep_alive;
    let events = answer.map(|event| Ok::<_, Infallible>(sse_event(event)));
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keep_alive))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // nginx (and proxies that copy it) would otherwise hold the events back in a buffer.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// `data` of a `queued` event.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QueuedEvent {
    /// Place in line, from 1 (this question included).
    position: usize,
}

/// `data` of a `delta` event.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeltaEvent {
    /// The next piece of the answer's text.
    text: String,
}

/// `data` of the `done` event.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DoneEvent {
    /// The conversation (new unless the question continued one).
    #[schema(format = Uuid)]
    conversation_id: String,
    /// The stored exchange.
    #[schema(format = Uuid)]
    message_id: String,
    /// The passages the answer's `[n]` markers name, in order of first mention.
    citations: Vec<Citation>,
    /// True when the built-in extractive answerer wrote it (no language model configured).
    extractive: bool,
    /// What answered.
    generator: String,
}

/// `data` of an `error` event: answering failed and nothing more follows.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorEvent {
    /// What went wrong, for the client.
    message: String,
}

/// The SSE form of an answer event (names and fields as `docs/api.md` lists them).
fn sse_event(event: AnswerEvent) -> Event {
    let (name, data) = match event {
        AnswerEvent::Queued { position } => ("queued", json(&QueuedEvent { position })),
        AnswerEvent::Delta { text } => ("delta", json(&DeltaEvent { text })),
        AnswerEvent::Done {
            conversation_id,
            message_id,
            citations,
            extractive,
            generator,
        } => (
            "done",
            json(&DoneEvent {
                conversation_id: conversation_id.to_string(),
                message_id: message_id.to_string(),
                citations,
                extractive,
                generator,
            }),
        ),
        AnswerEvent::Error { message } => ("error", json(&ErrorEvent { message })),
    };
    Event::default().event(name).data(data)
}

/// Structs of strings, numbers and booleans always serialise.
fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
