//! `quire bench filters`: search restricted to the documents a metadata filter matched (issue
//! 34's "no filter trap"). It loads N chunks of the synthetic corpus of `quire bench vectors`
//! into a [`VectorIndex`] (the product's default options) and, with synthetic text, into a
//! [`KeywordIndex`]; then, for a deterministic choice of 50%, 10%, 1% and 0.1% of the
//! documents, it runs the same queries unfiltered and through `search_within`. Vector results
//! are compared with an exact top 10 computed by brute force over the chosen documents'
//! vectors. Keyword results are exact by construction (the restriction applies before the top
//! 10 is taken), and the benchmark checks it: each must equal the top 10 among the chosen
//! documents of an unfiltered search that returns every matching chunk, or it stops.
//!
//! **Hybrid** is what the product's hybrid search fuses: the filtered keyword and vector lists
//! of `candidates` chunks each, fused as `quire-app` does with its default settings
//! (`SearchSettings::default()`: method, weights and candidates; the later reordering by
//! document and page, which needs the store, is left out). Its top 10 is compared with the
//! fusion of the exact keyword and exact vector lists over the chosen chunks, and its latency
//! (the two searches one after the other, then the fusion) with the unfiltered hybrid's. Query
//! `i` pairs the `i`-th text with the `i`-th vector.
//!
//! **The text**: every chunk has 40 words, half from its topic's 20 words and half from 2,000
//! general words (Zipf-like), so BM25 has rare and common terms to weigh. A keyword query is
//! two words of a random document's topic and one general word.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use quire_app::search::{FusionMethod, SearchSettings};
use quire_core::{DocumentId, SourceId, SourceScope};
use quire_search::{
    DocumentVectors, IndexedChunk, KeywordHit, KeywordIndex, VectorHit, VectorIndex, VectorOptions,
    convex_combination, reciprocal_rank_fusion,
};
use serde::Serialize;

use crate::bench_vectors::{K, Mixture, SOURCES, dot, splitmix64};

