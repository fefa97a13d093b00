//! The end of a document's processing, once its chunks are handed to the keyword index: wait
//! for the commit that makes them searchable, then store them and mark the document `ready`.
//!
//! Commits are grouped (`quire_search::KeywordIndex::submit_replace`), so a worker does not wait
//! for its document's commit: it hands this step to a task of its [`crate::JobRunner`] and claims
//! its next job, and the commit covers the documents of every worker that arrived meanwhile. A
//! document is `ready` only after the commit that includes it, as before; a crash before that
//! leaves its job leased, and the job is processed again when the lease runs out.
//!
//! The documents one commit covers come out of it together, and the [`Finisher`] stores them
//! together: every document that waits when the store is free goes into one call of
//! [`Store::finish_documents`], one transaction on SQLite, instead of a transaction each.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::FutureExt;
use quire_core::{Clock, DocumentId};
use quire_files::OriginalStore;
use quire_search::{Committed, KeywordIndex, VectorIndex};
use quire_store::{ClaimedJob, FinishOutcome, ProcessedDocument, Store};
use tokio::sync::{mpsc, oneshot};

use crate::follow::IndexedHere;
use crate::lease::Lease;
use crate::progress::Progress;
use crate::service::{IngestError, blocking};

/// The keyword index and, with semantic search, the vector index: where a document's entries
/// live besides the store.
#[derive(Clone)]
pub(crate) struct Indexes {
    pub(crate) keyword: Arc<KeywordIndex>,
    pub(crate) vectors: Option<Arc<VectorIndex>>,
    /// On a shared store: where documents indexed here and made ready are recorded, so this
    /// node's feed follower does not index them again.
    pub(crate) indexed_here: Option<IndexedHere>,
    /// Where the versions' originals are kept.
    pub(crate) originals: Arc<dyn OriginalStore>,
}

impl Indexes {
    /// Removes the original of a version no longer wanted (replaced or superseded); a failure
    /// leaves a file the next start's sweep removes.
    pub(crate) async fn forget_original(&self, id: DocumentId) {
        if let Err(e) = self.originals.remove(id).await {
            tracing::warn!(version = %id, error = %e, "could not remove a replaced original");
        }
    }

    /// Removes a document's chunks and vectors, so searches stop finding it at once.
    pub(crate) async fn remove(&self, id: DocumentId) -> Result<(), IngestError> {
        self.keyword.submit_delete(id).wait().await?;
        if let Some(vectors) = &self.vectors {
            let vectors = Arc::clone(vectors);
            blocking(move || vectors.delete_document(id)).await??;
        }
        Ok(())
    }
}

/// Most documents stored in one call of [`Store::finish_documents`].
const MAX_BATCH_DOCUMENTS: usize = 256;
/// Most chunks stored in one call, unless one document has more.
const MAX_BATCH_CHUNKS: usize = 10_000;

/// Stores finished documents in batches: a task takes every document waiting for it, stores them
/// in one call, answers each, and takes the next batch. Clones share the task, which ends when
/// the last clone is dropped.
#[derive(Clone)]
pub(crate) struct Finisher {
    waiting: mpsc::UnboundedSender<Waiting>,
}

/// A document waiting to be stored, and where its outcome goes.
struct Waiting {
    job: ClaimedJob,
    document: ProcessedDocument,
    outcome: oneshot::Sender<Result<FinishOutcome, String>>,
}

impl Finisher {
    /// Starts the task that stores documents in `store`, timed by `clock`.
    pub(crate) fn start(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        let (waiting, queue) = mpsc::unbounded_channel();
        tokio::spawn(store_in_batches(store, clock, queue));
        Self { waiting }
    }

    /// Stores `document`'s chunks and makes it ready, with the other documents waiting.
    pub(crate) async fn finish(
        &self,
        job: ClaimedJob,
        document: ProcessedDocument,
    ) -> Result<FinishOutcome, IngestError> {
        let (outcome, answer) = oneshot::channel();
        let waiting = Waiting {
            job,
            document,
            outcome,
        };
        if self.waiting.send(waiting).is_err() {
            return Err(IngestError::Finish("the finishing task has stopped".into()));
        }
        match answer.await {
            Ok(outcome) => outcome.map_err(IngestError::Finish),
            Err(_) => Err(IngestError::Finish(
                "the finishing task dropped the document".into(),
            )),
        }
    }
}

