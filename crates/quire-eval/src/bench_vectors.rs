//! `quire bench vectors`: the vector index at scale, on a synthetic corpus. It loads N chunk
//! vectors through [`VectorIndex::replace_documents`] (log writes and graph linking, timed as
//! the build), writes a snapshot, reopens the index as a restarted server would (timed), then
//! runs the same queries through the exact scan, the graph at several `ef` values and the
//! product's own choice ([`VectorIndex::search`]), over all sources and over 10%, 5%, 2% and 1%
//! of them. It prints p50 and p99 latency, recall@10 against an exact top 10 and the resident
//! memory. With `--pgvector` it then measures pgvector on the same corpus and queries (see
//! [`pgvector`]).
//!
//! **The corpus** imitates sentence embeddings rather than filling the sphere uniformly (on
//! which no index does well and which no text model produces). Every chunk is the normalised
//! sum of a direction shared by the whole corpus (weight 0.35: embeddings of one model are
//! anisotropic), one of 50 areas (0.5), one of 40 topics within it (0.7; 2,000 topics in all,
//! chosen uniformly per document), its document's own direction (0.7) and its own noise
//! (0.8); the directions are Gaussian. That puts chunks of one document at a cosine of about
//! 0.68, of one topic at 0.43, of one area at 0.19 and of different areas at 0.06, close to
//! what all-MiniLM-L6-v2 gives for passages of one document, one subject and unrelated text.
//! Documents have 1 to 16 chunks and are spread over 100 sources at random (so a scope is
//! scattered over the whole graph, the hard case for filtered search). A query is a new chunk
//! of a random existing document: same mixture, fresh noise.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use quire_core::{DocumentId, SourceId, SourceScope};
use quire_search::{DocumentVectors, HnswParams, Precision, VectorHit, VectorIndex, VectorOptions};

mod pgvector;

/// Options of `quire bench vectors`.
#[derive(Debug, Args)]
pub struct VectorBenchArgs {
    /// Chunk vectors in the synthetic corpus.
    #[arg(long, default_value_t = 100_000)]
    chunks: usize,
    /// Dimensions per vector.
    #[arg(long, default_value_t = 384)]
    dims: usize,
    /// Queries per scope.
    #[arg(long, default_value_t = 1000)]
    queries: usize,
    /// `ef` values to measure the graph at (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "64,128,256,512")]
    ef: Vec<usize>,
    /// The index's own `ef` (what `search` uses over the whole corpus; scaled down for scopes).
    #[arg(long, default_value_t = VectorOptions::default().ef_search)]
    ef_search: usize,
    /// Precision: f32, or int8 (an int8 copy for the graph, candidates re-ranked in f32).
    #[arg(long, default_value = "f32", value_parser = parse_precision)]
    precision: Precision,
    /// Links per graph node.
    #[arg(long, default_value_t = HnswParams::default().m)]
    m: usize,
    /// Candidates considered when linking a node.
    #[arg(long, default_value_t = HnswParams::default().ef_construction)]
    ef_construction: usize,
    /// Threads linking the graph.
    #[arg(long, default_value_t = VectorOptions::default().build_threads)]
    threads: usize,
    /// Directory for the index; a temporary one (deleted afterwards) when omitted.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Also load the corpus into pgvector on this PostgreSQL server (a table of its own,
    /// dropped afterwards) and measure its HNSW, filtered and exact paths on the same queries
    /// (`scripts/postgres start` prints a server's URL).
    #[arg(long, value_name = "URL")]
    pgvector: Option<String>,
    /// Queries per scope and path in pgvector (the first of the queries above).
    #[arg(long, default_value_t = 200)]
    pgvector_queries: usize,
}

fn parse_precision(s: &str) -> Result<Precision, String> {
    match s {
        "f32" => Ok(Precision::F32),
        "int8" => Ok(Precision::Int8),
        _ => Err(format!("{s:?}: expected f32 or int8")),
    }
}

/// Sources documents are spread over; one of them is a 1% scope.
pub(crate) const SOURCES: usize = 100;
/// Chunks loaded per `replace_documents` call (one synced log write each).
const BATCH_CHUNKS: usize = 10_000;
/// Results per query, and the k of recall@k.
pub(crate) const K: usize = 10;
/// Queries for the graph alone on the 1% scope (see [`Scope::graph_queries`]).
const SMALL_SCOPE_GRAPH_QUERIES: usize = 100;

