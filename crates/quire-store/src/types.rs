//! Values exchanged with the store that are not domain records.

use chrono::{DateTime, Utc};
use quire_core::{
    ChunkDraft, ConversationId, DocumentId, DocumentRecord, JobId, KeyId, MessageId, SourceId,
};

/// A job leased to a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedJob {
    /// The job.
    pub id: JobId,
    /// The document to process.
    pub document_id: DocumentId,
    /// The document's source.
    pub source_id: SourceId,
    /// The document's file name.
    pub document_name: String,
    /// The document's declared media type.
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
    /// The source already holds these bytes; this is that document, and nothing was stored.
    Existing(DocumentRecord),
}

impl Created {
    /// The document, new or existing.
    pub fn document(&self) -> &DocumentRecord {
        match self {
            Self::New(d) | Self::Existing(d) => d,
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
}

/// A ready document an index hit points to, with its source's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentHit {
    /// Document id.
    pub id: DocumentId,
    /// Document name.
    pub name: String,
    /// Source id.
    pub source_id: SourceId,
    /// Source name.
    pub source_name: String,
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
    /// The chunk's document.
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
