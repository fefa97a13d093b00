//! `quire bench cluster`: the embedded default against cluster mode on the same corpus, in one
//! run on one machine. For the embedded store and then for each node count, the bench starts
//! that many servers (in this process, each with its own data directory) on one fresh
//! PostgreSQL schema and one shared directory of originals, bulk-uploads the corpus through the
//! first node, and waits until every document is finished. It reports documents/s and chunks/s,
//! how long the last node took to find the last document (the index feed), search latency
//! through the last node (p50 and p99 over the corpus's queries, one at a time), and
//! PostgreSQL's share of the CPU time the run used (PostgreSQL's processes against this
//! process and its parse workers). With `--qrels` it also measures quality through the last
//! node: nDCG@10 of every judged query by keyword and by hybrid search, from that node's own
//! indexes (in a cluster of several nodes mostly filled from the index feed, with the vectors
//! other nodes computed), so the cluster's ranking can be compared with the embedded store's.
//!
//! All nodes share this machine's cores: on one machine more nodes add no CPU, so the figures
//! show what the coordination costs, not what more machines would add.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use quire_server::Config;

use quire_app::search::Retrieval;

use crate::bench::{percentile, read_jsonl};
use crate::bench_ingest::{InputFile, PipelineArgs, corpus_files};
use crate::bench_server::BenchServer;
use crate::eval_retrieval::{corpus_id, judged_queries, mean_ndcg};
use crate::retrieval_metrics::Judgements;

mod full_text;

/// Options of `quire bench cluster`.
#[derive(Debug, Args)]
pub struct ClusterBenchArgs {
    /// BEIR `corpus.jsonl` (`_id`, `title`, `text` per line).
    #[arg(long, value_name = "FILE")]
    corpus: PathBuf,
    /// BEIR `queries.jsonl`: searched one at a time through the last node, for latency.
    #[arg(long, value_name = "FILE")]
    queries: PathBuf,
    /// Take only the first N documents.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Upload the corpus this many times, each copy into a source of its own (the same bytes
    /// are one document per source), to measure search at a larger scale than the corpus.
    #[arg(long, default_value_t = 1)]
    copies: usize,
    /// Queries timed (at most).
    #[arg(long, default_value_t = 300)]
    searches: usize,
    /// PostgreSQL server to run the cluster on (a schema of its own is made per run and
    /// dropped after it); `scripts/postgres start` prints one.
    #[arg(long, value_name = "URL", env = "QUIRE_BENCH_POSTGRES_URL")]
    postgres_url: String,
    /// BEIR qrels TSV: also report nDCG@10 of every judged query (keyword and hybrid) through
    /// the last node.
    #[arg(long, value_name = "FILE")]
    qrels: Option<PathBuf>,
    /// Node counts to measure, in order (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    nodes: Vec<usize>,
    #[command(flatten)]
    pipeline: PipelineArgs,
}

/// What one configuration measured.
#[derive(Debug, Clone, PartialEq)]
struct RunReport {
    /// "embedded" or "cluster of N".
    label: String,
    documents: usize,
    chunks: u64,
    seconds: f64,
    /// How long after the first node had every document finished the last node found the
    /// last one (cluster only).
    follow_ms: Option<f64>,
    /// Search latencies through the last node, sorted.
    latencies: Vec<Duration>,
    /// PostgreSQL's share of the CPU time used during ingestion (cluster only).
    postgres_cpu_share: Option<f64>,
    /// nDCG@10 over the judged queries through the last node, per retrieval (with `--qrels`).
    quality: Vec<(&'static str, f64)>,
    /// PostgreSQL's own full-text search over the same chunks (one cluster, with `--qrels`).
    full_text: Option<full_text::FullText>,
}

impl RunReport {
    fn line(&self) -> String {
        let seconds = self.seconds.max(1e-9);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        format!(
            "{:<14} {:>9.1} {:>9.1} {:>9} {:>9.1} {:>9.1} {:>11} {:>10}",
            self.label,
            self.documents as f64 / seconds,
            self.chunks as f64 / seconds,
            self.chunks,
            ms(percentile(&self.latencies, 0.50)),
            ms(percentile(&self.latencies, 0.99)),
            self.follow_ms
                .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.0}")),
            self.postgres_cpu_share
                .map_or_else(|| "-".to_owned(), |share| format!("{:.0}%", 100.0 * share)),
        ) + &self
            .quality
            .iter()
            .map(|(label, ndcg)| format!("  nDCG@10 {label} {ndcg:.4}"))
            .collect::<String>()
    }
}

