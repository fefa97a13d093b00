//! [`Store`] for every [`Backend`]: each call goes to the shared logic, or to the backend where
//! only the dialect knows how.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use quire_core::{
    ApiKeyRecord, ChunkDraft, ConversationId, DocumentCursor, DocumentId, DocumentRecord,
    DocumentStatus, ExternalId, KeyId, NewApiKey, NewDocument, NewSource, PageSize, SourceId,
    SourceRecord, SourceScope, VersionRecord, WebhookEvent, WebhookId,
};
use uuid::Uuid;

use super::{
    Backend, admin, chunks, conversations, documents, jobs, keys, progress, rate, reviews, sources,
    syncs, webhooks,
};
use crate::{
    AdminSession, AuditEntry, ChunkVectors, ClaimedJob, ClusterNode, ConversationRecord, Created,
    DecidedReview, DeletedDocument, DeliveryAttempt, DocumentHit, DocumentPage, DocumentProgress,
    FinishOutcome, HeldDocument, IndexChange, MessageRecord, NewDeliveryAttempt, NewMessage,
    NewSync, NewWebhook, PendingDelivery, PoolStats, ProcessedDocument, QueueLimits, QueueRefusal,
    QueueView, RateWindow, ReviewDecision, ReviewRecord, SourceSync, Store, StoreResult,
    StoredChunk, SyncRun, TicketPlace, WebhookRecord,
};

#[async_trait]
impl<B: Backend> Store for B {
    async fn create_source(&self, source: NewSource) -> StoreResult<SourceRecord> {
        sources::create(self, source).await
    }

    async fn list_sources(&self, scope: &SourceScope) -> StoreResult<Vec<SourceRecord>> {
        sources::list(self, scope).await
    }

    async fn get_source(
        &self,
        scope: &SourceScope,
        id: SourceId,
    ) -> StoreResult<Option<SourceRecord>> {
        sources::get(self, scope, id).await
    }

    async fn create_syncing_source(
        &self,
        source: NewSource,
        sync: NewSync,
    ) -> StoreResult<SourceRecord> {
        syncs::create_source(self, source, sync).await
    }

    async fn source_sync(&self, source: SourceId) -> StoreResult<Option<SourceSync>> {
        syncs::get(self, source).await
    }

    async fn update_source_sync(&self, source: SourceId, sync: NewSync) -> StoreResult<bool> {
        syncs::update(self, source, sync).await
    }

