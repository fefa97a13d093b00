//! What the use cases work with: the store, the indexes, ingestion, the limiter, the clock and
//! the generator, assembled once at start and shared by every adapter.

use std::sync::Arc;

use quire_core::Clock;
use quire_ingest::Ingest;
use quire_search::KeywordIndex;
use quire_store::Store;

use crate::answers::Generation;
use crate::rate_limit::RateLimiter;
use crate::search::SearchSettings;

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

/// Everything a use case can reach. Cheap to clone: every part is shared.
#[derive(Clone)]
pub struct Services {
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
    /// Upload policy.
    pub uploads: UploadSettings,
    /// Webhook registration checks.
    pub webhooks: WebhookSettings,
    /// The generator and its queue.
    pub generation: Generation,
    /// Whether semantic search is on and with which model, or why it is off (for the health
    /// output).
    pub semantic_note: Arc<str>,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("search", &self.search)
            .field("uploads", &self.uploads)
            .field("webhooks", &self.webhooks)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}
