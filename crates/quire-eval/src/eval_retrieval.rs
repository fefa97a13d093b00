//! `quire eval retrieval`: ingests a BEIR-layout corpus through the product's own pipeline
//! (staging, parsing in the worker, chunking, embedding, store, keyword and vector indexes)
//! into a temporary data directory, runs every judged query through the product's search
//! function (the one `POST /api/v1/search` calls), folds chunk hits into a document ranking (a
//! document ranks where its best chunk does) and prints nDCG@10, Recall@100, MRR@10, ingest
//! chunks/second and query latency percentiles.
//!
//! `--sweep` also tries a grid of fusion settings on the same rankings (each query's keyword
//! and vector lists computed once, fused with the product's fusion function), which is how the
//! defaults were chosen.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use quire_app::Services;
use quire_app::search::{Retrieval, search};
use quire_core::{DocumentId, SourceScope, SystemClock};
use quire_search::{
    FusedHit, FusionParams, KeywordHit, VectorHit, convex_combination, reciprocal_rank_fusion,
};

use crate::bench::{ingest_markdown, ms, percentile, read_jsonl, scratch_app};
use crate::progress::Progress;
use crate::retrieval_metrics::{Judgements, ndcg_at, recall_at, reciprocal_rank_at};
use quire_server::{App, Config, Parts};
use tempfile::TempDir;

/// Chunk hits fetched per query; enough for 100 distinct documents on corpora of short
/// documents (SciFact abstracts are one or two chunks).
const CHUNK_HITS: usize = 300;

/// Results per query when timing, as `POST /api/v1/search` returns by default.
const API_LIMIT: usize = 10;

/// A fusion function, as the sweep tries them.
type Fusion<'a> = dyn Fn(&[KeywordHit], &[VectorHit]) -> Vec<FusedHit> + 'a;

