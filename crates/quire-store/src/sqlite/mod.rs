//! The SQLite store: the embedded default. One database file in the data directory, in WAL
//! mode so the CLI can create keys while the server runs.

mod codec;
mod migrations;

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use quire_core::{ChunkDraft, ChunkId, DocumentId, SourceId, WebhookId};
use sqlx::pool::PoolConnection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{QueryBuilder, Sqlite, SqliteConnection, SqlitePool, Transaction};

use crate::shared::records::{self, WEBHOOK_COLUMNS};
use crate::shared::webhooks::CLAIMABLE;
use crate::shared::{Arg, Backend, Cells, Query, Sql};
use crate::{PendingDelivery, PoolStats, StoreError, StoreResult, StoredChunk, WebhookRecord};

/// A [`Store`] in one SQLite database file.
///
/// Writes go through a pool of one connection and reads through a pool of several. SQLite lets
/// one connection write at a time; writers of one process that contend for its lock wait in its
/// busy handler, which sleeps for milliseconds whatever the holder's remaining time, and in
/// `quire bench ingest` the workers and uploads then left a quarter of the CPU idle. Queued on
/// the one writer, each write starts the moment the one before it ends (`docs/performance.md`,
/// "One writer connection"). Reads go on beside the writer, as WAL mode allows.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// Connections for reads.
    pool: SqlitePool,
    /// The one connection for writes (and the reads inside them).
    writer: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    pub async fn open(path: &Path) -> StoreResult<Self> {
        // Other processes (the CLI) write to the same file; wait for their lock.
        Self::open_waiting(path, Duration::from_secs(10)).await
    }

    /// [`Self::open`], waiting at most `busy_timeout` for another process's write lock.
    async fn open_waiting(path: &Path, busy_timeout: Duration) -> StoreResult<Self> {
        let url = format!("sqlite://{}", path.display());
        let options = SqliteConnectOptions::from_str(&url)
            .map_err(|e| StoreError::Open(e.to_string()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(busy_timeout);
        // Processes creating the file at the same moment (the server and the CLI on a first
        // run): switching a new file to WAL needs a lock SQLite reports as busy at once, without
        // waiting for busy_timeout; the loser tries again shortly.
        let mut busy_retries = 50;
        let writer = loop {
            match SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options.clone())
                .await
            {
                Ok(pool) => break pool,
                Err(sqlx::Error::Database(e))
                    if e.code().as_deref() == Some("5") && busy_retries > 0 =>
                {
                    busy_retries -= 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(StoreError::Open(format!("{}: {e}", path.display()))),
            }
        };
        migrations::run(&writer).await?;
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Open(format!("{}: {e}", path.display())))?;
        Ok(Self { pool, writer })
    }
}

/// The oldest runnable job (`?3`: now): queued and due, or running with its lease run out.
/// Read in `jobs_by_age` order (schema v11), so the first runnable row ends the search; left to
/// itself, SQLite finds the two kinds of row through `jobs_runnable` and sorts every queued job
/// (`bench/job-claim` times both).
macro_rules! next_job {
    () => {
        "SELECT id FROM jobs INDEXED BY jobs_by_age
     WHERE state IN ('queued', 'running')
       AND ((state = 'queued' AND run_after <= ?3)
            OR (state = 'running' AND lease_expires_at < ?3))
     ORDER BY created_at, rowid
     LIMIT 1"
    };
}

/// The statement that finds the next job, for the test of its query plan.
#[cfg(test)]
const NEXT_JOB: &str = next_job!();

/// Chunk rows per `INSERT`: 8 parameters each stays far below SQLite's 32,766 parameters a
/// statement, and a document of the largest allowed size is written in a few hundred statements.
const CHUNK_ROWS_PER_INSERT: usize = 500;

/// Most chunk keys bound in one statement (SQLite allows 32,766 parameters; two per key).
const KEYS_PER_QUERY: usize = 2_000;

#[async_trait]
impl Backend for SqliteStore {
    type Db = Sqlite;

    const SEQ: &'static str = "rowid";
    const GREATEST: &'static str = "MAX";
    const CLAIM_JOB: &'static str = concat!(
        "UPDATE jobs
         SET state = 'running', attempts = attempts + 1, lease_owner = ?1,
             lease_expires_at = ?2, updated_at = ?3
         WHERE id = (",
        next_job!(),
        ")
         RETURNING id, document_id, attempts, version"
    );
    // The transaction's commit costs SQLite far more than the few statements each document adds.
    const FINISH_IN_ONE_TRANSACTION: bool = true;

