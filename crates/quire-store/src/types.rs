//! Values exchanged with the store that are not domain records.

use std::fmt;

use chrono::{DateTime, Utc};
use quire_core::{
    ChunkDraft, ConversationId, DocumentId, DocumentRecord, EventId, JobId, KeyId, MessageId,
    SourceId, SourceScope, WebhookEvent, WebhookId,
};

/// A job leased to a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedJob {
    /// The job.
    pub id: JobId,
    /// The document to process.
    pub document_id: DocumentId,
    /// The version of it to process.
    pub version: u32,
    /// The id this version's chunks are indexed and its original stored under.
    pub index_id: DocumentId,
    /// When a live version is ready and this one will take its place: the live version's
    /// index id, whose entries go once this one is stored.
    pub replaces: Option<DocumentId>,
    /// The document's source.
    pub source_id: SourceId,
    /// The version's file name.
    pub document_name: String,
    /// The version's declared media type.
    pub content_type: String,
    /// How many times the job has been claimed, including this time.
    pub attempts: u32,
    /// The worker holding the lease.
    pub worker: String,
}

/// The result of creating a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// A new document (and its job) was stored.
    New(DocumentRecord),
    /// The source already holds these bytes; this is that document, and nothing was stored
    /// (but the metadata given, if any, which replaced the document's).
    Existing(DocumentRecord),
    /// The document with this external id (or the one named) got a new version, queued for
    /// processing; the live version stays searchable until it is ready.
    Version(DocumentRecord),
}

impl Created {
    /// The document, new or existing.
    pub fn document(&self) -> &DocumentRecord {
        match self {
            Self::New(d) | Self::Existing(d) | Self::Version(d) => d,
        }
    }
}

/// What processing produced for a document.
#[derive(Debug, Clone)]
pub struct ProcessedDocument {
    /// The chunks to store, in order.
    pub chunks: Vec<ChunkDraft>,
    /// Number of pages.
    pub page_count: u32,
    /// The chunks' vectors, when semantic search embedded them: a shared store keeps them so
    /// the other nodes copy rather than recompute them; a store only one node uses does not.
    pub vectors: Option<ChunkVectors>,
}

/// The vectors of a document's chunks, one per chunk in ordinal order, and the model that
/// computed them.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkVectors {
    /// The model, as the vector index names it (name and dimensions).
    pub model: String,
    /// One vector per chunk.
    pub vectors: Vec<Vec<f32>>,
}

/// One change to what the search indexes hold, at its place in the shared store's feed: what
/// every node of a cluster applies to its own keyword index and vector replica, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexChange {
    /// Position in the feed; positions grow in commit order.
    pub position: u64,
    /// The document concerned.
    pub document_id: DocumentId,
    /// Its source.
    pub source_id: SourceId,
    /// What happened to it.
    pub kind: IndexChangeKind,
    /// Ready: the id the ready version's chunks are indexed under. Removed: the live
    /// version's.
    pub index_id: DocumentId,
    /// Ready: the id of the version it replaced, whose entries go. Removed: the previous
    /// version's, whose entries go too.
    pub replaced: Option<DocumentId>,
}

/// What an [`IndexChange`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexChangeKind {
    /// The document became ready: index its stored chunks (and vectors).
    Ready,
    /// The document is gone: remove its entries.
    Removed,
}

impl IndexChangeKind {
    /// The name stored in the feed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Removed => "removed",
        }
    }

    /// The kind a stored name stands for.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "ready" => Some(Self::Ready),
            "removed" => Some(Self::Removed),
            _ => None,
        }
    }
}

/// How finishing a job went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishOutcome {
    /// The document's new status is stored.
    Stored,
    /// The document was deleted while it was processed; nothing was stored.
    DocumentGone,
    /// Another worker took the job over (the lease had expired); nothing was stored.
    LeaseLost,
    /// A newer version of the document took this one's place; nothing was stored, and what
    /// was indexed for this version should go.
    Superseded,
}

/// A ready document an index hit points to, with its source's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentHit {
    /// Document id.
    pub id: DocumentId,
    /// The id the live version's chunks are indexed under.
    pub index_id: DocumentId,
    /// The id the version before it was indexed under, still resolvable until the next
    /// switch (a node whose indexes have not applied the switch yet finds those entries).
    pub previous_index_id: Option<DocumentId>,
    /// Document name.
    pub name: String,
    /// Source id.
    pub source_id: SourceId,
    /// Source name.
    pub source_name: String,
    /// The document's metadata.
    pub metadata: quire_core::Metadata,
}

/// A rate-limited operation; each has its own window per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateBucket {
    /// `POST /api/v1/search`.
    Search,
    /// `POST /api/v1/generate`.
    Generate,
}