/// The [`Finisher`]'s task.
async fn store_in_batches(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    mut queue: mpsc::UnboundedReceiver<Waiting>,
) {
    while let Some(first) = queue.recv().await {
        let mut chunks = first.document.chunks.len();
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH_DOCUMENTS && chunks < MAX_BATCH_CHUNKS {
            let Ok(next) = queue.try_recv() else {
                break;
            };
            chunks += next.document.chunks.len();
            batch.push(next);
        }
        let (finished, outcomes): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|w| ((w.job, w.document), w.outcome))
            .unzip();
        // A panic fails this batch's documents, not every later one.
        let stored = AssertUnwindSafe(store.finish_documents(&finished, clock.now()))
            .catch_unwind()
            .await;
        match stored {
            Ok(Ok(stored)) => {
                for (outcome, stored) in outcomes.into_iter().zip(stored) {
                    let _ = outcome.send(Ok(stored));
                }
            }
            Ok(Err(e)) => answer_all(outcomes, &e.to_string()),
            Err(panic) => answer_all(
                outcomes,
                &format!(
                    "storing panicked: {}",
                    crate::service::panic_message(&*panic)
                ),
            ),
        }
    }
}

fn answer_all(outcomes: Vec<oneshot::Sender<Result<FinishOutcome, String>>>, error: &str) {
    for outcome in outcomes {
        let _ = outcome.send(Err(error.to_owned()));
    }
}

/// A document whose chunks await their commit: what is left to do for it.
pub(crate) struct Finish {
    pub(crate) finisher: Finisher,
    pub(crate) indexes: Indexes,
    /// The job, with the store and clock it is finished with; its lease is renewed until the
    /// document is stored, since a large document's commit and transaction can outlast it.
    pub(crate) lease: Lease,
    pub(crate) document: ProcessedDocument,
    pub(crate) progress: Progress,
    pub(crate) committed: Committed,
}

impl Finish {
    /// Waits for the commit, then has the [`Finisher`] store the chunks and make the document
    /// ready, with the other documents waiting for it; a failed commit fails the document
    /// instead. The job's lease is renewed meanwhile; when it is lost, the new owner finishes.
    pub(crate) async fn run(self) -> Result<(), IngestError> {
        let lease = self.lease.clone();
        lease.keep_during(self.finish()).await.unwrap_or(Ok(()))
    }

    async fn finish(self) -> Result<(), IngestError> {
        let Self {
            finisher,
            indexes,
            lease:
                Lease {
                    store,
                    clock,
                    job,
                    duration: _,
                },
            document,
            mut progress,
            committed,
        } = self;
        let id = job.index_id;
        let replaces = job.replaces;
        if let Err(e) = committed.wait().await {
            tracing::error!(error = %e, "indexing failed");
            // The failed batch was rolled back; the vectors go with the failure.
            if let Err(e) = indexes.remove(id).await {
                tracing::warn!(error = %e, "could not remove the failed document's entries");
            }
            store
                .fail_document(
                    &job,
                    "internal error while indexing; see the server log",
                    clock.now(),
                )
                .await?;
            return Ok(());
        }
        let chunk_count = document.chunks.len();
        progress.storing();
        match finisher.finish(job, document).await? {
            FinishOutcome::Stored => {
                if let Some(indexed_here) = &indexes.indexed_here {
                    indexed_here.record(id);
                }
                // The version it replaced is no longer resolvable here once this one is live,
                // and its original is not served any more.
                if let Some(replaced) = replaces {
                    indexes.remove(replaced).await?;
                    indexes.forget_original(replaced).await;
                }
                tracing::info!(chunks = chunk_count, "document ready");
            }
            // Deleted, or replaced by a newer version, while we worked: take back what was
            // just indexed.
            FinishOutcome::DocumentGone => indexes.remove(id).await?,
            FinishOutcome::Superseded => {
                indexes.remove(id).await?;
                indexes.forget_original(id).await;
            }
            FinishOutcome::LeaseLost => {
                tracing::warn!("lost the job's lease; another worker has it")
            }
        }
        Ok(())
    }
}

/// A document's last step, ready to run apart from the worker that processed it.
pub struct Finishing {
    chunks: usize,
    future: Pin<Box<dyn Future<Output = Result<(), IngestError>> + Send>>,
}

impl Finishing {
    pub(crate) fn new(finish: Finish, span: tracing::Span) -> Self {
        use tracing::Instrument as _;
        Self {
            chunks: finish.document.chunks.len(),
            future: Box::pin(finish.run().instrument(span)),
        }
    }

    /// How many chunks the document holds in memory until it is finished.
    pub fn chunks(&self) -> usize {
        self.chunks
    }