    fn in_ids(column: &str, param: &str) -> String {
        format!("{column} IN ({})", Self::each_id(param))
    }

    fn each_id(param: &str) -> String {
        format!("SELECT value AS id FROM json_each({param})")
    }

    fn in_scope(column: &str, param: &str) -> String {
        format!("({param} IS NULL OR {})", Self::in_ids(column, param))
    }

    fn lock(_clause: &'static str) -> &'static str {
        ""
    }

    async fn read(&self) -> StoreResult<PoolConnection<Sqlite>> {
        Ok(self.pool.acquire().await?)
    }

    async fn write(&self) -> StoreResult<PoolConnection<Sqlite>> {
        Ok(self.writer.acquire().await?)
    }

    /// IMMEDIATE: the reads of a write transaction must not go stale before its writes, and
    /// another process's write lock is waited for here rather than failing an upgrade later.
    async fn begin_write(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// A read first, as idle workers poll often and should not queue for the writer for
    /// nothing.
    async fn job_may_be_runnable(&self, now: DateTime<Utc>) -> StoreResult<bool> {
        self.read()
            .await?
            .exists(
                Query::new(
                    "SELECT 1 FROM jobs
                     WHERE (state = 'queued' AND run_after <= $1)
                        OR (state = 'running' AND lease_expires_at < $1)
                     LIMIT 1",
                )
                .bind(now),
            )
            .await
    }

    /// Many rows a statement: one statement per chunk cost a round trip to SQLite's thread each.
    async fn insert_chunks(
        conn: &mut SqliteConnection,
        document: DocumentId,
        index_id: DocumentId,
        source: SourceId,
        chunks: &[ChunkDraft],
    ) -> StoreResult<()> {
        for batch in chunks.chunks(CHUNK_ROWS_PER_INSERT) {
            let mut insert = QueryBuilder::<Sqlite>::new(
                "INSERT INTO chunks (id, document_id, index_id, source_id, ordinal, page, section,
                                     content) ",
            );
            insert.push_values(batch, |mut row, chunk| {
                row.push_bind(ChunkId::new().to_string())
                    .push_bind(document.to_string())
                    .push_bind(index_id.to_string())
                    .push_bind(source.to_string())
                    .push_bind(i64::from(chunk.ordinal))
                    .push_bind(i64::from(chunk.page))
                    .push_bind(&chunk.section)
                    .push_bind(&chunk.content);
            });
            insert.build().execute(&mut *conn).await?;
        }
        Ok(())
    }

    async fn chunks_by_keys(&self, keys: &[(DocumentId, u32)]) -> StoreResult<Vec<StoredChunk>> {
        let mut out = Vec::with_capacity(keys.len());
        for batch in keys.chunks(KEYS_PER_QUERY) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "SELECT index_id, ordinal, page, section, content FROM chunks
                 WHERE (index_id, ordinal) IN (VALUES ",
            );
            let mut list = qb.separated(", ");
            for (document, ordinal) in batch {
                list.push("(");
                list.push_bind_unseparated(document.to_string());
                list.push_unseparated(", ");
                list.push_bind_unseparated(i64::from(*ordinal));
                list.push_unseparated(")");
            }
            qb.push(")");
            for row in qb.build().fetch_all(&self.pool).await? {
                out.push(StoredChunk {
                    document_id: row.id("index_id")?,
                    chunk: records::chunk(&row)?,
                });
            }
        }
        Ok(out)
    }

