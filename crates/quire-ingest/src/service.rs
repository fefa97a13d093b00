//! The ingestion service: what the HTTP layer calls to accept and delete documents, and what
//! the workers call to process one job.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::Duration;
use futures_util::FutureExt;
use quire_core::{
    Clock, DocumentId, DocumentRecord, NewDocument, SourceId, SourceRecord, SourceScope,
};
use quire_files::{FilesError, OriginalStore};
use quire_search::{IndexedChunk, KeywordIndex, SearchError, VectorError};
use quire_store::{
    ChunkVectors, ClaimedJob, Created, FinishOutcome, ProcessedDocument, ProcessingStage,
    ReviewDecision, Store, StoreError,
};
use tempfile::TempPath;
use tokio::sync::Notify;
use tracing::Instrument;

use crate::chunker::{ChunkingParams, TokenCounting, WHOLE_SECTIONS, cut_to_window};
use crate::finish::{Finish, Finisher, Finishing, Indexes};
use crate::follow::{FeedFollower, IndexedHere};
use crate::isolation::{Isolation, PagesRead, ParseJob, parse_isolated};
use crate::lease::Lease;
use crate::originals::{StageError, StagedFile, StagedUpload, Staging};
use crate::pipeline::{OutputLimits, Processed, ProcessingError};
use crate::progress::Progress;
use crate::review::Review;
use crate::semantic::Semantic;
use quire_parse::{OcrSettings, ParseLimits, guess_content_type};

/// Chunks embedded per call to the embedder: small enough that progress moves every second or
/// so on a CPU, large enough that the embedder still fills its own batches.
const EMBED_BATCH: usize = 128;

/// Longest stored file name, in characters.
const MAX_NAME_CHARS: usize = 255;

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

