//! `quire bench vectors --pgvector URL`: the same synthetic corpus and the same queries in
//! pgvector, measured beside the product's own index in one run. This is the measurement
//! behind cluster mode's choice of a node-local vector replica over vectors searched inside
//! PostgreSQL (`docs/cluster.md`).
//!
//! The corpus goes into a table of its own (dropped afterwards) with one `vector` column and a
//! `halfvec` copy generated from it, a btree on the source and an HNSW index on each vector
//! column, built with the graph's own `m` and `ef_construction`. Every query is one statement
//! over one connection, as a node would send it, so the latencies include the loopback round
//! trip. Paths measured per scope:
//! - **HNSW**: `ORDER BY embedding <=> q LIMIT 10`, the scope as a filter (written so the
//!   btree cannot serve it, and with sequential scans off, so the plan is the HNSW index scan
//!   with the filter applied to what the walk returns: pgvector's "filter trap");
//! - the same with pgvector 0.8's **iterative scans** (`hnsw.iterative_scan`, relaxed and strict
//!   order), which walk on until `limit` rows pass the filter or `hnsw.max_scan_tuples` is reached;
//! - **exact through the btree**: the scope's rows fetched by the btree on the source in a
//!   materialised CTE, then sorted by distance (recall 1 by construction, cost growing with the
//!   scope);
//! - **the planner's choice**: the plain statement a user would write, pgvector's defaults.

use std::time::Instant;

use anyhow::Context;
use quire_core::SourceId;
use quire_search::VectorHit;

use super::{K, Loaded, Mixture, Pass, SCOPES, SOURCES, Truth};
use crate::pg_alternatives::{PgVectorTable, VectorColumn, VectorPath};

/// What the measurement needs from the bench: the corpus as loaded into the product's index,
/// the queries, and the exact answers per scope.
pub(super) struct Corpus<'a> {
    pub(super) mixture: &'a Mixture,
    pub(super) loaded: &'a [Loaded],
    pub(super) sources: &'a [SourceId],
    pub(super) queries: &'a [Vec<f32>],
    pub(super) truth: &'a [Truth],
}

/// The HNSW build parameters, the same as the product's graph.
pub(super) struct Build {
    pub(super) m: usize,
    pub(super) ef_construction: usize,
}

/// Rows sent per `COPY`.
const COPY_ROWS: usize = 2_000;

/// Both vector columns, in the report's order.
const COLUMNS: [VectorColumn; 2] = [VectorColumn::Vector, VectorColumn::Halfvec];

/// Loads the corpus into pgvector on `url`, runs every path over every scope and prints a
/// table: p50, p99, recall@10 against the exact top 10, and the rows returned per query (the
/// filter trap returns fewer than 10). The table is dropped afterwards, also after a failure.
pub(super) async fn report(url: &str, corpus: &Corpus<'_>, build: &Build) -> anyhow::Result<()> {
    let mut table = PgVectorTable::create(url, corpus.mixture.dims)
        .await
        .context("--pgvector")?;
    let measured = measure(&mut table, corpus, build).await;
    table.drop_table().await?;
    measured
}