    async fn claim_deliveries(
        &self,
        claimer: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<PendingDelivery>> {
        // Idle dispatchers poll often; a read first keeps them from taking the write lock for
        // nothing.
        let pending = Query::new(format!(
            "SELECT 1 FROM webhook_outbox WHERE {CLAIMABLE} LIMIT 1"
        ))
        .bind(now);
        if !self.read().await?.exists(pending).await? {
            return Ok(Vec::new());
        }
        let mut tx = self.begin_write().await?;
        // One statement picks and claims the rows under the write lock: no other claimer can
        // see them claimable until the claim runs out.
        let claimed = tx
            .fetch_all(
                Query::new(format!(
                    "UPDATE webhook_outbox SET claimed_by = $2, claimed_until = $3
                     WHERE seq IN (
                         SELECT seq FROM webhook_outbox WHERE {CLAIMABLE} ORDER BY seq LIMIT $4)
                     RETURNING seq, event_id, webhook_id, event, body, created_at"
                ))
                .bind(now)
                .bind(claimer)
                .bind(until)
                .bind(limit),
            )
            .await?;
        if claimed.is_empty() {
            tx.rollback().await?;
            return Ok(Vec::new());
        }
        let mut webhook_ids = claimed
            .iter()
            .map(|row| row.uuid("webhook_id"))
            .collect::<StoreResult<Vec<_>>>()?;
        webhook_ids.sort();
        webhook_ids.dedup();
        let webhooks: HashMap<WebhookId, WebhookRecord> = tx
            .fetch_all(
                Query::new(format!(
                    "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE {}",
                    Self::in_ids("id", "$1")
                ))
                .bind(Arg::Ids(webhook_ids)),
            )
            .await?
            .iter()
            .map(|row| records::webhook(row, "").map(|w| (w.id, w)))
            .collect::<StoreResult<_>>()?;
        let mut deliveries = Vec::with_capacity(claimed.len());
        for row in &claimed {
            let webhook_id: WebhookId = row.id("webhook_id")?;
            let webhook = webhooks.get(&webhook_id).cloned().ok_or_else(|| {
                StoreError::Corrupt(format!("outbox row for missing webhook {webhook_id}"))
            })?;
            deliveries.push((row.int("seq")?, records::pending_delivery(row, webhook)?));
        }
        tx.commit().await?;
        // RETURNING does not promise an order.
        deliveries.sort_by_key(|(seq, _)| *seq);
        Ok(deliveries.into_iter().map(|(_, d)| d).collect())
    }

    fn pool_stats(&self) -> PoolStats {
        // The reads' and the writer's connections together.
        let pools = [&self.pool, &self.writer];
        PoolStats {
            size: pools.iter().map(|p| p.size()).sum(),
            idle: pools
                .iter()
                .map(|p| u32::try_from(p.num_idle()).unwrap_or(u32::MAX))
                .sum(),
            max: pools
                .iter()
                .map(|p| p.options().get_max_connections())
                .sum(),
        }
    }

    async fn close(&self) {
        self.pool.close().await;
        self.writer.close().await;
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use futures_util::future::join_all;
    use quire_core::{NewDocument, NewSource, SourceDescription, SourceName, SourceType};
    use sqlx::Row;

    use super::*;
    use crate::Store;

    /// Writers of one process never meet SQLite's lock: with no waiting for it at all (a busy
    /// timeout of zero), many writes at once all succeed, because they queue for the one
    /// writer connection. Through a pool of several writing connections, some would fail with
    /// "database is locked".
    #[tokio::test]
    async fn writes_at_once_queue_for_the_writer_instead_of_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_waiting(&dir.path().join("q.db"), Duration::ZERO)
            .await
            .unwrap();
        let now = Utc::now();
        let writes = (0..64).map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                let source = store
                    .create_source(NewSource {
                        id: SourceId::new(),
                        name: SourceName::parse(&format!("S{n}")).unwrap(),
                        description: SourceDescription::default(),
                        source_type: SourceType::Network,
                        created_at: now,
                    })
                    .await?;
                let documents = (0..20)
                    .map(|d| NewDocument {
                        id: DocumentId::new(),
                        source_id: source.id,
                        name: format!("{d}.txt"),
                        content_type: "text/plain".into(),
                        size: 1,
                        sha256: format!("{d:064}"),
                        metadata: Default::default(),
                        external_id: None,
                        created_at: now,
                    })
                    .collect();
                store.create_documents(documents).await
            })
        });
        for written in join_all(writes).await {
            assert_eq!(written.unwrap().unwrap().len(), 20);
        }
        assert_eq!(store.pending_job_count().await.unwrap(), 64 * 20);
    }

    /// A claim reads the queue in age order and stops at the first runnable job: no sort of
    /// every queued job, which made each claim cost a millisecond per 5,000 queued jobs.
    #[tokio::test]
    async fn a_claim_reads_the_queue_in_age_order_without_sorting_it() {
        let pool = migrations::empty_database().await;
        migrations::run(&pool).await.unwrap();
        let plan: Vec<String> = sqlx::query(&format!("EXPLAIN QUERY PLAN {NEXT_JOB}"))
            .bind(0)
            .bind(0)
            .bind(0)
            .fetch_all(&pool)
            .await
            .unwrap()
            .iter()
            .map(|row| row.get("detail"))
            .collect();
        assert_eq!(plan, ["SCAN jobs USING INDEX jobs_by_age"], "{plan:?}");
    }
}