/// The judged queries and what the bench needs to score them.
struct Judged {
    queries: Vec<(String, String)>,
    judgements: HashMap<String, Judgements>,
    /// Whether to score hybrid search too (a model is configured).
    hybrid: bool,
}

/// Runs the benchmark and prints its report.
pub async fn cluster(base: &Config, args: ClusterBenchArgs) -> anyhow::Result<()> {
    let files = corpus_files(&args.corpus, args.limit.unwrap_or(usize::MAX))?;
    if files.is_empty() {
        bail!("nothing to ingest");
    }
    let queries: Vec<String> = read_jsonl(&args.queries, args.searches)?
        .iter()
        .filter_map(|q| q["text"].as_str().map(str::to_owned))
        .collect();
    let mut config = base.clone();
    args.pipeline.apply(&mut config);
    let judged = match &args.qrels {
        Some(path) => {
            let (queries, judgements) = judged_queries(&args.queries, path)?;
            Some(Judged {
                queries,
                judgements,
                hybrid: !args.pipeline.keyword_only,
            })
        }
        None => None,
    };
    println!(
        "{} documents{}, {} queries, {} workers per node, {}",
        files.len(),
        if args.copies > 1 {
            format!(" × {} copies", args.copies)
        } else {
            String::new()
        },
        queries.len(),
        config.workers.count,
        if args.pipeline.keyword_only {
            "keyword only"
        } else {
            "hybrid"
        }
    );
    anyhow::ensure!(args.copies > 0, "--copies must be at least 1");
    let corpus = Corpus {
        files: &files,
        copies: args.copies,
        queries: &queries,
        judged: judged.as_ref(),
    };
    let mut reports = vec![run(&config, &corpus, None, false).await?];
    for (n, &nodes) in args.nodes.iter().enumerate() {
        anyhow::ensure!(nodes > 0, "a cluster needs at least one node");
        let schema = format!("quire_bench_{}", uuid::Uuid::new_v4().simple());
        let url = quire_store::create_schema(&args.postgres_url, &schema)
            .await
            .context("could not make a schema on --postgres-url")?;
        // The chunks are the same in every cluster: PostgreSQL's full text is measured once.
        let report = run(&config, &corpus, Some((nodes, url)), n == 0).await;
        quire_store::drop_schema(&args.postgres_url, &schema).await?;
        reports.push(report?);
    }
    println!(
        "{:<14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>10}",
        "store", "docs/s", "chunks/s", "chunks", "p50 ms", "p99 ms", "follow ms", "PG CPU"
    );
    for report in &reports {
        println!("{}", report.line());
    }
    for report in &reports {
        if let Some(full_text) = &report.full_text {
            let ms = |d: Duration| d.as_secs_f64() * 1000.0;
            println!(
                "PostgreSQL full text on the chunks of the {} (ts_rank_cd over a GIN-indexed \
                 tsvector, the query's words ORed): nDCG@10 {:.4}, p50 {:.1} ms, p99 {:.1} ms \
                 at limit 10, {:.0} matching chunks per query on average; column and index \
                 added in {:.1} s",
                report.label,
                full_text.ndcg,
                ms(percentile(&full_text.latencies, 0.50)),
                ms(percentile(&full_text.latencies, 0.99)),
                full_text.mean_matches,
                full_text.indexing.as_secs_f64()
            );
        }
    }
    Ok(())
}

/// What every configuration ingests and asks.
struct Corpus<'a> {
    files: &'a [InputFile],
    /// Times the files are uploaded, each time into a source of its own.
    copies: usize,
    /// Searched one at a time through the last node, for latency.
    queries: &'a [String],
    judged: Option<&'a Judged>,
}

