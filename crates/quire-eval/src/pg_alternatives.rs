//! The in-database alternatives to cluster mode's node-local indexes: vectors searched with
//! pgvector ([`PgVectorTable`]) and a store's own chunks ranked by PostgreSQL's full-text
//! search ([`FullTextIndex`]). The product uses neither, so they live with the benches that
//! measure them beside what the nodes do, `quire bench vectors --pgvector` and
//! `quire bench cluster --qrels` (`docs/cluster.md` has the figures and the choice).

use std::fmt::Write as _;

use anyhow::{Context, anyhow};
use quire_store::StoreLocation;
use sqlx::{Connection, Executor, PgConnection, Row};

/// A vector column of a [`PgVectorTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VectorColumn {
    /// `vector(dims)`: single precision.
    Vector,
    /// `halfvec(dims)`: half precision, generated from the `vector` column.
    Halfvec,
}

impl VectorColumn {
    /// The column's name in the table.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Vector => "embedding",
            Self::Halfvec => "half",
        }
    }

    fn type_name(self) -> &'static str {
        match self {
            Self::Vector => "vector",
            Self::Halfvec => "halfvec",
        }
    }
}

/// How a search through a [`PgVectorTable`] is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VectorPath {
    /// The HNSW walk with the scope applied to what it returns (written so the btree cannot
    /// serve the filter, sequential scans off): pgvector's filter trap.
    Hnsw,
    /// The same with `hnsw.iterative_scan` in this order (`relaxed_order`, `strict_order`).
    Iterative(&'static str),
    /// The scope's rows through the btree on the source, then sorted by distance.
    ExactThroughBtree,
    /// The plain statement with pgvector's defaults, as the planner picks.
    PlannersChoice,
}

/// What [`PgVectorTable::describe`] reports: versions, settings and sizes, as PostgreSQL
/// prints them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PgVectorFacts {
    /// `server_version`.
    pub(crate) server_version: String,
    /// The `vector` extension's version.
    pub(crate) pgvector_version: String,
    /// `shared_buffers`: whether table and indexes fit PostgreSQL's own cache.
    pub(crate) shared_buffers: String,
    /// The table, both vector columns included.
    pub(crate) table_size: String,
    /// The HNSW index of the `vector` column (empty before it is built).
    pub(crate) vector_index_size: String,
    /// The HNSW index of the `halfvec` column (empty before it is built).
    pub(crate) halfvec_index_size: String,
}

/// A scratch table of numbered vectors in pgvector: `(number, ordinal, source)` and the vector
/// in both columns. Dropped by [`PgVectorTable::drop_table`].
#[derive(Debug)]
pub(crate) struct PgVectorTable {
    db: PgConnection,
    table: String,
    dims: usize,
}

impl PgVectorTable {
    /// Makes the extension (if missing) and an empty table of its own on `url`.
    pub(crate) async fn create(url: &str, dims: usize) -> anyhow::Result<Self> {
        let mut db = connect(url).await?;
        db.execute("CREATE EXTENSION IF NOT EXISTS vector")
            .await
            .map_err(|e| {
                anyhow!("the server has no pgvector extension (CREATE EXTENSION vector: {e})")
            })?;
        let table = format!("quire_bench_vectors_{}", uuid::Uuid::new_v4().simple());
        db.execute(
            format!(
                "CREATE TABLE {table} (number integer NOT NULL, ordinal integer NOT NULL, \
                 source integer NOT NULL, embedding vector({dims}) NOT NULL, \
                 half halfvec({dims}) GENERATED ALWAYS AS (embedding::halfvec({dims})) STORED)"
            )
            .as_str(),
        )
        .await?;
        Ok(Self { db, table, dims })
    }

    /// Appends `rows` of `(number, ordinal, source, vector)` with one `COPY … FROM STDIN`.
    pub(crate) async fn copy(&mut self, rows: &[(i32, i32, i32, Vec<f32>)]) -> anyhow::Result<()> {
        let mut text = String::new();
        for (number, ordinal, source, vector) in rows {
            if vector.len() != self.dims {
                anyhow::bail!(
                    "a vector of {} values in a table of {}",
                    vector.len(),
                    self.dims
                );
            }
            let _ = write!(text, "{number}\t{ordinal}\t{source}\t");
            write_vector(&mut text, vector);
            text.push('\n');
        }
        let mut copy = self
            .db
            .copy_in_raw(&format!(
                "COPY {} (number, ordinal, source, embedding) FROM STDIN",
                self.table
            ))
            .await?;
        copy.send(text.as_bytes()).await?;
        copy.finish().await?;
        Ok(())
    }