impl RateBucket {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Search => "search",
            Self::Generate => "generate",
        }
    }
}

/// One key's fixed window for one bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateWindow {
    /// The key.
    pub key: KeyId,
    /// The operation.
    pub bucket: RateBucket,
    /// Start of the window.
    pub start: DateTime<Utc>,
}

/// A stored chunk with its document, as the vector index's hits are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredChunk {
    /// The id the chunk's version is indexed under (the key index hits carry).
    pub document_id: DocumentId,
    /// Ordinal, page, section and text.
    pub chunk: ChunkDraft,
}

/// A generated answer to store: the first one of a new conversation or the next one of an
/// existing conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    /// The message.
    pub id: MessageId,
    /// The conversation it belongs to; created when it does not exist yet.
    pub conversation_id: ConversationId,
    /// The API key asking; it must own the conversation.
    pub key_id: KeyId,
    /// The question as asked.
    pub question: String,
    /// The generated answer.
    pub answer: String,
    /// The JSON array of citations sent in the stream's `done` event, stored verbatim.
    pub citations: String,
    /// What produced the answer: `extractive` or the model's name.
    pub generator: String,
    /// When the answer was generated.
    pub created_at: DateTime<Utc>,
}

/// A stored conversation, without its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationRecord {
    /// The conversation.
    pub id: ConversationId,
    /// The API key that created it, the only one that may see or continue it.
    pub key_id: KeyId,
    /// When its first message was generated.
    pub created_at: DateTime<Utc>,
    /// When its latest message was generated.
    pub updated_at: DateTime<Utc>,
    /// Number of messages in it.
    pub message_count: u32,
}

/// A stored question and answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRecord {
    /// The message.
    pub id: MessageId,
    /// Its conversation.
    pub conversation_id: ConversationId,
    /// The question as asked.
    pub question: String,
    /// The generated answer.
    pub answer: String,
    /// The JSON array of citations, as stored.
    pub citations: String,
    /// What produced the answer: `extractive` or the model's name.
    pub generator: String,
    /// When the answer was generated.
    pub created_at: DateTime<Utc>,
}

/// A webhook about to be registered. `Debug` leaves the secret out.
#[derive(Clone, PartialEq, Eq)]
pub struct NewWebhook {
    /// Identifier chosen by the caller.
    pub id: WebhookId,
    /// Where deliveries are POSTed.
    pub url: String,
    /// The events it subscribes to; at least one. Repeated events are stored once.
    pub events: Vec<WebhookEvent>,
    /// The key deliveries are signed with.
    pub secret: String,
    /// The sources whose events it receives: the scope of the key that registered it.
    pub scope: SourceScope,
    /// Registration time.
    pub created_at: DateTime<Utc>,
}

/// A registered webhook. `Debug` leaves the secret out.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookRecord {
    /// Identifier.
    pub id: WebhookId,
    /// Where deliveries are POSTed.
    pub url: String,
    /// The events it subscribes to, in the order registered, without repeats.
    pub events: Vec<WebhookEvent>,
    /// The key deliveries are signed with.
    pub secret: String,
    /// The sources whose events it receives: the scope of the key that registered it.
    pub scope: SourceScope,
    /// Registration time.
    pub created_at: DateTime<Utc>,
}

impl fmt::Debug for NewWebhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewWebhook")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("events", &self.events)
            .field("secret", &"[redacted]")
            .field("scope", &self.scope)
            .field("created_at", &self.created_at)
            .finish()
    }
}

impl fmt::Debug for WebhookRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookRecord")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("events", &self.events)
            .field("secret", &"[redacted]")
            .field("scope", &self.scope)
            .field("created_at", &self.created_at)
            .finish()
    }
}

/// An event taken from the outbox for one webhook, to be sent once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingDelivery {
    /// The event as recorded for this webhook; unique per (webhook, event).
    pub event_id: EventId,
    /// The webhook to send it to.
    pub webhook: WebhookRecord,
    /// What happened.
    pub event: WebhookEvent,
    /// The exact JSON body to POST: `{"event", "timestamp", "data"}`.
    pub body: String,
    /// When the event was recorded.
    pub created_at: DateTime<Utc>,
}

/// The outcome of one delivery attempt, to append to the webhook's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDeliveryAttempt {
    /// The event delivered.
    pub event_id: EventId,
    /// The webhook it was sent to.
    pub webhook_id: WebhookId,
    /// What happened.
    pub event: WebhookEvent,
    /// When the request was sent.
    pub attempted_at: DateTime<Utc>,
    /// The HTTP status of the answer; `None` when no answer came.
    pub status_code: Option<u16>,
    /// Why the attempt failed (connection refused, timeout, non-2xx), if it did.
    pub error: Option<String>,
    /// How long the request took.
    pub latency_ms: u64,
}

