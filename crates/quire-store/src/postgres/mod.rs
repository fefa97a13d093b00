//! The PostgreSQL store: one database shared by every node of a cluster. Each node keeps a
//! connection pool; everything nodes could race on is settled by the database itself: schema
//! migrations under an advisory lock, jobs and webhook deliveries claimed with
//! `FOR UPDATE SKIP LOCKED`, rate-limit windows counted by one atomic upsert.

mod admin;
pub(crate) mod alternatives;
mod chunks;
mod codec;
mod conversations;
mod documents;
mod feed;
mod jobs;
mod keys;
mod migrations;
mod nodes;
mod progress;
mod queue;
mod rate;
mod reviews;
pub(crate) mod schemas;
mod sources;
mod wakeups;
mod webhooks;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use quire_core::{
    ApiKeyRecord, ChunkDraft, ConversationId, DocumentId, DocumentRecord, DocumentStatus, KeyId,
    NewApiKey, NewDocument, NewSource, SourceId, SourceRecord, SourceScope, WebhookEvent,
    WebhookId,
};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};
use uuid::Uuid;

use crate::location::redact_password;
use crate::{
    AdminSession, AuditEntry, ChunkVectors, ClaimedJob, ClusterNode, ConversationRecord, Created,
    DecidedReview, DeliveryAttempt, DocumentHit, FinishOutcome, HeldDocument, IndexChange,
    MessageRecord, NewDeliveryAttempt, NewMessage, NewWebhook, PendingDelivery, ProcessedDocument,
    RateWindow, ReviewDecision, ReviewRecord, Store, StoreError, StoreResult, StoredChunk,
    WebhookRecord,
};
use crate::{QueueLimits, QueueRefusal, QueueView, TicketPlace};

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

#[async_trait]
impl Store for PgStore {
    async fn create_source(&self, source: NewSource) -> StoreResult<SourceRecord> {
        sources::create(&self.pool, source).await
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
        documents::create_all(&self.pool, documents).await
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
        documents::delete(&self.pool, scope, source, id).await
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
        jobs::claim(&self.pool, worker, now, lease_until).await
    }

    async fn renew_lease(
        &self,
        job: &ClaimedJob,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        jobs::renew(&self.pool, job, now, lease_until).await
    }