    /// Builds the btree on the source.
    pub(crate) async fn index_sources(&mut self) -> anyhow::Result<()> {
        let statement = format!("CREATE INDEX ON {} (source)", self.table);
        self.db.execute(statement.as_str()).await?;
        Ok(())
    }

    /// Builds the HNSW index (cosine) of `column` with `m` and `ef_construction`, with room
    /// for the whole graph in memory and one helper besides the leader (pgvector's advice for
    /// a fast build on two cores).
    pub(crate) async fn index_column(
        &mut self,
        column: VectorColumn,
        m: usize,
        ef_construction: usize,
    ) -> anyhow::Result<()> {
        self.db.execute("SET maintenance_work_mem = '4GB'").await?;
        self.db
            .execute("SET max_parallel_maintenance_workers = 1")
            .await?;
        let (table, name) = (&self.table, column.name());
        let statement = format!(
            "CREATE INDEX {table}_{name}_hnsw ON {table} USING hnsw ({name} {}_cosine_ops) \
             WITH (m = {m}, ef_construction = {ef_construction})",
            column.type_name()
        );
        self.db.execute(statement.as_str()).await?;
        Ok(())
    }

    /// Refreshes the planner's statistics, once the rows and indexes are in.
    pub(crate) async fn analyze(&mut self) -> anyhow::Result<()> {
        let statement = format!("ANALYZE {}", self.table);
        self.db.execute(statement.as_str()).await?;
        Ok(())
    }

    /// The server's and the extension's versions, its buffer cache, and what the table and
    /// its HNSW indexes take on disk.
    pub(crate) async fn describe(&mut self) -> anyhow::Result<PgVectorFacts> {
        let table = &self.table;
        let row = sqlx::query(&format!(
            "SELECT current_setting('server_version'), \
                    (SELECT extversion FROM pg_extension WHERE extname = 'vector'), \
                    current_setting('shared_buffers'), \
                    pg_size_pretty(pg_table_size('{table}')), \
                    pg_size_pretty(pg_relation_size(to_regclass('{table}_embedding_hnsw'))), \
                    pg_size_pretty(pg_relation_size(to_regclass('{table}_half_hnsw')))"
        ))
        .fetch_one(&mut self.db)
        .await?;
        let text = |i: usize| {
            row.try_get::<Option<String>, _>(i)
                .map(Option::unwrap_or_default)
        };
        Ok(PgVectorFacts {
            server_version: text(0)?,
            pgvector_version: text(1)?,
            shared_buffers: text(2)?,
            table_size: text(3)?,
            vector_index_size: text(4)?,
            halfvec_index_size: text(5)?,
        })
    }

    /// Reads the whole table once, so that later searches find it in the buffer cache.
    pub(crate) async fn read_through(&mut self) -> anyhow::Result<()> {
        sqlx::query(&format!("SELECT count(*) FROM {}", self.table))
            .execute(&mut self.db)
            .await?;
        Ok(())
    }

    /// Sets the session up for searches through `path` with `ef_search` (pgvector's default
    /// where the path takes no setting).
    pub(crate) async fn prepare(
        &mut self,
        path: VectorPath,
        ef_search: usize,
    ) -> anyhow::Result<()> {
        let defaults = "RESET hnsw.ef_search; RESET hnsw.iterative_scan; RESET enable_seqscan; \
                        RESET enable_bitmapscan;";
        let settings = match path {
            VectorPath::PlannersChoice | VectorPath::ExactThroughBtree => defaults.to_owned(),
            VectorPath::Hnsw => format!(
                "{defaults} SET hnsw.ef_search = {ef_search}; SET enable_seqscan = off; \
                 SET enable_bitmapscan = off;"
            ),
            VectorPath::Iterative(order) => format!(
                "{defaults} SET hnsw.ef_search = {ef_search}; SET hnsw.iterative_scan = {order}; \
                 SET enable_seqscan = off; SET enable_bitmapscan = off;"
            ),
        };
        self.db.execute(settings.as_str()).await?;
        Ok(())
    }

