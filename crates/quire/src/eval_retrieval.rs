//! `quire eval retrieval`: ingests a BEIR-layout corpus through the product's own pipeline
//! (staging, parsing in the worker, chunking, store, index) into a temporary data directory,
//! runs every judged query through the product's search, folds chunk hits into a document
//! ranking (a document ranks where its best chunk does) and prints nDCG@10, Recall@100,
//! MRR@10, ingest chunks/second and query latency percentiles. The vector and hybrid modes
//! embed the same chunks with the product's embedder into the product's vector index and fuse
//! with the product's reciprocal rank fusion, in-process.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use quire_core::{DocumentId, SourceId, SourceScope};
use quire_ingest::chunk_blocks;
use quire_models::LocalEmbedder;
use quire_search::{FusionParams, VectorIndex, reciprocal_rank_fusion};

use crate::bench::{ingest_markdown, ms, percentile, read_jsonl, scratch_app};
use crate::config::Config;
use crate::retrieval_metrics::{Judgements, ndcg_at, recall_at, reciprocal_rank_at};

/// Chunk hits fetched per query; enough for 100 distinct documents on corpora of short
/// documents (SciFact abstracts are one or two chunks).
const CHUNK_HITS: usize = 300;

/// Which retrievers to evaluate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// BM25 over chunks (Tantivy).
    Keyword,
    /// Embeddings only.
    Vector,
    /// Keyword and vector results fused by reciprocal rank.
    Hybrid,
    /// All three, from one ingestion, so they compare on the same run.
    All,
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
    /// Retrievers to evaluate.
    #[arg(long, value_enum, default_value = "keyword")]
    mode: Mode,
    /// Embedding model directory (vector and hybrid modes).
    #[arg(long, value_name = "DIR", env = "QUIRE_EMBEDDING_MODEL_DIR")]
    model_dir: Option<PathBuf>,
    /// Documents to ingest at most (all by default).
    #[arg(long)]
    documents: Option<usize>,
    /// RRF's `k` for the hybrid mode.
    #[arg(long, default_value_t = FusionParams::default().k)]
    rrf_k: f32,
    /// Weight of the vector list in the hybrid mode (the keyword list weighs 1).
    #[arg(long, default_value_t = FusionParams::default().vector_weight)]
    vector_weight: f32,
}

/// What one retriever scored over the judged queries.
#[derive(Default)]
struct Scores {
    ndcg: f64,
    recall: f64,
    mrr: f64,
    times: Vec<Duration>,
}

impl Scores {
    fn add(&mut self, ranked: &[String], judged: &Judgements, took: Duration) {
        self.ndcg += ndcg_at(ranked, judged, 10);
        self.recall += recall_at(ranked, judged, 100);
        self.mrr += reciprocal_rank_at(ranked, judged, 10);
        self.times.push(took);
    }
}

