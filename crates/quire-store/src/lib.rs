//! Quire's storage. The [`Store`] trait is everything the service keeps outside its indexes:
//! sources, documents, chunks, API keys, background jobs, rate-limit windows, generated
//! conversations, webhooks with their event outbox and delivery log, and the admin interface's
//! password, sessions and audit log. The embedded
//! default is SQLite ([`SqliteStore`]); a cluster shares one PostgreSQL database
//! ([`PgStore`]). Both implement the same trait and pass the same conformance tests.
//!
//! Every call that reads documents takes the caller's [`SourceScope`], so scope filtering
//! happens here, in one place, and no endpoint can forget it.

mod error;
mod location;
mod postgres;
mod shared;
mod sqlite;
mod types;

pub use error::StoreError;
pub use location::{StoreLocation, open};
pub use postgres::PgStore;
pub use postgres::schemas::{create_schema, drop_schema, schema_url};
pub use sqlite::SqliteStore;
/// The database driver's error, which [`StoreError::Database`] carries.
pub use sqlx::Error as SqlxError;
pub use types::{
    AdminSession, AuditEntry, ChunkVectors, ClaimedJob, ClusterNode, ConversationRecord, Created,
    DecidedReview, DeletedDocument, DeliveryAttempt, DocumentHit, DocumentPage, DocumentProgress,
    FinishOutcome, HeldDocument, IndexChange, IndexChangeKind, MessageRecord, NewDeliveryAttempt,
    NewMessage, NewSync, NewWebhook, PendingDelivery, PoolStats, ProcessedDocument,
    ProcessingStage, QueueLimits, QueueRefusal, QueueView, RateBucket, RateWindow, ReviewDecision,
    ReviewRecord, SourceSync, StoredChunk, SyncCounts, SyncRun, TicketPlace, WebhookRecord,
};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use quire_core::{
    ApiKeyRecord, ChunkDraft, ConversationId, DocumentCursor, DocumentId, DocumentRecord,
    DocumentStatus, ExternalId, KeyId, NewApiKey, NewDocument, NewSource, PageSize, SourceId,
    SourceRecord, SourceScope, VersionRecord, WebhookEvent, WebhookId,
};

/// Result of a store call.
pub type StoreResult<T> = Result<T, StoreError>;

/// How many delivery attempts are kept per webhook; older ones are pruned.
pub const DELIVERY_LOG_LIMIT: u32 = 1_000;