/// Runs the benchmark and prints its report.
pub fn vectors(args: VectorBenchArgs) -> anyhow::Result<()> {
    if args.chunks == 0 || args.queries == 0 || args.dims == 0 {
        bail!("--chunks, --queries and --dims must be positive");
    }
    let scratch = tempfile::tempdir()?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| scratch.path().join("vectors"));
    if dir.join("vectors.log").exists() {
        bail!("{} already holds a vector index", dir.display());
    }
    let options = VectorOptions {
        precision: args.precision,
        graph: HnswParams {
            m: args.m,
            ef_construction: args.ef_construction,
            ..HnswParams::default()
        },
        ef_search: args.ef_search,
        build_threads: args.threads.max(1),
        ..VectorOptions::default()
    };
    let mixture = Mixture::new(args.dims, 0x7175_6972_6562_656e);
    let sources: Vec<SourceId> = (0..SOURCES).map(|_| SourceId::new()).collect();
    let baseline = memory();

    let index = VectorIndex::open_with(&dir, "synthetic", args.dims, options.clone())?;
    let (loaded, build) = load(&index, &mixture, &sources, args.chunks)?;
    let documents = loaded.len() as u64;
    let built = memory();
    let started = Instant::now();
    index.checkpoint()?;
    let checkpoint = started.elapsed();
    let stats = index.stats();
    drop(index);
    let started = Instant::now();
    let index = VectorIndex::open_with(&dir, "synthetic", args.dims, options.clone())?;
    let reopen = started.elapsed();
    let reopened = memory();

    println!(
        "corpus        {} chunks in {documents} documents, {} dimensions, {SOURCES} sources, \
         2,000 topics (see `quire bench vectors --help`)",
        stats.rows, args.dims
    );
    println!(
        "graph         m {}, ef_construction {}, {:?} distances, {} threads",
        args.m, args.ef_construction, args.precision, options.build_threads
    );
    println!(
        "build         {:.1} s ({:.0} chunks/s; log writes, linking, snapshots)",
        build.as_secs_f64(),
        stats.rows as f64 / build.as_secs_f64()
    );
    println!("checkpoint    {:.2} s", checkpoint.as_secs_f64());
    println!(
        "reopen        {:.2} s (replay the log, load the snapshot)",
        reopen.as_secs_f64()
    );
    println!(
        "index memory  vectors {} MiB, int8 codes {} MiB, graph {} MiB",
        stats.vector_bytes >> 20,
        stats.code_bytes >> 20,
        stats.graph_bytes >> 20
    );
    println!(
        "process RSS   {} MiB before, {} MiB after the build, {} MiB after reopening; peak {} MiB",
        baseline.rss_mib, built.rss_mib, reopened.rss_mib, reopened.peak_mib
    );
    println!();
    println!("| scope | path | ef | p50 ms | p99 ms | recall@10 |");
    println!("|---|---|---|---|---|---|");
    let queries: Vec<Vec<f32>> = (0..args.queries as u64)
        .map(|q| mixture.query(q, documents))
        .collect();
    let started = Instant::now();
    let truth = ground_truth(&mixture, &loaded, &queries, options.build_threads);
    eprintln!(
        "(exact top-{K} by brute force over the regenerated corpus in {:.0} s)",
        started.elapsed().as_secs_f64()
    );
    for (scope, truth) in SCOPES.iter().zip(&truth) {
        let name = scope.name;
        let filter = match scope.sources {
            SOURCES => SourceScope::All,
            n => SourceScope::only(sources[..n].iter().copied()),
        };
        let exact = time(&queries, |q| Ok(index.search_exact(q, &filter, K)?))?;
        println!(
            "| {name} | exact scan | – | {} | {:.3} |",
            exact.latency(),
            exact.recall(truth)
        );
        let graph_queries = queries.len().min(scope.graph_queries);
        let fewer = if graph_queries < queries.len() {
            format!(" ({graph_queries} queries)")
        } else {
            String::new()
        };
        for ef in &args.ef {
            let graph = time(&queries[..graph_queries], |q| {
                Ok(index.search_graph(q, &filter, K, *ef)?)
            })?;
            println!(
                "| {name} | graph{fewer} | {ef} | {} | {:.3} |",
                graph.latency(),
                graph.recall(truth)
            );
        }
        let auto = time(&queries, |q| Ok(index.search(q, &filter, K)?))?;
        // Within a scope `search` scales its `ef` down, or scans (see `VectorOptions`).
        let ef = match scope.sources {
            SOURCES => args.ef_search.to_string(),
            _ => format!("{}, scaled", args.ef_search),
        };
        println!(
            "| {name} | `search` (the product) | {ef} | {} | {:.3} |",
            auto.latency(),
            auto.recall(truth)
        );
    }
    let end = memory();
    println!();
    println!(
        "process RSS at the end {} MiB, peak {} MiB",
        end.rss_mib, end.peak_mib
    );
    if let Some(url) = &args.pgvector {
        let asked = args.pgvector_queries.min(queries.len());
        let corpus = pgvector::Corpus {
            mixture: &mixture,
            loaded: &loaded,
            sources: &sources,
            queries: &queries[..asked],
            truth: &truth,
        };
        let build = pgvector::Build {
            m: args.m,
            ef_construction: args.ef_construction,
        };
        // The bench runs on a blocking thread of the command's runtime.
        tokio::runtime::Handle::current().block_on(pgvector::report(url, &corpus, &build))?;
    }
    Ok(())
}

