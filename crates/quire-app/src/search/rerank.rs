//! Reranking: the first results of the fused order, read by a cross-encoder behind a server
//! and shown in its order. A reranker that fails, answers garbage or runs out of time costs
//! the search its reranking, never its answer: the results keep the fused order, the failure
//! is counted in metrics and logged (at most once a minute, with the number left unsaid).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quire_core::embed::ModelError;
use quire_core::rerank::Reranker;

use super::SearchResult;

/// Counter of rerank requests, labelled `outcome`: `ok`, `error` (refused, unreachable or
/// garbage) or `timeout`.
pub const RERANK_REQUESTS: &str = "quire_rerank_requests_total";
/// Histogram of the time a rerank request took, whatever its outcome.
pub const RERANK_SECONDS: &str = "quire_rerank_duration_seconds";

/// How often a failing reranker is logged: every failure would flood the log while a server
/// is down, and the counter already holds the count.
const WARN_INTERVAL: Duration = Duration::from_secs(60);

/// The reranker search hands its first results to (`[search.rerank]`). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Rerank {
    reranker: Arc<dyn Reranker>,
    candidates: usize,
    warnings: Arc<Mutex<Warnings>>,
}

/// When the last failure was logged, and the failures since that were not.
#[derive(Debug, Default)]
struct Warnings {
    last: Option<Instant>,
    unsaid: u64,
}

impl Rerank {
    /// Reranks the first `candidates` results of the fused order (at least a search's limit)
    /// with `reranker`.
    pub fn new(reranker: Arc<dyn Reranker>, candidates: usize) -> Self {
        Self {
            reranker,
            candidates: candidates.max(1),
            warnings: Arc::default(),
        }
    }

    /// Results a search of `limit` resolves before reranking.
    pub(crate) fn depth(&self, limit: usize) -> usize {
        self.candidates.max(limit)
    }

    /// `results` (the fused order) in the reranker's order, each with the reranker's score,
    /// cut to `limit`; in the fused order, cut, when the reranker fails.
    pub(crate) async fn reorder(
        &self,
        query: &str,
        results: Vec<SearchResult>,
        limit: usize,
    ) -> Vec<SearchResult> {
        let mut results = results;
        if !results.is_empty() {
            let passages: Vec<String> = results.iter().map(|r| r.content.clone()).collect();
            let started = Instant::now();
            let scored = self.reranker.rerank(query, &passages).await;
            metrics::histogram!(RERANK_SECONDS).record(started.elapsed().as_secs_f64());
            let scored = scored.and_then(|scores| {
                if scores.len() == results.len() {
                    Ok(scores)
                } else {
                    Err(ModelError::Inference(format!(
                        "{} scores for {} passages",
                        scores.len(),
                        results.len()
                    )))
                }
            });
            match scored {
                Ok(scores) => {
                    metrics::counter!(RERANK_REQUESTS, "outcome" => "ok").increment(1);
                    let mut pairs: Vec<(f32, SearchResult)> =
                        scores.into_iter().zip(results).collect();
                    // Stable: passages the reranker ties keep their fused order.
                    pairs.sort_by(|(a, _), (b, _)| b.total_cmp(a));
                    results = pairs
                        .into_iter()
                        .map(|(score, mut result)| {
                            result.score = score;
                            result
                        })
                        .collect();
                }
                Err(error) => {
                    let outcome = match error {
                        ModelError::Timeout { .. } => "timeout",
                        _ => "error",
                    };
                    metrics::counter!(RERANK_REQUESTS, "outcome" => outcome).increment(1);
                    self.warn(&error);
                }
            }
        }
        results.truncate(limit);
        results
    }

    /// Logs a failure, unless one was logged within [`WARN_INTERVAL`].
    fn warn(&self, error: &ModelError) {
        let mut warnings = self.warnings.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if warnings
            .last
            .is_some_and(|last| now.duration_since(last) < WARN_INTERVAL)
        {
            warnings.unsaid += 1;
            return;
        }
        let unsaid = std::mem::take(&mut warnings.unsaid);
        warnings.last = Some(now);
        drop(warnings);
        tracing::warn!(
            reranker = %self.reranker.name(),
            error = %error,
            failures_not_logged = unsaid,
            "reranking failed; results keep the fused order"
        );
    }
}
