//! One generate request, from its place in the queue to its `done` event. The work runs in a
//! task that writes events into a channel the response streams from; when the client goes
//! away the channel closes, the task is dropped where it stands, and with it the queue ticket
//! (the place or slot is given back) and the model's stream (the upstream request is closed).

use futures_util::{Stream, StreamExt};
use quire_core::generate::{Grounding, Passage, TextStream, Turn};
use quire_core::{ConversationId, Filter, KeyId, MessageId, SourceScope};
use quire_store::NewMessage;
use tokio::sync::mpsc;

use super::citations::{Citation, cited_markers};
use super::queue::{JoinError, Place, Ticket};
use crate::Services;
use crate::search::SearchResult;

/// What the answer says when retrieval finds nothing to ground it on.
pub const NOTHING_FOUND: &str = "No passage in the documents available to this key matches this question, so there is \
     nothing to answer from.";

/// One event of an answer, in the order they happen.
#[derive(Debug, Clone, PartialEq)]
pub enum AnswerEvent {
    /// Waiting for a slot: `position` questions (this one included) are ahead in line.
    Queued {
        /// Place in line, from 1.
        position: usize,
    },
    /// The next piece of the answer's text.
    Delta {
        /// The piece.
        text: String,
    },
    /// The answer is complete and stored.
    Done {
        /// The conversation it belongs to (new unless the question continued one).
        conversation_id: ConversationId,
        /// The stored exchange.
        message_id: MessageId,
        /// The passages the answer's markers name, in order of first mention.
        citations: Vec<Citation>,
        /// True when the built-in extractive answerer wrote it.
        extractive: bool,
        /// What answered.
        generator: String,
    },
    /// Answering failed; nothing more follows. The message is for the client.
    Error {
        /// What went wrong (causes of internal failures are logged, not told).
        message: String,
    },
}

/// A validated request, ready to be answered.
#[derive(Debug)]
pub struct Question {
    /// The key asking (and owning the conversation).
    pub key_id: KeyId,
    /// Sources the answer may draw on.
    pub scope: SourceScope,
    /// The question.
    pub text: String,
    /// The conversation it continues, checked to belong to the key; `None` starts one.
    pub conversation: Option<ConversationId>,
    /// Only passages of the documents this filter matches.
    pub filter: Option<Filter>,
}

/// Starts answering `question` once `ticket` gets a slot; the events, as they happen. Dropping
/// the stream stops the work where it stands.
pub fn events(
    services: Services,
    ticket: Ticket,
    question: Question,
) -> impl Stream<Item = AnswerEvent> + Send + 'static {
    // A few events of headroom: a slow reader delays the model a little, never unboundedly.
    let (sender, receiver) = mpsc::channel::<AnswerEvent>(16);
    tokio::spawn(async move {
        let out = Events(&sender);
        tokio::select! {
            // The client went away: dropping `answer` here frees the ticket and closes the
            // model's stream.
            () = sender.closed() => {}
            () = answer(&services, ticket, question, &out) => {}
        }
    });
    futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|event| (event, receiver))
    })
}

/// Writes events; a closed channel is ignored (the select above ends the task).
struct Events<'a>(&'a mpsc::Sender<AnswerEvent>);

impl Events<'_> {
    async fn send(&self, event: AnswerEvent) {
        let _ = self.0.send(event).await;
    }

    async fn error(&self, message: impl Into<String>) {
        self.send(AnswerEvent::Error {
            message: message.into(),
        })
        .await;
    }
}

