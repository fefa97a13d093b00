//! The ingestion service: what the HTTP layer calls to accept and delete documents, and what
//! the workers call to process one job. The service and its settings are here; its work is in
//! [`intake`] (staging and accepting uploads), [`removal`] (deleting documents and what a
//! deletion left behind) and [`processing`] (claiming and processing jobs).

mod intake;
mod processing;
mod reading;
mod removal;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::Duration;
use quire_core::Clock;
use quire_files::{FilesError, OriginalStore};
use quire_search::{KeywordIndex, SearchError, VectorError};
use quire_store::{Store, StoreError};
use tokio::sync::Notify;

use crate::chunker::ChunkingParams;
use crate::finish::{Finisher, Indexes};
use crate::follow::{FeedFollower, IndexedHere};
use crate::isolation::Isolation;
use crate::originals::{StageError, Staging};
use crate::pipeline::OutputLimits;
use crate::review::Review;
use crate::semantic::Semantic;
use quire_parse::{OcrSettings, ParseLimits};

pub use intake::{Upload, clean_file_name};
pub use processing::Next;

/// Upload and processing settings.
#[derive(Debug, Clone)]
pub struct IngestSettings {
    /// Largest accepted file, in bytes.
    pub max_upload_bytes: u64,
    /// How documents are cut into chunks.
    pub chunking: ChunkingParams,
    /// Bounds on parsing one document.
    pub parse_limits: ParseLimits,
    /// Bounds on the text and chunks one document may become.
    pub output_limits: OutputLimits,
    /// Longest a worker may spend parsing one document before it is failed.
    pub time_budget: std::time::Duration,
    /// Longest the server-side steps after parsing (screening, embedding, indexing) may take
    /// for one document before it is failed.
    pub index_time_budget: std::time::Duration,
    /// Where documents are parsed: in a child process (killable, with a memory budget) or in
    /// this one.
    pub isolation: Isolation,
    /// How long a claimed job stays leased to its worker; the worker renews it every third of
    /// that while it works, until the document is stored.
    pub lease: Duration,
    /// Claims of one job (including ones interrupted by crashes) before its document fails.
    pub max_attempts: u32,
}

