//! Cluster mode: every node keeps its own keyword index and vector replica in step with the
//! shared store by applying its index feed ([`Store::index_changes`]) in order.
//!
//! Searches stay local (Tantivy's BM25 and the in-memory vector graph with its exact scan for
//! narrow scopes), so a cluster answers with the embedded default's quality and latency; what a
//! node needs from the others is only which documents became ready or went. A ready document's
//! chunks are read from the store and its vectors copied from what the node that embedded it
//! stored, so nothing is embedded twice. The node that processed a document indexed it already
//! before making it ready, and skips that change.
//!
//! The position reached is kept in a file next to the indexes and written only after the
//! changes before it are committed, so a crash replays a little, never skips; a node with no
//! file (a new node, or indexes thrown away) replays the feed from its start.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use quire_core::{DocumentId, DocumentStatus};
use quire_search::{Committed, IndexedChunk, KeywordIndex};
use quire_store::{ChunkVectors, IndexChange, IndexChangeKind, Store};

use crate::semantic::Semantic;
use crate::service::{IngestError, blocking};

/// Documents this node indexed itself and made ready on the shared store, whose `ready` change
/// the follower may skip: the entries it would write are the ones already there. Each is
/// forgotten when its change comes by, so the set holds only what the feed has not reached.
#[derive(Debug, Clone, Default)]
pub(crate) struct IndexedHere(Arc<Mutex<HashSet<DocumentId>>>);

impl IndexedHere {
    /// Records that this node indexed `id` and its document is now ready.
    pub(crate) fn record(&self, id: DocumentId) {
        self.lock().insert(id);
    }

