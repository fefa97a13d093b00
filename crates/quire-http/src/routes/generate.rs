//! `POST /api/v1/generate`: everything that can be refused is refused here, with a JSON error,
//! before the event stream starts; then the stream is returned at once and the answer follows
//! in it (see `generate::stream`).

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use quire_core::ConversationId;
use serde::Deserialize;

use crate::auth::{Read, Require};
use crate::extract::ApiJson;
use crate::generate::stream::{Question, events};
use crate::{ApiError, AppState};

/// Longest question, in characters (the spec's limit).
const MAX_QUERY_CHARS: usize = 4000;

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
    let length = body.query.chars().count();
    if body.query.trim().is_empty() || length > MAX_QUERY_CHARS {
        return Err(ApiError::BadRequest(format!(
            "`query` must be 1 to {MAX_QUERY_CHARS} characters and not only spaces (it has {length})"
        )));
    }
    let scope = super::search::requested_scope(&state, &caller, body.source_ids.as_deref()).await?;
    let conversation = match body.conversation_id.as_deref() {
        None => None,
        Some(raw) => {
            let id: ConversationId = raw.parse().map_err(|_| {
                ApiError::BadRequest(format!("`conversationId` is not a UUID: {raw:?}"))
            })?;
            // Another key's conversation answers exactly like a missing one.
            match state.store.get_conversation(id).await? {
                Some(c) if c.key_id == caller.key.id => Some(id),
                _ => return Err(ApiError::NotFound(format!("conversation {id} not found"))),
            }
        }
    };
    let ticket = state
        .generation
        .queue
        .join()
        .map_err(|full| ApiError::QueueFull(full.max_waiting))?;
    let keep_alive = state.generation.settings.keep_alive;
    let question = Question {
        key_id: caller.key.id,
        scope,
        text: body.query,
        conversation,
    };
    let mut response = Sse::new(events(state, ticket, question))
        .keep_alive(KeepAlive::new().interval(keep_alive))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // nginx (and proxies that copy it) would otherwise hold the events back in a buffer.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}
