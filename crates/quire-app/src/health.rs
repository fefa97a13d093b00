//! What the service says about itself: the version and whether semantic search is on for
//! anyone; the details (model, engine, counts, why a capability is off: text that can name
//! internal hosts and paths) for admin keys only, and the chunk count, which covers every
//! source, only for admin keys on every source. The policy lives here, once, for every
//! adapter; the REST health endpoint maps it.

use quire_core::{ApiKeyRecord, Permission, SourceScope};

use crate::Services;

/// The running version and what it can do, as far as the caller may know.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    /// The crate version.
    pub version: &'static str,
    /// Whether search is hybrid or keyword only.
    pub semantic: SemanticHealth,
    /// Whether OCR reads scanned pages (admin keys only).
    pub ocr: Option<OcrHealth>,
}

/// Semantic search: only `enabled` for anyone but an admin key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SemanticHealth {
    /// Whether an embedding model is loaded.
    pub enabled: bool,
    /// The model's id (admin, when enabled).
    pub model: Option<String>,
    /// What computes the vectors (admin, when enabled).
    pub engine: Option<String>,
    /// Vector dimensions (admin, when enabled).
    pub dimensions: Option<usize>,
    /// Passages with a vector, in every source (admin keys on every source, when enabled).
    pub embedded_chunks: Option<usize>,
    /// Documents without vectors are being embedded (admin, when enabled).
    pub reembedding: Option<bool>,
    /// Why it is off (admin, when disabled).
    pub reason: Option<String>,
    /// The embedding model is being fetched: search is keyword only until it is there, and
    /// documents made ready meanwhile are embedded then.
    pub preparing: bool,
}

/// OCR, for admin keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OcrHealth {
    /// Whether OCR is on.
    pub enabled: bool,
    /// Tesseract languages in use (when enabled).
    pub languages: Option<Vec<String>>,
    /// Pages read by OCR at most per document (when enabled).
    pub max_pages: Option<u32>,
    /// Resolution pages are rendered at for OCR (when enabled).
    pub dpi: Option<u32>,
    /// The Tesseract found, with its version (when enabled).
    pub note: Option<String>,
    /// Why OCR is off and how to turn it on (when disabled).
    pub reason: Option<String>,
}

/// The health report for `caller` (`None`: no key, or one that was not accepted).
pub fn report(services: &Services, caller: Option<&ApiKeyRecord>) -> Health {
    let admin_key = caller.filter(|key| key.permission == Permission::Admin);
    let admin = admin_key.is_some();
    // An admin key limited to some sources must not learn how much the others hold.
    let every_source = admin_key.is_some_and(|key| key.scope == SourceScope::All);
    let semantic = match (services.ingest.semantic(), admin) {
        (Some(_), false) => SemanticHealth {
            enabled: true,
            ..Default::default()
        },
        (None, false) => SemanticHealth {
            preparing: services.semantic_preparing(),
            ..Default::default()
        },
        (Some(semantic), true) => SemanticHealth {
            enabled: true,
            model: Some(semantic.embedder().model_id().to_string()),
            engine: Some(semantic.embedder().engine().to_string()),
            dimensions: Some(semantic.embedder().dimensions()),
            embedded_chunks: every_source.then(|| semantic.vectors().len()),
            reembedding: Some(semantic.backfill_running()),
            ..Default::default()
        },
        (None, true) => SemanticHealth {
            reason: Some(services.semantic_note()),
            preparing: services.semantic_preparing(),
            ..Default::default()
        },
    };
    let ocr = admin.then(|| match services.ingest.ocr() {
        Some(ocr) => OcrHealth {
            enabled: true,
            languages: Some(ocr.languages.clone()),
            max_pages: Some(ocr.max_pages),
            dpi: Some(ocr.dpi),
            note: Some(services.ingest.ocr_note().to_string()),
            reason: None,
        },
        None => OcrHealth {
            enabled: false,
            reason: Some(services.ingest.ocr_note().to_string()),
            ..Default::default()
        },
    });
    Health {
        version: env!("CARGO_PKG_VERSION"),
        semantic,
        ocr,
    }
}

/// The counts the administrator's dashboard shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Overview {
    /// Sources in all.
    pub sources: usize,
    /// Jobs waiting or running.
    pub pending_jobs: u64,
    /// Documents by status.
    pub documents: Vec<(quire_core::DocumentStatus, u64)>,
    /// The most recently failed documents, newest first.
    pub recent_failures: Vec<quire_core::DocumentRecord>,
}

/// What the dashboard shows, with at most `failures` failed documents.
pub async fn overview(ledger: &crate::Ledger, failures: u32) -> Result<Overview, crate::AppError> {
    let store = ledger.store();
    Ok(Overview {
        sources: store.list_sources(&SourceScope::All).await?.len(),
        pending_jobs: store.pending_job_count().await?,
        documents: store.document_status_counts().await?,
        recent_failures: store.recent_failures(failures).await?,
    })
}
