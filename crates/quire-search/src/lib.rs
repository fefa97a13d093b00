//! Quire's search core: a BM25 keyword index over chunks ([`KeywordIndex`], backed by Tantivy)
//! and a vector index of chunk embeddings ([`VectorIndex`], an exact scan), both always filtered
//! by the caller's source scope. Written as a library so ranking can be tested
//! without the HTTP layer.

mod fusion;
mod keyword;
mod vector;

pub use fusion::{FusedHit, FusionParams, reciprocal_rank_fusion};
pub use keyword::{IndexedChunk, KeywordHit, KeywordIndex, SearchError};
pub use vector::{VectorError, VectorHit, VectorIndex};