/// A logged delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryAttempt {
    /// Position in the log: larger is newer.
    pub sequence: u64,
    /// The event delivered.
    pub event_id: EventId,
    /// The webhook it was sent to.
    pub webhook_id: WebhookId,
    /// What happened.
    pub event: WebhookEvent,
    /// When the request was sent.
    pub attempted_at: DateTime<Utc>,
    /// The HTTP status of the answer; `None` when no answer came.
    pub status_code: Option<u16>,
    /// Why the attempt failed, if it did.
    pub error: Option<String>,
    /// How long the request took.
    pub latency_ms: u64,
}

/// Why a processed document is held for review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldDocument {
    /// The personal-data types that hold it (`email`, `person_name`, …).
    pub pii_types: Vec<String>,
    /// The findings, as a JSON array, for the reviewer.
    pub findings: String,
    /// Pages of the document.
    pub page_count: u32,
    /// The name the document shows while it waits, when its own holds personal data: the
    /// name with each finding replaced by its placeholder. Listings, search and the
    /// `document.pii_detected` payload show this one; the store keeps the real name for the
    /// reviewer until the decision.
    pub shown_name: Option<String>,
}

/// An administrator's decision on a held document (rejecting deletes it instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewDecision {
    /// Index the text as it is.
    Approve,
    /// Index the text with each finding replaced by a typed placeholder.
    Redact,
}

impl ReviewDecision {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Redact => "redact",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Result<Self, crate::StoreError> {
        match s {
            "approve" => Ok(Self::Approve),
            "redact" => Ok(Self::Redact),
            other => Err(crate::StoreError::Corrupt(format!(
                "unknown review decision {other:?}"
            ))),
        }
    }
}

/// An administrator's decision on a held document with what its review keeps from then on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecidedReview {
    /// The decision.
    pub decision: ReviewDecision,
    /// The findings reduced to what may be kept once the decision is taken (types, counts and
    /// masked excerpts, as a JSON array): they replace the recorded findings, so the found
    /// text is no longer stored.
    pub findings: String,
    /// The document's new name, when the decision removes personal data from it.
    pub name: Option<String>,
}

/// A held document and its review.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewRecord {
    /// The document.
    pub document: quire_core::DocumentRecord,
    /// The types that held it.
    pub pii_types: Vec<String>,
    /// The findings, as a JSON array: as the detector reported them while the document waits,
    /// reduced (one entry per type with a `count`) once it is decided.
    pub findings: String,
    /// When it was held.
    pub held_at: DateTime<Utc>,
    /// The decision, once made.
    pub decision: Option<ReviewDecision>,
    /// When it was made.
    pub decided_at: Option<DateTime<Utc>>,
    /// The document's real name while it waits with a masked one
    /// ([`HeldDocument::shown_name`]); `None` otherwise, and once decided.
    pub held_name: Option<String>,
}

impl ReviewRecord {
    /// How many findings the review records: each listed finding once, a reduced entry as
    /// many times as its `count`.
    pub fn finding_count(&self) -> u64 {
        let findings: Vec<serde_json::Value> =
            serde_json::from_str(&self.findings).unwrap_or_default();
        findings
            .iter()
            .map(|f| f["count"].as_u64().unwrap_or(1))
            .sum()
    }
}

/// A signed-in administrator's session, found by the hash of its cookie's token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSession {
    /// The token every form of this session must send back.
    pub csrf: String,
    /// When the session ends.
    pub expires_at: DateTime<Utc>,
}

/// One line of the audit log: who did what is implied (the administrator); what and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// When it happened.
    pub at: DateTime<Utc>,
    /// Who acted: `key <name> (<id>)`, `admin` or `operator` (empty for entries written before
    /// the log named the actor).
    pub actor: String,
    /// A short stable name, such as `key.created` or `admin.signed_in`.
    pub action: String,
    /// Human-readable specifics (never a secret).
    pub detail: String,
}

/// A page of a source's documents, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentPage {
    /// The documents of this page.
    pub documents: Vec<quire_core::DocumentRecord>,
    /// Where the next page starts, when more documents follow.
    pub next: Option<quire_core::DocumentCursor>,
}

/// The step a document being processed is at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProcessingStage {
    /// Text is being extracted from the original and cut into chunks.
    Parsing,
    /// The chunks are being screened for personal data.
    Screening,
    /// The chunks are being embedded for semantic search.
    Embedding,
    /// The chunks are being written to the keyword and vector indexes.
    Indexing,
}

impl ProcessingStage {
    /// The wire name (`parsing`, `screening`, `embedding`, `indexing`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Parsing => "parsing",
            Self::Screening => "screening",
            Self::Embedding => "embedding",
            Self::Indexing => "indexing",
        }
    }
}