/// The source the corpus is ingested into.
/// The source an eval corpus is ingested into; `quire bench generate` shares such data
/// directories.
pub(crate) const EVAL_SOURCE: &str = "eval";

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
    #[arg(long, value_enum, default_value = "hybrid")]
    mode: Mode,
    /// Embedding model directory (vector and hybrid modes); defaults to the configured
    /// `embedding.model_dir`.
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// Documents to ingest at most (all by default).
    #[arg(long)]
    documents: Option<usize>,
    /// RRF's `k` for the hybrid mode (default: the configured `search.rrf_k`).
    #[arg(long)]
    rrf_k: Option<f32>,
    /// Weight of the vector ranking (default: the configured `search.vector_weight`).
    #[arg(long)]
    vector_weight: Option<f32>,
    /// Weight of the keyword ranking (default: the configured `search.keyword_weight`).
    #[arg(long)]
    keyword_weight: Option<f32>,
    /// `rrf` or `convex` (default: the configured `search.fusion`).
    #[arg(long)]
    fusion: Option<String>,
    /// Also try a grid of fusion settings on the same rankings and print the best.
    #[arg(long)]
    sweep: bool,
    /// Keep the ingested corpus in this data directory and, when it already holds it (from
    /// an earlier run with the same corpus and model), skip ingestion: for tuning and for
    /// timing queries on a quiet machine.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
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
    let (queries, judgements) = judged_queries(&args.queries, &args.qrels)?;
    let corpus = read_jsonl(&args.corpus, args.documents.unwrap_or(usize::MAX))?;
    if queries.is_empty() || corpus.is_empty() {
        bail!("nothing to evaluate: no judged queries or no documents");
    }
    let mut config = base.clone();
    // A benchmark corpus must be indexed whole for its judgements to mean anything; screening
    // for personal data is measured on its own by `quire eval pii`.
    config.pii.enabled = false;
    if let Some(k) = args.rrf_k {
        config.search.rrf_k = k;
    }
    if let Some(w) = args.vector_weight {
        config.search.vector_weight = w;
    }
    if let Some(w) = args.keyword_weight {
        config.search.keyword_weight = w;
    }
    if let Some(method) = &args.fusion {
        config.search.fusion = method.clone();
    }
    config.search.candidates = config.search.candidates.max(CHUNK_HITS);
    use_model(&mut config, args.mode, args.model_dir.as_ref());
    let (_scratch, app, config) = eval_app(&config, args.data_dir.as_ref()).await?;
    let state = app.services().clone();
    let parts = app.parts().clone();
    needs_model(&app, args.mode)?;
    let corpus_id_of = match ingested_before(&parts).await? {
        Some((total, names)) if total == corpus.len() => {
            println!(
                "documents {}  chunks {}  judged queries {}  (ingested by an earlier run in {})",
                corpus.len(),
                parts.index.chunk_count(),
                queries.len(),
                config.data_dir.display()
            );
            if let Some(semantic) = parts.ingest.semantic() {
                // Another model's index was set aside on opening: embed everything again.
                let report = semantic.backfill(&*parts.store).await?;
                if report.documents > 0 {
                    println!("embedded {} documents for this model", report.documents);
                }
            }
            names
        }
        Some(_) => bail!(
            "{} holds another corpus (or an unfinished ingestion); use an empty directory",
            config.data_dir.display()
        ),
        None => ingest(&parts, &corpus, queries.len()).await?,
    };
    if let Some(semantic) = parts.ingest.semantic() {
        println!(
            "embedder {} on {}",
            semantic.embedder().model_id(),
            semantic.embedder().engine()
        );
    }
    let modes = retrievals(args.mode);
    let scope = SourceScope::All;
    println!(
        "\n{:<8} {:>8} {:>10} {:>8} {:>10} {:>10} {:>10}",
        "mode", "nDCG@10", "Recall@100", "MRR@10", "p50 ms", "p99 ms", "p50@300"
    );
    let n = queries.len() as f64;
    for (label, retrieval) in &modes {
        // A short warm-up, so the first queries do not pay for page faults.
        for (_, text) in queries.iter().take(10) {
            search(&state, &scope, text, CHUNK_HITS, Some(*retrieval)).await?;
        }
        let mut scores = Scores::default();
        let mut progress = Progress::new(
            &format!("{label} queries"),
            u64::try_from(queries.len()).unwrap_or(u64::MAX),
        );
        for (query_id, text) in &queries {
            let timed = Instant::now();
            let outcome = search(&state, &scope, text, CHUNK_HITS, Some(*retrieval)).await?;
            let took = timed.elapsed();
            let ranked = ranked_documents(
                outcome.results.iter().map(|r| r.document.id.as_str()),
                &corpus_id_of,
            );
            scores.add(&ranked, &judgements[query_id], took);
            progress.inc(1);
        }
        progress.finish();
        scores.times.sort();
        // Latency as clients see it: the same queries at the API's default limit.
        let mut times = Vec::with_capacity(queries.len());
        for (_, text) in &queries {
            let timed = Instant::now();
            search(&state, &scope, text, API_LIMIT, Some(*retrieval)).await?;
            times.push(timed.elapsed());
        }
        times.sort();
        println!(
            "{label:<8} {:>8.4} {:>10.4} {:>8.4} {:>10.2} {:>10.2} {:>10.2}",
            scores.ndcg / n,
            scores.recall / n,
            scores.mrr / n,
            ms(percentile(&times, 0.50)),
            ms(percentile(&times, 0.99)),
            ms(percentile(&scores.times, 0.50)),
        );
    }
    let fusion = config.search.settings().fusion;
    if args.mode != Mode::Keyword {
        println!(
            "(latency is the product's search call: query embedding, both rankings, fusion and \
             the store lookups; hybrid: {} fusion, k {}, keyword weight {}, vector weight {})",
            config.search.fusion, fusion.k, fusion.keyword_weight, fusion.vector_weight
        );
    }
    println!(
        "(quality: each query fetches the top {CHUNK_HITS} chunks and a document ranks where its \
         best chunk does; p50/p99: the same queries at limit {API_LIMIT}, the API's default; \
         p50@300: the quality run's median)"
    );
    if args.sweep && args.mode != Mode::Keyword {
        sweep(&parts, &queries, &judgements, &corpus_id_of).await?;
    }
    Ok(())
}

