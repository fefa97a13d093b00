//! The one interface every embedder implements, so ingestion and search do not care whether
//! vectors come from the local model or from a server speaking OpenAI's `/v1/embeddings`.

use async_trait::async_trait;

use crate::ModelError;

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
}

/// Scales `vector` to unit length (left alone when it is all zeros).
pub fn normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
}