/// A document as loaded: its id, its source's number and its chunk count.
type Loaded = (DocumentId, usize, usize);

/// Loads `chunks` chunk vectors in batches; returns the documents made and the time spent in
/// the index (generating the vectors is not counted).
fn load(
    index: &VectorIndex,
    mixture: &Mixture,
    sources: &[SourceId],
    chunks: usize,
) -> anyhow::Result<(Vec<Loaded>, Duration)> {
    let mut loaded_documents = Vec::new();
    let mut spent = Duration::ZERO;
    let mut loaded = 0usize;
    let mut document = 0u64;
    while loaded < chunks {
        let mut batch = Vec::new();
        let mut in_batch = 0;
        while in_batch < BATCH_CHUNKS && loaded + in_batch < chunks {
            let shape = mixture.document(document);
            let count = shape.chunks.min(chunks - loaded - in_batch);
            let id = DocumentId::new();
            loaded_documents.push((id, shape.source, count));
            batch.push(DocumentVectors {
                document: id,
                source: sources[shape.source],
                chunks: (0..count as u32)
                    .map(|o| (o, mixture.chunk(&shape, u64::from(o))))
                    .collect(),
            });
            in_batch += count;
            document += 1;
        }
        let started = Instant::now();
        index
            .replace_documents(&batch)
            .context("loading the synthetic corpus")?;
        spent += started.elapsed();
        loaded += in_batch;
    }
    Ok((loaded_documents, spent))
}

/// A scope of the report: the first `sources` sources.
struct Scope {
    name: &'static str,
    sources: usize,
    /// Queries for the graph alone: it is slow on a 1% scope (it walks past 99 chunks for
    /// each one it may return; `search` scans such scopes instead), so it gets fewer there.
    graph_queries: usize,
}

const SCOPES: [Scope; 5] = [
    Scope {
        name: "all",
        sources: SOURCES,
        graph_queries: usize::MAX,
    },
    Scope {
        name: "10%",
        sources: SOURCES / 10,
        graph_queries: usize::MAX,
    },
    Scope {
        name: "5%",
        sources: SOURCES / 20,
        graph_queries: usize::MAX,
    },
    Scope {
        name: "2%",
        sources: SOURCES / 50,
        graph_queries: SMALL_SCOPE_GRAPH_QUERIES,
    },
    Scope {
        name: "1%",
        sources: 1,
        graph_queries: SMALL_SCOPE_GRAPH_QUERIES,
    },
];

/// The exact top-k chunks (document and ordinal) per scope and query, best first.
type Truth = Vec<Vec<(DocumentId, u32)>>;

