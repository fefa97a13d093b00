//! Jobs that outlast their lease or their time budget, panics after parsing, and deletions
//! cut short: a slow document is processed once (its lease is renewed), one that takes too
//! long fails with the reason, a panic fails its document while the worker goes on, and what a
//! crashed deletion left behind is swept at start. Workers go on while their documents wait for
//! the keyword index's grouped commit, and every document they started ends ready.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use quire_core::embed::{Embedder, ModelError, Purpose};
use quire_core::{
    Clock, DocumentRecord, DocumentStatus, ManualClock, NewSource, SourceDescription, SourceId,
    SourceName, SourceScope, SourceType,
};
use quire_files::LocalFiles;
use quire_ingest::{
    ChunkingParams, Ingest, IngestSettings, Isolation, JobRunner, Next, ParseLimits, Semantic,
    Staging, Upload, WorkerSettings,
};
use quire_search::KeywordIndex;
use quire_store::{Store, StoreLocation};
use tempfile::TempDir;
use tokio::sync::Semaphore;

/// Text that makes the embedder wait for the gate.
const SLOW: &str = "SLOWMARKER";
/// Text that makes the embedder panic.
const PANIC: &str = "PANICMARKER";

/// A test embedder: waits on `gate` for texts holding [`SLOW`], panics on [`PANIC`], and
/// counts its calls.
#[derive(Debug)]
struct Scripted {
    gate: Semaphore,
    calls: AtomicUsize,
}

#[async_trait]
impl Embedder for Scripted {
    fn model_id(&self) -> &str {
        "scripted"
    }
    fn dimensions(&self) -> usize {
        4
    }
    fn engine(&self) -> String {
        "test".into()
    }
    async fn embed(
        &self,
        texts: &[String],
        _purpose: Purpose,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if texts.iter().any(|t| t.contains(PANIC)) {
            panic!("the test embedder was asked to panic");
        }
        if texts.iter().any(|t| t.contains(SLOW)) {
            let _permit = self.gate.acquire().await.unwrap();
        }
        Ok(texts.iter().map(|_| vec![1.0, 0.0, 0.0, 0.0]).collect())
    }
}

struct Fixture {
    ingest: Arc<Ingest>,
    store: Arc<dyn Store>,
    embedder: Arc<Scripted>,
    clock: Arc<ManualClock>,
    index: Arc<KeywordIndex>,
    semantic: Arc<Semantic>,
    files: Arc<LocalFiles>,
    source: SourceId,
    lease: chrono::Duration,
    _dir: TempDir,
}

async fn fixture(lease: chrono::Duration, index_time_budget: Duration) -> Fixture {
    fixture_with(lease, index_time_budget, |_| {}).await
}

/// [`fixture`] with its ingest settings adjusted by `adjust`.
async fn fixture_with(
    lease: chrono::Duration,
    index_time_budget: Duration,
    adjust: impl FnOnce(&mut IngestSettings),
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = quire_store::open(&StoreLocation::Sqlite(dir.path().join("quire.db")))
        .await
        .unwrap();
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let source = store
        .create_source(NewSource {
            id: SourceId::new(),
            name: SourceName::parse("Manuals").unwrap(),
            description: SourceDescription::parse("").unwrap(),
            source_type: SourceType::Network,
            created_at: clock.now(),
        })
        .await
        .unwrap()
        .id;
    let embedder = Arc::new(Scripted {
        gate: Semaphore::new(0),
        calls: AtomicUsize::new(0),
    });
    let semantic = Arc::new(Semantic::open(&dir.path().join("vectors"), embedder.clone()).unwrap());
    let index = Arc::new(KeywordIndex::open(&dir.path().join("index")).unwrap());
    let files = Arc::new(LocalFiles::in_data_dir(dir.path()).unwrap());
    let mut settings = IngestSettings {
        max_upload_bytes: 1 << 20,
        chunking: ChunkingParams::default(),
        parse_limits: ParseLimits::default(),
        output_limits: quire_ingest::OutputLimits::default(),
        time_budget: Duration::from_secs(30),
        index_time_budget,
        isolation: Isolation::InProcess,
        lease,
        max_attempts: 3,
    };
    adjust(&mut settings);
    let ingest = Ingest::new(
        Arc::clone(&store),
        Arc::clone(&index),
        Staging::open(dir.path()).unwrap(),
        files.clone(),
        clock.clone(),
        settings,
    )
    .with_semantic(Some(Arc::clone(&semantic)));
    Fixture {
        ingest: Arc::new(ingest),
        store,
        embedder,
        clock,
        index,
        semantic,
        files,
        source,
        lease,
        _dir: dir,
    }
}

