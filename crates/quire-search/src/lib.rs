//! Quire's search core: a BM25 keyword index over chunks ([`KeywordIndex`], backed by Tantivy),
//! always filtered by the caller's source scope. Written as a library so ranking can be tested
//! without the HTTP layer.

mod keyword;

pub use keyword::{IndexedChunk, KeywordHit, KeywordIndex, SearchError};