/// Chunk hits' document ids folded into a ranking of corpus ids: a document ranks where its
/// best chunk does (and where its best copy does, when the corpus was ingested more than
/// once); documents not of the corpus are left out.
pub(crate) fn ranked_documents<'a>(
    ids: impl Iterator<Item = &'a str>,
    corpus_id_of: &HashMap<String, String>,
) -> Vec<String> {
    let mut seen = HashSet::new();
    ids.filter_map(|id| corpus_id_of.get(id))
        .filter(|corpus_id| seen.insert(corpus_id.as_str()))
        .cloned()
        .collect()
}

/// Mean nDCG@10 of `retrieval` over the judged `queries`, through the product's search
/// function on `state` (each query fetching as many chunk hits as the evaluation does).
pub(crate) async fn mean_ndcg(
    state: &Services,
    queries: &[(String, String)],
    judgements: &HashMap<String, Judgements>,
    corpus_id_of: &HashMap<String, String>,
    retrieval: Retrieval,
) -> anyhow::Result<f64> {
    let mut sum = 0.0;
    for (query_id, text) in queries {
        let outcome = search(state, &SourceScope::All, text, CHUNK_HITS, Some(retrieval)).await?;
        let ranked = ranked_documents(
            outcome.results.iter().map(|r| r.document.id.as_str()),
            corpus_id_of,
        );
        sum += ndcg_at(&ranked, &judgements[query_id], 10);
    }
    Ok(sum / queries.len().max(1) as f64)
}

/// Judgements by query id, as a qrels file gives them.
pub(crate) type JudgementsByQuery = HashMap<String, Judgements>;

/// The queries of `queries` (`queries.jsonl`) that `qrels` judges, in file order, with the
/// judgements by query id.
pub(crate) fn judged_queries(
    queries: &PathBuf,
    qrels: &PathBuf,
) -> anyhow::Result<(Vec<(String, String)>, JudgementsByQuery)> {
    let judgements = read_qrels(qrels)?;
    let mut queries = read_queries(queries)?;
    queries.retain(|(id, _)| judgements.contains_key(id));
    Ok((queries, judgements))
}

/// `(id, text)` of every query of a BEIR `queries.jsonl`, in file order.
pub(crate) fn read_queries(path: &PathBuf) -> anyhow::Result<Vec<(String, String)>> {
    Ok(read_jsonl(path, usize::MAX)?
        .into_iter()
        .filter_map(|v| {
            Some((
                v["_id"].as_str()?.to_owned(),
                v["text"].as_str()?.to_owned(),
            ))
        })
        .collect())
}

/// The corpus id a document was ingested under (`{id}.md`).
pub(crate) fn corpus_id(name: &str) -> &str {
    name.strip_suffix(".md").unwrap_or(name)
}

/// A BEIR corpus as the Markdown documents it is ingested as: `({id}.md, "# title\n\ntext")`.
pub(crate) fn corpus_documents(corpus: &[serde_json::Value]) -> Vec<(String, String)> {
    corpus
        .iter()
        .map(|doc| {
            let text = format!(
                "# {}\n\n{}",
                doc["title"].as_str().unwrap_or(""),
                doc["text"].as_str().unwrap_or("")
            );
            (
                format!("{}.md", doc["_id"].as_str().unwrap_or_default()),
                text,
            )
        })
        .collect()
}

/// Points the configuration at the embedding model `mode` needs: none for keyword runs (so
/// they never load or download one), `model_dir` when given.
pub(crate) fn use_model(config: &mut Config, mode: Mode, model_dir: Option<&PathBuf>) {
    if mode == Mode::Keyword {
        config.embedding.model_dir = None;
        config.embedding.base_url = None;
        config.embedding.use_cached_model = false;
    } else if let Some(dir) = model_dir {
        config.embedding.model_dir = Some(dir.clone());
        config.embedding.base_url = None;
    }
}

