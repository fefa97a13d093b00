//! The end of a document's processing, once its chunks are handed to the keyword index: wait
//! for the commit that makes them searchable, then store them and mark the document `ready`.
//!
//! Commits are grouped (`quire_search::KeywordIndex::submit_replace`), so a worker does not wait
//! for its document's commit: it hands this step to a task of its [`crate::JobRunner`] and claims
//! its next job, and the commit covers the documents of every worker that arrived meanwhile. A
//! document is `ready` only after the commit that includes it, as before; a crash before that
//! leaves its job leased, and the job is processed again when the lease runs out.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use quire_core::{Clock, DocumentId};
use quire_search::{Committed, KeywordIndex, VectorIndex};
use quire_store::{ClaimedJob, FinishOutcome, ProcessedDocument, Store};

use crate::follow::IndexedHere;
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
}

impl Indexes {
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

/// A document whose chunks await their commit: what is left to do for it.
pub(crate) struct Finish {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) indexes: Indexes,
    pub(crate) job: ClaimedJob,
    pub(crate) document: ProcessedDocument,
    pub(crate) progress: Progress,
    pub(crate) committed: Committed,
}

impl Finish {
    /// Waits for the commit, then stores the chunks and makes the document ready in one
    /// transaction; a failed commit fails the document instead.
    pub(crate) async fn run(self) -> Result<(), IngestError> {
        let Self {
            store,
            clock,
            indexes,
            job,
            document,
            mut progress,
            committed,
        } = self;
        let id = job.document_id;
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
        match store.finish_document(&job, document, clock.now()).await? {
            FinishOutcome::Stored => {
                if let Some(indexed_here) = &indexes.indexed_here {
                    indexed_here.record(id);
                }
                tracing::info!(chunks = chunk_count, "document ready");
            }
            // Deleted while we worked: take back what was just indexed.
            FinishOutcome::DocumentGone => indexes.remove(id).await?,
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
