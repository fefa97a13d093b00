//! The per-dialect part of a store: its connections, the bits of SQL text that differ, the few
//! statements that cannot be written once, and what only a shared (PostgreSQL) store does.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use quire_core::{ChunkDraft, DocumentId, DocumentRecord, KeyId, SourceId};
use sqlx::pool::PoolConnection;
use sqlx::{Database, Transaction};

use super::sql::Sql;
use crate::{
    ChunkVectors, ClaimedJob, ClusterNode, IndexChange, PendingDelivery, PoolStats,
    ProcessedDocument, QueueLimits, QueueRefusal, QueueView, StoreError, StoreResult, StoredChunk,
    TicketPlace,
};

/// A connection of backend `B`.
pub(crate) type Conn<B> = <<B as Backend>::Db as Database>::Connection;

/// What a store of one dialect provides to the shared logic in [`super`].
#[async_trait]
pub(crate) trait Backend: Send + Sync + 'static {
    /// The sqlx database; its connections run neutral statements.
    type Db: Database<Connection: Sql>;

    /// The column that orders a table's rows by insertion: `rowid` or `seq`.
    const SEQ: &'static str;
    /// The function that takes the larger of two values: `MAX` or `GREATEST`.
    const GREATEST: &'static str;
    /// Leases the oldest runnable job to `$1` until `$2` at `$3` (now); returns its `id`,
    /// `document_id`, `attempts` and `version`.
    const CLAIM_JOB: &'static str;
    /// Whether [`crate::Store::finish_documents`] finishes a batch in one transaction.
    const FINISH_IN_ONE_TRANSACTION: bool;

    /// `column` is one of the ids bound at `param` as [`super::Arg::Ids`].
    fn in_ids(column: &str, param: &str) -> String;
    /// The ids bound at `param` as [`super::Arg::Ids`], as a `SELECT` of one column, `id`.
    fn each_id(param: &str) -> String;
    /// `column` is in the scope bound at `param` as [`super::Arg::Scope`].
    fn in_scope(column: &str, param: &str) -> String;
    /// A row-lock clause such as `FOR UPDATE`; SQLite has none (its one writer excludes all).
    fn lock(clause: &'static str) -> &'static str;

    /// A connection for reads.
    async fn read(&self) -> StoreResult<PoolConnection<Self::Db>>;
    /// A connection for writes of one statement.
    async fn write(&self) -> StoreResult<PoolConnection<Self::Db>>;
    /// A write transaction, which holds the write lock from its start where the dialect has one.
    async fn begin_write(&self) -> StoreResult<Transaction<'static, Self::Db>>;

    /// Whether a job may be runnable at `now`: a cheap check before the claim, for a dialect
    /// whose claim would otherwise queue idle workers for the write lock.
    async fn job_may_be_runnable(&self, now: DateTime<Utc>) -> StoreResult<bool> {
        let _ = now;
        Ok(true)
    }
    /// Inserts the chunks of a document's version indexed under `index_id`, in as few
    /// statements as the dialect allows.
    async fn insert_chunks(
        conn: &mut Conn<Self>,
        document: DocumentId,
        index_id: DocumentId,
        source: SourceId,
        chunks: &[ChunkDraft],
    ) -> StoreResult<()>;
    /// The stored chunks with these (index id, ordinal) keys, in no particular order.
    async fn chunks_by_keys(&self, keys: &[(DocumentId, u32)]) -> StoreResult<Vec<StoredChunk>>;
    /// [`crate::Store::claim_deliveries`], which each dialect settles its own way.
    async fn claim_deliveries(
        &self,
        claimer: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<PendingDelivery>>;

    /// Called in the transaction that made jobs runnable: wakes the waiting workers.
    async fn jobs_queued(conn: &mut Conn<Self>) -> StoreResult<()> {
        let _ = conn;
        Ok(())
    }
    /// Called last in the transaction that made a document's version ready (replacing the
    /// version indexed under `replaced`, if any): its index feed entry.
    async fn document_ready(
        conn: &mut Conn<Self>,
        job: &ClaimedJob,
        source: SourceId,
        processed: &ProcessedDocument,
        replaced: Option<DocumentId>,
    ) -> StoreResult<()> {
        let _ = (conn, job, source, processed, replaced);
        Ok(())
    }
    /// Called last in the transaction that deleted a document: its index feed entry.
    async fn document_removed(conn: &mut Conn<Self>, document: &DocumentRecord) -> StoreResult<()> {
        let _ = (conn, document);
        Ok(())
    }

    /// [`crate::Store::pool_stats`].
    fn pool_stats(&self) -> PoolStats;
    /// [`crate::Store::close`].
    async fn close(&self);
    /// [`crate::Store::wait_for_jobs`].
    async fn wait_for_jobs(&self, max: Duration) {
        tokio::time::sleep(max).await;
    }
    /// [`crate::Store::is_shared`].
    fn is_shared(&self) -> bool {
        false
    }
    /// [`crate::Store::index_changes`]: none where the store is not shared.
    async fn index_changes(&self, after: u64, limit: usize) -> StoreResult<Vec<IndexChange>> {
        let _ = (after, limit);
        Ok(Vec::new())
    }
    /// [`crate::Store::document_vectors`]: none where the store is not shared.
    async fn document_vectors(&self, id: DocumentId) -> StoreResult<Option<ChunkVectors>> {
        let _ = id;
        Ok(None)
    }
    /// [`crate::Store::join_cluster`]: no other nodes where the store is not shared.
    async fn join_cluster(
        &self,
        node: &str,
        model: Option<&str>,
        now: DateTime<Utc>,
        alive_since: DateTime<Utc>,
    ) -> StoreResult<Option<ClusterNode>> {
        let _ = (node, model, now, alive_since);
        Ok(None)
    }
    /// [`crate::Store::node_seen`].
    async fn node_seen(&self, node: &str, now: DateTime<Utc>) -> StoreResult<()> {
        let _ = (node, now);
        Ok(())
    }
    /// [`crate::Store::leave_cluster`].
    async fn leave_cluster(&self, node: &str) -> StoreResult<()> {
        let _ = node;
        Ok(())
    }
    /// [`crate::Store::queue_join`]: only a shared store has the queue.
    async fn queue_join(
        &self,
        id: uuid::Uuid,
        key: KeyId,
        node: &str,
        limits: QueueLimits,
        now: DateTime<Utc>,
        alive_since: DateTime<Utc>,
    ) -> StoreResult<Result<TicketPlace, QueueRefusal>> {
        let _ = (id, key, node, limits, now, alive_since);
        Err(no_queue())
    }
    /// [`crate::Store::queue_view`].
    async fn queue_view(
        &self,
        node: &str,
        slots: u64,
        now: DateTime<Utc>,
        alive_since: DateTime<Utc>,
    ) -> StoreResult<QueueView> {
        let _ = (node, slots, now, alive_since);
        Err(no_queue())
    }
    /// [`crate::Store::queue_leave`].
    async fn queue_leave(&self, id: uuid::Uuid) -> StoreResult<()> {
        let _ = id;
        Err(no_queue())
    }
}

/// What a store without the shared generation queue answers.
fn no_queue() -> StoreError {
    StoreError::Invalid("this store has no shared generation queue".into())
}
