//! One generate request, from its place in the queue to its `done` event. The work runs in a
//! task that writes events into a channel the response streams from; when the client goes
//! away the channel closes, the task is dropped where it stands, and with it the queue ticket
//! (the place or slot is given back) and the model's stream (the upstream request is closed).

use std::convert::Infallible;

use axum::response::sse::Event;
use futures_util::{Stream, StreamExt};
use quire_core::{ConversationId, KeyId, MessageId, SourceScope};
use quire_models::generate::{Grounding, Passage, TextStream, Turn};
use quire_store::NewMessage;
use serde_json::json;
use tokio::sync::mpsc;

use super::citations::{CitationJson, cited_markers};
use super::queue::{Place, Ticket};
use crate::AppState;
use crate::wire::SearchResultJson;

/// What the answer says when retrieval finds nothing to ground it on.
pub const NOTHING_FOUND: &str = "No passage in the documents available to this key matches this question, so there is \
     nothing to answer from.";

/// A validated request, ready to be answered.
#[derive(Debug)]
pub(crate) struct Question {
    /// The key asking (and owning the conversation).
    pub key_id: KeyId,
    /// Sources the answer may draw on.
    pub scope: SourceScope,
    /// The question.
    pub text: String,
    /// The conversation it continues, checked to belong to the key; `None` starts one.
    pub conversation: Option<ConversationId>,
}

/// Starts answering `question` once `ticket` gets a slot; the events, as the response streams
/// them.
pub(crate) fn events(
    state: AppState,
    ticket: Ticket,
    question: Question,
) -> impl Stream<Item = Result<Event, Infallible>> {
    // A few events of headroom: a slow reader delays the model a little, never unboundedly.
    let (sender, receiver) = mpsc::channel::<Event>(16);
    tokio::spawn(async move {
        let out = Events(&sender);
        tokio::select! {
            // The client went away: dropping `answer` here frees the ticket and closes the
            // model's stream.
            () = sender.closed() => {}
            () = answer(&state, ticket, question, &out) => {}
        }
    });
    futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|event| (Ok(event), receiver))
    })
}

/// Writes events; a closed channel is ignored (the select above ends the task).
struct Events<'a>(&'a mpsc::Sender<Event>);

impl Events<'_> {
    async fn send(&self, name: &str, data: serde_json::Value) {
        let event = Event::default().event(name).data(data.to_string());
        let _ = self.0.send(event).await;
    }

    async fn error(&self, message: impl Into<String>) {
        self.send("error", json!({ "message": message.into() }))
            .await;
    }
}

async fn answer(state: &AppState, mut ticket: Ticket, question: Question, out: &Events<'_>) {
    // Told at once, and again at every move, until a slot is ours.
    loop {
        match ticket.place() {
            Place::Running => break,
            Place::Waiting(position) => {
                out.send("queued", json!({ "position": position })).await;
                ticket.changed().await;
            }
        }
    }
    let generation = &state.generation;
    let history = match history(state, &question).await {
        Ok(history) => history,
        Err(message) => return out.error(message).await,
    };
    let query = retrieval_query(state, &history, &question.text).await;
    let answering = match start(state, &question.scope, &query, &question.text, history).await {
        Ok(answering) => answering,
        Err(message) => return out.error(message).await,
    };
    let mut text = String::new();
    match answering.pieces {
        None => {
            text.push_str(NOTHING_FOUND);
            out.send("delta", json!({ "text": NOTHING_FOUND })).await;
        }
        Some(mut pieces) => {
            while let Some(piece) = pieces.next().await {
                match piece {
                    Ok(piece) if piece.is_empty() => {}
                    Ok(piece) => {
                        text.push_str(&piece);
                        out.send("delta", json!({ "text": piece })).await;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the generator failed while answering");
                        return out.error(e.to_string()).await;
                    }
                }
            }
        }
    }
    // The slot is not needed to store the answer: the next in line may start.
    drop(ticket);

    let citations = citations(&text, &answering.passages);
    let conversation_id = question.conversation.unwrap_or_default();
    let generator = generation.generator.name();
    let stored = state
        .store
        .add_message(NewMessage {
            id: MessageId::new(),
            conversation_id,
            key_id: question.key_id,
            question: question.text.clone(),
            answer: text,
            citations: serde_json::to_string(&citations).unwrap_or_else(|_| "[]".into()),
            generator: generator.clone(),
            created_at: state.clock.now(),
        })
        .await;
    match stored {
        Ok(message) => {
            out.send(
                "done",
                json!({
                    "conversationId": conversation_id.to_string(),
                    "messageId": message.id.to_string(),
                    "citations": citations,
                    "extractive": generation.generator.is_extractive(),
                    "generator": generator,
                }),
            )
            .await;
        }
        Err(e) => {
            tracing::error!(error = %e, "could not store the answer");
            out.error("the answer could not be stored; the cause has been logged")
                .await;
        }
    }
}

/// A whole answer, collected rather than streamed (the admin interface's playground).
#[derive(Debug, Clone)]
pub struct CollectedAnswer {
    /// The answer text with its markers.
    pub text: String,
    /// The passages its markers name.
    pub citations: Vec<CitationJson>,
    /// What answered (`extractive`, or the model and server).
    pub generator: String,
}

