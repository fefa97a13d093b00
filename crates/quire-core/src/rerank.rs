//! The reranker's interface: a model that reads a query and each candidate passage together
//! (a cross-encoder) and scores how well the passage answers it. Search hands its fused top
//! candidates to one and shows them in its order (`docs/retrieval.md`, "Reranking"). The
//! client for reranking servers lives in `quire-models`; search depends on this trait alone.

use async_trait::async_trait;

use crate::embed::ModelError;

/// Scores passages against a query.
#[async_trait]
pub trait Reranker: Send + Sync + std::fmt::Debug {
    /// What scores the passages, for the log: the server and model.
    fn name(&self) -> String;

    /// The relevance of each of `documents` to `query`, in the order of `documents` (higher
    /// is more relevant; the scale is the model's own). A failure, or an answer that does not
    /// give every document exactly one finite score, is an error.
    async fn rerank(&self, query: &str, documents: &[String]) -> Result<Vec<f32>, ModelError>;
}