/// A received file, staged on disk, with what the client said about it.
#[derive(Debug)]
pub struct Upload {
    /// File name from the multipart part.
    pub name: String,
    /// Media type from the multipart part, if any.
    pub content_type: Option<String>,
    /// The staged bytes.
    pub staged: StagedUpload,
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
    semantic: Option<Arc<Semantic>>,
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
            semantic: None,
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
    pub fn with_semantic(mut self, semantic: Option<Arc<Semantic>>) -> Self {
        self.semantic = semantic;
        self
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
            self.semantic.clone(),
            position_file,
            self.indexed_here.clone().unwrap_or_default(),
        )
    }

    /// Semantic search's embedder and vector index, when a model is configured.
    pub fn semantic(&self) -> Option<&Arc<Semantic>> {
        self.semantic.as_ref()
    }

    /// The settings in force.
    pub fn settings(&self) -> &IngestSettings {
        &self.settings
    }

    /// The source `id` if the caller may upload into it.
    pub async fn source(
        &self,
        scope: &SourceScope,
        id: SourceId,
    ) -> Result<SourceRecord, IngestError> {
        self.store
            .get_source(scope, id)
            .await?
            .ok_or(IngestError::SourceNotFound)
    }

    /// Starts staging an upload, limited to the configured maximum size.
    pub async fn stage(&self) -> Result<StagedFile, IngestError> {
        Ok(self.staging.stage(self.settings.max_upload_bytes).await?)
    }

    /// Stores an upload as a new `queued` document of `source` and wakes a worker. When the
    /// source already holds the same bytes (and that document has not failed), nothing is
    /// stored and the existing document is returned as [`Created::Existing`]. The original is
    /// stored before the document is created, so a store of originals that is down
    /// ([`IngestError::FilesUnavailable`]) leaves no document behind.
    pub async fn accept(
        &self,
        scope: &SourceScope,
        source: SourceId,
        upload: Upload,
    ) -> Result<Created, IngestError> {
        let accepted = self.accept_all(scope, source, vec![upload]).await?;
        accepted
            .into_iter()
            .next()
            .unwrap_or_else(|| Err(missing()))
    }

    /// Stores uploads as [`Ingest::accept`] does each, in order, with one store transaction
    /// for all their documents: what became of each upload, or, when the source is not there
    /// or the store fails, an error for them all (and nothing is stored). An upload whose
    /// original could not be stored fails alone.
    pub async fn accept_all(
        &self,
        scope: &SourceScope,
        source: SourceId,
        uploads: Vec<Upload>,
    ) -> Result<Vec<Result<Created, IngestError>>, IngestError> {
        self.source(scope, source).await?;
        let mut put = Vec::with_capacity(uploads.len());
        let mut documents = Vec::with_capacity(uploads.len());
        for upload in uploads {
            let document = self.new_document(source, &upload);
            let id = document.id;
            match self.files.put(id, upload.staged.into_temp_path()).await {
                Ok(()) => {
                    documents.push(document);
                    put.push(Ok(id));
                }
                Err(e) => put.push(Err(e.into())),
            }
        }
        let created = match self.store.create_documents(documents).await {
            Ok(created) => created,
            Err(e) => {
                for id in put.iter().filter_map(|p| p.as_ref().ok()) {
                    self.remove_original(*id).await;
                }
                return Err(e.into());
            }
        };
        let mut created = created.into_iter();
        let mut outcomes = Vec::with_capacity(put.len());
        for outcome in put {
            outcomes.push(match outcome {
                Ok(id) => match created.next() {
                    Some(new @ Created::New(_)) => {
                        self.wakeup.notify_one();
                        Ok(new)
                    }
                    Some(existing @ Created::Existing(_)) => {
                        self.remove_original(id).await;
                        Ok(existing)
                    }
                    None => Err(missing()),
                },
                Err(e) => Err(e),
            });
        }
        Ok(outcomes)
    }

    /// The document an upload becomes: a new id, its cleaned name, and its media type as the
    /// client gave it or guessed from the name.
    fn new_document(&self, source: SourceId, upload: &Upload) -> NewDocument {
        let name = clean_file_name(&upload.name);
        let content_type = match upload.content_type.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() && t != "application/octet-stream" => t.to_owned(),
            _ => guess_content_type(&name).to_owned(),
        };
        NewDocument {
            id: DocumentId::new(),
            source_id: source,
            name,
            content_type,
            size: upload.staged.size,
            sha256: upload.staged.sha256.clone(),
            created_at: self.clock.now(),
        }
    }

    /// Deletes a document: its record, chunks and job, its index entries and its original.
    /// Returns `None` when it does not exist in `scope`.
    pub async fn delete(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
    ) -> Result<Option<DocumentRecord>, IngestError> {
        let Some(doc) = self.store.delete_document(scope, source, id).await? else {
            return Ok(None);
        };
        self.remove_from_indexes(id).await?;
        self.remove_original(id).await;
        Ok(Some(doc))
    }

    /// Removes what a deletion interrupted by a crash left behind: keyword-index entries and
    /// vectors of documents that no longer exist, and, when `originals` is set, their
    /// original files. Call it at start, before the workers run and (for originals) before
    /// uploads are accepted: an original is stored just before its document row. Returns how
    /// many documents' entries and originals were removed.
    pub async fn remove_orphans(&self, originals: bool) -> Result<(u64, u64), IngestError> {
        let index = Arc::clone(&self.index);
        let mut indexed = blocking(move || index.document_ids()).await??;
        if let Some(semantic) = &self.semantic {
            indexed.extend(semantic.vectors().document_ids());
        }
        indexed.sort_by_key(ToString::to_string);
        indexed.dedup();
        let mut removed_entries = 0;
        for id in self.gone(indexed).await? {
            self.remove_from_indexes(id).await?;
            removed_entries += 1;
        }
        let mut removed_originals = 0;
        if originals {
            for id in self.gone(self.files.list().await?).await? {
                self.files.remove(id).await?;
                removed_originals += 1;
            }
        }
        Ok((removed_entries, removed_originals))
    }

    /// Those of `ids` whose documents no longer exist, asked of the store a batch at a time
    /// (not a query per id: this runs at every start, over every indexed document).
    async fn gone(&self, ids: Vec<DocumentId>) -> Result<Vec<DocumentId>, IngestError> {
        const BATCH: usize = 500;
        let mut gone = Vec::new();
        for batch in ids.chunks(BATCH) {
            let existing: HashSet<DocumentId> = self
                .store
                .existing_documents(batch)
                .await?
                .into_iter()
                .collect();
            gone.extend(batch.iter().filter(|id| !existing.contains(id)));
        }
        Ok(gone)
    }

    /// Removes the original of a document that is gone; a failure leaves an orphaned file,
    /// which is logged rather than undoing what was already deleted.
    async fn remove_original(&self, id: DocumentId) {
        if let Err(e) = self.files.remove(id).await {
            tracing::warn!(document = %id, error = %e, "could not remove the original file");
        }
    }

    /// Removes a document's chunks from the keyword index and its vectors, so searches stop
    /// finding it at once.
    async fn remove_from_indexes(&self, id: DocumentId) -> Result<(), IngestError> {
        self.indexes().remove(id).await
    }

    fn indexes(&self) -> Indexes {
        Indexes {
            keyword: Arc::clone(&self.index),
            vectors: self.semantic.as_ref().map(|s| Arc::clone(s.vectors())),
            indexed_here: self.indexed_here.clone(),
        }
    }

    /// Waits until an upload arrives (or `notify_worker` is called).
    pub async fn wait_for_work(&self) {
        self.wakeup.notified().await;
    }

    /// Waits until the store says a job may be runnable (another node queued one), at most
    /// `max`.
    pub async fn wait_for_jobs(&self, max: std::time::Duration) {
        self.store.wait_for_jobs(max).await;
    }

    /// Wakes one waiting worker.
    pub fn notify_worker(&self) {
        self.wakeup.notify_one();
    }

    /// Claims and processes one job as `worker`, to its end (the document is `ready`, `failed`
    /// or held for review when this returns). Returns false when no job was runnable.
    pub async fn process_next(&self, worker: &str) -> Result<bool, IngestError> {
        match self.start_next(worker).await? {
            Next::Idle => Ok(false),
            Next::Done => Ok(true),
            Next::Finishing(finishing) => {
                finishing.run().await?;
                Ok(true)
            }
        }
    }

    /// Claims and processes one job as `worker` up to the keyword index's commit; a document
    /// that got that far comes back as [`Next::Finishing`], for the caller to run while it
    /// goes on with the next job (see [`Finishing`]).
    pub async fn start_next(&self, worker: &str) -> Result<Next, IngestError> {
        let now = self.clock.now();
        let Some(job) = self
            .store
            .claim_job(worker, now, now + self.settings.lease)
            .await?
        else {
            return Ok(Next::Idle);
        };
        let span = tracing::info_span!("job", document = %job.document_id, attempt = job.attempts);
        let finish = self.process_claimed(job).instrument(span.clone()).await?;
        Ok(match finish {
            Some(finish) => Next::Finishing(Finishing::new(finish, span)),
            None => Next::Done,
        })
    }

    /// Processes `job` while renewing its lease (see [`Lease`]), so a document that takes
    /// longer than one lease is not claimed (and processed a second time) by another worker.
    /// When a renewal finds the lease lost, the work is dropped: the new owner does it.
    async fn process_claimed(&self, job: ClaimedJob) -> Result<Option<Finish>, IngestError> {
        // The document's chunks are on their way to the keyword index until this returns
        // (handed over, or not coming): the commit before them waits for them rather than
        // starting at a pause between other workers' documents.
        let _chunks_coming = self.index.expect_change();
        let lease = self.lease(&job);
        Ok(lease
            .keep_during(self.process_leased(&job))
            .await
            .transpose()?
            .flatten())
    }

    /// `job`'s lease, as this service renews it.
    fn lease(&self, job: &ClaimedJob) -> Lease {
        Lease {
            store: Arc::clone(&self.store),
            clock: Arc::clone(&self.clock),
            job: job.clone(),
            duration: self.settings.lease,
        }
    }

    async fn process_leased(&self, job: &ClaimedJob) -> Result<Option<Finish>, IngestError> {
        if job.attempts > self.settings.max_attempts {
            let message = format!(
                "processing was interrupted {} times (the server stopped or the work ran out of \
                 time); giving up",
                job.attempts - 1
            );
            self.store
                .fail_document(job, &message, self.clock.now())
                .await?;
            return Ok(None);
        }
        let original = match self.original(job).await {
            Ok(original) => original,
            Err(FilesError::NotFound(_)) => {
                self.store
                    .fail_document(job, "the original file is missing", self.clock.now())
                    .await?;
                return Ok(None);
            }
            Err(e) => {
                // Not the document's fault: leave the job leased. When the lease runs out it
                // is claimed again (counting an attempt), by this node or another.
                tracing::warn!(
                    error = %e,
                    "could not fetch the original; the job is retried when its lease expires"
                );
                return Err(e.into());
            }
        };
        let mut progress = Progress::start(
            Arc::clone(&self.store),
            Arc::clone(&self.clock),
            job.document_id,
        );
        let (pages, mut pages_read) = tokio::sync::watch::channel(None);
        let extract = self.extract(job, original.path(), pages);
        tokio::pin!(extract);
        // The pages the parser reports become the parsing stage's progress while it runs.
        let extracted = loop {
            tokio::select! {
                extracted = &mut extract => break extracted,
                Ok(()) = pages_read.changed() => {
                    let report = *pages_read.borrow_and_update();
                    if let Some((done, total)) = report {
                        progress.pages(u64::from(done), u64::from(total));
                    }
                }
            }
        };
        match extracted {
            Ok(processed) => return self.index_processed(job, processed, progress).await,
            Err(message) => {
                tracing::info!(error = %message, "document failed");
                let outcome = self
                    .store
                    .fail_document(job, &message, self.clock.now())
                    .await?;
                if outcome == FinishOutcome::LeaseLost {
                    tracing::warn!("lost the job's lease before failing it");
                }
            }
        }
        Ok(None)
    }

    /// The original as a local file for the parser: in place when the store keeps it on this
    /// disk, else fetched into the staging area for as long as the returned value lives.
    async fn original(&self, job: &ClaimedJob) -> Result<LocalOriginal, FilesError> {
        if let Some(path) = self.files.local_path(job.document_id) {
            return Ok(LocalOriginal::InPlace(path));
        }
        let copy = self.staging.temp_path("original-")?;
        self.files.fetch_to(job.document_id, &copy).await?;
        Ok(LocalOriginal::Fetched(copy))
    }

    /// Parses and chunks the document at `path` under the time budget, isolated as
    /// configured; the error is the document's `error`.
    /// With a model that counts its own tokens, the parse worker returns each page and
    /// section whole and they are cut here to fit the model's window: the tokenizer lives with
    /// the model in this process, not in the worker.
    async fn extract(
        &self,
        job: &ClaimedJob,
        path: &Path,
        pages: PagesRead,
    ) -> Result<Processed, String> {
        let tokens = match self.settings.chunking.count {
            TokenCounting::Model => self.semantic.as_ref().and_then(|s| s.embedder().tokens()),
            TokenCounting::Estimate => None,
        };
        let parse = ParseJob {
            path: path.to_owned(),
            name: job.document_name.clone(),
            content_type: job.content_type.clone(),
            chunking: if tokens.is_some() {
                WHOLE_SECTIONS
            } else {
                self.settings.chunking
            },
            limits: self.settings.parse_limits,
            ocr: self.ocr.clone().map(|mut ocr| {
                // OCR stops itself with a reason a little before the server kills the worker.
                let budget = self.settings.time_budget.as_secs();
                ocr.document_timeout_seconds = budget.saturating_sub((budget / 10).max(2)).max(1);
                ocr
            }),
            output: self.settings.output_limits,
        };
        let mut processed = parse_isolated(
            &self.settings.isolation,
            parse,
            self.settings.time_budget,
            pages,
        )
        .await?;
        let Some(tokens) = tokens else {
            return Ok(processed);
        };
        let params = self.settings.chunking;
        let sections = std::mem::take(&mut processed.chunks);
        processed.chunks = blocking(move || cut_to_window(sections, &*tokens, params))
            .await
            .map_err(|e| e.to_string())?;
        let limit = self.settings.output_limits.max_chunks;
        if processed.chunks.len() > limit as usize {
            return Err(ProcessingError::TooManyChunks { limit }.to_string());
        }
        Ok(processed)
    }

    /// Applies the review: a document the policy holds waits (`None`); after a decision the
    /// text goes on as it is or redacted.
    async fn screen(
        &self,
        job: &ClaimedJob,
        mut processed: Processed,
    ) -> Result<Option<Processed>, IngestError> {
        match self.store.review_decision(job.document_id).await? {
            Some(ReviewDecision::Approve) => {}
            Some(ReviewDecision::Redact) => {
                // Screening may have been turned off since; the decision still stands. The
                // name was redacted with the decision (`Review::decided`).
                let review = self
                    .review
                    .clone()
                    .unwrap_or_else(|| Review::new(Default::default()));
                review.redact(&mut processed.chunks);
            }
            None => {
                let Some(review) = &self.review else {
                    return Ok(Some(processed));
                };
                let Some(held) =
                    review.screen(&processed.chunks, processed.page_count, &job.document_name)
                else {
                    return Ok(Some(processed));
                };
                let types = held.pii_types.join(", ");
                match self
                    .store
                    .hold_document(job, held, self.clock.now())
                    .await?
                {
                    FinishOutcome::Stored => {
                        tracing::info!(types = %types, "personal data found; held for review")
                    }
                    FinishOutcome::DocumentGone => {}
                    FinishOutcome::LeaseLost => {
                        tracing::warn!("lost the job's lease before holding the document")
                    }
                }
                return Ok(None);
            }
        }
        Ok(Some(processed))
    }

    /// The server-side steps after parsing, under their own time budget and with panics
    /// caught: either ends the document as failed with the reason, and the worker goes on.
    async fn index_processed(
        &self,
        job: &ClaimedJob,
        processed: Processed,
        progress: Progress,
    ) -> Result<Option<Finish>, IngestError> {
        let budget = self.settings.index_time_budget;
        let steps = AssertUnwindSafe(self.store_processed(job, processed, progress)).catch_unwind();
        let message = match tokio::time::timeout(budget, steps).await {
            Ok(Ok(result)) => return result,
            Ok(Err(panic)) => format!("processing panicked: {}", panic_message(&*panic)),
            Err(_) => format!(
                "embedding and indexing took longer than the time budget ({} s)",
                budget.as_secs_f64()
            ),
        };
        tracing::error!(error = %message, "document failed");
        // Entries the steps may have written before they stopped go with the failure.
        self.remove_from_indexes(job.document_id).await?;
        let outcome = self
            .store
            .fail_document(job, &message, self.clock.now())
            .await?;
        if outcome == FinishOutcome::LeaseLost {
            tracing::warn!("lost the job's lease before failing it");
        }
        Ok(None)
    }

    /// Screens, embeds and submits the chunks to the keyword index; what is left (the commit
    /// and the transaction that makes the document ready) is returned as a [`Finish`].
    async fn store_processed(
        &self,
        job: &ClaimedJob,
        processed: Processed,
        mut progress: Progress,
    ) -> Result<Option<Finish>, IngestError> {
        progress.stage(ProcessingStage::Screening, None);
        let Some(processed) = self.screen(job, processed).await? else {
            return Ok(None);
        };
        let (doc, source) = (job.document_id, job.source_id);
        let title = crate::document_title(&job.document_name);
        let mut shared_vectors = None;
        if let Some(semantic) = &self.semantic {
            let total = processed.chunks.len();
            progress.stage(ProcessingStage::Embedding, Some(count(total)));
            // A batch at a time, so the document's progress can say how far embedding is.
            let mut vectors = Vec::with_capacity(total);
            for batch in processed.chunks.chunks(EMBED_BATCH) {
                match semantic.embed_chunks(&title, batch).await {
                    Ok(embedded) => vectors.extend(embedded),
                    Err(e) => {
                        tracing::error!(document = %doc, error = %e, "embedding failed");
                        let message = format!(
                            "could not embed the document's text: {}; the cause has been logged",
                            e.client_message()
                        );
                        self.store
                            .fail_document(job, &message, self.clock.now())
                            .await?;
                        return Ok(None);
                    }
                }
                progress.advance(count(vectors.len()));
            }
            progress.stage(ProcessingStage::Indexing, None);
            if self.store.is_shared() {
                // The other nodes copy these into their replicas instead of embedding again.
                shared_vectors = Some(ChunkVectors {
                    model: semantic.embedder().model_id().to_owned(),
                    vectors: vectors.iter().map(|(_, v)| v.clone()).collect(),
                });
            }
            let index = Arc::clone(semantic.vectors());
            blocking(move || index.replace_document(doc, source, &vectors)).await??;
        }
        if self.semantic.is_none() {
            progress.stage(ProcessingStage::Indexing, None);
        }
        let indexed: Vec<IndexedChunk> = processed
            .chunks
            .iter()
            .map(|c| IndexedChunk {
                title: title.clone(),
                ordinal: c.ordinal,
                page: c.page,
                section: c.section.clone(),
                content: c.content.clone(),
            })
            .collect();
        let committed = self.index.submit_replace(doc, source, indexed);
        let finisher = self
            .finisher
            .get_or_init(|| Finisher::start(Arc::clone(&self.store), Arc::clone(&self.clock)))
            .clone();
        Ok(Some(Finish {
            finisher,
            indexes: self.indexes(),
            lease: self.lease(job),
            document: ProcessedDocument {
                chunks: processed.chunks,
                page_count: processed.page_count,
                vectors: shared_vectors,
            },
            progress,
            committed,
        }))
    }
}

