//! Quire's search core: a BM25 keyword index over chunks ([`KeywordIndex`], backed by Tantivy)
//! and a vector index of chunk embeddings ([`VectorIndex`]: an HNSW graph for large scopes, an
//! exact scan for small ones), both always filtered by the caller's source scope. Written as a
//! library so ranking can be tested without the HTTP layer.

mod fusion;
mod hnsw;
mod keyword;
mod vector;

pub use fusion::{FusedHit, FusionParams, convex_combination, reciprocal_rank_fusion};
pub use hnsw::HnswParams;
pub use keyword::{Committed, Expected, IndexedChunk, KeywordHit, KeywordIndex, SearchError};
pub use vector::{
    DocumentVectors, Precision, VectorError, VectorHit, VectorIndex, VectorIndexStats,
    VectorOptions,
};
