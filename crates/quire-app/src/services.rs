//! What the use cases work with: the store, the indexes, ingestion, the limiter, the clock and
//! the generator, assembled once at start and shared by every adapter. The fields are private:
//! adapters reach them only through the use cases, so no adapter can bypass a policy or the
//! audit log.

use std::sync::Arc;

use quire_core::Clock;
use quire_ingest::Ingest;
use quire_search::KeywordIndex;
use quire_store::Store;

use crate::Ledger;
use crate::answers::Generation;
use crate::rate_limit::RateLimiter;
use crate::search::{Rerank, SearchSettings};

/// Upload policy shared by the API and the admin interface.
#[derive(Debug, Clone, Copy)]
pub struct UploadSettings {
    /// Most file parts in one bulk upload.
    pub max_bulk_files: usize,
}

/// How webhook registrations are checked (`[webhooks]` in the config file).
#[derive(Debug, Clone, Copy, Default)]
pub struct WebhookSettings {
    /// Accept targets on loopback, private and link-local addresses.
    pub allow_private_targets: bool,
}

/// The parts [`Services::new`] assembles (built by the server's wiring).
pub struct ServiceParts {
    /// Persistent state.
    pub store: Arc<dyn Store>,
    /// Keyword index.
    pub index: Arc<KeywordIndex>,
    /// Upload, delete and processing.
    pub ingest: Arc<Ingest>,
    /// Rate limits for search and generate.
    pub limiter: Arc<RateLimiter>,
    /// The service's clock.
    pub clock: Arc<dyn Clock>,
    /// Fusion and candidate depth.
    pub search: SearchSettings,
    /// The reranker that orders the fused top results, if one is configured.
    pub rerank: Option<Rerank>,
    /// Upload policy.
    pub uploads: UploadSettings,
    /// Webhook registration checks.
    pub webhooks: WebhookSettings,
    /// The generator and its queue.
    pub generation: Generation,
    /// Whether semantic search is on and with which model, or why it is off (for the health
    /// output).
    pub semantic_note: Arc<str>,
    /// Whether the model is being fetched, to be turned on once it is there
    /// ([`crate::startup::semantic_ready`]).
    pub semantic_preparing: bool,
    /// What syncing sources need (`None`: this process runs none, such as the CLI).
    pub syncs: Option<crate::syncs::SyncSettings>,
}

/// Where semantic search stands: what the health output says, changed once a model fetched
/// after start is ready (or could not be fetched).
#[derive(Debug)]
pub(crate) struct SemanticStatus {
    pub(crate) note: std::sync::RwLock<String>,
    pub(crate) preparing: std::sync::atomic::AtomicBool,
}

impl SemanticStatus {
    pub(crate) fn set(&self, note: String, preparing: bool) {
        *self.note.write().expect("semantic note lock") = note;
        self.preparing
            .store(preparing, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Everything a use case can reach. Cheap to clone: every part is shared.
#[derive(Clone)]
pub struct Services {
    pub(crate) ledger: Ledger,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) index: Arc<KeywordIndex>,
    pub(crate) ingest: Arc<Ingest>,
    pub(crate) limiter: Arc<RateLimiter>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) search: SearchSettings,
    pub(crate) rerank: Option<Rerank>,
    pub(crate) uploads: UploadSettings,
    pub(crate) webhooks: WebhookSettings,
    pub(crate) generation: Generation,
    pub(crate) semantic: Arc<SemanticStatus>,
    pub(crate) syncs: Option<crate::syncs::SyncSettings>,
}

impl Services {
    /// Assembles the services from their parts.
    pub fn new(parts: ServiceParts) -> Self {
        Self {
            ledger: Ledger::serving(
                Arc::clone(&parts.store),
                Arc::clone(&parts.clock),
                Arc::clone(&parts.ingest),
            ),
            store: parts.store,
            index: parts.index,
            ingest: parts.ingest,
            limiter: parts.limiter,
            clock: parts.clock,
            search: parts.search,
            rerank: parts.rerank,
            uploads: parts.uploads,
            webhooks: parts.webhooks,
            generation: parts.generation,
            semantic: Arc::new(SemanticStatus {
                note: std::sync::RwLock::new(parts.semantic_note.to_string()),
                preparing: std::sync::atomic::AtomicBool::new(parts.semantic_preparing),
            }),
            syncs: parts.syncs,
        }
    }

    /// The store-backed part, which the use cases shared with the command line take.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The rate limiter, for the adapters' rate-limit headers and checks.
    pub fn limiter(&self) -> &RateLimiter {
        &self.limiter
    }

    /// Upload policy.
    pub fn upload_settings(&self) -> UploadSettings {
        self.uploads
    }

    /// The largest file one upload may carry, in bytes.
    pub fn max_upload_bytes(&self) -> u64 {
        self.ingest.settings().max_upload_bytes
    }

    /// The generator and its queue.
    pub fn generation(&self) -> &Generation {
        &self.generation
    }

    /// Why semantic search is off, or which model it runs with, for the operator's own tools
    /// (`quire eval`/`quire bench` say it when they need a model). Adapters show it only
    /// through [`crate::health::report`], to admin keys.
    pub fn semantic_note(&self) -> String {
        self.semantic
            .note
            .read()
            .expect("semantic note lock")
            .clone()
    }

    /// Whether the embedding model is being fetched (semantic search turns on once it is
    /// there).
    pub fn semantic_preparing(&self) -> bool {
        self.semantic
            .preparing
            .load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Use cases shared with the command line take a [`Ledger`]; a `&Services` is one.
impl std::ops::Deref for Services {
    type Target = Ledger;

    fn deref(&self) -> &Ledger {
        &self.ledger
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("search", &self.search)
            .field("rerank", &self.rerank)
            .field("uploads", &self.uploads)
            .field("webhooks", &self.webhooks)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}