/// Options of `quire bench filters`.
#[derive(Debug, Args)]
pub struct FilterBenchArgs {
    /// Chunks in the synthetic corpus (documents have 1 to 16 chunks).
    #[arg(long, default_value_t = 100_000)]
    chunks: usize,
    /// Queries per selectivity and path.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Seed of the choice of documents each selectivity keeps.
    #[arg(long, default_value_t = 34)]
    seed: u64,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Dimensions of the default model (all-MiniLM-L6-v2).
const DIMS: usize = 384;
/// Fractions of the documents a filter keeps.
const SELECTIVITIES: [f64; 4] = [0.5, 0.1, 0.01, 0.001];
/// Chunks per `replace_documents` call.
const BATCH_CHUNKS: usize = 10_000;
const WORDS_PER_CHUNK: u64 = 40;
const TOPIC_WORDS: u64 = 20;
const GENERAL_WORDS: u64 = 2_000;

/// Latency percentiles of one pass, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
struct Latency {
    p50_ms: f64,
    p95_ms: f64,
}

impl Latency {
    fn of(mut times: Vec<Duration>) -> Self {
        times.sort();
        let at = |p: f64| crate::bench::ms(crate::bench::percentile(&times, p));
        Self {
            p50_ms: at(0.50),
            p95_ms: at(0.95),
        }
    }
}

/// One path (vector, keyword or hybrid) at one selectivity.
#[derive(Debug, Serialize)]
struct PathReport {
    /// Mean recall@10 against the exact top 10 over the chosen documents; none for keyword
    /// search, exact by construction (and checked: see [`filters`]).
    recall_at_10: Option<f64>,
    /// Fraction of queries that returned as many hits as the filter allows (at most 10).
    full: f64,
    filtered: Latency,
    unfiltered: Latency,
    /// Filtered p50 over unfiltered p50.
    p50_ratio: f64,
}

#[derive(Debug, Serialize)]
struct Row {
    selectivity: f64,
    documents: usize,
    chunks: usize,
    vector: PathReport,
    keyword: PathReport,
    hybrid: PathReport,
}

#[derive(Debug, Serialize)]
struct Report {
    chunks: usize,
    documents: usize,
    dims: usize,
    queries: usize,
    /// Chunks each list gives the hybrid fusion.
    hybrid_candidates: usize,
    vector_build_s: f64,
    keyword_build_s: f64,
    rows: Vec<Row>,
}

/// Runs the benchmark and prints its report.
pub fn filters(args: FilterBenchArgs) -> anyhow::Result<()> {
    if args.chunks == 0 || args.queries == 0 {
        bail!("--chunks and --queries must be positive");
    }
    let scratch = tempfile::tempdir()?;
    let mixture = Mixture::new(DIMS, 0x7175_6972_6562_656e);
    let sources: Vec<SourceId> = (0..SOURCES).map(|_| SourceId::new()).collect();

    // The corpus: per document its id and chunk vectors, kept for the exact reference.
    let mut ids = Vec::new();
    let mut vectors: Vec<Vec<Vec<f32>>> = Vec::new();
    let mut topics = Vec::new();
    let mut total = 0;
    while total < args.chunks {
        let shape = mixture.document(ids.len() as u64);
        let count = shape.chunks.min(args.chunks - total);
        ids.push((DocumentId::new(), sources[shape.source]));
        topics.push(shape.topic);
        vectors.push(
            (0..count as u64)
                .map(|o| mixture.chunk(&shape, o))
                .collect(),
        );
        total += count;
    }
    let documents = ids.len();
    progress(
        &args,
        &format!("corpus: {total} chunks in {documents} documents"),
    );

    let index = VectorIndex::open_with(
        &scratch.path().join("vectors"),
        "synthetic",
        DIMS,
        VectorOptions::default(),
    )?;
    let started = Instant::now();
    let mut batch = Vec::new();
    let mut in_batch = 0;
    for (number, (document, source)) in ids.iter().enumerate() {
        in_batch += vectors[number].len();
        batch.push(DocumentVectors {
            document: *document,
            source: *source,
            chunks: vectors[number]
                .iter()
                .enumerate()
                .map(|(o, v)| (o as u32, v.clone()))
                .collect(),
        });
        if in_batch >= BATCH_CHUNKS || number + 1 == documents {
            index
                .replace_documents(&batch)
                .context("loading the vector index")?;
            batch.clear();
            in_batch = 0;
        }
    }
    let vector_build = started.elapsed();
    progress(
        &args,
        &format!("vector index: {:.1} s", vector_build.as_secs_f64()),
    );

    let keyword = KeywordIndex::open(&scratch.path().join("keyword"))?;
    let started = Instant::now();
    let mut pending = Vec::with_capacity(documents);
    for (number, (document, source)) in ids.iter().enumerate() {
        let chunks = (0..vectors[number].len() as u32)
            .map(|o| IndexedChunk {
                title: String::new(),
                ordinal: o,
                page: 1,
                section: String::new(),
                content: chunk_text(
                    topics[number],
                    splitmix64(number as u64 ^ (u64::from(o) << 32)),
                ),
            })
            .collect();
        pending.push(keyword.submit_replace(*document, *source, chunks));
    }
    for committed in pending {
        committed.wait_blocking()?;
    }
    let keyword_build = started.elapsed();
    progress(
        &args,
        &format!("keyword index: {:.1} s", keyword_build.as_secs_f64()),
    );

    let query_vectors: Vec<Vec<f32>> = (0..args.queries as u64)
        .map(|q| mixture.query(q, documents as u64))
        .collect();
    let query_texts: Vec<String> = (0..args.queries as u64)
        .map(|q| {
            let draw = splitmix64(q ^ 0x7E47);
            query_text(topics[(draw % documents as u64) as usize], draw)
        })
        .collect();
    let all = SourceScope::All;
    // Warm-up, so the first timed queries do not pay for page faults.
    for (v, t) in query_vectors.iter().zip(&query_texts).take(20) {
        index.search(v, &all, K)?;
        keyword.search(t, &all, K)?;
    }
    let (vector_unfiltered, _) = time(&query_vectors, |q: &Vec<f32>| {
        Ok(index.search(q, &all, K)?.len())
    })?;
    let (keyword_unfiltered, _) = time(&query_texts, |q: &String| {
        Ok(keyword.search(q, &all, K)?.len())
    })?;
    let vector_unfiltered = Latency::of(vector_unfiltered);
    let keyword_unfiltered = Latency::of(keyword_unfiltered);
    let settings = SearchSettings::default();
    let candidates = settings.candidates.max(K);
    let pairs: Vec<(&[f32], &str)> = query_vectors
        .iter()
        .map(Vec::as_slice)
        .zip(query_texts.iter().map(String::as_str))
        .collect();
    let (hybrid_unfiltered, _) = time(&pairs, |&(v, t)| {
        let keyword_hits = keyword.search(t, &all, candidates)?;
        let vector_hits = index.search(v, &all, candidates)?;
        Ok(fuse(&settings, &keyword_hits, &vector_hits).len())
    })?;
    let hybrid_unfiltered = Latency::of(hybrid_unfiltered);
    // Every chunk each text matches, best first: the exact keyword ranking of any set.
    let every_match: Vec<Vec<KeywordHit>> = query_texts
        .iter()
        .map(|t| keyword.search(t, &all, total))
        .collect::<Result<_, _>>()?;

    // Documents in a random order fixed by the seed; a selectivity keeps a prefix.
    let mut order: Vec<usize> = (0..documents).collect();
    order.sort_by_key(|n| splitmix64(args.seed ^ splitmix64(*n as u64)));
    let mut rows = Vec::new();
    for selectivity in SELECTIVITIES {
        let kept = ((documents as f64 * selectivity).round() as usize).max(1);
        let chosen = &order[..kept];
        let set: HashSet<DocumentId> = chosen.iter().map(|n| ids[*n].0).collect();
        let chunks: usize = chosen.iter().map(|n| vectors[*n].len()).sum();
        let allowed = chunks.min(K);
        progress(
            &args,
            &format!(
                "selectivity {}: {kept} documents, {chunks} chunks",
                percent(selectivity)
            ),
        );
        let exact_vector: Vec<Vec<VectorHit>> = query_vectors
            .iter()
            .map(|q| exact_top(q, chosen, &vectors, &ids, candidates))
            .collect();
        let exact_keyword: Vec<Vec<KeywordHit>> = every_match
            .iter()
            .map(|hits| {
                hits.iter()
                    .filter(|h| set.contains(&h.document_id))
                    .take(candidates)
                    .cloned()
                    .collect()
            })
            .collect();
        let truth: Vec<Vec<(DocumentId, u32)>> = exact_vector
            .iter()
            .map(|hits| top_keys(hits, |h| (h.document_id, h.ordinal)))
            .collect();
        let mut found: Vec<Vec<(DocumentId, u32)>> = Vec::with_capacity(query_vectors.len());
        let (times, counts) = time(&query_vectors, |q: &Vec<f32>| {
            let hits = index.search_within(q, &all, Some(&set), K)?;
            let n = hits.len();
            found.push(hits.iter().map(|h| (h.document_id, h.ordinal)).collect());
            Ok(n)
        })?;
        let filtered = Latency::of(times);
        let vector_report = PathReport {
            recall_at_10: Some(recall(&found, &truth)),
            full: full(&counts, allowed),
            filtered,
            unfiltered: vector_unfiltered,
            p50_ratio: filtered.p50_ms / vector_unfiltered.p50_ms,
        };
        let mut found = Vec::with_capacity(query_texts.len());
        let (times, counts) = time(&query_texts, |q: &String| {
            let hits = keyword.search_within(q, &all, Some(&set), K)?;
            found.push(top_keys(&hits, |h| (h.document_id, h.ordinal)));
            Ok(hits.len())
        })?;
        // The restriction is applied before the top 10 is taken, so anything but the exact top
        // 10 is a bug, not a recall to report.
        for ((hits, exact), text) in found.iter().zip(&exact_keyword).zip(&query_texts) {
            let exact = top_keys(exact, |h| (h.document_id, h.ordinal));
            if *hits != exact {
                bail!(
                    "keyword search restricted to {kept} documents is not exact for {text:?}: \
                     {hits:?} instead of {exact:?}"
                );
            }
        }
        let filtered = Latency::of(times);
        let keyword_report = PathReport {
            recall_at_10: None,
            full: full(&counts, allowed),
            filtered,
            unfiltered: keyword_unfiltered,
            p50_ratio: filtered.p50_ms / keyword_unfiltered.p50_ms,
        };
        let mut found = Vec::with_capacity(pairs.len());
        let (times, counts) = time(&pairs, |&(v, t)| {
            let keyword_hits = keyword.search_within(t, &all, Some(&set), candidates)?;
            let vector_hits = index.search_within(v, &all, Some(&set), candidates)?;
            let fused = fuse(&settings, &keyword_hits, &vector_hits);
            let n = fused.len();
            found.push(fused);
            Ok(n)
        })?;
        let truth: Vec<Vec<(DocumentId, u32)>> = exact_keyword
            .iter()
            .zip(&exact_vector)
            .map(|(k, v)| fuse(&settings, k, v))
            .collect();
        let filtered = Latency::of(times);
        let hybrid_report = PathReport {
            recall_at_10: Some(recall(&found, &truth)),
            full: full(&counts, allowed),
            filtered,
            unfiltered: hybrid_unfiltered,
            p50_ratio: filtered.p50_ms / hybrid_unfiltered.p50_ms,
        };
        rows.push(Row {
            selectivity,
            documents: kept,
            chunks,
            vector: vector_report,
            keyword: keyword_report,
            hybrid: hybrid_report,
        });
    }
    let report = Report {
        chunks: total,
        documents,
        dims: DIMS,
        queries: args.queries,
        hybrid_candidates: candidates,
        vector_build_s: vector_build.as_secs_f64(),
        keyword_build_s: keyword_build.as_secs_f64(),
        rows,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

fn progress(args: &FilterBenchArgs, message: &str) {
    if !args.json {
        eprintln!("({message})");
    }
}

fn percent(fraction: f64) -> String {
    format!("{}%", fraction * 100.0)
}

fn print_table(report: &Report) {
    println!(
        "corpus   {} chunks in {} documents, {} dimensions (see `quire bench vectors --help`), \
         {} queries per path; hybrid fuses {} candidates of each list",
        report.chunks, report.documents, report.dims, report.queries, report.hybrid_candidates
    );
    println!(
        "build    vector index {:.1} s, keyword index {:.1} s",
        report.vector_build_s, report.keyword_build_s
    );
    println!();
    println!(
        "| filter keeps | chunks | path | recall@10 | full 10 | p50 ms filtered | p95 ms filtered \
         | p50 ms unfiltered | p95 ms unfiltered | p50 ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for row in &report.rows {
        for (name, path) in [
            ("vector", &row.vector),
            ("keyword", &row.keyword),
            ("hybrid", &row.hybrid),
        ] {
            let recall = path
                .recall_at_10
                .map_or_else(|| "exact".to_owned(), |r| format!("{r:.3}"));
            println!(
                "| {} of {} documents | {} | {name} | {recall} | {:.3} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                percent(row.selectivity),
                row.documents,
                row.chunks,
                path.full,
                path.filtered.p50_ms,
                path.filtered.p95_ms,
                path.unfiltered.p50_ms,
                path.unfiltered.p95_ms,
                path.p50_ratio,
            );
        }
    }
}

/// The exact top `limit` chunks of `chosen` documents for `query`, best first.
fn exact_top(
    query: &[f32],
    chosen: &[usize],
    vectors: &[Vec<Vec<f32>>],
    ids: &[(DocumentId, SourceId)],
    limit: usize,
) -> Vec<VectorHit> {
    let mut best: Vec<(f32, usize, u32)> = Vec::with_capacity(limit + 1);
    for &number in chosen {
        for (ordinal, chunk) in vectors[number].iter().enumerate() {
            let score = dot(query, chunk);
            if best.len() == limit && best[limit - 1].0 >= score {
                continue;
            }
            let at = best.partition_point(|b| b.0 >= score);
            best.insert(at, (score, number, ordinal as u32));
            best.truncate(limit);
        }
    }
    best.iter()
        .map(|&(score, number, ordinal)| VectorHit {
            document_id: ids[number].0,
            source_id: ids[number].1,
            ordinal,
            score,
        })
        .collect()
}

/// The keys of the first `K` hits.
fn top_keys<H>(hits: &[H], key: impl Fn(&H) -> (DocumentId, u32)) -> Vec<(DocumentId, u32)> {
    hits.iter().take(K).map(key).collect()
}

/// The top `K` of the two lists fused as `quire-app`'s hybrid search fuses them (its `rank`).
fn fuse(
    settings: &SearchSettings,
    keyword: &[KeywordHit],
    vector: &[VectorHit],
) -> Vec<(DocumentId, u32)> {
    let fused = match settings.method {
        FusionMethod::ReciprocalRank => reciprocal_rank_fusion(keyword, vector, settings.fusion),
        FusionMethod::Convex => convex_combination(keyword, vector, settings.fusion),
    };
    top_keys(&fused, |h| (h.document_id, h.ordinal))
}

/// Mean fraction of each query's exact top-k found (a query with no exact hits counts as 1).
fn recall<T: PartialEq>(found: &[Vec<T>], truth: &[Vec<T>]) -> f64 {
    if truth.is_empty() {
        return 1.0;
    }
    let sum: f64 = found
        .iter()
        .zip(truth)
        .map(|(found, exact)| {
            if exact.is_empty() {
                1.0
            } else {
                exact.iter().filter(|e| found.contains(e)).count() as f64 / exact.len() as f64
            }
        })
        .sum();
    sum / truth.len() as f64
}

/// Fraction of queries that got `allowed` hits or more.
fn full(counts: &[usize], allowed: usize) -> f64 {
    counts.iter().filter(|c| **c >= allowed).count() as f64 / counts.len().max(1) as f64
}

fn time<T>(
    queries: &[T],
    mut search: impl FnMut(&T) -> anyhow::Result<usize>,
) -> anyhow::Result<(Vec<Duration>, Vec<usize>)> {
    let mut times = Vec::with_capacity(queries.len());
    let mut counts = Vec::with_capacity(queries.len());
    for query in queries {
        let started = Instant::now();
        counts.push(search(query)?);
        times.push(started.elapsed());
    }
    Ok((times, counts))
}

/// Word `k` of topic `topic`.
fn topic_word(topic: usize, k: u64) -> String {
    format!("t{topic}w{k}")
}

/// A general word, the low numbers far more often (about Zipf's law).
fn general_word(draw: u64) -> String {
    // The square of a uniform number favours small ranks without a table.
    let u = (draw >> 11) as f64 / (1u64 << 53) as f64;
    format!("g{}", (u * u * GENERAL_WORDS as f64) as u64)
}

fn chunk_text(topic: usize, seed: u64) -> String {
    let mut state = seed;
    let mut words = Vec::with_capacity(WORDS_PER_CHUNK as usize);
    for i in 0..WORDS_PER_CHUNK {
        state = splitmix64(state);
        words.push(if i % 2 == 0 {
            topic_word(topic, state % TOPIC_WORDS)
        } else {
            general_word(state)
        });
    }
    words.join(" ")
}

fn query_text(topic: usize, seed: u64) -> String {
    let a = splitmix64(seed);
    let b = splitmix64(a);
    let c = splitmix64(b);
    format!(
        "{} {} {}",
        topic_word(topic, a % TOPIC_WORDS),
        topic_word(topic, b % TOPIC_WORDS),
        general_word(c)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_counts_the_exact_hits_found() {
        let truth = vec![vec![1, 2, 3, 4], vec![5, 6], vec![]];
        let found = vec![vec![4, 3, 9, 1], vec![6, 5, 7], vec![8]];
        // 3/4, 2/2 and an empty reference counted as found.
        let r = recall(&found, &truth);
        assert!((r - (0.75 + 1.0 + 1.0) / 3.0).abs() < 1e-9, "{r}");
        assert!((recall::<u8>(&[], &[]) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_exact_reference_ranks_only_the_chosen_documents() {
        let ids: Vec<(DocumentId, SourceId)> = (0..3)
            .map(|_| (DocumentId::new(), SourceId::new()))
            .collect();
        let vectors = vec![
            vec![vec![1.0, 0.0], vec![0.0, 1.0]],
            vec![vec![0.9, 0.1]],
            vec![vec![0.99, 0.0]],
        ];
        let top = exact_top(&[1.0, 0.0], &[0, 1], &vectors, &ids, 10);
        let keys = top_keys(&top, |h| (h.document_id, h.ordinal));
        assert_eq!(keys, vec![(ids[0].0, 0), (ids[1].0, 0), (ids[0].0, 1)]);
        assert_eq!(exact_top(&[1.0, 0.0], &[0, 1], &vectors, &ids, 2).len(), 2);
        assert!((full(&[10, 3, 10], 10) - 2.0 / 3.0).abs() < 1e-9);
    }
}