/// One configuration: the embedded store (`cluster` is `None`) or `nodes` nodes on `url`.
/// With `measure_full_text` (and judged queries) a cluster's chunks are then also searched
/// with PostgreSQL's own full-text ranking.
async fn run(
    base: &Config,
    corpus: &Corpus<'_>,
    cluster: Option<(usize, String)>,
    measure_full_text: bool,
) -> anyhow::Result<RunReport> {
    let files = corpus.files;
    let scratch = tempfile::tempdir().context("could not create a scratch directory")?;
    let originals = scratch.path().join("originals");
    let nodes = cluster.as_ref().map_or(1, |(n, _)| *n);
    let mut servers = Vec::with_capacity(nodes);
    for n in 0..nodes {
        let mut config = base.clone();
        config.data_dir = scratch.path().join(format!("node{n}"));
        if let Some((_, url)) = &cluster {
            config.store.url = Some(quire_core::Secret::new(url.clone()));
            // Every node reads the originals the first one stored: one directory for all.
            config.files.url = Some(format!("file://{}", originals.display()));
        }
        servers.push(BenchServer::start(&config, "quire bench cluster").await?);
    }
    let label = match &cluster {
        None => "embedded".to_owned(),
        Some((n, _)) => format!("cluster of {n}"),
    };
    let first = &servers[0];
    let last = &servers[nodes - 1];
    let mut sources = Vec::with_capacity(corpus.copies);
    for copy in 1..=corpus.copies {
        sources.push(first.client.create_source(&format!("bench-{copy}")).await?);
    }
    let postgres_before = postgres_cpu_seconds();
    let own_before = own_cpu_seconds();
    let started = Instant::now();
    let total = files.len() * corpus.copies;
    // Document ids in upload order: copy after copy, each in the files' order.
    let mut ids = Vec::with_capacity(total);
    for source in &sources {
        for part in files.chunks(100) {
            ids.extend(first.client.upload(source, part).await?);
        }
    }
    first.wait_until_finished(total).await?;
    let seconds = started.elapsed().as_secs_f64();
    let postgres_cpu = postgres_cpu_seconds() - postgres_before;
    let own_cpu = own_cpu_seconds() - own_before;
    let (ready, chunks) = ready_documents(first, &ids).await?;
    let follow_ms = match &cluster {
        Some(_) => Some(wait_until_searchable(last, &ready).await?),
        None => None,
    };
    let mut latencies = Vec::with_capacity(corpus.queries.len());
    for query in corpus.queries {
        let asked = Instant::now();
        last.client.search(query, 10).await?;
        latencies.push(asked.elapsed());
    }
    latencies.sort();
    let corpus_id_of: HashMap<String, String> = ids
        .iter()
        .zip(files.iter().cycle())
        .map(|(id, file)| (id.to_string(), corpus_id(&file.name).to_owned()))
        .collect();
    let mut quality = Vec::new();
    if let Some(judged) = corpus.judged {
        let mut retrievals = vec![("keyword", Retrieval::Keyword)];
        if judged.hybrid {
            retrievals.push(("hybrid", Retrieval::Hybrid));
        }
        for (label, retrieval) in retrievals {
            let ndcg = mean_ndcg(
                &last.state,
                &judged.queries,
                &judged.judgements,
                &corpus_id_of,
                retrieval,
            )
            .await?;
            quality.push((label, ndcg));
        }
    }
    for server in servers {
        server.stop().await?;
    }
    let full_text = match (&cluster, corpus.judged) {
        (Some((_, url)), Some(judged)) if measure_full_text => {
            Some(full_text::measure(url, judged, &corpus_id_of).await?)
        }
        _ => None,
    };
    Ok(RunReport {
        label,
        documents: total,
        chunks,
        seconds,
        follow_ms,
        latencies,
        postgres_cpu_share: cluster
            .is_some()
            .then(|| postgres_cpu / (postgres_cpu + own_cpu).max(1e-9)),
        quality,
        full_text,
    })
}