impl fmt::Display for ProcessingStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ProcessingStage {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "parsing" => Self::Parsing,
            "screening" => Self::Screening,
            "embedding" => Self::Embedding,
            "indexing" => Self::Indexing,
            other => return Err(format!("unknown processing stage {other:?}")),
        })
    }
}

/// How far the processing of a document has come: its stage and, when the stage counts
/// something (chunks embedded), how many of how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentProgress {
    /// The current step.
    pub stage: ProcessingStage,
    /// Units of the stage done (chunks embedded), when the stage counts any.
    pub done: Option<u64>,
    /// Units the stage has in all, when known.
    pub total: Option<u64>,
    /// When the worker last reported.
    pub updated_at: DateTime<Utc>,
}

impl DocumentProgress {
    /// A document claimed at `at` whose worker has not reported yet: it is being parsed.
    pub fn claimed(at: DateTime<Utc>) -> Self {
        Self {
            stage: ProcessingStage::Parsing,
            done: None,
            total: None,
            updated_at: at,
        }
    }
}

/// How the store's connection pool is used right now (for the metrics endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Connections open (idle and in use).
    pub size: u32,
    /// Open connections not in use.
    pub idle: u32,
    /// Most connections the pool opens.
    pub max: u32,
}

/// A running node of a cluster, as it registered itself in the shared store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// Its stable name (`<data dir>/node-id`).
    pub node: String,
    /// The embedding model it searches with (`None`: keyword only).
    pub embedding_model: Option<String>,
    /// When it last said it runs.
    pub seen_at: DateTime<Utc>,
}

/// Where a question stands in the cluster's generation queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketPlace {
    /// Waiting; 1 is next in line.
    Waiting(u64),
    /// Holds a generation slot.
    Running,
}

/// Why the cluster's generation queue refused a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueRefusal {
    /// As many questions as allowed are waiting.
    LineFull,
    /// The key holds its share of the queue (waiting and running together).
    KeyShareUsed,
}

/// The bounds of the cluster's generation queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Answers generated at once in the whole cluster.
    pub slots: u64,
    /// Questions that may wait.
    pub max_waiting: u64,
    /// Questions one key may have waiting or running.
    pub max_per_key: u64,
}

/// What a node learns when it looks at the cluster's generation queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueView {
    /// The places of the asking node's tickets (a ticket missing here is gone).
    pub places: Vec<(uuid::Uuid, TicketPlace)>,
    /// Questions holding a slot, cluster-wide.
    pub running: u64,
    /// Questions waiting, cluster-wide.
    pub waiting: u64,
}

/// A deleted document, with every id its versions were indexed and stored under, whose index
/// entries and originals go with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletedDocument {
    /// The document as it was.
    pub document: DocumentRecord,
    /// The index ids of all its versions.
    pub index_ids: Vec<DocumentId>,
}

/// How a syncing source reaches its origin, to store with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSync {
    /// `folder`, `s3` or `web`.
    pub kind: String,
    /// The origin's settings as a JSON object, credentials left out.
    pub config: String,
    /// The credentials, sealed with the operator's key.
    pub sealed_secret: Option<String>,
    /// How often it syncs by itself (0: on demand only).
    pub interval_seconds: u64,
    /// When it first syncs by itself.
    pub next_run_at: Option<DateTime<Utc>>,
}

/// A syncing source's origin settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSync {
    /// The source.
    pub source_id: SourceId,
    /// `folder`, `s3` or `web`.
    pub kind: String,
    /// The origin's settings (a JSON object), credentials left out.
    pub config: String,
    /// The credentials, sealed.
    pub sealed_secret: Option<String>,
    /// How often it syncs by itself (0: on demand only).
    pub interval_seconds: u64,
    /// When it next syncs by itself.
    pub next_run_at: Option<DateTime<Utc>>,
}

/// Counts of what a sync run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncCounts {
    /// Items new to the source.
    pub added: u64,
    /// Items that changed: new versions.
    pub updated: u64,
    /// Items gone from the origin: documents deleted.
    pub deleted: u64,
    /// Items not fetched again.
    pub unchanged: u64,
    /// Items that failed (each with its reason).
    pub failed: u64,
}

/// One sync run of a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRun {
    /// Its id.
    pub id: uuid::Uuid,
    /// The source.
    pub source_id: SourceId,
    /// `running`, `succeeded` or `failed`.
    pub status: String,
    /// What it did.
    pub counts: SyncCounts,
    /// The failed items' external ids and reasons, as a JSON array of
    /// `{"externalId", "reason"}`.
    pub failures: String,
    /// Why the run failed as a whole (the origin could not be listed).
    pub error: Option<String>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
}
