//! The SQLite store: the embedded default. One database file in the data directory, in WAL
//! mode so the CLI can create keys while the server runs.

mod admin;
mod chunks;
mod codec;
mod conversations;
mod documents;
mod jobs;
mod keys;
mod migrations;
mod progress;
mod rate;
mod reviews;
mod sources;
mod webhooks;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use quire_core::{
    ApiKeyRecord, ChunkDraft, ConversationId, DocumentId, DocumentRecord, DocumentStatus, KeyId,
    NewApiKey, NewDocument, NewSource, SourceId, SourceRecord, SourceScope, WebhookEvent,
    WebhookId,
};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::{
    AdminSession, AuditEntry, ChunkVectors, ClaimedJob, ConversationRecord, Created, DecidedReview,
    DeliveryAttempt, DocumentHit, FinishOutcome, HeldDocument, IndexChange, MessageRecord,
    NewDeliveryAttempt, NewMessage, NewWebhook, PendingDelivery, ProcessedDocument, RateWindow,
    ReviewDecision, ReviewRecord, Store, StoreError, StoreResult, StoredChunk, WebhookRecord,
};

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

#[async_trait]
impl Store for SqliteStore {
    async fn create_source(&self, source: NewSource) -> StoreResult<SourceRecord> {
        sources::create(&self.writer, source).await
    }

    async fn list_sources(&self, scope: &SourceScope) -> StoreResult<Vec<SourceRecord>> {
        sources::list(&self.pool, scope).await
    }

    async fn get_source(
        &self,
        scope: &SourceScope,
        id: SourceId,
    ) -> StoreResult<Option<SourceRecord>> {
        sources::get(&self.pool, scope, id).await
    }

    async fn existing_sources(&self, ids: &[SourceId]) -> StoreResult<Vec<SourceId>> {
        sources::existing(&self.pool, ids).await
    }

    async fn create_documents(&self, documents: Vec<NewDocument>) -> StoreResult<Vec<Created>> {
        documents::create_all(&self.writer, documents).await
    }

    async fn list_documents(
        &self,
        scope: &SourceScope,
        source: SourceId,
    ) -> StoreResult<Option<Vec<DocumentRecord>>> {
        documents::list(&self.pool, scope, source).await
    }

    async fn get_document(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
    ) -> StoreResult<Option<DocumentRecord>> {
        documents::get(&self.pool, scope, source, id).await
    }

    async fn find_document(&self, id: DocumentId) -> StoreResult<Option<DocumentRecord>> {
        documents::find(&self.pool, id).await
    }

    async fn existing_documents(&self, ids: &[DocumentId]) -> StoreResult<Vec<DocumentId>> {
        documents::existing(&self.pool, ids).await
    }

    async fn delete_document(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
    ) -> StoreResult<Option<DocumentRecord>> {
        documents::delete(&self.writer, scope, source, id).await
    }

    async fn ready_documents(
        &self,
        scope: &SourceScope,
        ids: &[DocumentId],
    ) -> StoreResult<Vec<DocumentHit>> {
        documents::ready(&self.pool, scope, ids).await
    }

    async fn chunks(&self, keys: &[(DocumentId, u32)]) -> StoreResult<Vec<StoredChunk>> {
        chunks::by_keys(&self.pool, keys).await
    }

    async fn document_chunks(&self, id: DocumentId) -> StoreResult<Vec<ChunkDraft>> {
        chunks::of_document(&self.pool, id).await
    }

    async fn ready_document_ids(
        &self,
        after: Option<DocumentId>,
        limit: usize,
    ) -> StoreResult<Vec<(DocumentId, SourceId)>> {
        chunks::ready_document_ids(&self.pool, after, limit).await
    }