async fn measure(
    table: &mut PgVectorTable,
    corpus: &Corpus<'_>,
    build: &Build,
) -> anyhow::Result<()> {
    let started = Instant::now();
    copy_corpus(table, corpus).await?;
    let copied = started.elapsed();
    let started = Instant::now();
    table.index_sources().await?;
    let btree = started.elapsed();
    let mut built = Vec::new();
    for column in COLUMNS {
        let started = Instant::now();
        table
            .index_column(column, build.m, build.ef_construction)
            .await?;
        built.push((column.name(), started.elapsed()));
    }
    table.analyze().await?;
    let facts = table.describe().await?;
    println!();
    println!(
        "pgvector      PostgreSQL {}, pgvector {}, shared_buffers {}; the same corpus and queries",
        facts.server_version, facts.pgvector_version, facts.shared_buffers
    );
    println!(
        "pg build      COPY {:.1} s, btree on the source {:.1} s, {}",
        copied.as_secs_f64(),
        btree.as_secs_f64(),
        built
            .iter()
            .map(|(column, took)| format!("HNSW on {column} {:.1} s", took.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "pg sizes      table {} (vector and halfvec columns), HNSW vector {}, HNSW halfvec {}; \
         graph m {}, ef_construction {}",
        facts.table_size,
        facts.vector_index_size,
        facts.halfvec_index_size,
        build.m,
        build.ef_construction
    );
    warm_up(table, corpus).await?;
    println!();
    println!("| scope | pgvector path | column | ef_search | p50 ms | p99 ms | recall@10 | rows |");
    println!("|---|---|---|---|---|---|---|---|");
    for (scope, truth) in SCOPES.iter().zip(corpus.truth) {
        for path in paths(scope.sources) {
            let pass = run(table, corpus, &path, scope.sources).await?;
            println!(
                "| {} | {} | {} | {} | {} | {:.3} | {:.1} |",
                scope.name,
                path.name(),
                path.column.name(),
                path.ef(),
                pass.latency(),
                pass.recall(truth),
                pass.mean_rows()
            );
        }
    }
    Ok(())
}

/// Reads the table and walks both graphs once, unmeasured, so the first measured pass does
/// not pay for reading them into the buffer cache.
async fn warm_up(table: &mut PgVectorTable, corpus: &Corpus<'_>) -> anyhow::Result<()> {
    table.read_through().await?;
    let warm = Corpus {
        queries: &corpus.queries[..corpus.queries.len().min(50)],
        ..*corpus
    };
    for column in COLUMNS {
        let path = Path {
            kind: VectorPath::Hnsw,
            column,
            ef_search: 400,
        };
        run(table, &warm, &path, SOURCES).await?;
    }
    Ok(())
}

/// Loads the corpus, regenerated from the mixture, [`COPY_ROWS`] rows at a time.
async fn copy_corpus(table: &mut PgVectorTable, corpus: &Corpus<'_>) -> anyhow::Result<()> {
    let mut rows = Vec::with_capacity(COPY_ROWS);
    for (number, &(_, source, chunks)) in corpus.loaded.iter().enumerate() {
        let shape = corpus.mixture.document(number as u64);
        for ordinal in 0..chunks as u64 {
            let vector = corpus.mixture.chunk(&shape, ordinal);
            rows.push((number as i32, ordinal as i32, source as i32, vector));
            if rows.len() == COPY_ROWS {
                table.copy(&rows).await?;
                rows.clear();
            }
        }
    }
    if !rows.is_empty() {
        table.copy(&rows).await?;
    }
    Ok(())
}

/// How one pass asks.
#[derive(Debug, Clone, PartialEq)]
struct Path {
    kind: VectorPath,
    column: VectorColumn,
    ef_search: usize,
}

impl Path {
    fn name(&self) -> String {
        match self.kind {
            VectorPath::Hnsw => "HNSW, then the filter".to_owned(),
            VectorPath::Iterative(order) => format!("HNSW, iterative scan ({order})"),
            VectorPath::ExactThroughBtree => "exact: btree on the source, then sort".to_owned(),
            VectorPath::PlannersChoice => "planner's choice (plain SQL, defaults)".to_owned(),
        }
    }

    /// The `ef_search` column of the report.
    fn ef(&self) -> String {
        match self.kind {
            VectorPath::ExactThroughBtree => "–".to_owned(),
            _ => self.ef_search.to_string(),
        }
    }
}

/// pgvector's default `hnsw.ef_search`.
const PGVECTOR_EF_SEARCH: usize = 40;

/// The paths measured on a scope of `sources` sources out of [`SOURCES`].
fn paths(sources: usize) -> Vec<Path> {
    let path = |kind, column, ef_search| Path {
        kind,
        column,
        ef_search,
    };
    let mut paths = Vec::new();
    for column in COLUMNS {
        for ef in [PGVECTOR_EF_SEARCH, 100, 200, 400] {
            paths.push(path(VectorPath::Hnsw, column, ef));
        }
        if sources < SOURCES {
            for ef in [PGVECTOR_EF_SEARCH, 200] {
                paths.push(path(VectorPath::Iterative("relaxed_order"), column, ef));
            }
            paths.push(path(VectorPath::Iterative("strict_order"), column, 200));
        }
    }
    if sources < SOURCES {
        paths.push(path(VectorPath::ExactThroughBtree, VectorColumn::Vector, 0));
    }
    paths.push(path(
        VectorPath::PlannersChoice,
        VectorColumn::Vector,
        PGVECTOR_EF_SEARCH,
    ));
    paths
}

/// One pass of every query through `path`.
async fn run(
    table: &mut PgVectorTable,
    corpus: &Corpus<'_>,
    path: &Path,
    sources: usize,
) -> anyhow::Result<Pass> {
    table.prepare(path.kind, path.ef_search).await?;
    let mut pass = Pass {
        latencies: Vec::with_capacity(corpus.queries.len()),
        results: Vec::with_capacity(corpus.queries.len()),
    };
    for query in corpus.queries {
        let started = Instant::now();
        let rows = table
            .search(path.kind, path.column, query, sources as i32, K)
            .await
            .with_context(|| format!("{} on {}", path.name(), path.column.name()))?;
        pass.latencies.push(started.elapsed());
        pass.results.push(
            rows.into_iter()
                .map(|(number, ordinal)| {
                    let (document_id, source, _) = corpus.loaded[number as usize];
                    VectorHit {
                        document_id,
                        source_id: corpus.sources[source],
                        ordinal: ordinal as u32,
                        score: 0.0,
                    }
                })
                .collect(),
        );
    }
    Ok(pass)
}