/// The application an eval runs on: on `data_dir` when given (kept for later runs), on a
/// temporary directory otherwise (kept alive by the returned guard); no background workers.
pub(crate) async fn eval_app(
    config: &Config,
    data_dir: Option<&PathBuf>,
) -> anyhow::Result<(Option<TempDir>, App, Config)> {
    Ok(match data_dir {
        Some(dir) => {
            let mut config = config.clone();
            config.data_dir = dir.clone();
            config.workers.count = 0;
            let app = quire_server::build(&config, Arc::new(SystemClock)).await?;
            (None, app, config)
        }
        None => {
            let (scratch, app, config) = scratch_app(config).await?;
            (Some(scratch), app, config)
        }
    })
}

/// Fails with a hint when `mode` needs an embedding model and none was loaded.
pub(crate) fn needs_model(app: &App, mode: Mode) -> anyhow::Result<()> {
    if mode != Mode::Keyword && app.parts().ingest.semantic().is_none() {
        bail!(
            "--mode {mode:?} needs an embedding model ({}): pass --model-dir DIR or set \
             QUIRE_EMBEDDING_MODEL_DIR (`quire model fetch` or scripts/fetch-model put one in a cache)",
            app.services().semantic_note()
        );
    }
    Ok(())
}

/// The retrievers `mode` asks for, with their labels.
pub(crate) fn retrievals(mode: Mode) -> Vec<(&'static str, Retrieval)> {
    match mode {
        Mode::Keyword => vec![("keyword", Retrieval::Keyword)],
        Mode::Vector => vec![("vector", Retrieval::Vector)],
        Mode::Hybrid => vec![("hybrid", Retrieval::Hybrid)],
        Mode::All => vec![
            ("keyword", Retrieval::Keyword),
            ("vector", Retrieval::Vector),
            ("hybrid", Retrieval::Hybrid),
        ],
    }
}

/// The number of documents of an eval corpus ingested earlier into this data directory, and
/// the corpus ids of its ready ones by document id; `None` when the directory holds none.
pub(crate) async fn ingested_before(
    parts: &Parts,
) -> anyhow::Result<Option<(usize, HashMap<String, String>)>> {
    Ok(ingested_names(parts).await?.map(|(total, names)| {
        let ids = names
            .into_iter()
            .map(|(id, name)| (id, corpus_id(&name).to_owned()))
            .collect();
        (total, ids)
    }))
}

/// The number of documents ingested earlier into the eval source of this data directory, and
/// the file names of its ready ones by document id; `None` when the directory holds none.
pub(crate) async fn ingested_names(
    parts: &Parts,
) -> anyhow::Result<Option<(usize, HashMap<String, String>)>> {
    let sources = parts.store.list_sources(&SourceScope::All).await?;
    let Some(source) = sources.iter().find(|s| s.name.as_str() == EVAL_SOURCE) else {
        return Ok(None);
    };
    let documents = parts
        .store
        .list_documents(&SourceScope::All, source.id)
        .await?
        .unwrap_or_default();
    let total = documents.len();
    let ready = documents
        .into_iter()
        .filter(|d| d.status == quire_core::DocumentStatus::Ready)
        .map(|d| (d.id.to_string(), d.name))
        .collect();
    Ok(Some((total, ready)))
}

