//! The PostgreSQL store: one database shared by every node of a cluster. Each node keeps a
//! connection pool; everything nodes could race on is settled by the database itself: schema
//! migrations under an advisory lock, jobs and webhook deliveries claimed with
//! `FOR UPDATE SKIP LOCKED`, rate-limit windows counted by one atomic upsert.

mod codec;
mod feed;
mod migrations;
mod nodes;
mod queue;
pub(crate) mod schemas;
mod wakeups;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use quire_core::{ChunkDraft, DocumentId, DocumentRecord, KeyId, SourceId};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool, Postgres, Transaction};
use uuid::Uuid;

use crate::location::redact_password;
use crate::shared::records;
use crate::shared::webhooks::CLAIMABLE;
use crate::shared::{Backend, Cells, Query, Sql};
use crate::{
    ChunkVectors, ClaimedJob, ClusterNode, IndexChange, IndexChangeKind, PendingDelivery,
    PoolStats, ProcessedDocument, QueueLimits, QueueRefusal, QueueView, StoreError, StoreResult,
    StoredChunk, TicketPlace,
};

/// A [`Store`] in a PostgreSQL database (15 or newer).
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    wakeups: Arc<wakeups::Wakeups>,
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://…`) and brings its schema up to date.
    /// Errors name the URL with its password replaced by `***`.
    pub async fn open(url: &str) -> StoreResult<Self> {
        let shown = redact_password(url);
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Open(format!("{shown}: {e}")))?;
        // One connection first, outside the pool: the pool retries a refused connection until
        // its timeout and then reports only the timeout, while this says what went wrong.
        let mut conn = PgConnection::connect_with(&options)
            .await
            .map_err(|e| StoreError::Open(format!("{shown}: {e}")))?;
        let migrated = migrations::run(&mut conn).await;
        // Closing is a courtesy to the server; the schema is what matters.
        let _ = conn.close().await;
        migrated.map_err(|e| StoreError::Open(format!("{shown}: migrating the schema: {e}")))?;
        let pool = PgPoolOptions::new()
            .max_connections(10)
            // A node that cannot reach its database should say so, not hang.
            .acquire_timeout(Duration::from_secs(15))
            .connect_lazy_with(options);
        Ok(Self {
            pool,
            wakeups: Arc::default(),
        })
    }
}

/// Chunk rows per `INSERT`: a document of the largest allowed size is sent in a few dozen
/// statements of bounded size rather than one message holding all of its text.
const CHUNK_ROWS_PER_INSERT: usize = 2_000;

#[async_trait]
impl Backend for PgStore {
    type Db = Postgres;

    const SEQ: &'static str = "seq";
    const GREATEST: &'static str = "GREATEST";
    // The partial unique index on (source_id, sha256) decides between two nodes storing the
    // same bytes at once: the second insert waits for the first and then does nothing.
    // SKIP LOCKED: workers on several nodes each take a different row without waiting.
    const CLAIM_JOB: &'static str = "UPDATE jobs j
         SET state = 'running', attempts = j.attempts + 1, lease_owner = $1,
             lease_expires_at = $2, updated_at = $3
         FROM (SELECT id FROM jobs
               WHERE (state = 'queued' AND run_after <= $3)
                  OR (state = 'running' AND lease_expires_at < $3)
               ORDER BY created_at, seq
               LIMIT 1
               FOR UPDATE SKIP LOCKED) next
         WHERE j.id = next.id
         RETURNING j.id, j.document_id, j.attempts, j.version";
    // One transaction per document: each carries its own index feed entries and vectors, and
    // PostgreSQL's commits cost less than SQLite's.
    const FINISH_IN_ONE_TRANSACTION: bool = false;

    fn in_ids(column: &str, param: &str) -> String {
        format!("{column} = ANY({param})")
    }

    fn each_id(param: &str) -> String {
        format!("SELECT UNNEST({param}::uuid[]) AS id")
    }

