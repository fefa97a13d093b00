//! Answer generation behind one trait, [`Generator`]: an OpenAI-compatible streaming
//! chat-completions client ([`OpenAiChat`]) and the built-in extractive answerer
//! ([`Extractive`]), the embedded default when no model is configured.
//!
//! A generator gets a [`Grounding`]: the question, the conversation so far and the retrieved
//! passages, numbered from 1. It streams the answer as text pieces in which it cites passages
//! with `[n]` markers; the caller maps the markers it sees to citations. Dropping the stream
//! cancels the work (for a remote model, the HTTP request is closed).

mod extractive;
mod openai;
mod prompt;
mod relevance;
mod sentences;
mod sse;
mod support;
mod terms;

pub use extractive::{Extractive, ExtractiveSettings, NO_ANSWER};
pub use openai::{OpenAiChat, OpenAiChatSettings};
pub use prompt::{ChatMessage, Role, answer_messages, condense_messages};
pub use quire_core::generate::{GenerateError, Generator, Grounding, Passage, TextStream, Turn};