    /// One transaction per document, as [`Store::finish_document`]: each carries its own index
    /// feed entries and vectors, and PostgreSQL's commits cost less than SQLite's.
    async fn finish_documents(
        &self,
        finished: &[(ClaimedJob, ProcessedDocument)],
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<FinishOutcome>> {
        let mut outcomes = Vec::with_capacity(finished.len());
        for (job, processed) in finished {
            outcomes.push(jobs::finish(&self.pool, job, processed, now).await?);
        }
        Ok(outcomes)
    }

    async fn fail_document(
        &self,
        job: &ClaimedJob,
        error: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<FinishOutcome> {
        jobs::fail(&self.pool, job, error, now).await
    }

    async fn requeue_running_jobs(
        &self,
        owner_prefix: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        jobs::requeue_running(&self.pool, owner_prefix, now).await
    }

    async fn pending_job_count(&self) -> StoreResult<u64> {
        jobs::pending_count(&self.pool).await
    }

    async fn create_key(&self, key: NewApiKey) -> StoreResult<ApiKeyRecord> {
        keys::create(&self.pool, key).await
    }

    async fn find_key_by_hash(&self, key_hash: &str) -> StoreResult<Option<ApiKeyRecord>> {
        keys::find_by_hash(&self.pool, key_hash).await
    }

    async fn list_keys(&self) -> StoreResult<Vec<ApiKeyRecord>> {
        keys::list(&self.pool).await
    }

    async fn revoke_key(&self, id: KeyId, now: DateTime<Utc>) -> StoreResult<Option<ApiKeyRecord>> {
        keys::revoke(&self.pool, id, now).await
    }

    async fn touch_key(&self, id: KeyId, now: DateTime<Utc>) -> StoreResult<()> {
        keys::touch(&self.pool, id, now).await
    }

    async fn hit_rate_window(&self, window: &RateWindow) -> StoreResult<u64> {
        rate::hit(&self.pool, window).await
    }

    async fn peek_rate_window(&self, window: &RateWindow) -> StoreResult<u64> {
        rate::peek(&self.pool, window).await
    }

    async fn prune_rate_windows(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        rate::prune(&self.pool, before).await
    }

    async fn add_message(&self, message: NewMessage) -> StoreResult<MessageRecord> {
        conversations::add_message(&self.pool, message).await
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
        webhooks::create(&self.pool, webhook).await
    }

    async fn list_webhooks(&self) -> StoreResult<Vec<WebhookRecord>> {
        webhooks::list(&self.pool).await
    }

    async fn get_webhook(&self, id: WebhookId) -> StoreResult<Option<WebhookRecord>> {
        webhooks::get(&self.pool, id).await
    }

    async fn delete_webhook(&self, id: WebhookId) -> StoreResult<bool> {
        webhooks::delete(&self.pool, id).await
    }

    async fn enqueue_event(
        &self,
        document_id: DocumentId,
        event: WebhookEvent,
        extra: serde_json::Value,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        webhooks::enqueue_standalone(&self.pool, document_id, event, extra, now).await
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
        webhooks::claim(&self.pool, &claim, limit).await
    }

    async fn release_delivery_claims(&self, claimer: Option<&str>) -> StoreResult<u64> {
        webhooks::release(&self.pool, claimer).await
    }

    async fn record_delivery(&self, attempt: NewDeliveryAttempt) -> StoreResult<()> {
        webhooks::record(&self.pool, attempt).await
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
        reviews::hold(&self.pool, job, held, now).await
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
        reviews::decide(&self.pool, id, decided, now).await
    }

    async fn review_decision(&self, id: DocumentId) -> StoreResult<Option<ReviewDecision>> {
        reviews::decision(&self.pool, id).await
    }

    async fn reduce_decided_findings(
        &self,
        reduce: for<'f> fn(&'f str) -> String,
    ) -> StoreResult<u64> {
        reviews::reduce_decided(&self.pool, reduce).await
    }

    async fn admin_password_hash(&self) -> StoreResult<Option<String>> {
        admin::password_hash(&self.pool).await
    }

    async fn set_admin_password_hash(&self, hash: &str, now: DateTime<Utc>) -> StoreResult<()> {
        admin::set_password_hash(&self.pool, hash, now).await
    }

    async fn create_admin_session(
        &self,
        token_hash: &str,
        csrf: &str,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        admin::create_session(&self.pool, token_hash, csrf, expires_at).await
    }

    async fn admin_session(&self, token_hash: &str) -> StoreResult<Option<AdminSession>> {
        admin::session(&self.pool, token_hash).await
    }

    async fn delete_admin_session(&self, token_hash: &str) -> StoreResult<bool> {
        admin::delete_session(&self.pool, token_hash).await
    }

    async fn prune_admin_sessions(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        admin::prune_sessions(&self.pool, now).await
    }

    async fn record_audit(&self, entry: AuditEntry) -> StoreResult<()> {
        admin::record_audit(&self.pool, &entry).await
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

    async fn wait_for_jobs(&self, max: Duration) {
        self.wakeups.wait(&self.pool, max).await;
    }

    async fn set_document_progress(
        &self,
        id: DocumentId,
        progress: &crate::DocumentProgress,
    ) -> StoreResult<()> {
        progress::set(&self.pool, id, progress).await
    }

    async fn document_progress(
        &self,
        id: DocumentId,
    ) -> StoreResult<Option<crate::DocumentProgress>> {
        progress::get(&self.pool, id).await
    }

    fn pool_stats(&self) -> crate::PoolStats {
        crate::PoolStats {
            size: self.pool.size(),
            idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX),
            max: self.pool.options().get_max_connections(),
        }
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

    async fn close(&self) {
        // The listener holds a pool connection: it must let go before the pool can close.
        self.wakeups.stop();
        self.pool.close().await;
    }
}