    async fn claim_job(
        &self,
        worker: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<ClaimedJob>> {
        jobs::claim(&self.pool, &self.writer, worker, now, lease_until).await
    }

    async fn renew_lease(
        &self,
        job: &ClaimedJob,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        jobs::renew(&self.writer, job, now, lease_until).await
    }

    async fn finish_documents(
        &self,
        finished: &[(ClaimedJob, ProcessedDocument)],
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<FinishOutcome>> {
        jobs::finish_all(&self.writer, finished, now).await
    }

    async fn fail_document(
        &self,
        job: &ClaimedJob,
        error: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<FinishOutcome> {
        jobs::fail(&self.writer, job, error, now).await
    }

    async fn requeue_running_jobs(
        &self,
        owner_prefix: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        jobs::requeue_running(&self.writer, owner_prefix, now).await
    }

    async fn pending_job_count(&self) -> StoreResult<u64> {
        jobs::pending_count(&self.pool).await
    }

    async fn create_key(&self, key: NewApiKey) -> StoreResult<ApiKeyRecord> {
        keys::create(&self.writer, key).await
    }

    async fn find_key_by_hash(&self, key_hash: &str) -> StoreResult<Option<ApiKeyRecord>> {
        keys::find_by_hash(&self.pool, key_hash).await
    }

    async fn list_keys(&self) -> StoreResult<Vec<ApiKeyRecord>> {
        keys::list(&self.pool).await
    }

    async fn revoke_key(&self, id: KeyId, now: DateTime<Utc>) -> StoreResult<Option<ApiKeyRecord>> {
        keys::revoke(&self.writer, id, now).await
    }

    async fn touch_key(&self, id: KeyId, now: DateTime<Utc>) -> StoreResult<()> {
        keys::touch(&self.writer, id, now).await
    }

    async fn hit_rate_window(&self, window: &RateWindow) -> StoreResult<u64> {
        rate::hit(&self.writer, window).await
    }

    async fn peek_rate_window(&self, window: &RateWindow) -> StoreResult<u64> {
        rate::peek(&self.pool, window).await
    }

    async fn prune_rate_windows(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        rate::prune(&self.writer, before).await
    }

    async fn add_message(&self, message: NewMessage) -> StoreResult<MessageRecord> {
        conversations::add_message(&self.writer, message).await
    }

    async fn get_conversation(
        &self,
        id: ConversationId,
    ) -> StoreResult<Option<ConversationRecord>> {
        conversations::get(&self.pool, id).await
    }

    async fn recent_messages(
        &self,
        id: ConversationId,
        limit: u32,
    ) -> StoreResult<Vec<MessageRecord>> {
        conversations::recent_messages(&self.pool, id, limit).await
    }

    async fn list_conversations(
        &self,
        key_id: KeyId,
        limit: u32,
    ) -> StoreResult<Vec<ConversationRecord>> {
        conversations::list(&self.pool, key_id, limit).await
    }

    async fn create_webhook(&self, webhook: NewWebhook) -> StoreResult<WebhookRecord> {
        webhooks::create(&self.writer, webhook).await
    }

    async fn list_webhooks(&self) -> StoreResult<Vec<WebhookRecord>> {
        webhooks::list(&self.pool).await
    }

    async fn get_webhook(&self, id: WebhookId) -> StoreResult<Option<WebhookRecord>> {
        webhooks::get(&self.pool, id).await
    }

    async fn delete_webhook(&self, id: WebhookId) -> StoreResult<bool> {
        webhooks::delete(&self.writer, id).await
    }

    async fn enqueue_event(
        &self,
        document_id: DocumentId,
        event: WebhookEvent,
        extra: serde_json::Value,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        webhooks::enqueue_standalone(&self.writer, document_id, event, extra, now).await
    }

    async fn claim_deliveries(
        &self,
        claimer: &str,
        now: DateTime<Utc>,
        claim_until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<PendingDelivery>> {
        let claim = webhooks::Claim {
            claimer,
            now,
            until: claim_until,
        };
        webhooks::claim(&self.writer, &claim, limit).await
    }

    async fn release_delivery_claims(&self, claimer: Option<&str>) -> StoreResult<u64> {
        webhooks::release(&self.writer, claimer).await
    }

    async fn record_delivery(&self, attempt: NewDeliveryAttempt) -> StoreResult<()> {
        webhooks::record(&self.writer, attempt).await
    }

    async fn deliveries(
        &self,
        webhook_id: WebhookId,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryAttempt>> {
        webhooks::deliveries(&self.pool, webhook_id, limit).await
    }

    async fn pending_deliveries_count(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        webhooks::pending_count(&self.pool, now).await
    }

    async fn hold_document(
        &self,
        job: &ClaimedJob,
        held: HeldDocument,
        now: DateTime<Utc>,
    ) -> StoreResult<FinishOutcome> {
        reviews::hold(&self.writer, job, held, now).await
    }

    async fn pending_reviews(&self) -> StoreResult<Vec<ReviewRecord>> {
        reviews::waiting(&self.pool).await
    }

    async fn get_review(&self, id: DocumentId) -> StoreResult<Option<ReviewRecord>> {
        reviews::get(&self.pool, id).await
    }

    async fn decide_review(
        &self,
        id: DocumentId,
        decided: DecidedReview,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        reviews::decide(&self.writer, id, decided, now).await
    }

    async fn review_decision(&self, id: DocumentId) -> StoreResult<Option<ReviewDecision>> {
        reviews::decision(&self.pool, id).await
    }

    async fn reduce_decided_findings(
        &self,
        reduce: for<'f> fn(&'f str) -> String,
    ) -> StoreResult<u64> {
        reviews::reduce_decided(&self.writer, reduce).await
    }

    async fn admin_password_hash(&self) -> StoreResult<Option<String>> {
        admin::password_hash(&self.pool).await
    }

    async fn set_admin_password_hash(&self, hash: &str, now: DateTime<Utc>) -> StoreResult<()> {
        admin::set_password_hash(&self.writer, hash, now).await
    }

    async fn create_admin_session(
        &self,
        token_hash: &str,
        csrf: &str,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        admin::create_session(&self.writer, token_hash, csrf, expires_at).await
    }

    async fn admin_session(&self, token_hash: &str) -> StoreResult<Option<AdminSession>> {
        admin::session(&self.pool, token_hash).await
    }

    async fn delete_admin_session(&self, token_hash: &str) -> StoreResult<bool> {
        admin::delete_session(&self.writer, token_hash).await
    }

    async fn prune_admin_sessions(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        admin::prune_sessions(&self.writer, now).await
    }

    async fn record_audit(&self, entry: AuditEntry) -> StoreResult<()> {
        admin::record_audit(&self.writer, &entry).await
    }

    async fn audit_log(&self, limit: u32) -> StoreResult<Vec<AuditEntry>> {
        admin::audit_log(&self.pool, limit).await
    }

    async fn document_status_counts(&self) -> StoreResult<Vec<(DocumentStatus, u64)>> {
        admin::document_counts(&self.pool).await
    }

    async fn recent_failures(&self, limit: u32) -> StoreResult<Vec<DocumentRecord>> {
        admin::recent_failures(&self.pool, limit).await
    }

    async fn set_document_progress(
        &self,
        id: DocumentId,
        progress: &crate::DocumentProgress,
    ) -> StoreResult<()> {
        progress::set(&self.writer, id, progress).await
    }

    async fn document_progress(
        &self,
        id: DocumentId,
    ) -> StoreResult<Option<crate::DocumentProgress>> {
        progress::get(&self.pool, id).await
    }

    fn pool_stats(&self) -> crate::PoolStats {
        // The reads' and the writer's connections together.
        let pools = [&self.pool, &self.writer];
        crate::PoolStats {
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

    /// One process owns a SQLite store and writes its indexes itself: there is no feed.
    async fn index_changes(&self, _after: u64, _limit: usize) -> StoreResult<Vec<IndexChange>> {
        Ok(Vec::new())
    }

    /// The vectors live in the process's own vector index only.
    async fn document_vectors(&self, _id: DocumentId) -> StoreResult<Option<ChunkVectors>> {
        Ok(None)
    }

    async fn close(&self) {
        self.pool.close().await;
        self.writer.close().await;
    }
}

#[cfg(test)]
mod tests {
    use futures_util::future::join_all;
    use quire_core::{NewSource, SourceDescription, SourceName, SourceType};

    use super::*;

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
}