    fn in_scope(column: &str, param: &str) -> String {
        format!("({param}::uuid[] IS NULL OR {column} = ANY({param}))")
    }

    fn lock(clause: &'static str) -> &'static str {
        clause
    }

    async fn read(&self) -> StoreResult<PoolConnection<Postgres>> {
        Ok(self.pool.acquire().await?)
    }

    async fn write(&self) -> StoreResult<PoolConnection<Postgres>> {
        Ok(self.pool.acquire().await?)
    }

    async fn begin_write(&self) -> StoreResult<Transaction<'static, Postgres>> {
        Ok(self.pool.begin().await?)
    }

    /// Many rows a statement, as arrays, in batches that bound one statement's size.
    async fn insert_chunks(
        conn: &mut PgConnection,
        document: DocumentId,
        index_id: DocumentId,
        source: SourceId,
        chunks: &[ChunkDraft],
    ) -> StoreResult<()> {
        for batch in chunks.chunks(CHUNK_ROWS_PER_INSERT) {
            let ordinals: Vec<i64> = batch.iter().map(|c| i64::from(c.ordinal)).collect();
            let pages: Vec<i64> = batch.iter().map(|c| i64::from(c.page)).collect();
            let sections: Vec<&str> = batch.iter().map(|c| c.section.as_str()).collect();
            let contents: Vec<&str> = batch.iter().map(|c| c.content.as_str()).collect();
            sqlx::query(
                "INSERT INTO chunks (document_id, index_id, source_id, ordinal, page, section,
                                     content)
                 SELECT $1, $7, $2, c.ordinal, c.page, c.section, c.content
                 FROM UNNEST($3::bigint[], $4::bigint[], $5::text[], $6::text[])
                      AS c (ordinal, page, section, content)",
            )
            .bind(document.0)
            .bind(source.0)
            .bind(ordinals)
            .bind(pages)
            .bind(sections)
            .bind(contents)
            .bind(index_id.0)
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }

