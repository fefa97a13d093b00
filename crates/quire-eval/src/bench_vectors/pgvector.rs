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

use std::fmt::Write as _;
use std::time::Instant;

use anyhow::Context;
use quire_core::SourceId;
use quire_search::VectorHit;
use sqlx::{Connection, Executor, PgConnection, Row};

use super::{K, Loaded, Mixture, Pass, SCOPES, SOURCES, Truth};

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

/// Rows sent per `COPY` message.
const COPY_ROWS: usize = 2_000;

/// Loads the corpus into pgvector on `url`, runs every path over every scope and prints a
/// table: p50, p99, recall@10 against the exact top 10, and the rows returned per query (the
/// filter trap returns fewer than 10). The table is dropped afterwards, also after a failure.
pub(super) async fn report(url: &str, corpus: &Corpus<'_>, build: &Build) -> anyhow::Result<()> {
    let mut db = PgConnection::connect(url)
        .await
        .context("could not connect to --pgvector")?;
    db.execute("CREATE EXTENSION IF NOT EXISTS vector")
        .await
        .context("the server has no pgvector extension (CREATE EXTENSION vector failed)")?;
    let table = format!("quire_bench_vectors_{}", uuid::Uuid::new_v4().simple());
    let measured = measure(&mut db, &table, corpus, build).await;
    db.execute(format!("DROP TABLE IF EXISTS {table}").as_str())
        .await?;
    measured
}