    async fn start_sync_run(
        &self,
        source: SourceId,
        id: Uuid,
        node: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<SyncRun>> {
        syncs::start(self, source, id, node, now, lease_until).await
    }

    async fn renew_sync_run(&self, id: Uuid, lease_until: DateTime<Utc>) -> StoreResult<bool> {
        syncs::renew(self, id, lease_until).await
    }

    async fn finish_sync_run(
        &self,
        run: &SyncRun,
        next_run_at: Option<DateTime<Utc>>,
    ) -> StoreResult<bool> {
        syncs::finish(self, run, next_run_at).await
    }

    async fn sync_runs(&self, source: SourceId, limit: u32) -> StoreResult<Vec<SyncRun>> {
        syncs::runs(self, source, limit).await
    }

    async fn due_syncs(&self, now: DateTime<Utc>) -> StoreResult<Vec<SourceId>> {
        syncs::due(self, now).await
    }

    async fn fail_interrupted_sync_runs(
        &self,
        node_prefix: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        syncs::fail_interrupted(self, node_prefix, now).await
    }

    async fn fail_expired_sync_runs(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        syncs::fail_expired(self, now).await
    }

    async fn sync_items(&self, source: SourceId) -> StoreResult<Vec<(String, String)>> {
        syncs::items(self, source).await
    }

    async fn set_sync_item(
        &self,
        source: SourceId,
        external_id: &str,
        fingerprint: Option<&str>,
    ) -> StoreResult<()> {
        syncs::set_item(self, source, external_id, fingerprint).await
    }

    async fn existing_sources(&self, ids: &[SourceId]) -> StoreResult<Vec<SourceId>> {
        sources::existing(self, ids).await
    }

    async fn create_documents(&self, documents: Vec<NewDocument>) -> StoreResult<Vec<Created>> {
        documents::create_all(self, documents).await
    }

    async fn add_version(
        &self,
        scope: &SourceScope,
        id: DocumentId,
        document: NewDocument,
    ) -> StoreResult<Option<Created>> {
        documents::add_version_to(self, scope, id, document).await
    }

    async fn find_document_by_external_id(
        &self,
        scope: &SourceScope,
        source: SourceId,
        external_id: &ExternalId,
    ) -> StoreResult<Option<DocumentRecord>> {
        documents::by_external_id(self, scope, source, external_id).await
    }

    async fn document_versions(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
    ) -> StoreResult<Option<Vec<VersionRecord>>> {
        documents::versions(self, scope, source, id).await
    }

    async fn list_documents(
        &self,
        scope: &SourceScope,
        source: SourceId,
    ) -> StoreResult<Option<Vec<DocumentRecord>>> {
        documents::list(self, scope, source).await
    }

    async fn ready_documents_in_scope(
        &self,
        scope: &SourceScope,
    ) -> StoreResult<Vec<DocumentRecord>> {
        documents::ready_in_scope(self, scope).await
    }

    async fn list_documents_page(
        &self,
        scope: &SourceScope,
        source: SourceId,
        after: Option<DocumentCursor>,
        size: PageSize,
    ) -> StoreResult<Option<DocumentPage>> {
        documents::list_page(self, scope, source, after, size).await
    }

    async fn patch_document_metadata(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
        patch: &serde_json::Value,
    ) -> StoreResult<Option<DocumentRecord>> {
        documents::patch_metadata(self, scope, source, id, patch).await
    }

    async fn get_document(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
    ) -> StoreResult<Option<DocumentRecord>> {
        documents::get(self, scope, source, id).await
    }

    async fn find_document(&self, id: DocumentId) -> StoreResult<Option<DocumentRecord>> {
        documents::find(self, id).await
    }

    async fn existing_documents(&self, ids: &[DocumentId]) -> StoreResult<Vec<DocumentId>> {
        documents::existing(self, ids).await
    }

    async fn delete_document(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<DeletedDocument>> {
        documents::delete(self, scope, source, id, now).await
    }

    async fn ready_documents(
        &self,
        scope: &SourceScope,
        ids: &[DocumentId],
    ) -> StoreResult<Vec<DocumentHit>> {
        documents::ready(self, scope, ids).await
    }

    async fn chunks(&self, keys: &[(DocumentId, u32)]) -> StoreResult<Vec<StoredChunk>> {
        self.chunks_by_keys(keys).await
    }

    async fn document_chunks(&self, id: DocumentId) -> StoreResult<Vec<ChunkDraft>> {
        chunks::of_document(self, id).await
    }

    async fn ready_document_ids(
        &self,
        after: Option<DocumentId>,
        limit: usize,
    ) -> StoreResult<Vec<(DocumentId, SourceId)>> {
        chunks::ready_document_ids(self, after, limit).await
    }

    async fn claim_job(
        &self,
        worker: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<ClaimedJob>> {
        jobs::claim(self, worker, now, lease_until).await
    }

    async fn renew_lease(
        &self,
        job: &ClaimedJob,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        jobs::renew(self, job, now, lease_until).await
    }

    async fn finish_documents(
        &self,
        finished: &[(ClaimedJob, ProcessedDocument)],
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<FinishOutcome>> {
        jobs::finish_all(self, finished, now).await
    }

    async fn fail_document(
        &self,
        job: &ClaimedJob,
        error: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<FinishOutcome> {
        jobs::fail(self, job, error, now).await
    }

    async fn requeue_running_jobs(
        &self,
        owner_prefix: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        jobs::requeue_running(self, owner_prefix, now).await
    }

    async fn pending_job_count(&self) -> StoreResult<u64> {
        jobs::pending_count(self).await
    }

    async fn wait_for_jobs(&self, max: Duration) {
        Backend::wait_for_jobs(self, max).await;
    }

    async fn create_key(&self, key: NewApiKey) -> StoreResult<ApiKeyRecord> {
        keys::create(self, key).await
    }

    async fn find_key_by_hash(&self, key_hash: &str) -> StoreResult<Option<ApiKeyRecord>> {
        keys::find_by_hash(self, key_hash).await
    }

    async fn list_keys(&self) -> StoreResult<Vec<ApiKeyRecord>> {
        keys::list(self).await
    }

    async fn revoke_key(&self, id: KeyId, now: DateTime<Utc>) -> StoreResult<Option<ApiKeyRecord>> {
        keys::revoke(self, id, now).await
    }

    async fn touch_key(&self, id: KeyId, now: DateTime<Utc>) -> StoreResult<()> {
        keys::touch(self, id, now).await
    }

    async fn hit_rate_window(&self, window: &RateWindow) -> StoreResult<u64> {
        rate::hit(self, window).await
    }

    async fn peek_rate_window(&self, window: &RateWindow) -> StoreResult<u64> {
        rate::peek(self, window).await
    }

    async fn prune_rate_windows(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        rate::prune(self, before).await
    }

    async fn add_message(&self, message: NewMessage) -> StoreResult<MessageRecord> {
        conversations::add_message(self, message).await
    }

    async fn get_conversation(
        &self,
        id: ConversationId,
    ) -> StoreResult<Option<ConversationRecord>> {
        conversations::get(self, id).await
    }

    async fn recent_messages(
        &self,
        id: ConversationId,
        limit: u32,
    ) -> StoreResult<Vec<MessageRecord>> {
        conversations::recent_messages(self, id, limit).await
    }

    async fn list_conversations(
        &self,
        key_id: KeyId,
        limit: u32,
    ) -> StoreResult<Vec<ConversationRecord>> {
        conversations::list(self, key_id, limit).await
    }

    async fn create_webhook(&self, webhook: NewWebhook) -> StoreResult<WebhookRecord> {
        webhooks::create(self, webhook).await
    }

    async fn list_webhooks(&self) -> StoreResult<Vec<WebhookRecord>> {
        webhooks::list(self).await
    }

    async fn get_webhook(&self, id: WebhookId) -> StoreResult<Option<WebhookRecord>> {
        webhooks::get(self, id).await
    }

    async fn delete_webhook(&self, id: WebhookId) -> StoreResult<bool> {
        webhooks::delete(self, id).await
    }

    async fn enqueue_event(
        &self,
        document_id: DocumentId,
        event: WebhookEvent,
        extra: serde_json::Value,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        webhooks::enqueue_standalone(self, document_id, event, extra, now).await
    }

    async fn claim_deliveries(
        &self,
        claimer: &str,
        now: DateTime<Utc>,
        claim_until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<PendingDelivery>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        Backend::claim_deliveries(self, claimer, now, claim_until, limit).await
    }

    async fn release_delivery_claims(&self, claimer: Option<&str>) -> StoreResult<u64> {
        webhooks::release(self, claimer).await
    }

    async fn record_delivery(&self, attempt: NewDeliveryAttempt) -> StoreResult<()> {
        webhooks::record(self, attempt).await
    }

    async fn deliveries(
        &self,
        webhook_id: WebhookId,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryAttempt>> {
        webhooks::deliveries(self, webhook_id, limit).await
    }

    async fn pending_deliveries_count(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        webhooks::pending_count(self, now).await
    }

    async fn hold_document(
        &self,
        job: &ClaimedJob,
        held: HeldDocument,
        now: DateTime<Utc>,
    ) -> StoreResult<FinishOutcome> {
        reviews::hold(self, job, held, now).await
    }

    async fn pending_reviews(&self) -> StoreResult<Vec<ReviewRecord>> {
        reviews::waiting(self).await
    }

    async fn get_review(&self, id: DocumentId) -> StoreResult<Option<ReviewRecord>> {
        reviews::get(self, id).await
    }

    async fn decide_review(
        &self,
        id: DocumentId,
        decided: DecidedReview,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        reviews::decide(self, id, decided, now).await
    }

    async fn review_decision(&self, id: DocumentId) -> StoreResult<Option<ReviewDecision>> {
        reviews::decision(self, id).await
    }

    async fn reduce_decided_findings(
        &self,
        reduce: for<'f> fn(&'f str) -> String,
    ) -> StoreResult<u64> {
        reviews::reduce_decided(self, reduce).await
    }

    async fn admin_password_hash(&self) -> StoreResult<Option<String>> {
        admin::password_hash(self).await
    }

    async fn set_admin_password_hash(&self, hash: &str, now: DateTime<Utc>) -> StoreResult<()> {
        admin::set_password_hash(self, hash, now).await
    }

    async fn create_admin_session(
        &self,
        token_hash: &str,
        csrf: &str,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        admin::create_session(self, token_hash, csrf, expires_at).await
    }

    async fn admin_session(&self, token_hash: &str) -> StoreResult<Option<AdminSession>> {
        admin::session(self, token_hash).await
    }

    async fn delete_admin_session(&self, token_hash: &str) -> StoreResult<bool> {
        admin::delete_session(self, token_hash).await
    }

    async fn prune_admin_sessions(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        admin::prune_sessions(self, now).await
    }

    async fn record_audit(&self, entry: AuditEntry) -> StoreResult<()> {
        admin::record_audit(self, &entry).await
    }

    async fn audit_log(&self, limit: u32) -> StoreResult<Vec<AuditEntry>> {
        admin::audit_log(self, limit).await
    }

    async fn document_status_counts(&self) -> StoreResult<Vec<(DocumentStatus, u64)>> {
        admin::document_counts(self).await
    }

    async fn recent_failures(&self, limit: u32) -> StoreResult<Vec<DocumentRecord>> {
        admin::recent_failures(self, limit).await
    }

    async fn set_document_progress(
        &self,
        id: DocumentId,
        progress: &DocumentProgress,
    ) -> StoreResult<()> {
        progress::set(self, id, progress).await
    }

    async fn document_progress(&self, id: DocumentId) -> StoreResult<Option<DocumentProgress>> {
        progress::get(self, id).await
    }

    fn pool_stats(&self) -> PoolStats {
        Backend::pool_stats(self)
    }

    fn is_shared(&self) -> bool {
        Backend::is_shared(self)
    }

    async fn index_changes(&self, after: u64, limit: usize) -> StoreResult<Vec<IndexChange>> {
        Backend::index_changes(self, after, limit).await
    }

    async fn document_vectors(&self, id: DocumentId) -> StoreResult<Option<ChunkVectors>> {
        Backend::document_vectors(self, id).await
    }

    async fn join_cluster(
        &self,
        node: &str,
        model: Option<&str>,
        now: DateTime<Utc>,
        alive_since: DateTime<Utc>,
    ) -> StoreResult<Option<ClusterNode>> {
        Backend::join_cluster(self, node, model, now, alive_since).await
    }

    async fn node_seen(&self, node: &str, now: DateTime<Utc>) -> StoreResult<()> {
        Backend::node_seen(self, node, now).await
    }

    async fn leave_cluster(&self, node: &str) -> StoreResult<()> {
        Backend::leave_cluster(self, node).await
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
        Backend::queue_join(self, id, key, node, limits, now, alive_since).await
    }

    async fn queue_view(
        &self,
        node: &str,
        slots: u64,
        now: DateTime<Utc>,
        alive_since: DateTime<Utc>,
    ) -> StoreResult<QueueView> {
        Backend::queue_view(self, node, slots, now, alive_since).await
    }

    async fn queue_leave(&self, id: Uuid) -> StoreResult<()> {
        Backend::queue_leave(self, id).await
    }

    async fn close(&self) {
        Backend::close(self).await;
    }
}
