//! `quire bench queries`: search throughput and latency under concurrent clients, as they see
//! it over HTTP. The product's server runs on a fresh temporary data directory with an
//! embedding model; the bench bulk-uploads the first documents of a BEIR corpus, waits until
//! they are processed, then for each number of clients runs that many clients for a fixed
//! time, each sending the corpus's queries (`POST /api/v1/search`, the server's default
//! retrieval: hybrid) one after another. It reports requests/s and the latency percentiles of
//! each client count.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use quire_server::Config;

use crate::bench::read_jsonl;
use crate::bench_ingest::corpus_files;
use crate::bench_server::{BenchServer, Client};

/// Queries sent one after another before the first measurement, so the model's first calls
/// (allocations, thread start-up) are not timed.
const WARM_UP_QUERIES: usize = 20;

/// Options of `quire bench queries`.
#[derive(Debug, Args)]
pub struct QueriesBenchArgs {
    /// BEIR `corpus.jsonl` (`_id`, `title`, `text` per line).
    #[arg(long, value_name = "FILE")]
    corpus: PathBuf,
    /// BEIR `queries.jsonl` (`text` per line), sent in order, round-robin.
    #[arg(long, value_name = "FILE")]
    queries: PathBuf,
    /// Embedding model directory; defaults to the configured `embedding.model_dir`.
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// Documents of the corpus to ingest first.
    #[arg(long, default_value_t = 1000)]
    documents: usize,
    /// Client counts to measure, in order (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    clients: Vec<usize>,
    /// Seconds each client count runs.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// `limit` of each search.
    #[arg(long, default_value_t = 10)]
    limit: usize,
}

/// What one client count measured.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoadReport {
    /// Concurrent clients.
    pub(crate) clients: usize,
    /// Searches answered.
    pub(crate) requests: usize,
    /// Seconds from the first request to the last answer.
    pub(crate) seconds: f64,
    /// Each search's latency in milliseconds, sorted.
    pub(crate) latencies_ms: Vec<f64>,
}

impl LoadReport {
    /// The report's table row: clients, requests/s, p50, p90, p99 (ms).
    fn line(&self) -> String {
        format!(
            "{:>7} {:>10.1} {:>8.1} {:>8.1} {:>8.1} {:>9}",
            self.clients,
            self.requests as f64 / self.seconds,
            percentile(&self.latencies_ms, 0.50),
            percentile(&self.latencies_ms, 0.90),
            percentile(&self.latencies_ms, 0.99),
            self.requests,
        )
    }
}

/// The `q` quantile of sorted `values` (nearest rank), or 0 without any.
pub(crate) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Runs `quire bench queries`.
pub async fn queries(base: &Config, args: QueriesBenchArgs) -> anyhow::Result<()> {
    if args.clients.is_empty() || args.clients.contains(&0) {
        bail!("--clients takes counts of at least 1");
    }
    if args.seconds.is_nan() || args.seconds <= 0.0 {
        bail!("--seconds must be positive");
    }
    let files = corpus_files(&args.corpus, args.documents)?;
    let queries: Vec<String> = read_jsonl(&args.queries, usize::MAX)?
        .into_iter()
        .filter_map(|q| q["text"].as_str().map(str::to_owned))
        .filter(|q| !q.trim().is_empty())
        .collect();
    if files.is_empty() || queries.is_empty() {
        bail!("the bench needs documents and queries");
    }
    let scratch = tempfile::tempdir().context("could not create a scratch directory")?;
    let mut config = base.clone();
    config.data_dir = scratch.path().to_path_buf();
    if let Some(dir) = &args.model_dir {
        config.embedding.model_dir = Some(dir.clone());
        config.embedding.base_url = None;
    }
    let server = BenchServer::start(&config, "quire bench queries").await?;
    let Some(semantic) = server.parts.ingest.semantic() else {
        bail!(
            "no embedding model ({}): pass --model-dir DIR or set QUIRE_EMBEDDING_MODEL_DIR",
            server.state.semantic_note()
        );
    };
    let embedder = format!(
        "{} on {}",
        semantic.embedder().model_id(),
        semantic.embedder().engine()
    );
    let source = server.client.create_source("bench").await?;
    for part in files.chunks(100) {
        server.client.upload(&source, part).await?;
    }
    let (ready, failed, held) = server.wait_until_finished(files.len()).await?;
    println!(
        "{} documents ({ready} ready, {failed} failed, {held} held), {} chunks; embedder {embedder}",
        files.len(),
        server.parts.index.chunk_count()
    );
    for query in queries.iter().cycle().take(WARM_UP_QUERIES) {
        server.client.search(query, args.limit).await?;
    }
    let queries = Arc::new(queries);
    println!("clients  requests/s   p50 ms   p90 ms   p99 ms  requests");
    for &clients in &args.clients {
        let report = load(
            &server.client,
            &queries,
            clients,
            Duration::from_secs_f64(args.seconds),
            args.limit,
        )
        .await?;
        println!("{}", report.line());
    }
    server.stop().await
}

/// `clients` clients searching one query after another for `duration`, the queries taken in
/// turn from `queries`.
async fn load(
    client: &Client,
    queries: &Arc<Vec<String>>,
    clients: usize,
    duration: Duration,
    limit: usize,
) -> anyhow::Result<LoadReport> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (client, queries, next) = (client.clone(), Arc::clone(queries), Arc::clone(&next));
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let query = &queries[next.fetch_add(1, Ordering::Relaxed) % queries.len()];
                let sent = Instant::now();
                client.search(query, limit).await?;
                latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
            }
            anyhow::Ok(latencies)
        });
    }
    let mut latencies_ms = Vec::new();
    while let Some(done) = tasks.join_next().await {
        latencies_ms.extend(done.context("a client task failed")??);
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies_ms.sort_by(f64::total_cmp);
    Ok(LoadReport {
        clients,
        requests: latencies_ms.len(),
        seconds,
        latencies_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 0.50), 50.0);
        assert_eq!(percentile(&values, 0.99), 99.0);
        assert_eq!(percentile(&values, 1.0), 100.0);
        assert_eq!(percentile(&[7.0], 0.5), 7.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn the_row_divides_requests_by_the_wall_time() {
        let report = LoadReport {
            clients: 8,
            requests: 4,
            seconds: 2.0,
            latencies_ms: vec![10.0, 20.0, 30.0, 40.0],
        };
        let line = report.line();
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields, ["8", "2.0", "20.0", "40.0", "40.0", "4"]);
    }
}
