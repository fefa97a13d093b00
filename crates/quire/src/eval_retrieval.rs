//! `quire eval retrieval`: ingests a BEIR-layout corpus through the product's own pipeline
//! (staging, parsing in the worker, chunking, store, index) into a temporary data directory,
//! runs every judged query through the product's search, folds chunk hits into a document
//! ranking (a document ranks where its best chunk does) and prints nDCG@10, Recall@100,
//! MRR@10, ingest chunks/second and query latency percentiles.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use quire_core::{
    NewSource, SourceDescription, SourceId, SourceName, SourceScope, SourceType, SystemClock,
};
use quire_ingest::Upload;
use quire_store::Created;

use crate::bench::{ms, percentile, read_jsonl};
use crate::config::Config;
use crate::retrieval_metrics::{Judgements, ndcg_at, recall_at, reciprocal_rank_at};

/// Chunk hits fetched per query; enough for 100 distinct documents on corpora of short
/// documents (SciFact abstracts are one or two chunks).
const CHUNK_HITS: usize = 300;

/// Which retriever to evaluate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// BM25 over chunks (Tantivy).
    Keyword,
    /// Embeddings only.
    Vector,
    /// Keyword and vector results fused.
    Hybrid,
}

/// Options of `quire eval retrieval`.
#[derive(Debug, Args)]
pub struct RetrievalEvalArgs {
    /// BEIR `corpus.jsonl` (`_id`, `title`, `text` per line).
    #[arg(long, value_name = "FILE")]
    corpus: PathBuf,
    /// BEIR `queries.jsonl` (`_id`, `text` per line).
    #[arg(long, value_name = "FILE")]
    queries: PathBuf,
    /// BEIR qrels TSV (`query-id`, `corpus-id`, `score`, with a header line).
    #[arg(long, value_name = "FILE")]
    qrels: PathBuf,
    /// Retriever to evaluate.
    #[arg(long, value_enum, default_value = "keyword")]
    mode: Mode,
    /// Documents to ingest at most (all by default).
    #[arg(long)]
    documents: Option<usize>,
}

/// Runs the evaluation and prints the report.
pub async fn retrieval(base: &Config, args: RetrievalEvalArgs) -> anyhow::Result<()> {
    if args.mode != Mode::Keyword {
        bail!(
            "--mode {:?} is not available yet: the vector index is not part of this build \
             (only keyword search is); see docs/retrieval.md",
            args.mode
        );
    }
    let judgements = read_qrels(&args.qrels)?;
    let queries: Vec<(String, String)> = read_jsonl(&args.queries, usize::MAX)?
        .into_iter()
        .filter_map(|v| {
            Some((
                v["_id"].as_str()?.to_owned(),
                v["text"].as_str()?.to_owned(),
            ))
        })
        .filter(|(id, _)| judgements.contains_key(id))
        .collect();
    let corpus = read_jsonl(&args.corpus, args.documents.unwrap_or(usize::MAX))?;
    if queries.is_empty() || corpus.is_empty() {
        bail!("nothing to evaluate: no judged queries or no documents");
    }

    let scratch = tempfile::tempdir().context("could not create a scratch directory")?;
    let mut config = base.clone();
    config.data_dir = scratch.path().to_path_buf();
    config.workers.count = 0;
    let app = crate::build(&config, Arc::new(SystemClock)).await?;
    let state = app.state().clone();
    let source = state
        .store
        .create_source(NewSource {
            id: SourceId::new(),
            name: SourceName::parse("eval")?,
            description: SourceDescription::default(),
            source_type: SourceType::Network,
            created_at: quire_core::Clock::now(&SystemClock),
        })
        .await?;

    let started = Instant::now();
    let mut corpus_id_of = HashMap::new();
    for doc in &corpus {
        let id = doc["_id"].as_str().unwrap_or_default().to_owned();
        let text = format!(
            "# {}\n\n{}",
            doc["title"].as_str().unwrap_or(""),
            doc["text"].as_str().unwrap_or("")
        );
        let mut staged = state.ingest.stage().await?;
        staged.write(text.as_bytes()).await?;
        let upload = Upload {
            name: format!("{id}.md"),
            content_type: Some("text/markdown".into()),
            staged: staged.finish().await?,
        };
        let document = match state
            .ingest
            .accept(&SourceScope::All, source.id, upload)
            .await?
        {
            Created::New(d) | Created::Existing(d) => d,
        };
        corpus_id_of.insert(document.id, id);
    }
    while state.ingest.process_next("eval").await? {}
    let ingest_seconds = started.elapsed().as_secs_f64();
    let chunks = state.index.chunk_count();

    let scope = SourceScope::All;
    let mut totals = [0.0f64; 3];
    let mut times = Vec::with_capacity(queries.len());
    for (query_id, text) in &queries {
        let index = Arc::clone(&state.index);
        let (text, task_scope) = (text.clone(), scope.clone());
        let timed = Instant::now();
        let hits =
            tokio::task::spawn_blocking(move || index.search(&text, &task_scope, CHUNK_HITS))
                .await??;
        times.push(timed.elapsed());
        let mut seen = HashSet::new();
        let ranked: Vec<String> = hits
            .iter()
            .filter(|hit| seen.insert(hit.document_id))
            .filter_map(|hit| corpus_id_of.get(&hit.document_id).cloned())
            .collect();
        let judged = &judgements[query_id];
        totals[0] += ndcg_at(&ranked, judged, 10);
        totals[1] += recall_at(&ranked, judged, 100);
        totals[2] += reciprocal_rank_at(&ranked, judged, 10);
    }
    times.sort();
    let n = queries.len() as f64;
    println!("mode           {:?}", args.mode);
    println!(
        "documents      {}  chunks {chunks}  judged queries {}",
        corpus.len(),
        queries.len()
    );
    println!("nDCG@10        {:.4}", totals[0] / n);
    println!("Recall@100     {:.4}", totals[1] / n);
    println!("MRR@10         {:.4}", totals[2] / n);
    println!(
        "ingest         {ingest_seconds:.1} s, {:.1} chunks/s (parse, chunk, store, index)",
        chunks as f64 / ingest_seconds
    );
    println!(
        "query latency  p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms (top {CHUNK_HITS} chunks)",
        ms(percentile(&times, 0.50)),
        ms(percentile(&times, 0.99)),
        ms(*times.last().unwrap_or(&Duration::ZERO))
    );
    Ok(())
}

/// Judgements by query id from a BEIR qrels TSV (header line skipped).
fn read_qrels(path: &PathBuf) -> anyhow::Result<HashMap<String, Judgements>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read {}", path.display()))?;
    let mut out: HashMap<String, Judgements> = HashMap::new();
    for (number, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
        if number == 0 && fields.first() == Some(&"query-id") || line.trim().is_empty() {
            continue;
        }
        let [query, document, grade] = fields[..] else {
            bail!(
                "{}: line {} is not query-id, corpus-id, score",
                path.display(),
                number + 1
            );
        };
        let grade: i64 = grade
            .parse()
            .with_context(|| format!("{}: line {}: bad score", path.display(), number + 1))?;
        out.entry(query.to_owned())
            .or_default()
            .insert(document.to_owned(), grade.max(0) as u32);
    }
    Ok(out)
}