/// Runs the evaluation and prints the report.
pub async fn retrieval(base: &Config, args: RetrievalEvalArgs) -> anyhow::Result<()> {
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
    let semantic = args.mode != Mode::Keyword;
    let embedder = match (&args.model_dir, semantic) {
        (Some(dir), true) => Some(Arc::new(LocalEmbedder::load(dir).with_context(|| {
            format!("could not load the embedding model in {}", dir.display())
        })?)),
        (None, true) => bail!(
            "--mode {:?} needs an embedding model: pass --model-dir DIR or set \
             QUIRE_EMBEDDING_MODEL_DIR (scripts/fetch-model puts one in a cache)",
            args.mode
        ),
        _ => None,
    };

    let (scratch, app, config) = scratch_app(base).await?;
    let state = app.state().clone();
    let started = Instant::now();
    let documents: Vec<(String, String)> = corpus
        .iter()
        .map(|doc| {
            let text = format!(
                "# {}\n\n{}",
                doc["title"].as_str().unwrap_or(""),
                doc["text"].as_str().unwrap_or("")
            );
            (doc["_id"].as_str().unwrap_or_default().to_owned(), text)
        })
        .collect();
    let (source, ids) = ingest_markdown(
        &state,
        "eval",
        documents
            .iter()
            .map(|(id, text)| (format!("{id}.md"), text.clone())),
    )
    .await?;
    let corpus_id_of: HashMap<DocumentId, String> = ids
        .iter()
        .zip(&documents)
        .map(|(document, (id, _))| (*document, id.clone()))
        .collect();
    let texts: Vec<(DocumentId, String)> = ids
        .into_iter()
        .zip(documents.into_iter().map(|(_, text)| text))
        .collect();
    let ingest_seconds = started.elapsed().as_secs_f64();
    let chunks = state.index.chunk_count();
    println!(
        "documents {}  chunks {chunks}  judged queries {}",
        corpus.len(),
        queries.len()
    );
    println!(
        "ingest, keyword  {ingest_seconds:.1} s, {:.1} chunks/s (parse, chunk, store, index)",
        chunks as f64 / ingest_seconds
    );

    let vectors = match &embedder {
        Some(embedder) => Some(embed_corpus(
            embedder,
            &texts,
            &config,
            source.id,
            scratch.path(),
        )?),
        None => None,
    };
    let fusion = FusionParams {
        k: args.rrf_k,
        keyword_weight: 1.0,
        vector_weight: args.vector_weight,
    };

    let mut keyword = Scores::default();
    let mut vector = Scores::default();
    let mut hybrid = Scores::default();
    let scope = SourceScope::All;
    let to_documents = |ids: &mut dyn Iterator<Item = DocumentId>| -> Vec<String> {
        let mut seen = HashSet::new();
        ids.filter(|id| seen.insert(*id))
            .filter_map(|id| corpus_id_of.get(&id).cloned())
            .collect()
    };
    for (query_id, text) in &queries {
        let judged = &judgements[query_id];
        let timed = Instant::now();
        let keyword_hits = state.index.search(text, &scope, CHUNK_HITS)?;
        let keyword_took = timed.elapsed();
        keyword.add(
            &to_documents(&mut keyword_hits.iter().map(|h| h.document_id)),
            judged,
            keyword_took,
        );
        let (Some(embedder), Some(index)) = (&embedder, &vectors) else {
            continue;
        };
        let timed = Instant::now();
        let query = embedder.embed(&[text.as_str()])?.remove(0);
        let vector_hits = index.search(&query, &scope, CHUNK_HITS)?;
        let vector_took = timed.elapsed();
        vector.add(
            &to_documents(&mut vector_hits.iter().map(|h| h.document_id)),
            judged,
            vector_took,
        );
        let timed = Instant::now();
        let fused = reciprocal_rank_fusion(&keyword_hits, &vector_hits, fusion);
        let fused_took = timed.elapsed() + keyword_took + vector_took;
        hybrid.add(
            &to_documents(&mut fused.iter().map(|h| h.document_id)),
            judged,
            fused_took,
        );
    }
    println!(
        "\n{:<8} {:>8} {:>10} {:>8} {:>10} {:>10}",
        "mode", "nDCG@10", "Recall@100", "MRR@10", "p50 ms", "p99 ms"
    );
    let n = queries.len() as f64;
    let rows: Vec<(&str, &mut Scores)> = match args.mode {
        Mode::Keyword => vec![("keyword", &mut keyword)],
        Mode::Vector => vec![("vector", &mut vector)],
        Mode::Hybrid => vec![("hybrid", &mut hybrid)],
        Mode::All => vec![
            ("keyword", &mut keyword),
            ("vector", &mut vector),
            ("hybrid", &mut hybrid),
        ],
    };
    for (label, scores) in rows {
        scores.times.sort();
        println!(
            "{label:<8} {:>8.4} {:>10.4} {:>8.4} {:>10.2} {:>10.2}",
            scores.ndcg / n,
            scores.recall / n,
            scores.mrr / n,
            ms(percentile(&scores.times, 0.50)),
            ms(percentile(&scores.times, 0.99)),
        );
    }
    if args.mode != Mode::Keyword {
        println!(
            "(vector and hybrid latency include embedding the query; hybrid: RRF k {}, vector weight {})",
            fusion.k, fusion.vector_weight
        );
    }
    println!(
        "(each query fetches the top {CHUNK_HITS} chunks; a document ranks where its best chunk does)"
    );
    Ok(())
}

/// Chunks every document exactly as the ingestion pipeline does (the same parser and chunker
/// with the same settings, so ordinals match the keyword index's) and puts their embeddings
/// in a vector index in the scratch directory.
fn embed_corpus(
    embedder: &LocalEmbedder,
    texts: &[(DocumentId, String)],
    config: &Config,
    source: SourceId,
    scratch: &std::path::Path,
) -> anyhow::Result<VectorIndex> {
    let index = VectorIndex::open(
        &scratch.join("vectors"),
        embedder.name(),
        embedder.dimensions(),
    )?;
    let started = Instant::now();
    let mut chunk_count = 0usize;
    for (document, text) in texts {
        let parsed = quire_parse::parse(
            text.as_bytes(),
            "doc.md",
            "text/markdown",
            &config.parsing.limits(),
        )?;
        let chunks = chunk_blocks(&parsed.blocks, config.chunking);
        let contents: Vec<&str> = chunks.iter().map(|c| c.content.as_str()).collect();
        let vectors = embedder.embed(&contents)?;
        let entries: Vec<(u32, Vec<f32>)> = chunks.iter().map(|c| c.ordinal).zip(vectors).collect();
        chunk_count += entries.len();
        index.replace_document(*document, source, &entries)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "ingest, vector   {seconds:.1} s, {:.1} chunks/s (embed {} chunks, index)",
        chunk_count as f64 / seconds,
        chunk_count
    );
    Ok(index)
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