    /// Runs the step to its end.
    pub async fn run(self) -> Result<(), IngestError> {
        self.future.await
    }
}

impl std::fmt::Debug for Finishing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finishing")
            .field("chunks", &self.chunks)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::future::join_all;
    use quire_core::{ChunkDraft, ManualClock, SourceScope, SystemClock};

    use super::*;
    use crate::test_store::{claimed_document, claimed_document_at, with_source};

    fn processed(chunks: u32) -> ProcessedDocument {
        ProcessedDocument {
            chunks: (0..chunks)
                .map(|ordinal| ChunkDraft {
                    ordinal,
                    page: 1,
                    section: String::new(),
                    content: format!("chunk {ordinal}"),
                })
                .collect(),
            page_count: 1,
            vectors: None,
        }
    }

    /// Documents sent to the finisher at once are stored together, and each waiter gets its
    /// own document's outcome: one deleted meanwhile is gone, the others are ready with their
    /// own chunks.
    #[tokio::test]
    async fn documents_finished_at_once_each_get_their_own_outcome() {
        let dir = tempfile::tempdir().unwrap();
        let (store, source) = with_source(dir.path()).await;
        let mut jobs = Vec::new();
        for n in 0..20 {
            jobs.push(claimed_document(&*store, source, n).await);
        }
        let deleted = jobs[7].document_id;
        store
            .delete_document(&SourceScope::All, source, deleted, chrono::Utc::now())
            .await
            .unwrap();

        let finisher = Finisher::start(Arc::clone(&store), Arc::new(SystemClock));
        let finishes = jobs.iter().zip(1..).map(|(job, chunks)| {
            let finisher = finisher.clone();
            let job = job.clone();
            async move { finisher.finish(job, processed(chunks)).await.unwrap() }
        });
        let outcomes = join_all(finishes).await;
        for ((job, chunks), outcome) in jobs.iter().zip(1..).zip(outcomes) {
            if job.document_id == deleted {
                assert_eq!(outcome, FinishOutcome::DocumentGone);
                continue;
            }
            assert_eq!(outcome, FinishOutcome::Stored);
            let stored = store.document_chunks(job.document_id).await.unwrap();
            assert_eq!(stored.len(), chunks);
        }
    }

    /// A document whose commit and transaction outlast its lease keeps its job: the lease is
    /// renewed while it waits to be stored, so no other worker takes the job over.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_lease_is_kept_while_the_document_waits_to_be_stored() {
        let dir = tempfile::tempdir().unwrap();
        let (store, source) = with_source(dir.path()).await;
        let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
        let lease = chrono::Duration::milliseconds(600);
        let job = claimed_document_at(&*store, source, 1, clock.now(), lease).await;
        let keyword = Arc::new(KeywordIndex::open(&dir.path().join("index")).unwrap());
        // A finisher nobody serves yet: the document waits to be stored as long as the test
        // likes.
        let (waiting, mut queue) = mpsc::unbounded_channel();
        let finish = Finish {
            finisher: Finisher { waiting },
            indexes: Indexes {
                keyword: Arc::clone(&keyword),
                vectors: None,
                indexed_here: None,
                originals: Arc::new(
                    quire_files::LocalFiles::open(&dir.path().join("files")).unwrap(),
                ),
            },
            lease: Lease {
                store: Arc::clone(&store),
                clock: clock.clone(),
                job: job.clone(),
                duration: lease,
            },
            document: processed(3),
            progress: Progress::start(Arc::clone(&store), clock.clone(), job.document_id),
            committed: keyword.submit_replace(job.document_id, source, Vec::new()),
        };
        let running = tokio::spawn(finish.run());
        let stored = tokio::time::timeout(Duration::from_secs(10), queue.recv())
            .await
            .expect("the document never reached the finisher")
            .unwrap();
        // Four leases pass on the clock, each step a third of a lease and followed by at least
        // one renewal (every third of a lease, 200 ms).
        for _ in 0..12 {
            clock.advance(chrono::Duration::milliseconds(200));
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = clock.now();
            let other = store.claim_job("w2", now, now + lease).await.unwrap();
            assert!(
                other.is_none(),
                "another worker took the job while it waited"
            );
        }
        let outcome = store
            .finish_documents(&[(stored.job, stored.document)], clock.now())
            .await
            .unwrap();
        assert_eq!(outcome, [FinishOutcome::Stored]);
        let _ = stored.outcome.send(Ok(FinishOutcome::Stored));
        running.await.unwrap().unwrap();
    }
}
