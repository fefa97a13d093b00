//! `POST /api/v1/generate`: the question is validated and queued by the application layer
//! (`quire_app::answers::ask`), which refuses with a JSON error before the stream starts; then
//! the event stream is returned at once and each answer event becomes one SSE event.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use quire_app::answers::{AnswerEvent, AskRequest, ask};
use serde::Deserialize;
use serde_json::json;

use crate::auth::{Read, Require};
use crate::extract::ApiJson;
use crate::{ApiError, AppState};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GenerateBody {
    query: String,
    source_ids: Option<Vec<String>>,
    conversation_id: Option<String>,
}

pub(super) async fn generate(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
    ApiJson(body): ApiJson<GenerateBody>,
) -> Result<Response, ApiError> {
    let request = AskRequest {
        query: body.query,
        source_ids: body.source_ids,
        conversation_id: body.conversation_id,
    };
    let answer = ask(&state, caller.key.id, caller.scope(), request).await?;
    let keep_alive = state.generation.settings.keep_alive;
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

/// The SSE form of an answer event (names and fields as `docs/api.md` lists them).
fn sse_event(event: AnswerEvent) -> Event {
    let (name, data) = match event {
        AnswerEvent::Queued { position } => ("queued", json!({ "position": position })),
        AnswerEvent::Delta { text } => ("delta", json!({ "text": text })),
        AnswerEvent::Done {
            conversation_id,
            message_id,
            citations,
            extractive,
            generator,
        } => (
            "done",
            json!({
                "conversationId": conversation_id.to_string(),
                "messageId": message_id.to_string(),
                "citations": citations,
                "extractive": extractive,
                "generator": generator,
            }),
        ),
        AnswerEvent::Error { message } => ("error", json!({ "message": message })),
    };
    Event::default().event(name).data(data.to_string())
}