async fn measure(
    db: &mut PgConnection,
    table: &str,
    corpus: &Corpus<'_>,
    build: &Build,
) -> anyhow::Result<()> {
    let dims = corpus.mixture.dims;
    db.execute(
        format!(
            "CREATE TABLE {table} (number integer NOT NULL, ordinal integer NOT NULL, \
             source integer NOT NULL, embedding vector({dims}) NOT NULL, \
             half halfvec({dims}) GENERATED ALWAYS AS (embedding::halfvec({dims})) STORED)"
        )
        .as_str(),
    )
    .await?;
    let started = Instant::now();
    copy_corpus(db, table, corpus).await?;
    let copied = started.elapsed();
    let started = Instant::now();
    db.execute(format!("CREATE INDEX ON {table} (source)").as_str())
        .await?;
    let btree = started.elapsed();
    // Room for the whole graph in memory, and one helper besides the leader on two cores:
    // what pgvector's documentation advises for a fast build.
    db.execute("SET maintenance_work_mem = '4GB'").await?;
    db.execute("SET max_parallel_maintenance_workers = 1")
        .await?;
    let mut built = Vec::new();
    for (column, ops) in [
        ("embedding", "vector_cosine_ops"),
        ("half", "halfvec_cosine_ops"),
    ] {
        let started = Instant::now();
        db.execute(
            format!(
                "CREATE INDEX {table}_{column}_hnsw ON {table} USING hnsw ({column} {ops}) \
                 WITH (m = {}, ef_construction = {})",
                build.m, build.ef_construction
            )
            .as_str(),
        )
        .await?;
        built.push((column, started.elapsed()));
    }
    db.execute(format!("ANALYZE {table}").as_str()).await?;

    let facts = sqlx::query(&format!(
        "SELECT current_setting('server_version'), \
                (SELECT extversion FROM pg_extension WHERE extname = 'vector'), \
                current_setting('shared_buffers'), \
                pg_size_pretty(pg_table_size('{table}')), \
                pg_size_pretty(pg_relation_size('{table}_embedding_hnsw')), \
                pg_size_pretty(pg_relation_size('{table}_half_hnsw'))"
    ))
    .fetch_one(&mut *db)
    .await?;
    let fact = |i: usize| facts.try_get::<String, _>(i);
    println!();
    println!(
        "pgvector      PostgreSQL {}, pgvector {}, shared_buffers {}; the same corpus and queries",
        fact(0)?,
        fact(1)?,
        fact(2)?
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
        fact(3)?,
        fact(4)?,
        fact(5)?,
        build.m,
        build.ef_construction
    );
    warm_up(db, table, corpus).await?;
    println!();
    println!("| scope | pgvector path | column | ef_search | p50 ms | p99 ms | recall@10 | rows |");
    println!("|---|---|---|---|---|---|---|---|");
    for (scope, truth) in SCOPES.iter().zip(corpus.truth) {
        for path in paths(scope.sources) {
            let pass = run(db, table, corpus, &path, scope.sources).await?;
            println!(
                "| {} | {} | {} | {} | {} | {:.3} | {:.1} |",
                scope.name,
                path.name(),
                path.column,
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
async fn warm_up(db: &mut PgConnection, table: &str, corpus: &Corpus<'_>) -> anyhow::Result<()> {
    sqlx::query(&format!("SELECT count(*) FROM {table}"))
        .execute(&mut *db)
        .await?;
    let warm = Corpus {
        queries: &corpus.queries[..corpus.queries.len().min(50)],
        ..*corpus
    };
    for column in ["embedding", "half"] {
        let path = Path {
            kind: Kind::Hnsw,
            column,
            ef_search: 400,
        };
        run(db, table, &warm, &path, SOURCES).await?;
    }
    Ok(())
}

/// Streams the corpus into the table with `COPY … FROM STDIN` in text format.
async fn copy_corpus(
    db: &mut PgConnection,
    table: &str,
    corpus: &Corpus<'_>,
) -> anyhow::Result<()> {
    let mut copy = db
        .copy_in_raw(&format!(
            "COPY {table} (number, ordinal, source, embedding) FROM STDIN"
        ))
        .await?;
    let mut rows = String::new();
    let mut pending = 0;
    for (number, &(_, source, chunks)) in corpus.loaded.iter().enumerate() {
        let shape = corpus.mixture.document(number as u64);
        for ordinal in 0..chunks as u64 {
            let vector = corpus.mixture.chunk(&shape, ordinal);
            write!(rows, "{number}\t{ordinal}\t{source}\t")?;
            write_vector(&mut rows, &vector);
            rows.push('\n');
            pending += 1;
            if pending == COPY_ROWS {
                copy.send(rows.as_bytes()).await?;
                rows.clear();
                pending = 0;
            }
        }
    }
    if !rows.is_empty() {
        copy.send(rows.as_bytes()).await?;
    }
    copy.finish().await?;
    Ok(())
}

/// A vector in pgvector's text form, `[x,y,…]`.
fn write_vector(out: &mut String, vector: &[f32]) {
    out.push('[');
    for (i, x) in vector.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // `{x}` is the shortest text that reads back as the same f32.
        let _ = write!(out, "{x}");
    }
    out.push(']');
}

/// How one pass asks.
#[derive(Debug, Clone, PartialEq)]
struct Path {
    kind: Kind,
    column: &'static str,
    ef_search: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// The HNSW walk, the filter applied to what it returns.
    Hnsw,
    /// The walk with `hnsw.iterative_scan` at this order.
    Iterative(&'static str),
    /// The scope's rows through the btree, sorted by distance.
    ExactThroughBtree,
    /// The plain statement with the btree available and pgvector's defaults.
    PlannersChoice,
}

impl Path {
    fn name(&self) -> String {
        match self.kind {
            Kind::Hnsw => "HNSW, then the filter".to_owned(),
            Kind::Iterative(order) => format!("HNSW, iterative scan ({order})"),
            Kind::ExactThroughBtree => "exact: btree on the source, then sort".to_owned(),
            Kind::PlannersChoice => "planner's choice (plain SQL, defaults)".to_owned(),
        }
    }

    /// The `ef_search` column of the report.
    fn ef(&self) -> String {
        match self.kind {
            Kind::ExactThroughBtree => "–".to_owned(),
            _ => self.ef_search.to_string(),
        }
    }

    /// The statement: `$1` the query vector as text, `$2` the number of sources in scope
    /// (the scope is the sources numbered below it).
    fn statement(&self, table: &str) -> String {
        let column = self.column;
        let ty = if column == "half" {
            "halfvec"
        } else {
            "vector"
        };
        match self.kind {
            // `source + 0` keeps the btree out of the plan: the walk must find the scope.
            Kind::Hnsw | Kind::Iterative(_) => format!(
                "SELECT number, ordinal FROM {table} WHERE source + 0 < $2 \
                 ORDER BY {column} <=> $1::text::{ty} LIMIT {K}"
            ),
            Kind::ExactThroughBtree => format!(
                "WITH scope AS MATERIALIZED (SELECT number, ordinal, {column} FROM {table} \
                 WHERE source < $2) \
                 SELECT number, ordinal FROM scope ORDER BY {column} <=> $1::text::{ty} LIMIT {K}"
            ),
            Kind::PlannersChoice => format!(
                "SELECT number, ordinal FROM {table} WHERE source < $2 \
                 ORDER BY {column} <=> $1::text::{ty} LIMIT {K}"
            ),
        }
    }

    /// The session settings before the pass.
    fn settings(&self) -> String {
        let defaults = "RESET hnsw.ef_search; RESET hnsw.iterative_scan; RESET enable_seqscan; \
                        RESET enable_bitmapscan;";
        match self.kind {
            Kind::PlannersChoice | Kind::ExactThroughBtree => defaults.to_owned(),
            Kind::Hnsw => format!(
                "{defaults} SET hnsw.ef_search = {}; SET enable_seqscan = off; \
                 SET enable_bitmapscan = off;",
                self.ef_search
            ),
            Kind::Iterative(order) => format!(
                "{defaults} SET hnsw.ef_search = {}; SET hnsw.iterative_scan = {order}; \
                 SET enable_seqscan = off; SET enable_bitmapscan = off;",
                self.ef_search
            ),
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
    for column in ["embedding", "half"] {
        for ef in [PGVECTOR_EF_SEARCH, 100, 200, 400] {
            paths.push(path(Kind::Hnsw, column, ef));
        }
        if sources < SOURCES {
            for ef in [PGVECTOR_EF_SEARCH, 200] {
                paths.push(path(Kind::Iterative("relaxed_order"), column, ef));
            }
            paths.push(path(Kind::Iterative("strict_order"), column, 200));
        }
    }
    if sources < SOURCES {
        paths.push(path(Kind::ExactThroughBtree, "embedding", 0));
    }
    paths.push(path(Kind::PlannersChoice, "embedding", PGVECTOR_EF_SEARCH));
    paths
}

/// One pass of every query through `path`.
async fn run(
    db: &mut PgConnection,
    table: &str,
    corpus: &Corpus<'_>,
    path: &Path,
    sources: usize,
) -> anyhow::Result<Pass> {
    db.execute(path.settings().as_str()).await?;
    let statement = path.statement(table);
    let mut pass = Pass {
        latencies: Vec::with_capacity(corpus.queries.len()),
        results: Vec::with_capacity(corpus.queries.len()),
    };
    let mut text = String::new();
    for query in corpus.queries {
        text.clear();
        write_vector(&mut text, query);
        let started = Instant::now();
        let rows: Vec<(i32, i32)> = sqlx::query_as(&statement)
            .bind(&text)
            .bind(sources as i32)
            .fetch_all(&mut *db)
            .await
            .with_context(|| format!("{} on {}", path.name(), path.column))?;
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