impl Fixture {
    async fn upload(&self, name: &str, text: &str) {
        let mut staged = self.ingest.stage().await.unwrap();
        staged.write(text.as_bytes()).await.unwrap();
        let upload = Upload {
            name: name.into(),
            content_type: Some("text/plain".into()),
            staged: staged.finish().await.unwrap(),
            metadata: None,
            external_id: None,
        };
        self.ingest
            .accept(&SourceScope::All, self.source, upload)
            .await
            .unwrap();
    }

    async fn document(&self, name: &str) -> DocumentRecord {
        self.store
            .list_documents(&SourceScope::All, self.source)
            .await
            .unwrap()
            .unwrap()
            .into_iter()
            .find(|d| d.name == name)
            .unwrap()
    }

    /// Runs `workers` workers until no job is pending (true) or `within` has passed (false),
    /// then shuts them down, which waits for the documents they are finishing.
    async fn run_workers(&self, workers: usize, within: Duration) -> bool {
        let runner = JobRunner::start(
            Arc::clone(&self.ingest),
            WorkerSettings {
                node: "test-node".into(),
                workers,
                poll_interval: Duration::from_millis(20),
            },
        );
        let deadline = tokio::time::Instant::now() + within;
        let mut settled = false;
        while tokio::time::Instant::now() < deadline {
            if self.store.pending_job_count().await.unwrap() == 0 {
                settled = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        runner.shutdown(Duration::from_secs(5)).await;
        settled
    }

    /// Waits (at most ten seconds) until the embedder has been called `calls` times.
    async fn wait_for_calls(&self, calls: usize) {
        for _ in 0..1000 {
            if self.embedder.calls.load(Ordering::SeqCst) >= calls {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the embedder was not called {calls} times");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_that_outlasts_its_lease_is_processed_once() {
    let f = fixture(chrono::Duration::milliseconds(300), Duration::from_secs(30)).await;
    f.upload("slow.txt", &format!("A long document. {SLOW}"))
        .await;
    let ingest = Arc::clone(&f.ingest);
    let first = tokio::spawn(async move { ingest.process_next("w1").await });
    f.wait_for_calls(1).await;

    // The clock passes the first lease many times over while the embedder works; each step
    // is shorter than a lease and followed by at least one renewal (every third of a lease,
    // 100 ms), so no other worker can take the job over.
    for _ in 0..5 {
        f.clock.advance(chrono::Duration::milliseconds(200));
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = f.clock.now();
        let other = f.store.claim_job("w2", now, now + f.lease).await.unwrap();
        assert!(other.is_none(), "another worker took the job while it ran");
    }
    f.embedder.gate.add_permits(1);
    assert!(first.await.unwrap().unwrap());
    let doc = f.document("slow.txt").await;
    assert_eq!(doc.status, DocumentStatus::Ready, "{:?}", doc.error);
    assert_eq!(f.embedder.calls.load(Ordering::SeqCst), 1, "embedded once");
}

/// A document of 50,000 chunks outlasts its lease many times over while it is embedded,
/// indexed and stored: its lease is renewed all along, no other worker takes it over, and
/// each chunk is embedded, indexed and stored once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_of_50_000_chunks_is_processed_once() {
    const PARAGRAPHS: usize = 50_000;
    let lease = chrono::Duration::milliseconds(600);
    let f = fixture_with(lease, Duration::from_secs(600), |settings| {
        settings.max_upload_bytes = 8 << 20;
        // One short paragraph a chunk.
        settings.chunking = ChunkingParams {
            target_tokens: 8,
            overlap_tokens: 0,
            ..ChunkingParams::default()
        };
    })
    .await;
    let text: String = (0..PARAGRAPHS)
        .map(|i| format!("Paragraph {i} on seals.\n\n"))
        .collect();
    f.upload("long.txt", &text).await;
    let ingest = Arc::clone(&f.ingest);
    let first = tokio::spawn(async move { ingest.process_next("w1").await });
    // The clock keeps real time; the job outlasts its lease several times (it is renewed every
    // third of a lease) while another worker keeps asking for it.
    let mut leases_outlasted = 0;
    let started = f.clock.now();
    while !first.is_finished() {
        f.clock.advance(chrono::Duration::milliseconds(100));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = f.clock.now();
        let other = f.store.claim_job("w2", now, now + lease).await.unwrap();
        assert!(other.is_none(), "another worker took the job while it ran");
        leases_outlasted = ((now - started).num_milliseconds() / lease.num_milliseconds()) as u32;
    }
    assert!(first.await.unwrap().unwrap());
    assert!(
        leases_outlasted >= 2,
        "ran for only {leases_outlasted} leases"
    );

    let doc = f.document("long.txt").await;
    assert_eq!(doc.status, DocumentStatus::Ready, "{:?}", doc.error);
    assert_eq!(doc.chunk_count, PARAGRAPHS as u64);
    assert_eq!(
        f.store.document_chunks(doc.id).await.unwrap().len(),
        PARAGRAPHS
    );
    assert_eq!(
        f.semantic.vectors().len(),
        PARAGRAPHS,
        "each chunk embedded once"
    );
    let batches = PARAGRAPHS.div_ceil(128);
    assert_eq!(f.embedder.calls.load(Ordering::SeqCst), batches);
    let found = f
        .index
        .search("paragraph 49999", &SourceScope::All, 10)
        .unwrap();
    assert_eq!(found.len(), 10);
}

#[tokio::test]
async fn embedding_beyond_its_time_budget_fails_the_document() {
    let f = fixture(chrono::Duration::seconds(60), Duration::from_millis(200)).await;
    f.upload("slow.txt", &format!("Never embedded in time. {SLOW}"))
        .await;
    // The gate never opens: only the budget ends the work.
    let processed = tokio::time::timeout(Duration::from_secs(10), f.ingest.process_next("w"))
        .await
        .expect("the time budget did not stop the work");
    assert!(processed.unwrap());
    let doc = f.document("slow.txt").await;
    assert_eq!(doc.status, DocumentStatus::Failed);
    let error = doc.error.unwrap();
    assert!(error.contains("time budget"), "{error}");
    assert_eq!(f.store.pending_job_count().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_after_parsing_fails_its_document_and_the_worker_goes_on() {
    let f = fixture(chrono::Duration::seconds(60), Duration::from_secs(30)).await;
    f.upload(
        "boom.txt",
        &format!("This one breaks the embedder. {PANIC}"),
    )
    .await;
    f.upload("fine.txt", "This one is embedded as usual.").await;
    // One worker: it must survive the first document to process the second.
    let settled = f.run_workers(1, Duration::from_secs(10)).await;
    assert!(settled, "the worker stopped after the panic");
    let boom = f.document("boom.txt").await;
    assert_eq!(boom.status, DocumentStatus::Failed);
    let error = boom.error.unwrap();
    assert!(
        error.starts_with("processing panicked: the test embedder was asked to panic"),
        "{error}"
    );
    let fine = f.document("fine.txt").await;
    assert_eq!(fine.status, DocumentStatus::Ready, "{:?}", fine.error);
}

#[tokio::test]
async fn what_a_crashed_deletion_left_is_removed_at_start() {
    let f = fixture(chrono::Duration::seconds(60), Duration::from_secs(30)).await;
    f.upload("kept.txt", "This document stays.").await;
    f.upload("gone.txt", "This document is deleted.").await;
    assert!(f.ingest.process_next("w").await.unwrap());
    assert!(f.ingest.process_next("w").await.unwrap());
    let (kept, gone) = (
        f.document("kept.txt").await.id,
        f.document("gone.txt").await.id,
    );
    // The row goes, then the process dies before the entries and the original follow.
    f.store
        .delete_document(&SourceScope::All, f.source, gone, chrono::Utc::now())
        .await
        .unwrap()
        .unwrap();
    let mut indexed = f.index.document_ids().unwrap();
    indexed.sort_by_key(ToString::to_string);
    let mut both = vec![kept, gone];
    both.sort_by_key(ToString::to_string);
    assert_eq!(indexed, both);

    assert_eq!(f.ingest.remove_orphans(true).await.unwrap(), (1, 1));
    assert_eq!(f.index.document_ids().unwrap(), vec![kept]);
    assert_eq!(f.semantic.vectors().document_ids(), vec![kept]);
    assert_eq!(
        quire_files::OriginalStore::list(&*f.files).await.unwrap(),
        vec![kept]
    );
    assert_eq!(f.ingest.remove_orphans(true).await.unwrap(), (0, 0));
}

/// A worker hands a document's commit and last transaction to a task of its own and takes the
/// next job: the first document is not ready until that task runs, and then it is, searchable.
#[tokio::test]
async fn a_worker_goes_on_before_its_document_is_committed() {
    let f = fixture(chrono::Duration::seconds(60), Duration::from_secs(30)).await;
    f.upload("first.txt", "Alpha turbines spin.").await;
    f.upload("second.txt", "Beta compressors hum.").await;
    let mut finishing = Vec::new();
    for _ in 0..2 {
        match f.ingest.start_next("w").await.unwrap() {
            Next::Finishing(document) => finishing.push(document),
            other => panic!("expected a document awaiting its commit, got {other:?}"),
        }
    }
    assert!(matches!(
        f.ingest.start_next("w").await.unwrap(),
        Next::Idle
    ));
    for name in ["first.txt", "second.txt"] {
        assert_eq!(f.document(name).await.status, DocumentStatus::Processing);
    }
    for document in finishing.into_iter().rev() {
        document.run().await.unwrap();
    }
    for (name, word) in [("first.txt", "turbines"), ("second.txt", "compressors")] {
        let document = f.document(name).await;
        assert_eq!(
            document.status,
            DocumentStatus::Ready,
            "{:?}",
            document.error
        );
        let hits = f.index.search(word, &SourceScope::All, 10).unwrap();
        assert_eq!(hits.len(), 1, "{word}");
        assert_eq!(hits[0].document_id, document.id);
    }
}

/// While one worker still processes its document, another's finished document does not start
/// a commit at the first pause: it waits for the commit at the end of the spacing (a second
/// after the last one began), which the first document may still join.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_waits_for_a_document_still_being_processed() {
    let f = fixture(chrono::Duration::seconds(60), Duration::from_secs(30)).await;
    f.upload("slow.txt", &format!("Gamma pumps wait. {SLOW}"))
        .await;
    f.upload("quick.txt", "Delta valves close.").await;
    // A commit now, so the next one is spaced from it.
    let primed = std::time::Instant::now();
    f.index
        .submit_delete(quire_core::DocumentId::new())
        .wait()
        .await
        .unwrap();
    let ingest = Arc::clone(&f.ingest);
    let slow = tokio::spawn(async move { ingest.process_next("w1").await });
    f.wait_for_calls(1).await;
    let Next::Finishing(quick) = f.ingest.start_next("w2").await.unwrap() else {
        panic!("quick.txt was not processed up to its commit");
    };
    quick.run().await.unwrap();
    // Without the slow document's change expected, the quick one is committed once no other
    // change comes within 50 ms.
    assert!(
        primed.elapsed() >= Duration::from_millis(900),
        "committed {:?} after the last commit, within the spacing of a second",
        primed.elapsed()
    );
    assert_eq!(f.document("quick.txt").await.status, DocumentStatus::Ready);
    f.embedder.gate.add_permits(1);
    assert!(slow.await.unwrap().unwrap());
    assert_eq!(f.document("slow.txt").await.status, DocumentStatus::Ready);
}

/// Two workers through many small documents: each ends ready and searchable once, with no more
/// commits than documents (how many they share depends on timing; `quire-search`'s own test
/// shows a burst sharing them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_finishes_every_document_it_started() {
    const DOCUMENTS: usize = 40;
    let f = fixture(chrono::Duration::seconds(60), Duration::from_secs(30)).await;
    for n in 0..DOCUMENTS {
        f.upload(
            &format!("note-{n}.txt"),
            &format!("Inspection note marker{n}."),
        )
        .await;
    }
    let commits_before = f.index.commits();
    let settled = f.run_workers(2, Duration::from_secs(30)).await;
    assert!(settled, "jobs were left");
    for n in 0..DOCUMENTS {
        let document = f.document(&format!("note-{n}.txt")).await;
        assert_eq!(
            document.status,
            DocumentStatus::Ready,
            "{:?}",
            document.error
        );
        let hits = f
            .index
            .search(&format!("marker{n}"), &SourceScope::All, 10)
            .unwrap();
        assert_eq!(hits.len(), 1, "marker{n}");
    }
    assert_eq!(f.index.chunk_count(), DOCUMENTS as u64);
    let commits = f.index.commits() - commits_before;
    assert!(commits <= DOCUMENTS as u64, "{commits} commits");
}
