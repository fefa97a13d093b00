//! Processing jobs: claiming one, keeping its lease, parsing the original where the settings
//! say, screening, embedding and indexing its chunks, and handing the rest (the commit and the
//! transaction that makes the document ready) to a [`Finish`].

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::FutureExt;
use quire_files::FilesError;
use quire_search::IndexedChunk;
use quire_store::{
    ChunkVectors, ClaimedJob, FinishOutcome, ProcessedDocument, ProcessingStage, ReviewDecision,
};
use tempfile::TempPath;
use tracing::Instrument;

use super::{Ingest, IngestError, blocking, panic_message};
use crate::chunker::{TokenCounting, WHOLE_SECTIONS, cut_to_window};
use crate::finish::{Finish, Finisher, Finishing};
use crate::isolation::{PagesRead, ParseJob, parse_isolated};
use crate::lease::Lease;
use crate::pipeline::{Processed, ProcessingError};
use crate::progress::Progress;
use crate::review::Review;

/// Chunks embedded per call to the embedder: small enough that the document's progress moves
/// often, large enough that the embedder still fills its own batches (`docs/performance.md`).
const EMBED_BATCH: usize = 128;

/// How long a job whose original could not be fetched waits before it is claimed again.
const FETCH_RETRY_SECONDS: i64 = 600;

impl Ingest {
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
                // Not the document's fault: leave the job leased for the retry delay, not one
                // short lease, so an outage does not use up its attempts in a minute or two.
                // Then it is claimed again (counting an attempt), by this node or another.
                let now = self.clock.now();
                let until = now + chrono::Duration::seconds(FETCH_RETRY_SECONDS);
                if let Err(renewal) = self.store.renew_lease(job, now, until).await {
                    tracing::warn!(error = %renewal, "could not hold the job for its retry");
                }
                tracing::warn!(
                    error = %e,
                    "could not fetch the original; the job is retried in {FETCH_RETRY_SECONDS} s"
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
        // Each version's original is stored under its index id.
        if let Some(path) = self.files.local_path(job.index_id) {
            return Ok(LocalOriginal::InPlace(path));
        }
        let copy = self.staging.temp_path("original-")?;
        self.files.fetch_to(job.index_id, &copy).await?;
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
            TokenCounting::Model => self.semantic.get().and_then(|s| s.embedder().tokens()),
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
                    FinishOutcome::DocumentGone | FinishOutcome::Superseded => {}
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
        self.remove_from_indexes(job.index_id).await?;
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
        // The version's entries go under its index id, beside the live version's.
        let (doc, source) = (job.index_id, job.source_id);
        let title = crate::document_title(&job.document_name);
        let mut shared_vectors = None;
        if let Some(semantic) = self.semantic.get() {
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
        if self.semantic.get().is_none() {
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
