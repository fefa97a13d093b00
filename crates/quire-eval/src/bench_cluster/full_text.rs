//! PostgreSQL's own full-text search over a cluster's chunks, measured on the judged queries
//! beside the nodes' BM25: the measurement behind cluster mode's choice of a Tantivy index per
//! node over ranking keywords inside the database (`docs/cluster.md`).
//!
//! After the nodes have stopped, the cluster's chunks get what a PostgreSQL design would add
//! ([`FullTextIndex`]: a GIN-indexed `tsvector`, queries as the OR of their words, ranked by
//! `ts_rank_cd`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::Judged;
use crate::eval_retrieval::ranked_documents;
use crate::pg_alternatives::FullTextIndex;
use crate::retrieval_metrics::ndcg_at;

/// Chunk hits per query when scoring quality, as the nodes' evaluation fetches.
const QUALITY_HITS: i64 = 300;
/// Hits per query when timing, the API's default `limit`.
const TIMED_HITS: i64 = 10;

/// What PostgreSQL's full-text search scored.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct FullText {
    /// Adding the `tsvector` column and its GIN index.
    pub(super) indexing: Duration,
    /// Mean nDCG@10 over the judged queries.
    pub(super) ndcg: f64,
    /// Latencies at [`TIMED_HITS`], sorted.
    pub(super) latencies: Vec<Duration>,
    /// Mean number of matching chunks per query (what `ts_rank_cd` has to rank).
    pub(super) mean_matches: f64,
}

/// Indexes the chunks of the cluster's schema at `url` for full-text search and scores every
/// judged query.
pub(super) async fn measure(
    url: &str,
    judged: &Judged,
    corpus_id_of: &HashMap<String, String>,
) -> anyhow::Result<FullText> {
    let started = Instant::now();
    let mut index = FullTextIndex::build(url).await?;
    let indexing = started.elapsed();

    let mut ndcg = 0.0;
    let mut matches = 0i64;
    for (query_id, text) in &judged.queries {
        let hits = index.search(text, QUALITY_HITS).await?;
        let ranked = ranked_documents(hits.iter().map(String::as_str), corpus_id_of);
        ndcg += ndcg_at(&ranked, &judged.judgements[query_id], 10);
        matches += index.matches(text).await?;
    }
    let mut latencies = Vec::with_capacity(judged.queries.len());
    for (_, text) in &judged.queries {
        let asked = Instant::now();
        index.search(text, TIMED_HITS).await?;
        latencies.push(asked.elapsed());
    }
    latencies.sort();
    let n = judged.queries.len().max(1) as f64;
    Ok(FullText {
        indexing,
        ndcg: ndcg / n,
        latencies,
        mean_matches: matches as f64 / n,
    })
}
