//! What a worker tells the store (for the API and the admin interface) and the metrics (for
//! Prometheus) while it processes a document.
//!
//! The worker keeps its document's progress in memory; a reporter task writes it to the store
//! at most once per [`REPORT_EVERY`], each change within one interval of it, and nothing for a
//! document finished within the first interval: the store shows a claimed document without a
//! report as parsing since its claim. Writing every stage change at once cost three write
//! transactions a document, which took a fifth of keyword-only ingest's CPU
//! (`docs/performance.md`, "Progress written by a reporter"), for documents done long before
//! anyone could poll them. A failed write is logged and forgotten: progress is for people
//! watching, never a reason to fail a document.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quire_core::{Clock, DocumentId};
use quire_store::{DocumentProgress, ProcessingStage, Store};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Shortest time between two progress writes, and the longest a change waits to be written.
pub const REPORT_EVERY: Duration = Duration::from_secs(1);

/// Histogram of each stage's duration, labelled `stage` (`parse`, `screen`, `embed`, `index`,
/// and `store`: the transaction that stores the chunks and makes the document ready, timed
/// apart from `index` though the document's progress still says indexing).
pub const STAGE_SECONDS: &str = "quire_ingest_stage_duration_seconds";
/// Counter of chunks embedded by workers and by the start-up backfill.
pub const CHUNKS_EMBEDDED: &str = "quire_chunks_embedded_total";

/// Reports the progress of one document's processing; dropping it ends the last stage and
/// stops the reporting.
pub(crate) struct Progress {
    clock: Arc<dyn Clock>,
    latest: watch::Sender<DocumentProgress>,
    reporter: JoinHandle<()>,
    stage_started: Instant,
    /// The stage's time is now the store transaction's (see [`Progress::storing`]).
    storing: bool,
}

impl Progress {
    /// Starts reporting for `document`, at the parsing stage.
    pub(crate) fn start(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        document: DocumentId,
    ) -> Self {
        Self::start_every(store, clock, document, REPORT_EVERY)
    }

    fn start_every(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        document: DocumentId,
        every: Duration,
    ) -> Self {
        let (latest, changes) = watch::channel(DocumentProgress::claimed(clock.now()));
        let reporter = tokio::spawn(report(store, document, changes, every));
        Self {
            clock,
            latest,
            reporter,
            stage_started: Instant::now(),
            storing: false,
        }
    }

    /// Ends the current stage (recording its duration) and starts `stage`, which counts up
    /// to `total` units when given.
    pub(crate) fn stage(&mut self, stage: ProcessingStage, total: Option<u64>) {
        self.record_stage_time();
        self.stage_started = Instant::now();
        self.latest.send_replace(DocumentProgress {
            stage,
            done: total.map(|_| 0),
            total,
            updated_at: self.clock.now(),
        });
    }

    /// `done` units of the current stage are done.
    pub(crate) fn advance(&mut self, done: u64) {
        let now = self.clock.now();
        self.latest.send_modify(|progress| {
            progress.done = Some(done);
            progress.updated_at = now;
        });
    }

    /// Ends the indexing time and times the store transaction under `store` from now on;
    /// nothing is reported, as clients see one indexing stage until the document is ready.
    pub(crate) fn storing(&mut self) {
        self.record_stage_time();
        self.storing = true;
        self.stage_started = Instant::now();
    }

    /// Page `done` of `total` has been parsed (the parsing stage counts pages once the parser
    /// knows how many there are).
    pub(crate) fn pages(&mut self, done: u64, total: u64) {
        let now = self.clock.now();
        self.latest.send_if_modified(|progress| {
            if progress.stage != ProcessingStage::Parsing {
                return false;
            }
            progress.done = Some(done);
            progress.total = Some(total);
            progress.updated_at = now;
            true
        });
    }

    fn record_stage_time(&self) {
        let label = match self.latest.borrow().stage {
            _ if self.storing => "store",
            ProcessingStage::Parsing => "parse",
            ProcessingStage::Screening => "screen",
            ProcessingStage::Embedding => "embed",
            ProcessingStage::Indexing => "index",
        };
        metrics::histogram!(STAGE_SECONDS, "stage" => label)
            .record(self.stage_started.elapsed().as_secs_f64());
    }
}