/// Answers `question` over `scope` as a generate call would (queue, hybrid retrieval,
/// numbered passages, the configured generator, markers to citations), without a
/// conversation and without storing anything. Waits in the queue like everyone else.
pub async fn answer_collected(
    state: &AppState,
    scope: &SourceScope,
    question: &str,
) -> Result<CollectedAnswer, String> {
    let mut ticket = state.generation.queue.join().map_err(|full| {
        format!(
            "{} questions are already waiting for the model",
            full.max_waiting
        )
    })?;
    while ticket.place() != Place::Running {
        ticket.changed().await;
    }
    let answering = start(state, scope, question, question, Vec::new()).await?;
    let mut text = String::new();
    match answering.pieces {
        None => text.push_str(NOTHING_FOUND),
        Some(mut pieces) => {
            while let Some(piece) = pieces.next().await {
                text.push_str(&piece.map_err(|e| e.to_string())?);
            }
        }
    }
    drop(ticket);
    Ok(CollectedAnswer {
        citations: citations(&text, &answering.passages),
        text,
        generator: state.generation.generator.name(),
    })
}

/// The passages retrieved for an answer and, when there are any, the generator's stream.
struct Answering {
    passages: Vec<SearchResultJson>,
    /// `None` when nothing was retrieved: the answer is [`NOTHING_FOUND`] and the model is
    /// not asked.
    pieces: Option<TextStream>,
}

/// Retrieves passages for `query` over `scope`, numbers them and starts the generator on
/// `question`. The error is the message for the client (causes are logged).
async fn start(
    state: &AppState,
    scope: &SourceScope,
    query: &str,
    question: &str,
    history: Vec<Turn>,
) -> Result<Answering, String> {
    let generation = &state.generation;
    let passages = crate::search::search(state, scope, query, generation.settings.passages, None)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "retrieval for an answer failed");
            "retrieval failed; the cause has been logged".to_owned()
        })?
        .results;
    if passages.is_empty() {
        return Ok(Answering {
            passages,
            pieces: None,
        });
    }
    let grounding = Grounding {
        question: question.to_owned(),
        history,
        passages: passages
            .iter()
            .enumerate()
            .map(|(i, p)| passage(i + 1, p))
            .collect(),
    };
    let pieces = generation.generator.answer(&grounding).await.map_err(|e| {
        tracing::warn!(error = %e, "the generator failed before answering");
        e.to_string()
    })?;
    Ok(Answering {
        passages,
        pieces: Some(pieces),
    })
}

/// The citations of the markers `text` contains, in order of first mention.
fn citations(text: &str, passages: &[SearchResultJson]) -> Vec<CitationJson> {
    cited_markers(text, passages.len())
        .into_iter()
        .map(|n| CitationJson::of(n, &passages[n - 1]))
        .collect()
}

/// The conversation's earlier exchanges, oldest first, within the history budget.
async fn history(state: &AppState, question: &Question) -> Result<Vec<Turn>, String> {
    let Some(id) = question.conversation else {
        return Ok(Vec::new());
    };
    let settings = state.generation.settings;
    let messages = state
        .store
        .recent_messages(id, settings.history_turns)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "could not read the conversation");
            "the conversation could not be read; the cause has been logged".to_owned()
        })?;
    let turns: Vec<Turn> = messages
        .into_iter()
        .map(|m| Turn {
            question: m.question,
            answer: m.answer,
        })
        .collect();
    Ok(within_budget(turns, settings.history_tokens))
}

/// The newest turns whose estimated size fits `tokens`, oldest first.
fn within_budget(turns: Vec<Turn>, tokens: usize) -> Vec<Turn> {
    let mut used = 0;
    let mut kept: Vec<Turn> = turns
        .into_iter()
        .rev()
        .take_while(|t| {
            used += estimated_tokens(&t.question) + estimated_tokens(&t.answer);
            used <= tokens
        })
        .collect();
    kept.reverse();
    kept
}

/// About four characters per token for English text under common tokenizers: close enough
/// for a budget, and needs no tokenizer for a model we may not know.
fn estimated_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// What to search for: the question itself, or for a follow-up, a standalone version the
/// model writes, or, without a model, the last question followed by this one.
async fn retrieval_query(state: &AppState, history: &[Turn], question: &str) -> String {
    let Some(last) = history.last() else {
        return question.to_owned();
    };
    match state.generation.generator.condense(history, question).await {
        Ok(Some(standalone)) => return standalone,
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "could not condense the follow-up question"),
    }
    format!("{} {}", last.question, question)
}

fn passage(index: usize, result: &SearchResultJson) -> Passage {
    Passage {
        index,
        document_name: result.document.name.clone(),
        page: Some(result.metadata.page),
        section: Some(result.metadata.section.clone()).filter(|s| !s.is_empty()),
        content: result.content.clone(),
        score: result.score,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(n: usize, size: usize) -> Turn {
        Turn {
            question: format!("q{n}"),
            answer: "x".repeat(size),
        }
    }

    #[test]
    fn the_budget_keeps_the_newest_turns_in_order() {
        let turns = vec![turn(1, 400), turn(2, 400), turn(3, 400)];
        let kept = within_budget(turns.clone(), 210);
        assert_eq!(kept, [turn(2, 400), turn(3, 400)]);
        assert_eq!(within_budget(turns.clone(), 10_000), turns);
        assert!(within_budget(turns, 50).is_empty());
    }
}
