//! Answers: the queue in front of the generator, how markers become citations, and the task
//! that turns one question into its events (`queued`, `delta`, `done` or `error`), which the
//! REST API streams as SSE and the admin playground collects.

mod ask;
mod citations;
pub mod queue;
pub mod shared_queue;
mod stream;

use std::sync::Arc;
use std::time::Duration;

use quire_core::generate::Generator;

pub use ask::{AskRequest, MAX_QUESTION_CHARS, ask};
pub use citations::{Citation, cited_markers};
pub use queue::{GenerationQueue, JoinError, Place, QueueFull, Ticket};
pub use shared_queue::SharedLine;
pub use stream::{AnswerEvent, CollectedAnswer, NOTHING_FOUND, Question, answer_collected, events};

/// The generator, its queue and how answers are grounded.
#[derive(Clone)]
pub struct Generation {
    /// What writes answers: a chat model, or the built-in extractive answerer.
    pub generator: Arc<dyn Generator>,
    /// Concurrent generations and the line in front of them.
    pub queue: Arc<GenerationQueue>,
    /// Grounding and streaming settings.
    pub settings: GenerationSettings,
}

impl std::fmt::Debug for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generation")
            .field("generator", &self.generator.name())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// How answers are grounded and streamed.
#[derive(Debug, Clone, Copy)]
pub struct GenerationSettings {
    /// Passages retrieved and numbered for each answer: by default as many as a search
    /// returns by default, so an answer reads what a search would show.
    pub passages: usize,
    /// Earlier exchanges of a conversation read back.
    pub history_turns: u32,
    /// Budget, in estimated tokens, for those exchanges in the prompt: the oldest are left
    /// out first.
    pub history_tokens: usize,
    /// Interval of SSE keep-alive comments while nothing else is sent.
    pub keep_alive: Duration,
}

impl Default for GenerationSettings {
    fn default() -> Self {
        Self {
            passages: 10,
            history_turns: 10,
            history_tokens: 2000,
            keep_alive: Duration::from_secs(15),
        }
    }
}
