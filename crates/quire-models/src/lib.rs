//! Quire's models, behind the [`Embedder`] trait. Today: the local sentence embedder (all-MiniLM-L6-v2 by default), a BERT
//! encoder run on the CPU from a model directory of `config.json`, `vocab.txt` and
//! `model.safetensors`, producing what sentence-transformers produces (mean pooling, L2
//! normalised).

mod bert;
mod embedder;
mod local;
pub mod throughput;
pub mod tokenizer;

pub use bert::BertConfig;
pub use embedder::{Embedder, Purpose, normalize};
pub use local::LocalEmbedder;

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
}