/// The exact top-k of every query in every scope, by brute force over the corpus regenerated
/// from the mixture, so the reference does not depend on the index (not even on its exact
/// scan).
fn ground_truth(
    mixture: &Mixture,
    loaded: &[Loaded],
    queries: &[Vec<f32>],
    threads: usize,
) -> Vec<Truth> {
    /// Per scope, per query, the best (score, document number, ordinal) so far.
    type Best = Vec<Vec<Vec<(f32, usize, u32)>>>;
    let scan = |documents: std::ops::Range<usize>| -> Best {
        let mut best: Best = vec![vec![Vec::with_capacity(K + 1); queries.len()]; SCOPES.len()];
        for number in documents {
            let (_, source, chunks) = loaded[number];
            let shape = mixture.document(number as u64);
            for ordinal in 0..chunks as u32 {
                let chunk = mixture.chunk(&shape, u64::from(ordinal));
                for (q, query) in queries.iter().enumerate() {
                    let score = dot(query, &chunk);
                    for (scope, best) in SCOPES.iter().zip(&mut best) {
                        if source < scope.sources {
                            keep_best(&mut best[q], (score, number, ordinal));
                        }
                    }
                }
            }
        }
        best
    };
    let threads = threads.clamp(1, 16);
    let share = loaded.len().div_ceil(threads);
    let parts: Vec<Best> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let range = (t * share).min(loaded.len())..((t + 1) * share).min(loaded.len());
                s.spawn(move || scan(range))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("ground-truth thread"))
            .collect()
    });
    (0..SCOPES.len())
        .map(|scope| {
            (0..queries.len())
                .map(|q| {
                    let mut merged = Vec::with_capacity(K + 1);
                    for part in &parts {
                        for hit in &part[scope][q] {
                            keep_best(&mut merged, *hit);
                        }
                    }
                    merged
                        .iter()
                        .map(|(_, number, ordinal)| (loaded[*number].0, *ordinal))
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// Inserts `hit` into `best` (sorted, best first) if it is among the best `K`.
pub(crate) fn keep_best(best: &mut Vec<(f32, usize, u32)>, hit: (f32, usize, u32)) {
    if best.len() == K && best[K - 1].0 >= hit.0 {
        return;
    }
    let at = best.partition_point(|b| b.0 >= hit.0);
    best.insert(at, hit);
    best.truncate(K);
}

pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent sums so the compiler can keep them in vector registers.
    let mut sums = [0f32; 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for i in 0..8 {
            sums[i] += x[i] * y[i];
        }
    }
    let tail = a.len() / 8 * 8;
    sums.iter().sum::<f32>()
        + a[tail..]
            .iter()
            .zip(&b[tail..])
            .map(|(x, y)| x * y)
            .sum::<f32>()
}

/// Latencies and results of one pass over the queries.
struct Pass {
    latencies: Vec<Duration>,
    results: Vec<Vec<VectorHit>>,
}

impl Pass {
    fn latency(&self) -> String {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let at = |q: usize| sorted[(sorted.len() * q / 100).min(sorted.len() - 1)];
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        format!("{:.2} | {:.2}", ms(at(50)), ms(at(99)))
    }

    /// Mean number of hits per query (a filtered graph walk can return fewer than asked).
    fn mean_rows(&self) -> f64 {
        let rows: usize = self.results.iter().map(Vec::len).sum();
        rows as f64 / self.results.len().max(1) as f64
    }

    /// Mean fraction of the exact top-k found, over the queries of this pass.
    fn recall(&self, truth: &[Vec<(DocumentId, u32)>]) -> f64 {
        let mut sum = 0.0;
        for (found, exact) in self.results.iter().zip(truth) {
            if exact.is_empty() {
                sum += 1.0;
                continue;
            }
            let hits = exact
                .iter()
                .filter(|(document, ordinal)| {
                    found
                        .iter()
                        .any(|f| f.document_id == *document && f.ordinal == *ordinal)
                })
                .count();
            sum += hits as f64 / exact.len() as f64;
        }
        sum / self.results.len() as f64
    }
}

fn time(
    queries: &[Vec<f32>],
    mut search: impl FnMut(&[f32]) -> anyhow::Result<Vec<VectorHit>>,
) -> anyhow::Result<Pass> {
    let mut pass = Pass {
        latencies: Vec::with_capacity(queries.len()),
        results: Vec::with_capacity(queries.len()),
    };
    for query in queries {
        let started = Instant::now();
        let hits = search(query)?;
        pass.latencies.push(started.elapsed());
        pass.results.push(hits);
    }
    Ok(pass)
}

/// Resident memory of this process, from `/proc/self/status` (zero where there is none).
struct Memory {
    rss_mib: u64,
    peak_mib: u64,
}

fn memory() -> Memory {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map_or(0, |kib| kib >> 10)
    };
    Memory {
        rss_mib: field("VmRSS:"),
        peak_mib: field("VmHWM:"),
    }
}

/// Areas, and topics per area.
const AREAS: usize = 50;
const TOPICS_PER_AREA: usize = 40;
/// Weights of the parts of a chunk (see the module doc).
const W_SHARED: f32 = 0.35;
const W_AREA: f32 = 0.5;
const W_TOPIC: f32 = 0.7;
const W_DOCUMENT: f32 = 0.7;
const W_NOISE: f32 = 0.8;

/// The synthetic mixture: fixed directions, and everything else drawn from hashes of a
/// document's or chunk's number, so any document can be regenerated for a query.
pub(crate) struct Mixture {
    dims: usize,
    seed: u64,
    shared: Vec<f32>,
    areas: Vec<Vec<f32>>,
    topics: Vec<Vec<f32>>,
}

/// A document's draw.
pub(crate) struct Shape {
    pub(crate) topic: usize,
    pub(crate) source: usize,
    pub(crate) chunks: usize,
    /// Its own direction, weighted.
    offset: Vec<f32>,
    seed: u64,
}

impl Mixture {
    pub(crate) fn new(dims: usize, seed: u64) -> Self {
        let unit = |stream: u64| normalised(gaussian(dims, seed ^ stream, 1.0));
        Self {
            dims,
            seed,
            shared: unit(1),
            areas: (0..AREAS as u64).map(|a| unit(0x100 + a)).collect(),
            topics: (0..(AREAS * TOPICS_PER_AREA) as u64)
                .map(|t| unit(0x10_0000 + t))
                .collect(),
        }
    }

    pub(crate) fn document(&self, number: u64) -> Shape {
        let draw = splitmix64(self.seed ^ splitmix64(number ^ 0xD0C));
        let seed = splitmix64(draw);
        let scale = W_DOCUMENT / (self.dims as f32).sqrt();
        Shape {
            topic: (draw % (AREAS * TOPICS_PER_AREA) as u64) as usize,
            source: ((draw >> 20) % SOURCES as u64) as usize,
            chunks: 1 + ((draw >> 40) % 16) as usize,
            offset: gaussian(self.dims, seed, scale),
            seed,
        }
    }

    /// Chunk `number` of `shape` (numbers past its chunk count give new chunks, as queries).
    pub(crate) fn chunk(&self, shape: &Shape, number: u64) -> Vec<f32> {
        let scale = W_NOISE / (self.dims as f32).sqrt();
        let mut v = gaussian(self.dims, splitmix64(shape.seed ^ (number + 1)), scale);
        let area = &self.areas[shape.topic / TOPICS_PER_AREA];
        let topic = &self.topics[shape.topic];
        for (i, x) in v.iter_mut().enumerate() {
            *x +=
                W_SHARED * self.shared[i] + W_AREA * area[i] + W_TOPIC * topic[i] + shape.offset[i];
        }
        normalised(v)
    }

    /// Query `number`: a new chunk of one of the first `documents` documents.
    pub(crate) fn query(&self, number: u64, documents: u64) -> Vec<f32> {
        let document = splitmix64(self.seed ^ number ^ 0x9E3) % documents.max(1);
        self.chunk(&self.document(document), 1_000_000 + number)
    }
}

/// `dims` independent normal values with standard deviation `scale`, from `seed`.
fn gaussian(dims: usize, seed: u64, scale: f32) -> Vec<f32> {
    // Each 64-bit draw gives four 16-bit uniforms; their sum, centred and scaled to unit
    // variance, is close enough to normal here and far cheaper than Box-Muller.
    let mut state = seed;
    (0..dims)
        .map(|_| {
            state = splitmix64(state);
            let sum: f32 = (0..4)
                .map(|k| ((state >> (16 * k)) & 0xFFFF) as f32 / 65_535.0)
                .sum();
            (sum - 2.0) * 3f32.sqrt() * scale
        })
        .collect()
}

fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

pub(crate) fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    /// The similarities the module doc promises, within sampling error.
    #[test]
    fn the_mixture_has_the_documented_structure() {
        let mixture = Mixture::new(384, 5);
        let a = mixture.document(1);
        let same_document = cosine(&mixture.chunk(&a, 0), &mixture.chunk(&a, 1));
        assert!((0.6..0.76).contains(&same_document), "{same_document}");
        let other = (2..)
            .map(|n| mixture.document(n))
            .find(|d| d.topic / TOPICS_PER_AREA != a.topic / TOPICS_PER_AREA)
            .unwrap();
        let unrelated = cosine(&mixture.chunk(&a, 0), &mixture.chunk(&other, 0));
        assert!(unrelated.abs() < 0.2, "{unrelated}");
        let query = mixture.query(3, 10);
        assert!((cosine(&query, &query) - 1.0).abs() < 1e-4);
    }
}
