//! Quire's models, behind the [`Embedder`] trait: the local sentence embedder
//! ([`LocalEmbedder`], all-MiniLM-L6-v2 by default), a BERT encoder run on the CPU from a model
//! directory of `config.json`, `vocab.txt` and `model.safetensors`, producing what
//! sentence-transformers produces (mean pooling, L2 normalised); and [`OpenAiEmbedder`], a
//! client for any server speaking OpenAI's `/v1/embeddings` (OpenAI, Ollama,
//! text-embeddings-inference, vLLM). [`fetch`] downloads a model directory from the model hub.

mod bert;
mod embedder;
pub mod fetch;
mod fused;
pub mod generate;
mod http;
mod local;
pub mod onnx;
mod openai;
pub mod throughput;
pub mod tokenizer;

pub use bert::BertConfig;
pub use embedder::{Embedder, Purpose, normalize};
pub use local::{Engine, EngineOptions, LocalEmbedder};
pub use openai::{OpenAiEmbedder, OpenAiSettings};

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A file of the model directory is missing or unreadable.
    #[error("model file {path}: {source}")]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// `config.json` is not a BERT configuration.
    #[error("model configuration: {0}")]
    Config(String),
    /// The weights do not match the configuration.
    #[error("model weights: {0}")]
    Weights(String),
    /// The model uses something this implementation does not.
    #[error("unsupported model: {0}")]
    Unsupported(String),
    /// The forward pass failed.
    #[error("inference failed: {0}")]
    Inference(String),
    /// The settings of a remote model or a download cannot work (bad URL, empty model name).
    #[error("model settings: {0}")]
    Settings(String),
    /// No connection to a server could be made (refused, no route, unknown host, TLS).
    #[error("could not reach {url}: {reason}")]
    Unreachable {
        /// What was asked.
        url: String,
        /// Why the connection failed.
        reason: String,
    },
    /// A server took longer than the configured time to answer.
    #[error("{url} did not answer within {seconds} s")]
    Timeout {
        /// What was asked.
        url: String,
        /// The limit that passed.
        seconds: f64,
    },
    /// A server answered with an error status.
    #[error("{url} answered HTTP {status}: {message}")]
    Remote {
        /// What was asked.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's own explanation (`error.message`), or the start of its body.
        message: String,
    },
    /// A server answered, but not as the protocol says (malformed JSON, wrong number of
    /// vectors, wrong width, a broken download).
    #[error("{url}: {message}")]
    Protocol {
        /// What was asked.
        url: String,
        /// What was wrong with the answer.
        message: String,
    },
    /// A downloaded file is not the one expected; it was not kept.
    #[error("{file} from {url} has SHA-256 {actual}, expected {expected}; not kept")]
    Checksum {
        /// The file's name.
        file: String,
        /// Where it came from.
        url: String,
        /// The pinned hash.
        expected: String,
        /// The hash of what arrived.
        actual: String,
    },
}