/// Persistent state of the service. Implementations must be safe to share between the HTTP
/// handlers, the background workers and other processes using the same database (the CLI).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    // --- sources ---

    /// Creates a source.
    async fn create_source(&self, source: NewSource) -> StoreResult<SourceRecord>;
    /// Sources visible in `scope`, oldest first.
    async fn list_sources(&self, scope: &SourceScope) -> StoreResult<Vec<SourceRecord>>;
    /// One source, if it exists and is in `scope`.
    async fn get_source(
        &self,
        scope: &SourceScope,
        id: SourceId,
    ) -> StoreResult<Option<SourceRecord>>;
    /// Creates a source that syncs from an origin, with its origin settings, in one
    /// transaction.
    async fn create_syncing_source(
        &self,
        source: NewSource,
        sync: NewSync,
    ) -> StoreResult<SourceRecord>;
    /// A source's origin settings, when it syncs.
    async fn source_sync(&self, source: SourceId) -> StoreResult<Option<SourceSync>>;
    /// Replaces a syncing source's origin settings (its kind stays); false when the source
    /// does not sync (or does not exist).
    async fn update_source_sync(&self, source: SourceId, sync: NewSync) -> StoreResult<bool>;
    /// Starts run `id` of `source` on `node` at `now`, leased to it until `lease_until`;
    /// `None` (nothing started) while another run of the source runs, on this or any node.
    async fn start_sync_run(
        &self,
        source: SourceId,
        id: uuid::Uuid,
        node: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<SyncRun>>;
    /// Moves running run `id`'s lease to `lease_until`; false when it is no longer running
    /// (it was ended as interrupted).
    async fn renew_sync_run(&self, id: uuid::Uuid, lease_until: DateTime<Utc>)
    -> StoreResult<bool>;
    /// Records how `run` ended (its status, counts, failures, end) and when the source next
    /// syncs by itself (`None`: on demand only), and queues `source.synced`, in one
    /// transaction; false (nothing recorded) when the run had already been ended as interrupted.
    async fn finish_sync_run(
        &self,
        run: &SyncRun,
        next_run_at: Option<DateTime<Utc>>,
    ) -> StoreResult<bool>;
    /// Up to `limit` runs of `source`, newest first.
    async fn sync_runs(&self, source: SourceId, limit: u32) -> StoreResult<Vec<SyncRun>>;
    /// Syncing sources due at `now` with no run running, the longest due first.
    async fn due_syncs(&self, now: DateTime<Utc>) -> StoreResult<Vec<SourceId>>;
    /// Ends as failed the runs left running by a process that stopped: those of nodes whose
    /// name starts with `node_prefix` (every one: `None`), and queues `source.synced` for each.
    /// Returns how many.
    async fn fail_interrupted_sync_runs(
        &self,
        node_prefix: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<u64>;
    /// Ends as failed the runs whose lease ran out before `now` (their node died or hung), and
    /// queues `source.synced` for each. Returns how many.
    async fn fail_expired_sync_runs(&self, now: DateTime<Utc>) -> StoreResult<u64>;
    /// The (external id, fingerprint) of every item of `source` last taken from its origin.
    async fn sync_items(&self, source: SourceId) -> StoreResult<Vec<(String, String)>>;
    /// Records the fingerprint an item of `source` was taken with (`None`: forgets it).
    async fn set_sync_item(
        &self,
        source: SourceId,
        external_id: &str,
        fingerprint: Option<&str>,
    ) -> StoreResult<()>;
    /// Which of `ids` exist (regardless of any scope); for validating key scopes.
    async fn existing_sources(&self, ids: &[SourceId]) -> StoreResult<Vec<SourceId>>;

    // --- documents ---

    /// Creates a document in status `queued` together with its first version and processing
    /// job, atomically. With an external id the source already holds, the bytes become a new
    /// version of that document instead ([`Created::Version`]; [`Created::Existing`] when they
    /// are its newest version's that has not failed). Without one, when the source already has
    /// a document with the same SHA-256 that has not failed, nothing is created and that
    /// document is returned as [`Created::Existing`]. Uploads into one source are serialised,
    /// so two with the same new external id end as one document.
    async fn create_document(&self, document: NewDocument) -> StoreResult<Created> {
        let mut created = self.create_documents(vec![document]).await?;
        created.pop().ok_or_else(|| fewer_than_given("created"))
    }
    /// Creates `documents` in order, each as [`Store::create_document`] would, in one
    /// transaction: all or none, and a later one with the same bytes as an earlier one is
    /// [`Created::Existing`] of it. For a bulk upload, whose documents would otherwise cost a
    /// write transaction each.
    async fn create_documents(&self, documents: Vec<NewDocument>) -> StoreResult<Vec<Created>>;
    /// Documents of one source (which must be in `scope`), newest first. `None` when the
    /// source is missing or out of scope.
    async fn list_documents(
        &self,
        scope: &SourceScope,
        source: SourceId,
    ) -> StoreResult<Option<Vec<DocumentRecord>>>;
    /// The `ready` documents of every source in `scope`, newest first (one query however many
    /// sources): what a search filter is evaluated over.
    async fn ready_documents_in_scope(
        &self,
        scope: &SourceScope,
    ) -> StoreResult<Vec<DocumentRecord>>;
    /// A page of the documents of one source (which must be in `scope`), newest first: at most
    /// `size` of those after `after` (from the newest without it), with the cursor of the next
    /// page when more follow. `None` when the source is missing or out of scope.
    async fn list_documents_page(
        &self,
        scope: &SourceScope,
        source: SourceId,
        after: Option<DocumentCursor>,
        size: PageSize,
    ) -> StoreResult<Option<DocumentPage>>;
    /// Gives document `id` of `document.source_id` (in `scope`) a new version from `document`
    /// (whose id becomes the version's index id), as an upload under its external id would.
    /// `None` when there is no such document.
    async fn add_version(
        &self,
        scope: &SourceScope,
        id: DocumentId,
        document: NewDocument,
    ) -> StoreResult<Option<Created>>;
    /// The document of `source` (in `scope`) with this external id.
    async fn find_document_by_external_id(
        &self,
        scope: &SourceScope,
        source: SourceId,
        external_id: &ExternalId,
    ) -> StoreResult<Option<DocumentRecord>>;
    /// Every version of document `id` of `source` (in `scope`), oldest first; `None` when
    /// there is no such document.
    async fn document_versions(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
    ) -> StoreResult<Option<Vec<VersionRecord>>>;
    /// One document of one source, if both exist and the source is in `scope`.
    async fn get_document(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
    ) -> StoreResult<Option<DocumentRecord>>;
    /// Changes the metadata of document `id` of `source` (in `scope`) by `patch`, a JSON merge
    /// patch (RFC 7396), read, merged and written in one transaction so concurrent patches
    /// all apply; the document as it now is. `None` when there is no such document;
    /// [`StoreError::Invalid`] when the patch or its result breaks the metadata rules.
    async fn patch_document_metadata(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
        patch: &serde_json::Value,
    ) -> StoreResult<Option<DocumentRecord>>;
    /// A document by its id alone, in any source: for administrators, never for API keys
    /// (whose every read goes through a scope).
    async fn find_document(&self, id: DocumentId) -> StoreResult<Option<DocumentRecord>>;
    /// Which of `ids` are documents that exist, in any source and status, or index ids of
    /// versions still wanted (live, or newer and not superseded), regardless of any scope: for
    /// finding index entries and files left by deleted documents and replaced versions.
    async fn existing_documents(&self, ids: &[DocumentId]) -> StoreResult<Vec<DocumentId>>;
    /// Deletes a document with every version, its chunks and job, and announces
    /// `document.deleted` in the same transaction; returns what was deleted.
    async fn delete_document(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<DeletedDocument>>;
    /// The ready documents in `scope` whose live or previous version is indexed under one of
    /// `ids`, with their source names; used to turn index hits into results (and to drop hits
    /// for documents deleted, or versions replaced, meanwhile).
    async fn ready_documents(
        &self,
        scope: &SourceScope,
        ids: &[DocumentId],
    ) -> StoreResult<Vec<DocumentHit>>;

    // --- chunks ---

    /// The stored chunks with these (index id, ordinal) keys, in no particular order; keys
    /// that match nothing are left out. Not scoped: callers check the documents with
    /// [`Store::ready_documents`].
    async fn chunks(&self, keys: &[(DocumentId, u32)]) -> StoreResult<Vec<StoredChunk>>;
    /// The chunks stored under index id `id` (a document's live or previous version), in
    /// order; empty when there are none.
    async fn document_chunks(&self, id: DocumentId) -> StoreResult<Vec<ChunkDraft>>;
    /// Up to `limit` ready documents' live index ids after `after`, in that order, with their
    /// sources: a cursor over every searchable document (re-embedding walks it).
    async fn ready_document_ids(
        &self,
        after: Option<DocumentId>,
        limit: usize,
    ) -> StoreResult<Vec<(DocumentId, SourceId)>>;

    // --- jobs ---

    /// Takes the oldest runnable job (queued, or running with an expired lease), leases it to
    /// `worker` until `lease_until`, and marks its document `processing`.
    async fn claim_job(
        &self,
        worker: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<ClaimedJob>>;
    /// Extends the lease of a job its worker still holds to `lease_until`, so a document that
    /// takes longer than one lease is not claimed by another worker while it is processed.
    /// False when the lease was lost (another worker claimed the job after it ran out, or the
    /// job ended or went with its document): the caller should stop working on it.
    async fn renew_lease(
        &self,
        job: &ClaimedJob,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Stores the chunks, marks the document `ready` and the job done, and in the same
    /// transaction writes a `document.ready` event to the outbox for each subscribed webhook.
    /// Does nothing if the document was deleted or the lease was lost meanwhile, and says which.
    async fn finish_document(
        &self,
        job: &ClaimedJob,
        processed: ProcessedDocument,
        now: DateTime<Utc>,
    ) -> StoreResult<FinishOutcome> {
        let mut outcomes = self
            .finish_documents(&[(job.clone(), processed)], now)
            .await?;
        outcomes.pop().ok_or_else(|| fewer_than_given("finished"))
    }
    /// Finishes each of `finished` as [`Store::finish_document`] does, and says what became of
    /// each, in order. The SQLite store finishes them all in one transaction (its commits are
    /// what a finish costs most), so an error there finished none; the PostgreSQL store
    /// finishes them one after another and stops at the first error. Either way a job left
    /// unfinished is retried when its lease runs out.
    async fn finish_documents(
        &self,
        finished: &[(ClaimedJob, ProcessedDocument)],
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<FinishOutcome>>;
    /// Marks the document `failed` with `error` and the job failed, and in the same transaction
    /// writes a `document.failed` event to the outbox for each subscribed webhook.
    async fn fail_document(
        &self,
        job: &ClaimedJob,
        error: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<FinishOutcome>;
    /// Puts leased jobs back in the queue (their owner is gone); returns how many. With
    /// `owner_prefix`, only jobs whose lease owner (the worker's name) starts with it: a node
    /// restarting on a shared store takes back its own previous incarnation's jobs and leaves
    /// the other nodes' alone. Without, every leased job: for the only process that runs
    /// workers, when it starts.
    async fn requeue_running_jobs(
        &self,
        owner_prefix: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<u64>;
    /// Number of jobs waiting or running.
    async fn pending_job_count(&self) -> StoreResult<u64>;
    /// Waits until a job may have become runnable, or `max` has passed: what an idle worker
    /// does between claims. PostgreSQL returns as soon as any node queues a job (`LISTEN`);
    /// SQLite, which has no notifications, sleeps `max`. It may return without a job to claim,
    /// and a job queued just before the wait began may wait up to `max`.
    async fn wait_for_jobs(&self, max: std::time::Duration) {
        tokio::time::sleep(max).await;
    }

    // --- API keys ---

    /// Stores a new key. Fails with [`StoreError::Invalid`] if its scope names unknown sources.
    async fn create_key(&self, key: NewApiKey) -> StoreResult<ApiKeyRecord>;
    /// The key whose secret hashes to `key_hash`, revoked or not.
    async fn find_key_by_hash(&self, key_hash: &str) -> StoreResult<Option<ApiKeyRecord>>;
    /// All keys, oldest first.
    async fn list_keys(&self) -> StoreResult<Vec<ApiKeyRecord>>;
    /// Revokes a key; `None` if it does not exist. Revoking twice keeps the first time.
    async fn revoke_key(&self, id: KeyId, now: DateTime<Utc>) -> StoreResult<Option<ApiKeyRecord>>;
    /// Records that a key was used (at most one write per key a minute).
    async fn touch_key(&self, id: KeyId, now: DateTime<Utc>) -> StoreResult<()>;

    // --- rate limits ---

    /// Counts one request in the window and returns the count including it.
    async fn hit_rate_window(&self, window: &RateWindow) -> StoreResult<u64>;
    /// The count in the window without adding to it.
    async fn peek_rate_window(&self, window: &RateWindow) -> StoreResult<u64>;
    /// Forgets windows that started before `before`.
    async fn prune_rate_windows(&self, before: DateTime<Utc>) -> StoreResult<u64>;

    // --- conversations ---

    /// Stores a generated answer, atomically creating its conversation (owned by
    /// `message.key_id`, created at `message.created_at`) if it does not exist and moving the
    /// conversation's `updated_at` forward. Fails with [`StoreError::Invalid`], writing
    /// nothing, if the conversation belongs to another key or the key does not exist.
    async fn add_message(&self, message: NewMessage) -> StoreResult<MessageRecord>;
    /// One conversation, whoever owns it; callers compare its `key_id` with the caller's key.
    async fn get_conversation(&self, id: ConversationId)
    -> StoreResult<Option<ConversationRecord>>;
    /// The last `limit` messages of a conversation, oldest first (ties on `created_at` in the
    /// order they were added); empty when the conversation does not exist.
    async fn recent_messages(
        &self,
        id: ConversationId,
        limit: u32,
    ) -> StoreResult<Vec<MessageRecord>>;
    /// Up to `limit` conversations of one key, the most recently updated first.
    async fn list_conversations(
        &self,
        key_id: KeyId,
        limit: u32,
    ) -> StoreResult<Vec<ConversationRecord>>;

    // --- webhooks ---

    /// Registers a webhook. Repeated events are stored once; no event at all is
    /// [`StoreError::Invalid`].
    async fn create_webhook(&self, webhook: NewWebhook) -> StoreResult<WebhookRecord>;
    /// All webhooks, oldest first.
    async fn list_webhooks(&self) -> StoreResult<Vec<WebhookRecord>>;
    /// One webhook, if it exists.
    async fn get_webhook(&self, id: WebhookId) -> StoreResult<Option<WebhookRecord>>;
    /// Deletes a webhook with its pending (and claimed) outbox rows and its delivery log; false
    /// when it did not exist.
    async fn delete_webhook(&self, id: WebhookId) -> StoreResult<bool>;
    /// Writes `event` about a document to the outbox for each webhook subscribed to it, in one
    /// transaction; for events not written by [`Store::finish_document`] or
    /// [`Store::fail_document`], such as `document.pii_detected`. `extra` (a JSON object, or
    /// null for none) adds fields to the body's `data` after the document's id and name and its
    /// source's id and name; it may not repeat them. Returns the number of rows written: 0,
    /// writing nothing, when no webhook is subscribed. Fails with [`StoreError::Invalid`] when
    /// `extra` is not an object or repeats a field, or a webhook is subscribed and the document
    /// does not exist.
    async fn enqueue_event(
        &self,
        document_id: DocumentId,
        event: WebhookEvent,
        extra: serde_json::Value,
        now: DateTime<Utc>,
    ) -> StoreResult<u64>;
    /// Takes up to `limit` outbox rows that nobody holds a claim on at `now` (never claimed,
    /// released, or claimed until before `now`), oldest first, claims them for `claimer` until
    /// `claim_until` in the same statement, and returns them with their webhooks. While a claim
    /// lasts no other call returns the row, in this or any other process or node; once it has
    /// run out (its claimer died between claiming and logging the attempt) the row is returned
    /// again, with the same event id. [`Store::record_delivery`] removes the row for good.
    async fn claim_deliveries(
        &self,
        claimer: &str,
        now: DateTime<Utc>,
        claim_until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<PendingDelivery>>;
    /// Ends the claims of every claimer whose name starts with `claimer_prefix` (every claim:
    /// `None`), so those rows can be claimed again at once; returns how many. For claimers
    /// known to be gone: every claim when the only process that dispatches starts, a
    /// restarting node's own (its claimers' names start with its node id), and a stopping
    /// dispatcher's own claims on the deliveries it cut short.
    async fn release_delivery_claims(&self, claimer_prefix: Option<&str>) -> StoreResult<u64>;
    /// Appends an attempt to its webhook's delivery log, keeping the newest
    /// [`DELIVERY_LOG_LIMIT`], and removes the event's outbox row in the same transaction, so a
    /// logged attempt is never claimed again. An attempt for a webhook deleted meanwhile is
    /// dropped.
    async fn record_delivery(&self, attempt: NewDeliveryAttempt) -> StoreResult<()>;
    /// Up to `limit` logged attempts of one webhook, newest first.
    async fn deliveries(
        &self,
        webhook_id: WebhookId,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryAttempt>>;
    /// Number of outbox rows [`Store::claim_deliveries`] could take at `now`.
    async fn pending_deliveries_count(&self, now: DateTime<Utc>) -> StoreResult<u64>;

    // --- personal-data review ---

    /// Ends `job` with its document in `pending_review` (not searchable), records the findings
    /// and announces `document.pii_detected` to subscribed webhooks, in one transaction.
    async fn hold_document(
        &self,
        job: &ClaimedJob,
        held: HeldDocument,
        now: DateTime<Utc>,
    ) -> StoreResult<FinishOutcome>;
    /// Documents waiting for a decision, oldest first.
    async fn pending_reviews(&self) -> StoreResult<Vec<ReviewRecord>>;
    /// One document's review (waiting or decided), if it was ever held.
    async fn get_review(&self, id: DocumentId) -> StoreResult<Option<ReviewRecord>>;
    /// Records an approve or redact decision, replaces the recorded findings with
    /// `decided.findings` (and the document's name with `decided.name`, when given) and queues
    /// the document for processing again, in one transaction; false (and nothing changed) when
    /// it is not waiting for review.
    async fn decide_review(
        &self,
        id: DocumentId,
        decided: DecidedReview,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// The decision a document was sent back to processing with, if any.
    async fn review_decision(&self, id: DocumentId) -> StoreResult<Option<ReviewDecision>>;
    /// Passes the findings of every decided review through `reduce` and stores those it
    /// changes; returns how many changed. Reviews decided before decisions reduced their
    /// findings still hold the found text: run at start, this removes it (and does nothing
    /// once every review is reduced).
    async fn reduce_decided_findings(
        &self,
        reduce: for<'f> fn(&'f str) -> String,
    ) -> StoreResult<u64>;

    // --- admin web interface ---

    /// The Argon2id hash (PHC string) of the admin password, if one was set.
    async fn admin_password_hash(&self) -> StoreResult<Option<String>>;
    /// Sets (or replaces) the admin password's hash and ends every admin session.
    async fn set_admin_password_hash(&self, hash: &str, now: DateTime<Utc>) -> StoreResult<()>;
    /// Stores a new admin session under the SHA-256 of its token.
    async fn create_admin_session(
        &self,
        token_hash: &str,
        csrf: &str,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// The session whose token hashes to `token_hash`, expired or not (callers compare
    /// `expires_at` with their clock).
    async fn admin_session(&self, token_hash: &str) -> StoreResult<Option<AdminSession>>;
    /// Ends a session; false when there was none.
    async fn delete_admin_session(&self, token_hash: &str) -> StoreResult<bool>;
    /// Forgets sessions that expired at or before `now`; returns how many.
    async fn prune_admin_sessions(&self, now: DateTime<Utc>) -> StoreResult<u64>;
    /// Appends an entry to the audit log.
    async fn record_audit(&self, entry: AuditEntry) -> StoreResult<()>;
    /// Up to `limit` audit entries, newest first (ties: the last recorded first).
    async fn audit_log(&self, limit: u32) -> StoreResult<Vec<AuditEntry>>;
    /// Number of documents in each status that has any (all sources).
    async fn document_status_counts(&self) -> StoreResult<Vec<(DocumentStatus, u64)>>;
    /// Up to `limit` failed documents of every source, the most recently failed first.
    async fn recent_failures(&self, limit: u32) -> StoreResult<Vec<DocumentRecord>>;

    // --- progress and pool ---

    /// Records how far the processing of document `id` has come, replacing what was recorded
    /// before. A document deleted meanwhile is not an error: nothing is written.
    async fn set_document_progress(
        &self,
        id: DocumentId,
        progress: &DocumentProgress,
    ) -> StoreResult<()>;
    /// The last progress recorded for document `id` since it was claimed, while it is
    /// `processing` (`None` in every other status, so a finished or failed document never shows
    /// a stale stage). Until its worker reports, a claimed document is shown parsing since its
    /// claim ([`DocumentProgress::claimed`]); a report of an earlier attempt is not shown.
    async fn document_progress(&self, id: DocumentId) -> StoreResult<Option<DocumentProgress>>;
    /// How the connection pool is used right now.
    fn pool_stats(&self) -> PoolStats;

    // --- cluster mode: the indexes every node keeps in step ---

    /// Whether other nodes may share this store (PostgreSQL). Each node then keeps its own
    /// keyword index and vector replica in step by following [`Store::index_changes`]. False
    /// for a store one process owns (SQLite), whose indexes only that process writes.
    fn is_shared(&self) -> bool {
        false
    }
    /// Up to `limit` changes to what the indexes hold after position `after`, oldest first:
    /// a document became ready ([`Store::finish_document`]) or went
    /// ([`Store::delete_document`]). Positions grow in commit order, so a follower that has
    /// applied everything up to N only ever needs what comes after N. Empty when the store is
    /// not shared.
    async fn index_changes(&self, after: u64, limit: usize) -> StoreResult<Vec<IndexChange>>;
    /// The chunk vectors stored with a ready document by the node that embedded it, if any
    /// (only a shared store keeps them).
    async fn document_vectors(&self, id: DocumentId) -> StoreResult<Option<ChunkVectors>>;

    /// Registers `node` as running with `model` (`None`: keyword only) at `now`, unless a
    /// live node (another one, seen at or after `alive_since`) searches with another model:
    /// then nothing is registered and that node is returned. A keyword-only node conflicts
    /// with none. Nodes joining at once are serialised, so two with different models never
    /// both get in. A store that is not shared has no other nodes and registers nothing.
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
    /// Records that `node` still runs.
    async fn node_seen(&self, node: &str, now: DateTime<Utc>) -> StoreResult<()> {
        let _ = (node, now);
        Ok(())
    }
    /// Removes `node` from the running nodes (it stops).
    async fn leave_cluster(&self, node: &str) -> StoreResult<()> {
        let _ = node;
        Ok(())
    }

    // --- cluster mode: the generation queue all nodes share ---

    /// Puts ticket `id` of `key` (asked through `node`) in the cluster's generation queue:
    /// a slot at once when one is free and nobody waits, else the end of the line, unless
    /// `limits` refuse it. Tickets of nodes not seen since `alive_since` are removed first.
    /// Only a shared store has this queue; others answer [`StoreError::Invalid`] (each process
    /// then queues its own questions).
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
        Err(StoreError::Invalid(
            "this store has no shared generation queue".into(),
        ))
    }
    /// What `node` does while it holds tickets: says they are alive, removes tickets of nodes
    /// not seen since `alive_since`, hands free slots (of `slots` cluster-wide) to the head of
    /// the line, and returns the places of its tickets.
    async fn queue_view(
        &self,
        node: &str,
        slots: u64,
        now: DateTime<Utc>,
        alive_since: DateTime<Utc>,
    ) -> StoreResult<QueueView> {
        let _ = (node, slots, now, alive_since);
        Err(StoreError::Invalid(
            "this store has no shared generation queue".into(),
        ))
    }
    /// Takes ticket `id` out of the queue (answered, or the client went away).
    async fn queue_leave(&self, id: uuid::Uuid) -> StoreResult<()> {
        let _ = id;
        Err(StoreError::Invalid(
            "this store has no shared generation queue".into(),
        ))
    }

    // --- lifecycle ---

    /// Closes every connection, waiting for those in use. Calls after it fail.
    async fn close(&self);
}

/// A store answered a batch call with fewer results than it was given: a bug in the store.
fn fewer_than_given(what: &str) -> StoreError {
    StoreError::Corrupt(format!(
        "the store {what} fewer documents than it was given"
    ))
}
