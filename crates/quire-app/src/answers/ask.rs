//! Asking a question: everything that can be refused is refused here, before any event, so an
//! adapter can answer with a plain error; then the answer's events follow.

use futures_util::Stream;
use quire_core::{ConversationId, Filter, KeyId, SourceScope};

use super::queue::JoinError;
use super::stream::{AnswerEvent, Question, events};
use crate::scope::requested_scope;
use crate::{AppError, Services};

/// Longest question, in characters (the spec's limit).
pub const MAX_QUESTION_CHARS: usize = 4000;

/// A question as a client sends it.
#[derive(Debug, Clone)]
pub struct AskRequest {
    /// The question.
    pub query: String,
    /// Sources to draw on (within the key's scope); `None`: all the key may read.
    pub source_ids: Option<Vec<String>>,
    /// The conversation it continues, as sent (a UUID string).
    pub conversation_id: Option<String>,
    /// Only documents this filter matches, as sent (see `quire_core::Filter`).
    pub filter: Option<serde_json::Value>,
}

/// Validates `request` for the key `key_id` with scope `scope`, takes a place in the
/// generation queue and returns the answer's events. Refused with [`AppError::Invalid`] (bad
/// question or ids), [`AppError::NotFound`] (a source outside the scope, another key's
/// conversation) or [`AppError::QueueFull`].
pub async fn ask(
    services: &Services,
    key_id: KeyId,
    scope: &SourceScope,
    request: AskRequest,
) -> Result<impl Stream<Item = AnswerEvent> + Send + 'static, AppError> {
    let length = request.query.chars().count();
    if request.query.trim().is_empty() || length > MAX_QUESTION_CHARS {
        return Err(AppError::Invalid(format!(
            "`query` must be 1 to {MAX_QUESTION_CHARS} characters and not only spaces (it has {length})"
        )));
    }
    let filter = request
        .filter
        .as_ref()
        .map(Filter::parse)
        .transpose()
        .map_err(|e| AppError::Invalid(e.0))?;
    let scope = requested_scope(services, scope, request.source_ids.as_deref()).await?;
    let conversation = match request.conversation_id.as_deref() {
        None => None,
        Some(raw) => {
            let id: ConversationId = raw.parse().map_err(|_| {
                AppError::Invalid(format!("`conversationId` is not a UUID: {raw:?}"))
            })?;
            // Another key's conversation answers exactly like a missing one.
            match services.store.get_conversation(id).await? {
                Some(c) if c.key_id == key_id => Some(id),
                _ => return Err(AppError::NotFound(format!("conversation {id} not found"))),
            }
        }
    };
    let ticket = services
        .generation
        .queue
        .take(key_id)
        .await
        .map_err(|e| match e {
            JoinError::Full(full) => AppError::QueueFull(full),
            JoinError::Store(e) => e.into(),
        })?;
    let question = Question {
        key_id,
        scope,
        text: request.query,
        conversation,
        filter,
    };
    Ok(events(services.clone(), ticket, question))
}