/// What [`Ingest::start_next`] did.
#[derive(Debug)]
pub enum Next {
    /// No job was runnable.
    Idle,
    /// A job was processed to its end.
    Done,
    /// A job's document awaits its commit: run this to finish it.
    Finishing(Finishing),
}

/// The store answered fewer documents than it was given: a broken store, never the upload's
/// fault.
fn missing() -> IngestError {
    StoreError::Corrupt("the store created fewer documents than it was given".into()).into()
}

/// A length as a progress count.
fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// An original the parser can read: the store's own file, or a fetched copy removed on drop.
enum LocalOriginal {
    InPlace(PathBuf),
    Fetched(TempPath),
}

impl LocalOriginal {
    fn path(&self) -> &Path {
        match self {
            Self::InPlace(path) => path,
            Self::Fetched(copy) => copy,
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

/// The last path component of a client-supplied file name, without control characters, at
/// most 255 characters; `upload` when nothing is left.
pub fn clean_file_name(raw: &str) -> String {
    let base = raw.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = base
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() || cleaned == "." || cleaned == ".." {
        "upload".to_owned()
    } else {
        cleaned.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_lose_directories_and_control_characters() {
        assert_eq!(clean_file_name("../../etc/passwd"), "passwd");
        assert_eq!(clean_file_name("C:\\Users\\me\\report.md"), "report.md");
        assert_eq!(clean_file_name("a\u{0}b\n.txt"), "ab.txt");
        assert_eq!(clean_file_name(""), "upload");
        assert_eq!(clean_file_name(".."), "upload");
        assert_eq!(clean_file_name(&"x".repeat(300)).len(), 255);
    }
}
