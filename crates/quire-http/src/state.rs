//! What every handler can reach.

use std::sync::Arc;

use quire_core::Clock;
use quire_ingest::Ingest;
use quire_search::KeywordIndex;
use quire_store::Store;

use crate::RateLimiter;
use crate::generate::Generation;
use crate::search::SearchSettings;

/// Limits of the HTTP layer itself (`[limits]` in the config file).
#[derive(Debug, Clone, Copy)]
pub struct HttpSettings {
    /// Largest JSON request body, in bytes.
    pub max_json_bytes: usize,
    /// Most file parts in one bulk upload.
    pub max_bulk_files: usize,
}

/// How webhook registrations are checked (`[webhooks]` in the config file).
#[derive(Debug, Clone, Copy, Default)]
pub struct WebhookSettings {
    /// Accept targets on loopback, private and link-local addresses.
    pub allow_private_targets: bool,
}

/// Shared state of the router.
#[derive(Clone)]
pub struct AppState {
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
    /// HTTP limits.
    pub settings: HttpSettings,
    /// Fusion and candidate depth.
    pub search: SearchSettings,
    /// Webhook registration checks.
    pub webhooks: WebhookSettings,
    /// The generator and its queue, for `POST /api/v1/generate`.
    pub generation: Generation,
    /// Whether semantic search is on and with which model, or why it is off (for the health
    /// output).
    pub semantic_note: Arc<str>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}
