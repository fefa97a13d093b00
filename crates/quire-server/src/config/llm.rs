//! `[llm]`: the language model that writes answers, and the queue in front of it.

use anyhow::bail;
use quire_core::Secret;
use serde::{Deserialize, Serialize};

/// `[llm]`: the chat model for `POST /api/v1/generate`. Without `base_url` answers come from
/// the built-in extractive answerer, which quotes the most relevant sentences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// An OpenAI-compatible server's base URL (`…/v1`: Ollama, llama.cpp server, vLLM,
    /// LM Studio, OpenAI).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The served model's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Bearer token for the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret<String>>,
    /// Longest wait for the server's first answer, and between two pieces of a stream, in
    /// seconds.
    pub timeout_seconds: u64,
    /// Sampling temperature.
    pub temperature: f32,
    /// Most tokens in one answer.
    pub max_tokens: u32,
    /// Answers generated at the same time; others wait in line. One suits a single local
    /// model; a hosted API takes more. With a shared (PostgreSQL) store this, like the two
    /// bounds below, is the whole cluster's: set the same values on every node.
    pub max_concurrent: usize,
    /// Questions that may wait in line; beyond it generate answers 429 `queue_full`.
    pub max_queue: usize,
    /// Questions one key may have waiting or being answered at once; beyond it that key alone
    /// gets 429 `queue_full`, so one busy client cannot fill the line for everyone.
    pub max_queue_per_key: usize,
    /// Passages retrieved and numbered for each answer.
    pub passages: usize,
    /// Earlier exchanges of a conversation read back.
    pub history_turns: u32,
    /// Budget for those exchanges in the prompt, in estimated tokens (oldest left out first).
    pub history_tokens: usize,
    /// Seconds between SSE keep-alive comments while a stream has nothing else to send.
    pub keep_alive_seconds: u64,
}

impl Default for LlmConfig {
    fn default() -> Self {
        let g = quire_app::answers::GenerationSettings::default();
        Self {
            base_url: None,
            model: None,
            api_key: None,
            timeout_seconds: 60,
            temperature: 0.1,
            max_tokens: 1024,
            max_concurrent: 1,
            max_queue: 100,
            max_queue_per_key: 10,
            passages: g.passages,
            history_turns: g.history_turns,
            history_tokens: g.history_tokens,
            keep_alive_seconds: g.keep_alive.as_secs(),
        }
    }
}

impl LlmConfig {
    /// The grounding and streaming settings handed to the HTTP layer.
    pub fn generation_settings(&self) -> quire_app::answers::GenerationSettings {
        quire_app::answers::GenerationSettings {
            passages: self.passages,
            history_turns: self.history_turns,
            history_tokens: self.history_tokens,
            keep_alive: std::time::Duration::from_secs(self.keep_alive_seconds),
        }
    }

    /// Refuses settings the service cannot work with.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.max_queue_per_key == 0 {
            bail!("llm.max_queue_per_key must be at least 1");
        }
        if self.base_url.is_some() != self.model.is_some() {
            bail!("llm.base_url and llm.model go together (the server and the model it serves)");
        }
        if self.max_concurrent == 0 {
            bail!("llm.max_concurrent must be at least 1");
        }
        if self.passages == 0 || self.passages > 50 {
            bail!("llm.passages must be between 1 and 50");
        }
        if self.timeout_seconds == 0 || self.keep_alive_seconds == 0 || self.max_tokens == 0 {
            bail!(
                "llm.timeout_seconds, llm.keep_alive_seconds and llm.max_tokens must be at least 1"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::env;
    use crate::config::{Config, Overrides};

    #[test]
    fn the_llm_is_configured_from_the_environment() {
        let c = Config::load(
            None,
            env(&[
                ("QUIRE_LLM_BASE_URL", "http://localhost:11434/v1"),
                ("QUIRE_LLM_MODEL", "llama3.1:8b"),
                ("QUIRE_LLM_API_KEY", "sk-test"),
                ("QUIRE_LLM_MAX_CONCURRENT", "3"),
            ]),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.llm.base_url.as_deref(), Some("http://localhost:11434/v1"));
        assert_eq!(c.llm.model.as_deref(), Some("llama3.1:8b"));
        assert_eq!(c.llm.api_key.as_ref().unwrap().expose(), "sk-test");
        assert_eq!(c.llm.max_concurrent, 3);
        let err = Config::load(
            None,
            env(&[("QUIRE_LLM_BASE_URL", "http://localhost:11434/v1")]),
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("llm.model"), "{err:#}");
        let err = Config::load(
            None,
            env(&[("QUIRE_LLM_MAX_CONCURRENT", "0")]),
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("llm.max_concurrent"), "{err:#}");
    }
}
