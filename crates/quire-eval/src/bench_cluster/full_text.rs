//! PostgreSQL's own full-text search over a cluster's chunks, measured on the judged queries
//! beside the nodes' BM25: the measurement behind cluster mode's choice of a Tantivy index per
//! node over ranking keywords inside the database (`docs/cluster.md`).
//!
//! After the nodes have stopped, the cluster's `chunks` table gets what a PostgreSQL design
//! would add: a stored `tsvector` of the section and the text (English configuration, as the
//! keyword index stems English) and a GIN index on it. Each query becomes the OR of its
//! stemmed words (`plainto_tsquery` joins them with AND, which few chunks of a 5,000-document
//! corpus satisfy for a whole sentence) and the matches are ranked by `ts_rank_cd`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, PgConnection};

use super::Judged;
use crate::eval_retrieval::ranked_documents;
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

/// The ranking statement: `$1` the query text, `$2` the number of hits.
const RANKED: &str = "\
    WITH q AS (SELECT to_tsquery('english', \
                 replace(plainto_tsquery('english', $1)::text, ' & ', ' | ')) AS q) \
    SELECT document_id::text FROM chunks, q \
    WHERE full_text @@ q.q \
    ORDER BY ts_rank_cd(full_text, q.q) DESC \
    LIMIT $2";

/// Counts the chunks a query matches.
const MATCHES: &str = "\
    SELECT count(*) FROM chunks \
    WHERE full_text @@ to_tsquery('english', \
            replace(plainto_tsquery('english', $1)::text, ' & ', ' | '))";

/// Indexes the chunks of the cluster's schema at `url` for full-text search and scores every
/// judged query.
pub(super) async fn measure(
    url: &str,
    judged: &Judged,
    corpus_id_of: &HashMap<String, String>,
) -> anyhow::Result<FullText> {
    let mut db = PgConnection::connect(url).await?;
    let started = Instant::now();
    db.execute(
        "ALTER TABLE chunks ADD COLUMN full_text tsvector GENERATED ALWAYS AS \
         (to_tsvector('english', section || ' ' || content)) STORED",
    )
    .await?;
    db.execute("CREATE INDEX chunks_full_text ON chunks USING gin (full_text)")
        .await?;
    db.execute("ANALYZE chunks").await?;
    let indexing = started.elapsed();

    let mut ndcg = 0.0;
    let mut matches = 0i64;
    for (query_id, text) in &judged.queries {
        let hits: Vec<String> = sqlx::query_scalar(RANKED)
            .bind(text)
            .bind(QUALITY_HITS)
            .fetch_all(&mut db)
            .await?;
        let ranked = ranked_documents(hits.iter().map(String::as_str), corpus_id_of);
        ndcg += ndcg_at(&ranked, &judged.judgements[query_id], 10);
        matches += sqlx::query_scalar::<_, i64>(MATCHES)
            .bind(text)
            .fetch_one(&mut db)
            .await?;
    }
    let mut latencies = Vec::with_capacity(judged.queries.len());
    for (_, text) in &judged.queries {
        let asked = Instant::now();
        sqlx::query_scalar::<_, String>(RANKED)
            .bind(text)
            .bind(TIMED_HITS)
            .fetch_all(&mut db)
            .await?;
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