    /// The `k` rows nearest to `query` in `column` among the sources numbered below
    /// `sources`, through `path` (after [`Self::prepare`]): `(number, ordinal)`, best first.
    pub(crate) async fn search(
        &mut self,
        path: VectorPath,
        column: VectorColumn,
        query: &[f32],
        sources: i32,
        k: usize,
    ) -> anyhow::Result<Vec<(i32, i32)>> {
        let (table, name, ty) = (&self.table, column.name(), column.type_name());
        let statement = match path {
            // `source + 0` keeps the btree out of the plan: the walk must find the scope.
            VectorPath::Hnsw | VectorPath::Iterative(_) => format!(
                "SELECT number, ordinal FROM {table} WHERE source + 0 < $2 \
                 ORDER BY {name} <=> $1::text::{ty} LIMIT {k}"
            ),
            VectorPath::ExactThroughBtree => format!(
                "WITH scope AS MATERIALIZED (SELECT number, ordinal, {name} FROM {table} \
                 WHERE source < $2) \
                 SELECT number, ordinal FROM scope ORDER BY {name} <=> $1::text::{ty} LIMIT {k}"
            ),
            VectorPath::PlannersChoice => format!(
                "SELECT number, ordinal FROM {table} WHERE source < $2 \
                 ORDER BY {name} <=> $1::text::{ty} LIMIT {k}"
            ),
        };
        let mut text = String::new();
        write_vector(&mut text, query);
        Ok(sqlx::query_as(&statement)
            .bind(&text)
            .bind(sources)
            .fetch_all(&mut self.db)
            .await?)
    }

    /// Drops the table and closes the connection.
    pub(crate) async fn drop_table(mut self) -> anyhow::Result<()> {
        let statement = format!("DROP TABLE IF EXISTS {}", self.table);
        self.db.execute(statement.as_str()).await?;
        self.db.close().await?;
        Ok(())
    }
}

/// A vector in pgvector's text form, `[x,y,…]` (`{x}` is the shortest text that reads back as
/// the same `f32`).
fn write_vector(out: &mut String, vector: &[f32]) {
    out.push('[');
    for (i, x) in vector.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{x}");
    }
    out.push(']');
}

/// PostgreSQL's full-text search over a store's chunks, as a PostgreSQL design would add it: a
/// stored `tsvector` of each chunk's section and text (English, as the keyword index stems
/// English) with a GIN index, queries as the OR of their stemmed words (`plainto_tsquery`
/// joins them with AND, which few chunks satisfy for a whole sentence), matches ranked by
/// `ts_rank_cd`. It changes the `chunks` table: for a store no node serves any more (a bench's
/// throw-away schema), never for one in use.
#[derive(Debug)]
pub(crate) struct FullTextIndex {
    db: PgConnection,
}

/// The query as the OR of its stemmed words.
const FULL_TEXT_QUERY: &str =
    "to_tsquery('english', replace(plainto_tsquery('english', $1)::text, ' & ', ' | '))";

impl FullTextIndex {
    /// Adds the column and its index to the chunks of the store at `url`.
    pub(crate) async fn build(url: &str) -> anyhow::Result<Self> {
        let mut db = connect(url).await?;
        db.execute(
            "ALTER TABLE chunks ADD COLUMN full_text tsvector GENERATED ALWAYS AS \
             (to_tsvector('english', section || ' ' || content)) STORED",
        )
        .await?;
        db.execute("CREATE INDEX chunks_full_text ON chunks USING gin (full_text)")
            .await?;
        db.execute("ANALYZE chunks").await?;
        Ok(Self { db })
    }

    /// The documents of the `limit` best-ranked chunks matching `query`, best first (a
    /// document once per matching chunk).
    pub(crate) async fn search(&mut self, query: &str, limit: i64) -> anyhow::Result<Vec<String>> {
        Ok(sqlx::query_scalar(&format!(
            "WITH q AS (SELECT {FULL_TEXT_QUERY} AS q) \
             SELECT document_id::text FROM chunks, q WHERE full_text @@ q.q \
             ORDER BY ts_rank_cd(full_text, q.q) DESC LIMIT $2"
        ))
        .bind(query)
        .bind(limit)
        .fetch_all(&mut self.db)
        .await?)
    }

    /// How many chunks match `query` (what `ts_rank_cd` has to rank).
    pub(crate) async fn matches(&mut self, query: &str) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(&format!(
            "SELECT count(*) FROM chunks WHERE full_text @@ {FULL_TEXT_QUERY}"
        ))
        .bind(query)
        .fetch_one(&mut self.db)
        .await?)
    }
}

/// One connection to `url`; an error names the server without its password.
async fn connect(url: &str) -> anyhow::Result<PgConnection> {
    PgConnection::connect(url).await.with_context(|| {
        format!(
            "could not open the database {}",
            StoreLocation::Postgres(url.to_owned())
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_written_in_pgvectors_text_form() {
        let mut out = String::new();
        write_vector(&mut out, &[0.5, -1.0, 1e-8]);
        assert_eq!(out, "[0.5,-1,0.00000001]");
    }
}