/// Why an ingestion call failed.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The source does not exist or is outside the caller's scope.
    #[error("data source not found")]
    SourceNotFound,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The keyword index failed.
    #[error(transparent)]
    Index(#[from] SearchError),
    /// The vector index failed.
    #[error(transparent)]
    Vectors(#[from] VectorError),
    /// The embedder failed.
    #[error("embedding failed: {0}")]
    Embedding(String),
    /// Staging or moving a file failed.
    #[error(transparent)]
    Stage(#[from] StageError),
    /// The store of originals could not be reached, timed out or failed on its side: nothing
    /// was stored, and the same request may succeed later.
    #[error("the file storage is unavailable: {0}")]
    FilesUnavailable(String),
    /// The store of originals refused the request or failed otherwise.
    #[error(transparent)]
    Files(FilesError),
    /// Disk I/O failed.
    #[error("file system error: {0}")]
    Io(#[from] std::io::Error),
    /// A blocking task could not be joined.
    #[error("background task failed: {0}")]
    Task(String),
    /// Storing processed documents failed (the store's message, shared by every document of
    /// the transaction that failed).
    #[error("could not store the processed document: {0}")]
    Finish(String),
}

impl From<FilesError> for IngestError {
    fn from(e: FilesError) -> Self {
        match e {
            FilesError::Unavailable(message) => Self::FilesUnavailable(message),
            other => Self::Files(other),
        }
    }
}

/// Accepts uploads, deletes documents and processes jobs.
pub struct Ingest {
    store: Arc<dyn Store>,
    index: Arc<KeywordIndex>,
    /// Set once: at start, or when a model fetched after start is ready.
    semantic: std::sync::OnceLock<Arc<Semantic>>,
    review: Option<Review>,
    ocr: Option<OcrSettings>,
    ocr_note: String,
    staging: Staging,
    files: Arc<dyn OriginalStore>,
    clock: Arc<dyn Clock>,
    settings: IngestSettings,
    wakeup: Notify,
    /// On a shared store: documents this node indexed and made ready (see `follow`).
    indexed_here: Option<IndexedHere>,
    /// Stores finished documents in batches; started with the first (it needs the runtime).
    finisher: std::sync::OnceLock<Finisher>,
}

impl std::fmt::Debug for Ingest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingest")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Ingest {
    /// Wires the service to its store, index, local staging area, store of originals and
    /// clock.
    pub fn new(
        store: Arc<dyn Store>,
        index: Arc<KeywordIndex>,
        staging: Staging,
        files: Arc<dyn OriginalStore>,
        clock: Arc<dyn Clock>,
        settings: IngestSettings,
    ) -> Self {
        Self {
            indexed_here: store.is_shared().then(IndexedHere::default),
            store,
            index,
            semantic: std::sync::OnceLock::new(),
            review: None,
            ocr: None,
            ocr_note: "OCR off".to_owned(),
            staging,
            files,
            clock,
            settings,
            wakeup: Notify::new(),
            finisher: std::sync::OnceLock::new(),
        }
    }

    /// Embeds every chunk into `semantic`'s vector index before its document becomes ready.
    pub fn with_semantic(self, semantic: Option<Arc<Semantic>>) -> Self {
        if let Some(semantic) = semantic {
            self.enable_semantic(semantic);
        }
        self
    }

    /// Turns semantic search on while the service runs (the model was fetched after start):
    /// documents processed from now on are embedded, and the caller embeds those made ready
    /// before ([`Semantic::backfill`]). False, changing nothing, when it is on already.
    pub fn enable_semantic(&self, semantic: Arc<Semantic>) -> bool {
        self.semantic.set(semantic).is_ok()
    }

    /// Reads scanned pages and images with OCR (`None`: off; `note` says how it was decided,
    /// for the start-up log and the version endpoint).
    pub fn with_ocr(mut self, ocr: Option<OcrSettings>, note: String) -> Self {
        self.ocr = ocr;
        self.ocr_note = note;
        self
    }

    /// The OCR settings documents are parsed with (`None`: OCR is off).
    pub fn ocr(&self) -> Option<&OcrSettings> {
        self.ocr.as_ref()
    }

    /// What was found out about OCR at start (on with which program and version, or why off).
    pub fn ocr_note(&self) -> &str {
        &self.ocr_note
    }

    /// Screens every processed document for personal data; those `review`'s policy holds
    /// wait for an administrator instead of being indexed.
    pub fn with_review(mut self, review: Option<Review>) -> Self {
        self.review = review;
        self
    }

    /// The personal-data screening, when it is on.
    pub fn review(&self) -> Option<&Review> {
        self.review.as_ref()
    }

    /// A follower that keeps this node's keyword index and vector replica in step with a
    /// shared store's index feed, resuming from the position kept in `position_file`.
    pub fn feed_follower(&self, position_file: PathBuf) -> Result<FeedFollower, IngestError> {
        FeedFollower::open(
            Arc::clone(&self.store),
            Arc::clone(&self.index),
            self.semantic.get().cloned(),
            position_file,
            self.indexed_here.clone().unwrap_or_default(),
        )
    }

    /// Semantic search's embedder and vector index, when a model is configured.
    pub fn semantic(&self) -> Option<&Arc<Semantic>> {
        self.semantic.get()
    }

    /// The settings in force.
    pub fn settings(&self) -> &IngestSettings {
        &self.settings
    }

    /// The data directory's staging area (`<data_dir>/tmp`): where a sync spools what it
    /// fetched, so that a process that dies mid-run leaves nothing behind after its next
    /// start.
    pub fn staging_directory(&self) -> &Path {
        self.staging.directory()
    }

    /// Where a document's chunks and vectors are written, and removed from.
    fn indexes(&self) -> Indexes {
        Indexes {
            keyword: Arc::clone(&self.index),
            vectors: self.semantic.get().map(|s| Arc::clone(s.vectors())),
            indexed_here: self.indexed_here.clone(),
            originals: Arc::clone(&self.files),
        }
    }
}

/// Runs `f` on the blocking pool. A panic in `f` goes on unwinding in the caller, so the
/// caller's own panic handling (failing the document) applies to it as well.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, IngestError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(value) => Ok(value),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(IngestError::Task(e.to_string())),
    }
}

/// The text a panic was raised with, when it is a string.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}