/// Waits until `server`'s own keyword index holds every document in `ready`, and returns how
/// long that took in milliseconds.
async fn wait_until_searchable(
    server: &BenchServer,
    ready: &HashSet<quire_core::DocumentId>,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    loop {
        let indexed: HashSet<_> = server.parts.index.document_ids()?.into_iter().collect();
        if indexed.is_superset(ready) {
            return Ok(started.elapsed().as_secs_f64() * 1000.0);
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(120),
            "the last node did not follow within 2 minutes"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Those of `ids` that are ready, and their chunks.
async fn ready_documents(
    server: &BenchServer,
    ids: &[quire_core::DocumentId],
) -> anyhow::Result<(HashSet<quire_core::DocumentId>, u64)> {
    let mut ready = HashSet::new();
    let mut chunks = 0;
    for id in ids {
        if let Some(document) = server.parts.store.find_document(*id).await?
            && document.status == quire_core::DocumentStatus::Ready
        {
            ready.insert(*id);
            chunks += document.chunk_count;
        }
    }
    Ok((ready, chunks))
}

/// CPU seconds (user and system) used so far by every process named `postgres` on this
/// machine (`/proc/<pid>/stat`, in clock ticks of 100 Hz). Backends that exit during the run
/// take their time with them, so this is a lower bound; the bench's connections are pooled and
/// stay open.
fn postgres_cpu_seconds() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|stat| {
            let (name, ticks) = stat_cpu(&stat)?;
            (name == "postgres").then_some(ticks)
        })
        .sum::<f64>()
        / CLOCK_TICKS
}

/// This process's CPU seconds, with those of its children that have ended (the parse
/// workers).
fn own_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let fields = stat_fields(&stat)?;
            let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
            // utime, stime, cutime, cstime: fields 14 to 17 of stat(5), 11 to 14 after `comm`.
            Some(tick(11)? + tick(12)? + tick(13)? + tick(14)?)
        })
        .unwrap_or(0.0)
        / CLOCK_TICKS
}

/// `sysconf(_SC_CLK_TCK)` on Linux.
const CLOCK_TICKS: f64 = 100.0;

/// A process's name and its user plus system clock ticks, from its `stat` line.
fn stat_cpu(stat: &str) -> Option<(String, f64)> {
    let name = stat.get(stat.find('(')? + 1..stat.rfind(')')?)?.to_owned();
    let fields = stat_fields(stat)?;
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

/// The fields of a `stat` line after the `(comm)` one, which may itself hold spaces.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    Some(
        stat.get(stat.rfind(')')? + 1..)?
            .split_whitespace()
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_the_name_and_cpu_ticks() {
        // A postgres backend's line: the name holds a space and parentheses are balanced.
        let line = "4242 (postgres) S 1 4242 4242 0 -1 4194560 2213 0 0 0 150 37 0 0 20 0 1 0 \
                    883 221450240 3154 18446744073709551615";
        assert_eq!(stat_cpu(line), Some(("postgres".to_owned(), 187.0)));
        let odd = "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 5 6 7 8 20 0 1 0 9 0 0 0";
        assert_eq!(stat_cpu(odd), Some(("a (b) c".to_owned(), 11.0)));
        let fields = stat_fields(odd).unwrap();
        assert_eq!(&fields[11..15], ["5", "6", "7", "8"]);
    }

    #[test]
    fn the_report_line_shows_dashes_where_a_figure_does_not_apply() {
        let report = RunReport {
            label: "embedded".into(),
            documents: 100,
            chunks: 150,
            seconds: 2.0,
            follow_ms: None,
            latencies: vec![Duration::from_millis(4), Duration::from_millis(8)],
            postgres_cpu_share: None,
            quality: Vec::new(),
            full_text: None,
        };
        let line = report.line();
        assert!(line.starts_with("embedded"), "{line}");
        assert!(line.contains("50.0") && line.contains("75.0"), "{line}");
        assert_eq!(line.matches(" -").count(), 2, "{line}");
        let cluster = RunReport {
            label: "cluster of 2".into(),
            follow_ms: Some(140.0),
            postgres_cpu_share: Some(0.25),
            quality: vec![("keyword", 0.6512), ("hybrid", 0.7301)],
            ..report
        };
        let line = cluster.line();
        assert!(line.contains("140") && line.contains("25%"), "{line}");
        assert!(
            line.ends_with("nDCG@10 keyword 0.6512  nDCG@10 hybrid 0.7301"),
            "{line}"
        );
    }

    #[test]
    fn the_postgres_total_is_a_number() {
        // Whatever runs on this machine, reading /proc never fails the bench.
        assert!(postgres_cpu_seconds() >= 0.0);
        // This process's own time grows as it works (in clock ticks of 10 ms).
        let before = own_cpu_seconds();
        let started = Instant::now();
        let mut x = 0u64;
        while own_cpu_seconds() <= before {
            for i in 0..100_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            assert!(started.elapsed() < Duration::from_secs(5), "{x}");
        }
    }
}
