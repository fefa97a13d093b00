//! What a worker tells the store (for the API and the admin interface) and the metrics (for
//! Prometheus) while it processes a document.
//!
//! Progress is written at every stage change and, within a stage, at most once per
//! [`REPORT_EVERY`], so a document of thousands of chunks costs a handful of small writes, not
//! one per batch. A failed write is logged and forgotten: progress is for people watching,
//! never a reason to fail a document.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quire_core::{Clock, DocumentId};
use quire_store::{DocumentProgress, ProcessingStage, Store};

/// Shortest time between two progress writes within one stage.
pub const REPORT_EVERY: Duration = Duration::from_secs(1);

/// Histogram of each stage's duration, labelled `stage` (`parse`, `screen`, `embed`, `index`,
/// and `store`: the transaction that stores the chunks and makes the document ready, timed
/// apart from `index` though the document's progress still says indexing).
pub const STAGE_SECONDS: &str = "quire_ingest_stage_duration_seconds";
/// Counter of chunks embedded by workers and by the start-up backfill.
pub const CHUNKS_EMBEDDED: &str = "quire_chunks_embedded_total";

/// Reports the progress of one document's processing; dropping it ends the last stage.
pub(crate) struct Progress {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    document: DocumentId,
    stage: ProcessingStage,
    total: Option<u64>,
    last_write: Option<Instant>,
    stage_started: Instant,
    /// The stage's time is now the store transaction's (see [`Progress::storing`]).
    storing: bool,
    /// Shortest time between two writes within a stage ([`REPORT_EVERY`] but in tests).
    every: Duration,
}

impl Progress {
    /// Starts reporting for `document`, at the parsing stage.
    pub(crate) async fn start(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        document: DocumentId,
    ) -> Self {
        Self::start_every(store, clock, document, REPORT_EVERY).await
    }

    async fn start_every(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        document: DocumentId,
        every: Duration,
    ) -> Self {
        let mut progress = Self {
            store,
            clock,
            document,
            stage: ProcessingStage::Parsing,
            total: None,
            last_write: None,
            stage_started: Instant::now(),
            storing: false,
            every,
        };
        progress.write(None).await;
        progress
    }

    /// Ends the current stage (recording its duration) and starts `stage`, which counts up
    /// to `total` units when given; the change is written at once.
    pub(crate) async fn stage(&mut self, stage: ProcessingStage, total: Option<u64>) {
        self.record_stage_time();
        self.stage = stage;
        self.total = total;
        self.stage_started = Instant::now();
        self.write(total.map(|_| 0)).await;
    }

    /// `done` units of the current stage are done; written when [`REPORT_EVERY`] has passed
    /// since the last write (the stage's end is written by the next stage or the outcome).
    pub(crate) async fn advance(&mut self, done: u64) {
        if self
            .last_write
            .is_none_or(|last| last.elapsed() >= self.every)
        {
            self.write(Some(done)).await;
        }
    }

    /// Ends the indexing time and times the store transaction under `store` from now on;
    /// nothing is written, as clients see one indexing stage until the document is ready.
    pub(crate) fn storing(&mut self) {
        self.record_stage_time();
        self.storing = true;
        self.stage_started = Instant::now();
    }

    /// Page `done` of `total` has been parsed (the parsing stage counts pages once the parser
    /// knows how many there are); written as [`Progress::advance`] is.
    pub(crate) async fn pages(&mut self, done: u64, total: u64) {
        if self.stage == ProcessingStage::Parsing && self.total != Some(total) {
            self.total = Some(total);
            // The first count of the stage is shown at once, as a stage change is.
            self.last_write = None;
        }
        self.advance(done).await;
    }

    fn record_stage_time(&self) {
        let label = match self.stage {
            _ if self.storing => "store",
            ProcessingStage::Parsing => "parse",
            ProcessingStage::Screening => "screen",
            ProcessingStage::Embedding => "embed",
            ProcessingStage::Indexing => "index",
        };
        metrics::histogram!(STAGE_SECONDS, "stage" => label)
            .record(self.stage_started.elapsed().as_secs_f64());
    }

    async fn write(&mut self, done: Option<u64>) {
        self.last_write = Some(Instant::now());
        let progress = DocumentProgress {
            stage: self.stage,
            done,
            total: self.total,
            updated_at: self.clock.now(),
        };
        if let Err(e) = self
            .store
            .set_document_progress(self.document, &progress)
            .await
        {
            tracing::debug!(error = %e, "could not record the document's progress");
        }
    }
}

impl Drop for Progress {
    /// The last stage ends with the report: the document is stored, failed or held.
    fn drop(&mut self) {
        self.record_stage_time();
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use quire_core::{
        NewDocument, NewSource, SourceDescription, SourceId, SourceName, SourceType, SystemClock,
    };
    use quire_store::SqliteStore;

    use super::*;

    /// A store with one document a worker has claimed (so its progress is shown).
    async fn processing_document(dir: &std::path::Path) -> (Arc<dyn Store>, DocumentId) {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("q.db")).await.unwrap());
        let now = Utc::now();
        let source = store
            .create_source(NewSource {
                id: SourceId::new(),
                name: SourceName::parse("S").unwrap(),
                description: SourceDescription::default(),
                source_type: SourceType::Network,
                created_at: now,
            })
            .await
            .unwrap()
            .id;
        let id = DocumentId::new();
        store
            .create_document(NewDocument {
                id,
                source_id: source,
                name: "big.txt".into(),
                content_type: "text/plain".into(),
                size: 3,
                sha256: "ab".repeat(32),
                created_at: now,
            })
            .await
            .unwrap();
        let lease = now + chrono::Duration::minutes(5);
        store.claim_job("w", now, lease).await.unwrap().unwrap();
        (store, id)
    }

    async fn shown(
        store: &dyn Store,
        id: DocumentId,
    ) -> (ProcessingStage, Option<u64>, Option<u64>) {
        let p = store.document_progress(id).await.unwrap().unwrap();
        (p.stage, p.done, p.total)
    }

    #[tokio::test]
    async fn stage_changes_are_written_at_once_and_counts_at_most_once_per_interval() {
        let dir = tempfile::tempdir().unwrap();
        let (store, id) = processing_document(dir.path()).await;
        let every = Duration::from_millis(300);
        let mut progress =
            Progress::start_every(Arc::clone(&store), Arc::new(SystemClock), id, every).await;
        assert_eq!(
            shown(&*store, id).await,
            (ProcessingStage::Parsing, None, None)
        );

        progress.stage(ProcessingStage::Embedding, Some(400)).await;
        assert_eq!(
            shown(&*store, id).await,
            (ProcessingStage::Embedding, Some(0), Some(400))
        );
        // Within the interval: not written.
        progress.advance(128).await;
        progress.advance(256).await;
        assert_eq!(
            shown(&*store, id).await,
            (ProcessingStage::Embedding, Some(0), Some(400))
        );
        // After it: the latest count is.
        tokio::time::sleep(every).await;
        progress.advance(384).await;
        assert_eq!(
            shown(&*store, id).await,
            (ProcessingStage::Embedding, Some(384), Some(400))
        );

        progress.stage(ProcessingStage::Indexing, None).await;
        assert_eq!(
            shown(&*store, id).await,
            (ProcessingStage::Indexing, None, None)
        );
    }
}