    /// The keys travel as two arrays, so any number of them is one statement.
    async fn chunks_by_keys(&self, keys: &[(DocumentId, u32)]) -> StoreResult<Vec<StoredChunk>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (documents, ordinals): (Vec<Uuid>, Vec<i64>) = keys
            .iter()
            .map(|(document, ordinal)| (document.0, i64::from(*ordinal)))
            .unzip();
        let rows = sqlx::query(
            "SELECT c.index_id, c.ordinal, c.page, c.section, c.content
             FROM chunks c
             JOIN UNNEST($1::uuid[], $2::bigint[]) AS k (index_id, ordinal)
               ON c.index_id = k.index_id AND c.ordinal = k.ordinal",
        )
        .bind(documents)
        .bind(ordinals)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(StoredChunk {
                    document_id: row.id("index_id")?,
                    chunk: records::chunk(row)?,
                })
            })
            .collect()
    }

    /// One statement picks, locks and claims the rows; SKIP LOCKED lets dispatchers on other
    /// nodes take the next rows instead of waiting for these, and never the same ones (a row
    /// another claimer committed meanwhile is checked again against the condition, and fails
    /// it).
    async fn claim_deliveries(
        &self,
        claimer: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<PendingDelivery>> {
        let query = Query::new(format!(
            "WITH claimed AS (
                 UPDATE webhook_outbox o SET claimed_by = $2, claimed_until = $3
                 FROM (SELECT seq FROM webhook_outbox WHERE {CLAIMABLE}
                       ORDER BY seq LIMIT $4 FOR UPDATE SKIP LOCKED) pick
                 WHERE o.seq = pick.seq
                 RETURNING o.seq, o.event_id, o.webhook_id, o.event, o.body, o.created_at)
             SELECT c.seq, c.event_id, c.event, c.body, c.created_at,
                    w.id AS webhook_id, w.url AS webhook_url, w.events AS webhook_events,
                    w.secret AS webhook_secret, w.source_ids AS webhook_source_ids,
                    w.created_at AS webhook_created_at
             FROM claimed c JOIN webhooks w ON w.id = c.webhook_id
             ORDER BY c.seq"
        ))
        .bind(now)
        .bind(claimer)
        .bind(until)
        .bind(limit);
        let rows = self.write().await?.fetch_all(query).await?;
        rows.iter()
            .map(|row| records::pending_delivery(row, records::webhook(row, "webhook_")?))
            .collect()
    }

    async fn jobs_queued(conn: &mut PgConnection) -> StoreResult<()> {
        wakeups::notify_runnable(conn).await
    }

    async fn document_ready(
        conn: &mut PgConnection,
        job: &ClaimedJob,
        source: SourceId,
        processed: &ProcessedDocument,
        replaced: Option<DocumentId>,
    ) -> StoreResult<()> {
        match &processed.vectors {
            Some(vectors) => feed::store_vectors(conn, job, vectors).await?,
            // Vectors of an earlier attempt (with a model since removed) must not outlive it.
            None => {
                sqlx::query("DELETE FROM document_vectors WHERE document_id = $1")
                    .bind(job.document_id.0)
                    .execute(&mut *conn)
                    .await?;
            }
        }
        let change = feed::Change {
            document: job.document_id,
            source,
            kind: IndexChangeKind::Ready,
            index_id: job.index_id,
            replaced,
        };
        feed::append(conn, change).await
    }

    /// Every node removes the document's entries from its own indexes.
    async fn document_removed(
        conn: &mut PgConnection,
        document: &DocumentRecord,
    ) -> StoreResult<()> {
        let change = feed::Change {
            document: document.id,
            source: document.source_id,
            kind: IndexChangeKind::Removed,
            index_id: document.index_id,
            replaced: document.previous_index_id,
        };
        feed::append(conn, change).await
    }

    fn pool_stats(&self) -> PoolStats {
        PoolStats {
            size: self.pool.size(),
            idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX),
            max: self.pool.options().get_max_connections(),
        }
    }

    async fn close(&self) {
        // The listener holds a pool connection: it must let go before the pool can close.
        self.wakeups.stop();
        self.pool.close().await;
    }

    async fn wait_for_jobs(&self, max: Duration) {
        self.wakeups.wait(&self.pool, max).await;
    }

    fn is_shared(&self) -> bool {
        true
    }

    async fn index_changes(&self, after: u64, limit: usize) -> StoreResult<Vec<IndexChange>> {
        feed::changes(&self.pool, after, limit).await
    }

    async fn document_vectors(&self, id: DocumentId) -> StoreResult<Option<ChunkVectors>> {
        feed::vectors(&self.pool, id).await
    }

    async fn join_cluster(
        &self,
        node: &str,
        model: Option<&str>,
        now: DateTime<Utc>,
        alive_since: DateTime<Utc>,
    ) -> StoreResult<Option<ClusterNode>> {
        nodes::join(&self.pool, node, model, now, alive_since).await
    }

    async fn node_seen(&self, node: &str, now: DateTime<Utc>) -> StoreResult<()> {
        nodes::seen(&self.pool, node, now).await
    }

    async fn leave_cluster(&self, node: &str) -> StoreResult<()> {
        nodes::leave(&self.pool, node).await
    }

    async fn queue_join(
        &self,
        id: Uuid,
        key: KeyId,
        node: &str,
        limits: QueueLimits,
        now: DateTime<Utc>,
        alive_since: DateTime<Utc>,
    ) -> StoreResult<Result<TicketPlace, QueueRefusal>> {
        queue::join(&self.pool, id, key, node, limits, now, alive_since).await
    }

    async fn queue_view(
        &self,
        node: &str,
        slots: u64,
        now: DateTime<Utc>,
        alive_since: DateTime<Utc>,
    ) -> StoreResult<QueueView> {
        queue::view(&self.pool, node, slots, now, alive_since).await
    }

    async fn queue_leave(&self, id: Uuid) -> StoreResult<()> {
        queue::leave(&self.pool, id).await
    }
}