async fn answer(services: &Services, mut ticket: Ticket, question: Question, out: &Events<'_>) {
    // Told at once, and again at every move, until a slot is ours.
    loop {
        match ticket.place() {
            Place::Running => break,
            Place::Waiting(position) => {
                out.send(AnswerEvent::Queued { position }).await;
                ticket.changed().await;
            }
        }
    }
    let generation = &services.generation;
    let history = match history(services, &question).await {
        Ok(history) => history,
        Err(message) => return out.error(message).await,
    };
    let query = retrieval_query(services, &history, &question.text).await;
    let answering = match start(
        services,
        &question.scope,
        &query,
        &question.text,
        history,
        question.filter.as_ref(),
    )
    .await
    {
        Ok(answering) => answering,
        Err(message) => return out.error(message).await,
    };
    let mut text = String::new();
    match answering.pieces {
        None => {
            text.push_str(NOTHING_FOUND);
            out.send(AnswerEvent::Delta {
                text: NOTHING_FOUND.to_owned(),
            })
            .await;
        }
        Some(mut pieces) => {
            while let Some(piece) = pieces.next().await {
                match piece {
                    Ok(piece) if piece.is_empty() => {}
                    Ok(piece) => {
                        text.push_str(&piece);
                        out.send(AnswerEvent::Delta { text: piece }).await;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the generator failed while answering");
                        return out.error(e.client_message()).await;
                    }
                }
            }
        }
    }
    // The slot is not needed to store the answer: the next in line may start.
    ticket.release().await;

    let citations = citations(&text, &answering.passages);
    let conversation_id = question.conversation.unwrap_or_default();
    let generator = generation.generator.name();
    let stored = services
        .store
        .add_message(NewMessage {
            id: MessageId::new(),
            conversation_id,
            key_id: question.key_id,
            question: question.text.clone(),
            answer: text,
            citations: serde_json::to_string(&citations).unwrap_or_else(|_| "[]".into()),
            generator: generator.clone(),
            created_at: services.clock.now(),
        })
        .await;
    match stored {
        Ok(message) => {
            out.send(AnswerEvent::Done {
                conversation_id,
                message_id: message.id,
                citations,
                extractive: generation.generator.is_extractive(),
                generator,
            })
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
    pub citations: Vec<Citation>,
    /// Every passage retrieved and numbered for the answer, cited or not, in rank order
    /// (what the generator was given: the evaluation reads it to tell retrieval's misses
    /// from the answerer's).
    pub retrieved: Vec<Citation>,
    /// What answered (`extractive`, or the model and server).
    pub generator: String,
}

/// Answers `question` for the key `key_id` over `scope` as a generate call would (queue,
/// hybrid retrieval, numbered passages, the configured generator, markers to citations),
/// without a conversation and without storing anything. Waits in the queue like everyone
/// else, within the key's share of it.
pub async fn answer_collected(
    services: &Services,
    key_id: KeyId,
    scope: &SourceScope,
    question: &str,
    filter: Option<&Filter>,
) -> Result<CollectedAnswer, String> {
    let mut ticket = services
        .generation
        .queue
        .take(key_id)
        .await
        .map_err(|e| match e {
            JoinError::Full(full) => full.to_string(),
            JoinError::Store(e) => {
                tracing::error!(error = %e, "the shared generation queue failed");
                "the generation queue is unavailable; try again".to_owned()
            }
        })?;
    while ticket.place() != Place::Running {
        ticket.changed().await;
    }
    let answering = start(services, scope, question, question, Vec::new(), filter).await?;
    let mut text = String::new();
    match answering.pieces {
        None => text.push_str(NOTHING_FOUND),
        Some(mut pieces) => {
            while let Some(piece) = pieces.next().await {
                text.push_str(&piece.map_err(|e| {
                    tracing::warn!(error = %e, "the generator failed while answering");
                    e.client_message()
                })?);
            }
        }
    }
    ticket.release().await;
    Ok(CollectedAnswer {
        citations: citations(&text, &answering.passages),
        retrieved: answering
            .passages
            .iter()
            .enumerate()
            .map(|(i, p)| Citation::of(i + 1, p))
            .collect(),
        text,
        generator: services.generation.generator.name(),
    })
}

/// The passages retrieved for an answer and, when there are any, the generator's stream.
struct Answering {
    passages: Vec<SearchResult>,
    /// `None` when nothing was retrieved: the answer is [`NOTHING_FOUND`] and the model is
    /// not asked.
    pieces: Option<TextStream>,
}

/// Retrieves passages for `query` over `scope`, numbers them and starts the generator on
/// `question`. The error is the message for the client (causes are logged).
async fn start(
    services: &Services,
    scope: &SourceScope,
    query: &str,
    question: &str,
    history: Vec<Turn>,
    filter: Option<&Filter>,
) -> Result<Answering, String> {
    let generation = &services.generation;
    let passages = crate::search::search_filtered(
        services,
        scope,
        query,
        generation.settings.passages,
        None,
        filter,
    )
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
        e.client_message()
    })?;
    Ok(Answering {
        passages,
        pieces: Some(pieces),
    })
}

/// The citations of the markers `text` contains, in order of first mention.
fn citations(text: &str, passages: &[SearchResult]) -> Vec<Citation> {
    cited_markers(text, passages.len())
        .into_iter()
        .map(|n| Citation::of(n, &passages[n - 1]))
        .collect()
}

/// The conversation's earlier exchanges, oldest first, within the history budget.
async fn history(services: &Services, question: &Question) -> Result<Vec<Turn>, String> {
    let Some(id) = question.conversation else {
        return Ok(Vec::new());
    };
    let settings = services.generation.settings;
    let messages = services
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
async fn retrieval_query(services: &Services, history: &[Turn], question: &str) -> String {
    let Some(last) = history.last() else {
        return question.to_owned();
    };
    match services
        .generation
        .generator
        .condense(history, question)
        .await
    {
        Ok(Some(standalone)) => return standalone,
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "could not condense the follow-up question"),
    }
    format!("{} {}", last.question, question)
}

fn passage(index: usize, result: &SearchResult) -> Passage {
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