/// Ingests the corpus (title as a heading, then the text) through the product's pipeline and
/// prints the throughput; returns the corpus ids by document id.
async fn ingest(
    parts: &Parts,
    corpus: &[serde_json::Value],
    query_count: usize,
) -> anyhow::Result<HashMap<String, String>> {
    let started = Instant::now();
    let documents = corpus_documents(corpus);
    let names: Vec<String> = documents.iter().map(|(name, _)| name.clone()).collect();
    let (_, ids) = ingest_markdown(parts, EVAL_SOURCE, documents.into_iter()).await?;
    let corpus_id_of: HashMap<String, String> = ids
        .iter()
        .zip(&names)
        .map(|(document, name)| (document.to_string(), corpus_id(name).to_owned()))
        .collect();
    let ingest_seconds = started.elapsed().as_secs_f64();
    let chunks = parts.index.chunk_count();
    println!(
        "documents {}  chunks {chunks}  judged queries {query_count}",
        corpus.len(),
    );
    let what = match parts.ingest.semantic() {
        Some(s) => format!(
            "parse, chunk, embed with {}, store, index",
            s.embedder().model_id()
        ),
        None => "parse, chunk, store, index".to_owned(),
    };
    println!(
        "ingest {ingest_seconds:.1} s, {:.1} chunks/s ({what}, one worker)",
        chunks as f64 / ingest_seconds
    );
    Ok(corpus_id_of)
}

/// Fuses each query's keyword and vector rankings (computed once) under a grid of settings and
/// prints nDCG@10 for each, best last.
async fn sweep(
    parts: &Parts,
    queries: &[(String, String)],
    judgements: &HashMap<String, Judgements>,
    corpus_id_of: &HashMap<String, String>,
) -> anyhow::Result<()> {
    let Some(semantic) = parts.ingest.semantic() else {
        return Ok(());
    };
    let scope = SourceScope::All;
    let mut rankings = Vec::with_capacity(queries.len());
    for (query_id, text) in queries {
        let keyword = parts.index.search(text, &scope, CHUNK_HITS)?;
        let embedding = semantic.embed_query(text).await?;
        let vector = semantic.vectors().search(&embedding, &scope, CHUNK_HITS)?;
        rankings.push((query_id, keyword, vector));
    }
    let name_of = |id: DocumentId| corpus_id_of.get(&id.to_string()).cloned();
    let score = |fuse: &Fusion<'_>| -> f64 {
        let mut ndcg = 0.0;
        for (query_id, keyword, vector) in &rankings {
            let mut seen = HashSet::new();
            let ranked: Vec<String> = fuse(keyword, vector)
                .into_iter()
                .filter(|h| seen.insert(h.document_id))
                .filter_map(|h| name_of(h.document_id))
                .collect();
            ndcg += ndcg_at(&ranked, &judgements[*query_id], 10);
        }
        ndcg / queries.len() as f64
    };
    let mut results = Vec::new();
    for k in [5.0, 10.0, 20.0, 30.0, 40.0, 60.0, 80.0, 100.0] {
        for vector_weight in [0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0] {
            let params = FusionParams {
                k,
                keyword_weight: 1.0,
                vector_weight,
            };
            let ndcg = score(&|kw, v| reciprocal_rank_fusion(kw, v, params));
            results.push((
                ndcg,
                format!("rrf     k {k:>5}  vector weight {vector_weight:>4}"),
            ));
        }
    }
    for tenths in 1..=9 {
        let vector_weight = tenths as f32 / 10.0;
        let params = FusionParams {
            k: 0.0,
            keyword_weight: 1.0 - vector_weight,
            vector_weight,
        };
        let ndcg = score(&|kw, v| convex_combination(kw, v, params));
        results.push((
            ndcg,
            format!(
                "convex          vector weight {vector_weight:>4} (keyword {:.1})",
                1.0 - vector_weight
            ),
        ));
    }
    results.sort_by(|a, b| a.0.total_cmp(&b.0));
    println!("\nfusion sweep: nDCG@10 by method and parameters (rrf: keyword weight 1), best last");
    for (ndcg, label) in results.iter().rev().take(15).rev() {
        println!("  {label}  nDCG@10 {ndcg:.4}");
    }
    Ok(())
}

/// Judgements by query id from a BEIR qrels TSV (header line skipped).
pub(crate) fn read_qrels(path: &PathBuf) -> anyhow::Result<HashMap<String, Judgements>> {
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
