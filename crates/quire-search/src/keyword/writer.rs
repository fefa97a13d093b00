//! Group commit: one thread owns the Tantivy writer, applies every change waiting for it, commits
//! them together and then tells each caller that its change is searchable.
//!
//! A Tantivy commit flushes a segment and syncs several files, so one per document was most of
//! keyword-only ingest time (figures: `docs/performance.md`, "Ingest"). Changes that arrive
//! while a commit runs, or while they keep coming within [`COMMIT_SPACING`] of the last one's
//! start, wait for the next one, so the batch grows with the load: one document alone is
//! committed at once, a stream of documents shares a commit every second, or every
//! [`ENOUGH_CHUNKS`] chunks when it is fast.
//!
//! Callers that know a change is coming (an ingest worker processing a document) say so
//! ([`Expected`]): while one is expected, a commit within the spacing waits for the spacing to
//! end instead of starting at the first pause in the stream.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use quire_core::{DocumentId, SourceId};
use tantivy::indexer::LogMergePolicy;
use tantivy::{IndexReader, IndexWriter, TantivyDocument, Term, doc};
use tokio::sync::oneshot;

use super::{Fields, IndexedChunk, SearchError};

/// Most changes applied in one commit: bounds the memory a burst holds and the time a caller
/// waits behind others.
const MAX_BATCH: usize = 1024;

/// Chunks that make a commit worth starting before the spacing ends: a commit's cost is mostly
/// fixed (a new segment's files, the writer's tables, merges), so shared by this many chunks it
/// is small and waiting out the spacing would only slow a fast stream (keyword-only ingest),
/// while a slow one (an embedder's) still shares a commit per spacing. Figures:
/// `docs/performance.md`, "Commits wait for the documents being processed".
pub(super) const ENOUGH_CHUNKS: usize = 256;

/// How commits are spaced while changes stream in.
///
/// A commit writes a new segment (several files, each synced), so committing whatever was
/// waiting, a document or two at a time, spent much of the CPU creating and merging files;
/// spaced, a commit carries every document finished in the meantime. Figures:
/// `docs/performance.md`, "Commit spacing".
#[derive(Debug, Clone, Copy)]
pub(super) struct Spacing {
    /// Shortest time from the start of one commit to the start of the next, while changes
    /// keep coming.
    pub(super) between: Duration,
    /// Within that time, how long a commit waits for one more change: when none comes and
    /// none is [`Expected`], it starts at once. So a caller that changes one document at a
    /// time and waits for each commit (deletes through the API, one by one) waits at most this
    /// much more, not the whole spacing, while a stream of documents shares a commit per
    /// spacing.
    pub(super) linger: Duration,
}

/// The spacing of the product's index. A change that finds the index idle for `between` is
/// committed at once, so a lone upload is not held back.
///
/// A second, as Elasticsearch's default refresh interval: under a stream of documents, each
/// becomes searchable at most a second after its chunks are handed over, and of the spacings
/// measured, commits that wait out a second (as they do while changes are [`Expected`]) gave
/// hybrid ingest the most documents a second. Figures: `docs/performance.md`, "Commits wait
/// for the documents being processed".
pub(super) const COMMIT_SPACING: Spacing = Spacing {
    between: Duration::from_secs(1),
    linger: Duration::from_millis(50),
};

/// Segments below this many chunks count as one size class when merging. Tantivy's default,
/// 10,000, puts every young segment of an index in one class, so each merge of eight segments
/// copies the growing largest one again and again; with a small floor, segments merge with
/// others of their own size, and each chunk is copied a few times. Figures:
/// `docs/performance.md`, "Merges by size".
const MERGE_FLOOR_CHUNKS: u32 = 256;

/// A change to the index.
pub(super) enum Change {
    /// Replace whatever the index holds for the document with these chunks.
    Replace {
        document: DocumentId,
        source: SourceId,
        chunks: Vec<IndexedChunk>,
    },
    /// Remove every chunk of the document.
    Delete(DocumentId),
}

impl Change {
    /// How much the change weighs in a commit: the chunks it adds, a delete or an empty
    /// replacement counting as one.
    fn chunks(&self) -> usize {
        match self {
            Change::Replace { chunks, .. } => chunks.len().max(1),
            Change::Delete(_) => 1,
        }
    }
}

