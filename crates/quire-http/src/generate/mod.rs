//! Answer generation for `POST /api/v1/generate`: the queue in front of the generator, how
//! markers become citations, and the task that turns one request into its event stream.

mod citations;
pub mod queue;
pub(crate) mod stream;

pub use stream::{CollectedAnswer, answer_collected};

use std::sync::Arc;
use std::time::Duration;

use quire_models::generate::Generator;

pub use citations::{CitationJson, cited_markers};
pub use queue::{GenerationQueue, Place, QueueFull, Ticket};

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
    /// Passages retrieved and numbered for each answer.
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
            passages: 8,
            history_turns: 10,
            history_tokens: 2000,
            keep_alive: Duration::from_secs(15),
        }
    }
}