    /// Whether this node indexed `id` itself (forgetting it).
    fn take(&self, id: DocumentId) -> bool {
        self.lock().remove(&id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<DocumentId>> {
        // A set of ids, changed one insert or remove at a time: never left torn.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Changes read from the store at a time.
const BATCH: usize = 256;

/// How often an idle follower asks the store for new changes: well inside the second within
/// which a document made ready through one node must be found through every node, and one
/// indexed primary-key read per node each time.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(200);

/// Applies a shared store's index feed to this node's indexes.
pub struct FeedFollower {
    store: Arc<dyn Store>,
    keyword: Arc<KeywordIndex>,
    semantic: Option<Arc<Semantic>>,
    position_file: PathBuf,
    position: AtomicU64,
    indexed_here: IndexedHere,
}

impl std::fmt::Debug for FeedFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeedFollower")
            .field("position_file", &self.position_file)
            .field("position", &self.position())
            .finish_non_exhaustive()
    }
}

impl FeedFollower {
    /// A follower for these indexes, resuming from the position recorded in `position_file`
    /// (from the feed's start when there is none).
    pub(crate) fn open(
        store: Arc<dyn Store>,
        keyword: Arc<KeywordIndex>,
        semantic: Option<Arc<Semantic>>,
        position_file: PathBuf,
        indexed_here: IndexedHere,
    ) -> Result<Self, IngestError> {
        let position = read_position(&position_file)?;
        Ok(Self {
            store,
            keyword,
            semantic,
            position_file,
            position: AtomicU64::new(position),
            indexed_here,
        })
    }

    /// The feed position applied so far.
    pub fn position(&self) -> u64 {
        self.position.load(Ordering::Relaxed)
    }

    /// Applies every change the feed holds now; returns how many were applied.
    async fn catch_up(&self) -> Result<u64, IngestError> {
        let mut applied = 0;
        loop {
            let changes = self.store.index_changes(self.position(), BATCH).await?;
            let Some(last) = changes.last().map(|c| c.position) else {
                return Ok(applied);
            };
            self.apply(&changes).await?;
            write_position(&self.position_file, last)?;
            self.position.store(last, Ordering::Relaxed);
            applied += changes.len() as u64;
            metrics::gauge!(FEED_POSITION).set(last as f64);
        }
    }

    /// Follows the feed until the task is aborted: catches up, then asks again every
    /// [`FOLLOW_INTERVAL`]. A failure (the database away) is logged and tried again.
    pub async fn follow(self: Arc<Self>) {
        let mut failing = false;
        loop {
            match self.catch_up().await {
                Ok(applied) => {
                    if applied > 0 {
                        tracing::debug!(applied, position = self.position(), "index feed applied");
                    }
                    if failing {
                        tracing::info!("following the index feed again");
                        failing = false;
                    }
                }
                Err(e) if !failing => {
                    tracing::warn!(error = %e, "could not apply the index feed; trying again");
                    failing = true;
                }
                Err(_) => {}
            }
            tokio::time::sleep(FOLLOW_INTERVAL).await;
        }
    }

    /// Applies `changes` in order, then waits until the keyword index has committed them.
    /// What a ready document needs from the store (its record, chunks and vectors) is read for
    /// several documents at once, ahead of applying them: one after another, those round
    /// trips left a node minutes behind a busy cluster.
    async fn apply(&self, changes: &[IndexChange]) -> Result<(), IngestError> {
        let mut fetched = futures_util::stream::iter(changes.iter().copied())
            .map(|change| async move { (change, self.fetch(&change).await) })
            .buffered(PREFETCH);
        let mut commits = Vec::with_capacity(changes.len());
        while let Some((change, fetched)) = fetched.next().await {
            let id = change.index_id;
            match change.kind {
                IndexChangeKind::Ready => {
                    let Some(ready) = fetched? else {
                        continue;
                    };
                    if let (Some(semantic), Some(entries)) = (&self.semantic, ready.vectors) {
                        let vectors = Arc::clone(semantic.vectors());
                        let source = change.source_id;
                        blocking(move || vectors.replace_document(id, source, &entries)).await??;
                    }
                    commits.push(
                        self.keyword
                            .submit_replace(id, change.source_id, ready.chunks),
                    );
                    // The new version is found here from now on; the one it replaced goes.
                    if let Some(replaced) = change.replaced {
                        commits.push(self.remove(replaced).await?);
                    }
                }
                IndexChangeKind::Removed => {
                    commits.push(self.remove(id).await?);
                    if let Some(previous) = change.replaced {
                        commits.push(self.remove(previous).await?);
                    }
                }
            }
        }
        for committed in commits {
            committed.wait().await?;
        }
        Ok(())
    }

    /// Removes the entries indexed under `id` from the vector replica at once and from the
    /// keyword index with its next commit, which the returned value waits for.
    async fn remove(&self, id: DocumentId) -> Result<Committed, IngestError> {
        let committed = self.keyword.submit_delete(id);
        if let Some(semantic) = &self.semantic {
            let vectors = Arc::clone(semantic.vectors());
            blocking(move || vectors.delete_document(id)).await??;
        }
        Ok(committed)
    }

    /// What a `ready` change needs from the store: nothing for a document this node indexed
    /// itself, or one that is gone or no longer ready (the change that took it away comes
    /// later in the feed); else its chunks as the keyword index takes them and the vectors
    /// the embedding node stored, when they are of this node's model (the backfill embeds
    /// the others here). A `removed` change needs nothing.
    async fn fetch(&self, change: &IndexChange) -> Result<Option<ReadyDocument>, IngestError> {
        let id = change.index_id;
        if change.kind != IndexChangeKind::Ready || self.indexed_here.take(id) {
            return Ok(None);
        }
        let Some(document) = self.store.find_document(change.document_id).await? else {
            return Ok(None);
        };
        // A version replaced meanwhile: the change that made the newer one live comes later.
        if document.status != DocumentStatus::Ready || document.index_id != id {
            return Ok(None);
        }
        let chunks = self.store.document_chunks(id).await?;
        let vectors = match &self.semantic {
            Some(semantic) => {
                let stored = self.store.document_vectors(id).await?;
                let entries = stored_entries(semantic, stored, &chunks);
                if entries.is_none() {
                    tracing::debug!(document = %id, "no usable stored vectors; the backfill embeds it");
                }
                entries
            }
            None => None,
        };
        let title = crate::document_title(&document.name);
        let chunks = chunks
            .into_iter()
            .map(|c| IndexedChunk {
                title: title.clone(),
                ordinal: c.ordinal,
                page: c.page,
                section: c.section,
                content: c.content,
            })
            .collect();
        Ok(Some(ReadyDocument { chunks, vectors }))
    }
}

/// Documents whose store reads run ahead of the one being applied: enough to hide the round
/// trips, few enough to leave most of the node's pool of 10 connections to its requests.
const PREFETCH: usize = 4;

/// A ready document as the follower applies it.
struct ReadyDocument {
    chunks: Vec<IndexedChunk>,
    vectors: Option<Vec<(u32, Vec<f32>)>>,
}

/// The feed position a node has applied, as a gauge.
pub const FEED_POSITION: &str = "quire_index_feed_position";

/// Stored vectors keyed by the chunks' ordinals, when they were computed by `semantic`'s model
/// with its width, one per chunk.
pub(crate) fn stored_entries(
    semantic: &Semantic,
    stored: Option<ChunkVectors>,
    chunks: &[quire_core::ChunkDraft],
) -> Option<Vec<(u32, Vec<f32>)>> {
    let stored = stored?;
    let embedder = semantic.embedder();
    let usable = stored.model == embedder.model_id()
        && stored.vectors.len() == chunks.len()
        && stored
            .vectors
            .iter()
            .all(|v| v.len() == embedder.dimensions());
    usable.then(|| {
        chunks
            .iter()
            .map(|c| c.ordinal)
            .zip(stored.vectors)
            .collect()
    })
}

fn read_position(path: &Path) -> Result<u64, IngestError> {
    match std::fs::read_to_string(path) {
        Ok(text) => text.trim().parse().map_err(|_| {
            IngestError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{} does not hold a feed position; delete it to rebuild this node's indexes \
                     from the feed",
                    path.display()
                ),
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// Writes the position through a temporary file and a rename, so a crash leaves the old
/// position or the new one, never a torn one.
fn write_position(path: &Path, position: u64) -> Result<(), IngestError> {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, position.to_string())?;
    std::fs::rename(&temporary, path)?;
    Ok(())
}