/// A change and whom to tell when it is committed (or why it is not).
struct Request {
    change: Change,
    committed: oneshot::Sender<Result<(), String>>,
}

/// The promise of a submitted change: resolved once the commit that includes it is done and
/// searches see it. Dropping it does not withdraw the change.
#[derive(Debug)]
#[must_use = "a change is searchable only once its commit is awaited"]
pub struct Committed(oneshot::Receiver<Result<(), String>>);

impl Committed {
    /// Waits for the commit, on an async task.
    pub async fn wait(self) -> Result<(), SearchError> {
        outcome(self.0.await)
    }

    /// Waits for the commit, blocking this thread (never call it on an async runtime's
    /// worker thread).
    pub fn wait_blocking(self) -> Result<(), SearchError> {
        outcome(self.0.blocking_recv())
    }
}

fn outcome(
    received: Result<Result<(), String>, oneshot::error::RecvError>,
) -> Result<(), SearchError> {
    match received {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(SearchError::Commit(message)),
        Err(_) => Err(SearchError::Commit(
            "the index writer stopped before committing".to_owned(),
        )),
    }
}

/// The handle to the writer thread; dropping it commits what is waiting and joins the thread,
/// so the index's lock is released when this returns.
pub(super) struct Writer {
    requests: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

/// A change on its way to the index: while any is alive, a commit within the spacing does not
/// start at a pause in the stream of changes, only when the spacing ends. Dropped when the
/// change has been submitted, or when it will not come.
///
/// Why: a stream of documents through ingest workers pauses longer than the linger whenever
/// the embedder is slow, and a commit started at each pause carried only a few documents yet
/// paid a commit's whole fixed cost (a new segment's files, the writer's tables, the merges of
/// small segments). Figures: `docs/performance.md`, "Commits wait for the documents being
/// processed".
#[must_use = "a change is expected only while this lives"]
pub struct Expected(Arc<Shared>);

impl Drop for Expected {
    fn drop(&mut self) {
        self.0.expected.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Writer {
    /// Starts the thread that owns `writer` and reloads `reader` after each commit.
    pub(super) fn start(
        writer: IndexWriter,
        reader: IndexReader,
        fields: Fields,
        spacing: Spacing,
    ) -> Result<Self, SearchError> {
        writer.set_merge_policy(Box::new(merge_policy()));
        let (requests, incoming) = mpsc::channel();
        let shared = Arc::new(Shared {
            commits: AtomicU64::new(0),
            expected: AtomicUsize::new(0),
        });
        let counters = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("quire-keyword-writer".to_owned())
            .spawn(move || run(writer, reader, fields, spacing, incoming, &counters))
            .map_err(|e| SearchError::Open(format!("could not start the index writer: {e}")))?;
        Ok(Self {
            requests: Some(requests),
            thread: Some(thread),
            shared,
        })
    }

    /// Says a change is on its way, until the returned value is dropped.
    pub(super) fn expect(&self) -> Expected {
        self.shared.expected.fetch_add(1, Ordering::Relaxed);
        Expected(Arc::clone(&self.shared))
    }

    /// Queues `change` for the next commit.
    pub(super) fn submit(&self, change: Change) -> Committed {
        let (committed, receiver) = oneshot::channel();
        if let Some(requests) = &self.requests {
            // A send fails only when the thread has ended (it panicked); the dropped sender
            // then resolves the promise with an error.
            let _ = requests.send(Request { change, committed });
        }
        Committed(receiver)
    }

    /// Commits made since the index was opened.
    pub(super) fn commits(&self) -> u64 {
        self.shared.commits.load(Ordering::Relaxed)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        drop(self.requests.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn merge_policy() -> LogMergePolicy {
    let mut policy = LogMergePolicy::default();
    policy.set_min_layer_size(MERGE_FLOOR_CHUNKS);
    policy
}

/// What the writer thread shares with its handle.
struct Shared {
    /// Commits made.
    commits: AtomicU64,
    /// Changes on their way ([`Expected`]).
    expected: AtomicUsize,
}

/// The writer thread: takes the first waiting change, gathers others while they come (or are
/// expected) until `spacing` has passed since the last commit began, takes every other one
/// already waiting (up to [`MAX_BATCH`]), applies them in order, commits once and answers all
/// of them.
fn run(
    mut writer: IndexWriter,
    reader: IndexReader,
    fields: Fields,
    spacing: Spacing,
    incoming: mpsc::Receiver<Request>,
    shared: &Shared,
) {
    let mut last_started: Option<Instant> = None;
    while let Ok(first) = incoming.recv() {
        let mut batch = vec![first];
        // Within the spacing of the last commit, changes gather while they come until it has
        // passed; then everything waiting joins.
        if let Some(deadline) = last_started.map(|started| started + spacing.between) {
            gather_until(
                &incoming,
                &mut batch,
                deadline,
                spacing.linger,
                &shared.expected,
            );
        }
        while batch.len() < MAX_BATCH {
            match incoming.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        last_started = Some(Instant::now());
        let result = match apply(&writer, fields, &batch) {
            Ok(()) => commit(&mut writer, &reader),
            Err(e) => {
                // Drop what was added, so the next commit does not carry half of this batch.
                let _ = writer.rollback();
                Err(e)
            }
        };
        if result.is_ok() {
            shared.commits.fetch_add(1, Ordering::Relaxed);
        }
        let answer = result.map_err(|e| {
            tracing::error!(error = %e, changes = batch.len(), "keyword index commit failed");
            e.to_string()
        });
        for request in batch {
            let _ = request.committed.send(answer.clone());
        }
    }
}

/// Adds the changes that arrive before `deadline` to `batch` (up to [`MAX_BATCH`], and until
/// they hold [`ENOUGH_CHUNKS`]); returns early when none comes within `linger` and none is
/// `expected`, or when the handle is dropped, so closing the index never waits out the spacing.
fn gather_until(
    incoming: &mpsc::Receiver<Request>,
    batch: &mut Vec<Request>,
    deadline: Instant,
    linger: Duration,
    expected: &AtomicUsize,
) {
    let mut chunks: usize = batch.iter().map(|r| r.change.chunks()).sum();
    while batch.len() < MAX_BATCH && chunks < ENOUGH_CHUNKS {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return;
        };
        match incoming.recv_timeout(left.min(linger)) {
            Ok(next) => {
                chunks += next.change.chunks();
                batch.push(next);
            }
            Err(mpsc::RecvTimeoutError::Timeout) if expected.load(Ordering::Relaxed) > 0 => {}
            Err(_) => return,
        }
    }
}

/// Adds the batch's changes to the writer. A delete applies to documents added before it, so a
/// replacement's new chunks survive its own delete, within one commit as across commits.
fn apply(writer: &IndexWriter, f: Fields, batch: &[Request]) -> Result<(), SearchError> {
    for request in batch {
        match &request.change {
            Change::Delete(document) => {
                writer.delete_term(Term::from_field_text(f.document_id, &document.to_string()));
            }
            Change::Replace {
                document,
                source,
                chunks,
            } => {
                writer.delete_term(Term::from_field_text(f.document_id, &document.to_string()));
                for chunk in chunks {
                    writer.add_document(entry(f, *document, *source, chunk))?;
                }
            }
        }
    }
    Ok(())
}

pub(super) fn entry(
    f: Fields,
    document: DocumentId,
    source: SourceId,
    chunk: &IndexedChunk,
) -> TantivyDocument {
    let mut entry = doc!(
        f.document_id => document.to_string(),
        f.source_id => source.to_string(),
        f.ordinal => u64::from(chunk.ordinal),
        f.page => u64::from(chunk.page),
        f.section => chunk.section.as_str(),
        f.content => chunk.content.as_str(),
    );
    let (high, low) = document.0.as_u64_pair();
    entry.add_u64(f.document_high, high);
    entry.add_u64(f.document_low, low);
    // The title is a second value of the heading field: searched as headings are, at their
    // weight, while a hit still shows the heading path (the first value) alone. Indexes written
    // before titles keep working; their chunks gain titles when their documents are indexed
    // again.
    if !chunk.title.is_empty() {
        entry.add_text(f.section, &chunk.title);
    }
    entry
}

/// Commits and makes the commit visible to searches. A failed commit is rolled back, so the
/// next one does not carry half of this batch.
fn commit(writer: &mut IndexWriter, reader: &IndexReader) -> Result<(), SearchError> {
    if let Err(e) = writer.commit() {
        let _ = writer.rollback();
        return Err(e.into());
    }
    reader.reload()?;
    Ok(())
}
