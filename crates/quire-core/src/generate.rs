//! Answer generation behind one trait, [`Generator`]. A generator gets a [`Grounding`]: the
//! question, the conversation so far and the retrieved passages, numbered from 1. It streams
//! the answer as text pieces in which it cites passages with `[n]` markers; the caller maps the
//! markers it sees to citations. Dropping the stream cancels the work (for a remote model, the
//! HTTP request is closed). The implementations live in `quire-models`.

use std::pin::Pin;

use async_trait::async_trait;
use futures_core::Stream;

/// A retrieved passage as the generator sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Passage {
    /// The marker number that cites it (`[index]`), from 1.
    pub index: usize,
    /// The document's name (file name).
    pub document_name: String,
    /// The page it is on, from 1, when the format has pages.
    pub page: Option<u32>,
    /// Its heading path, when there is one.
    pub section: Option<String>,
    /// The passage's text.
    pub content: String,
    /// Its search score (higher is better), for the extractive answerer's tie-breaks.
    pub score: f32,
}

/// One earlier exchange of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// What was asked.
    pub question: String,
    /// What was answered (with its markers).
    pub answer: String,
}

/// Everything an answer is generated from.
#[derive(Debug, Clone, PartialEq)]
pub struct Grounding {
    /// The question as asked.
    pub question: String,
    /// Earlier exchanges, oldest first, already cut to the history budget.
    pub history: Vec<Turn>,
    /// Retrieved passages, best first, numbered from 1.
    pub passages: Vec<Passage>,
}

/// The answer as it is produced: text pieces in order. An `Err` item ends the stream.
pub type TextStream = Pin<Box<dyn Stream<Item = Result<String, GenerateError>> + Send>>;

/// Produces grounded answers.
#[async_trait]
pub trait Generator: Send + Sync + std::fmt::Debug {
    /// What answers, for logs and the `done` event: `extractive`, or the model and server.
    fn name(&self) -> String;

    /// True for the built-in extractive answerer (it quotes, it does not write).
    fn is_extractive(&self) -> bool;

    /// A standalone version of a follow-up `question` given the conversation `history`
    /// (oldest first), for retrieval: "and its side effects?" after a question about a drug
    /// becomes a question naming the drug. `None` when this generator cannot rewrite
    /// questions; the caller then builds the retrieval query itself.
    async fn condense(
        &self,
        history: &[Turn],
        question: &str,
    ) -> Result<Option<String>, GenerateError>;

    /// Starts answering. An error before any text (server down, refused) is returned here;
    /// errors after the first piece arrive as the stream's last item.
    async fn answer(&self, grounding: &Grounding) -> Result<TextStream, GenerateError>;
}

/// Why an answer could not be generated. Every variant's message is meant for the client's
/// SSE `error` event: it says what failed without leaking credentials.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum GenerateError {
    /// No connection to the model server could be made.
    #[error("could not reach the language model at {url}: {reason}")]
    Unreachable {
        /// The endpoint.
        url: String,
        /// Why the connection failed.
        reason: String,
    },
    /// The server did not answer, or stopped sending, within the configured time.
    #[error("the language model at {url} sent nothing for {seconds} s")]
    Timeout {
        /// The endpoint.
        url: String,
        /// The limit that passed.
        seconds: f64,
    },
    /// The server answered with an error status.
    #[error("the language model at {url} answered HTTP {status}: {message}")]
    Remote {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's own explanation, or the start of its body.
        message: String,
    },
    /// The server broke the streaming protocol (malformed chunk, wrong content type).
    #[error("the language model at {url} sent a malformed stream: {message}")]
    Protocol {
        /// The endpoint.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// The stream ended before the server said it was finished (connection closed, no
    /// `[DONE]` and no finish reason).
    #[error("the language model at {url} stopped before the answer was complete: {reason}")]
    Interrupted {
        /// The endpoint.
        url: String,
        /// What happened.
        reason: String,
    },
    /// Settings that cannot work (bad URL, empty model name).
    #[error("language model settings: {0}")]
    Settings(String),
}

impl GenerateError {
    /// What a client may be told: the kind of failure without the model server's address or
    /// its own words (an upstream body can name internal hosts, keys' owners or quotas). The
    /// full error belongs in the log.
    pub fn client_message(&self) -> String {
        let told = match self {
            Self::Unreachable { .. } => "the language model could not be reached".to_owned(),
            Self::Timeout { seconds, .. } => {
                format!("the language model sent nothing for {seconds} s")
            }
            Self::Remote { status, .. } => format!("the language model answered HTTP {status}"),
            Self::Protocol { .. } => "the language model sent a malformed stream".to_owned(),
            Self::Interrupted { .. } => {
                "the language model stopped before the answer was complete".to_owned()
            }
            Self::Settings(_) => "the language model is not configured correctly".to_owned(),
        };
        format!("{told}; the cause has been logged")
    }
}
