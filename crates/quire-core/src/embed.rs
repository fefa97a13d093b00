//! The embedder's interface, so ingestion and search do not care whether vectors come from the
//! local model or from a server speaking OpenAI's `/v1/embeddings`. The engines live in
//! `quire-models`; crates that only call an embedder depend on this trait alone and never
//! compile candle or ONNX Runtime.

use async_trait::async_trait;

/// What a text is embedded for. Symmetric models (all-MiniLM-L6-v2) treat both alike; some
/// served models want a different prefix or instruction for queries, and implementations may
/// use this to add it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A chunk of a document, at ingestion.
    Document,
    /// A search query.
    Query,
}

/// Turns texts into unit-length vectors of a fixed width.
#[async_trait]
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// Identifies the model (and its exact weights where they can be told apart). The vector
    /// index records it and is rebuilt when it changes, so two models' vectors never mix.
    fn model_id(&self) -> &str;

    /// Length of every vector.
    fn dimensions(&self) -> usize;

    /// What computes the vectors, for the log and the health output: an inference engine for
    /// a local model, the server for a remote one.
    fn engine(&self) -> String;

    /// The embedding of each text, in order; each has [`Embedder::dimensions`] values and
    /// unit length.
    async fn embed(&self, texts: &[String], purpose: Purpose) -> Result<Vec<Vec<f32>>, ModelError>;

    /// The model's own token counts, when the embedder can give them (a local model with its
    /// tokenizer): ingestion then cuts chunks that fit the model's window exactly instead of
    /// estimating from words. `None` (the default): chunk sizes are estimated.
    fn tokens(&self) -> Option<std::sync::Arc<dyn TokenCount>> {
        None
    }

    /// Whether a text's vector is the same whatever other texts share its call (up to
    /// floating-point rounding). True by default; false for a model quantised per call (int8
    /// activations take one scale over the whole batch), whose search queries are then
    /// embedded one per call so that a query's results never depend on other searches.
    fn batch_invariant(&self) -> bool {
        true
    }
}

/// Counts text in a model's own tokens, for cutting chunks that fit its window.
pub trait TokenCount: Send + Sync + std::fmt::Debug {
    /// Tokens of `text`, without the special tokens the model adds around a sequence.
    fn count(&self, text: &str) -> usize;

    /// Most tokens the model reads of one sequence, its special tokens included; the rest of
    /// a longer text is cut off, not embedded.
    fn window(&self) -> usize;

    /// Special tokens added around every sequence (`[CLS]` and `[SEP]` for BERT).
    fn special_tokens(&self) -> usize;
}

/// Scales `vector` to unit length (left alone when it is all zeros).
pub fn normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
}

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

impl ModelError {
    /// What a client may be told: the kind of failure without the embedding server's address,
    /// file paths or the server's own words, which can name internal hosts. The full error
    /// belongs in the log.
    pub fn client_message(&self) -> String {
        match self {
            Self::Unreachable { .. } => "the embedding server could not be reached".into(),
            Self::Timeout { seconds, .. } => {
                format!("the embedding server did not answer within {seconds} s")
            }
            Self::Remote { status, .. } => {
                format!("the embedding server answered HTTP {status}")
            }
            Self::Protocol { .. } => "the embedding server sent a malformed answer".into(),
            Self::File { .. }
            | Self::Config(_)
            | Self::Weights(_)
            | Self::Unsupported(_)
            | Self::Settings(_)
            | Self::Checksum { .. } => "the embedding model is not usable".into(),
            Self::Inference(_) => "the embedding model failed on this text".into(),
        }
    }
}
