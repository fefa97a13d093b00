//! Quire's domain: identifiers, statuses, permissions, source scopes, validated inputs and the
//! traits for services from outside (the clock, the embedder, the reranker, the answer generator). No I/O and no framework types live here, so
//! every other crate can share these definitions without pulling in axum or sqlx.

pub mod clock;
pub mod embed;
pub mod filter;
pub mod generate;
pub mod ids;
pub mod input;
pub mod metadata;
pub mod model;
pub mod page;
pub mod permission;
pub mod rerank;
pub mod scope;
pub mod secret;
pub mod version;
pub mod webhook;

pub use clock::{Clock, ManualClock, SystemClock};
pub use filter::{Filter, FilterTarget};
pub use ids::{
    ChunkId, ConversationId, DocumentId, EventId, JobId, KeyId, MessageId, SourceId, WebhookId,
};
pub use input::{InputError, SearchLimit, SearchQuery, SourceDescription, SourceName, SourceType};
pub use metadata::{Metadata, MetadataValue};
pub use model::{
    ApiKeyRecord, ChunkDraft, DocumentRecord, DocumentStatus, NewApiKey, NewDocument, NewSource,
    SourceRecord,
};
pub use page::{DocumentCursor, PageSize};
pub use permission::Permission;
pub use rerank::Reranker;
pub use scope::SourceScope;
pub use secret::Secret;
pub use version::{ExternalId, NextVersion, VersionRecord, VersionStatus};
pub use webhook::{UnknownWebhookEvent, WebhookEvent, wire_timestamp};