impl Drop for Progress {
    /// The last stage ends with the report: the document is stored, failed or held.
    fn drop(&mut self) {
        self.record_stage_time();
        self.reporter.abort();
    }
}

/// Writes `document`'s progress as it changes: the first change once `every` has passed since
/// the start, then each later one at least `every` after the write before it. Ends when the
/// [`Progress`] is dropped.
async fn report(
    store: Arc<dyn Store>,
    document: DocumentId,
    mut changes: watch::Receiver<DocumentProgress>,
    every: Duration,
) {
    loop {
        tokio::time::sleep(every).await;
        if changes.changed().await.is_err() {
            return;
        }
        let progress = changes.borrow_and_update().clone();
        if let Err(e) = store.set_document_progress(document, &progress).await {
            tracing::debug!(error = %e, "could not record the document's progress");
        }
    }
}

#[cfg(test)]
mod tests {
    use quire_core::SystemClock;

    use super::*;

    /// A store with one document a worker has claimed (so its progress is shown).
    async fn processing_document(dir: &std::path::Path) -> (Arc<dyn Store>, DocumentId) {
        let (store, source) = crate::test_store::with_source(dir).await;
        let job = crate::test_store::claimed_document(&*store, source, 1).await;
        (store, job.document_id)
    }

    async fn shown(
        store: &dyn Store,
        id: DocumentId,
    ) -> (ProcessingStage, Option<u64>, Option<u64>) {
        let p = store.document_progress(id).await.unwrap().unwrap();
        (p.stage, p.done, p.total)
    }

    /// Polls until the store shows `expected`, for at most ten seconds.
    async fn shown_soon(
        store: &dyn Store,
        id: DocumentId,
        expected: (ProcessingStage, Option<u64>, Option<u64>),
    ) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while shown(store, id).await != expected {
            assert!(Instant::now() < deadline, "never shown: {expected:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn a_document_done_within_the_interval_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (store, id) = processing_document(dir.path()).await;
        let every = Duration::from_secs(1);
        let mut progress =
            Progress::start_every(Arc::clone(&store), Arc::new(SystemClock), id, every);
        progress.stage(ProcessingStage::Screening, None);
        progress.stage(ProcessingStage::Indexing, None);
        drop(progress);
        tokio::time::sleep(every + every / 2).await;
        // What the store shows for a claimed document without a report.
        assert_eq!(
            shown(&*store, id).await,
            (ProcessingStage::Parsing, None, None)
        );
    }

    #[tokio::test]
    async fn changes_are_written_within_an_interval_and_at_most_once_per_interval() {
        let dir = tempfile::tempdir().unwrap();
        let (store, id) = processing_document(dir.path()).await;
        let every = Duration::from_secs(1);
        let started = Instant::now();
        let mut progress =
            Progress::start_every(Arc::clone(&store), Arc::new(SystemClock), id, every);
        progress.pages(1, 3);
        assert_eq!(
            shown(&*store, id).await,
            (ProcessingStage::Parsing, None, None)
        );
        shown_soon(&*store, id, (ProcessingStage::Parsing, Some(1), Some(3))).await;
        assert!(started.elapsed() >= every, "written before the interval");

        progress.stage(ProcessingStage::Embedding, Some(400));
        progress.advance(128);
        let written = Instant::now();
        // The last write was just now: these wait for the interval.
        assert_eq!(
            shown(&*store, id).await,
            (ProcessingStage::Parsing, Some(1), Some(3))
        );
        shown_soon(
            &*store,
            id,
            (ProcessingStage::Embedding, Some(128), Some(400)),
        )
        .await;
        assert!(
            written.elapsed() >= every / 2,
            "written too soon after the last"
        );

        // Pages count only while parsing.
        progress.pages(2, 3);
        assert_eq!(progress.latest.borrow().done, Some(128));

        progress.stage(ProcessingStage::Indexing, None);
        shown_soon(&*store, id, (ProcessingStage::Indexing, None, None)).await;
    }
}
