//! Semantic search's share of ingestion: the embedder, the vector index it fills, and the
//! re-embedding that brings the index up to date with the store.
//!
//! The vector index records the model that made its vectors. Opening it for another model
//! sets the old index aside and starts an empty one, and [`Semantic::backfill`] then embeds
//! every ready document that has no vectors yet; it also catches documents that became ready
//! while the service ran without a model. So the two models' vectors never mix, and turning a
//! model on (or changing it) needs nothing but a restart.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use quire_core::embed::{Embedder, ModelError, Purpose};
use quire_core::{ChunkDraft, DocumentId, SourceScope};
use quire_search::{VectorError, VectorIndex};
use quire_store::Store;

use crate::IngestError;
use crate::query_batch::QueryBatcher;

/// Documents read from the store per step of the walk over ready documents.
const WALK_PAGE: usize = 256;

/// Why semantic search could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SemanticError {
    /// The vector index could not be opened.
    #[error(transparent)]
    Index(#[from] VectorError),
    /// An index made by another model could not be set aside.
    #[error("could not set aside the vector index in {path}: {source}")]
    SetAside {
        /// The index directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// What the re-embedding did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackfillReport {
    /// Documents embedded.
    pub documents: u64,
    /// Chunks embedded.
    pub chunks: u64,
}

/// The embedder and its vector index.
#[derive(Debug)]
pub struct Semantic {
    embedder: Arc<dyn Embedder>,
    /// Search queries, batched across concurrent searches.
    queries: QueryBatcher,
    vectors: Arc<VectorIndex>,
    backfill_running: AtomicBool,
    backfilled_documents: AtomicU64,
}

impl Semantic {
    /// Opens the vector index in `dir` for `embedder`'s model. An index made by another model
    /// (or of another width) is moved to `dir` + `.previous` (replacing an older one there) and
    /// an empty index takes its place.
    pub fn open(dir: &Path, embedder: Arc<dyn Embedder>) -> Result<Self, SemanticError> {
        let (model, dims) = (embedder.model_id().to_owned(), embedder.dimensions());
        let vectors = match VectorIndex::open(dir, &model, dims) {
            Err(VectorError::ModelMismatch { found, wanted }) => {
                tracing::warn!(
                    %found, %wanted,
                    "the embedding model changed; every document will be embedded again"
                );
                set_aside(dir)?;
                VectorIndex::open(dir, &model, dims)?
            }
            other => other?,
        };
        Ok(Self {
            queries: QueryBatcher::new(Arc::clone(&embedder)),
            embedder,
            vectors: Arc::new(vectors),
            backfill_running: AtomicBool::new(false),
            backfilled_documents: AtomicU64::new(0),
        })
    }

    /// The embedder.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// The vector index.
    pub fn vectors(&self) -> &Arc<VectorIndex> {
        &self.vectors
    }

    /// True while [`Semantic::backfill`] runs.
    pub fn backfill_running(&self) -> bool {
        self.backfill_running.load(Ordering::Relaxed)
    }

    /// Documents embedded by the backfill so far.
    pub fn backfilled_documents(&self) -> u64 {
        self.backfilled_documents.load(Ordering::Relaxed)
    }

    /// The vectors of `chunks` of the document titled `title` ([`crate::document_title`]),
    /// keyed by ordinal, embedded as [`embedding_text`] words them.
    pub async fn embed_chunks(
        &self,
        title: &str,
        chunks: &[ChunkDraft],
    ) -> Result<Vec<(u32, Vec<f32>)>, ModelError> {
        let texts: Vec<String> = chunks.iter().map(|c| embedding_text(title, c)).collect();
        let vectors = self.embedder.embed(&texts, Purpose::Document).await?;
        metrics::counter!(crate::progress::CHUNKS_EMBEDDED)
            .increment(u64::try_from(vectors.len()).unwrap_or(u64::MAX));
        Ok(chunks.iter().map(|c| c.ordinal).zip(vectors).collect())
    }

    /// The vector of a search query, embedded together with the queries of concurrent
    /// searches (see [`crate::query_batch`]).
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>, ModelError> {
        self.queries.embed(query).await
    }

    /// Removes the vectors of documents that are no longer ready (deleted while the service
    /// ran without a model). Call it before the workers start: a document being processed has
    /// vectors before it is ready.
    pub async fn remove_orphans(&self, store: &dyn Store) -> Result<u64, IngestError> {
        let ready = ready_documents(store).await?;
        let mut removed = 0;
        for document in self.vectors.document_ids() {
            if !ready.contains(&document) {
                let vectors = Arc::clone(&self.vectors);
                blocking(move || vectors.delete_document(document)).await??;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Embeds every ready document that has no vectors, a document at a time, so search
    /// improves as it goes and a restart resumes where it stopped.
    pub async fn backfill(&self, store: &dyn Store) -> Result<BackfillReport, IngestError> {
        self.backfill_running.store(true, Ordering::Relaxed);
        let result = self.walk(store).await;
        self.backfill_running.store(false, Ordering::Relaxed);
        result
    }

    async fn walk(&self, store: &dyn Store) -> Result<BackfillReport, IngestError> {
        let mut report = BackfillReport::default();
        let mut after = None;
        loop {
            let page = store.ready_document_ids(after, WALK_PAGE).await?;
            let Some(&(last, _)) = page.last() else {
                return Ok(report);
            };
            after = Some(last);
            for (document, source) in page {
                if self.vectors.has_document(document) {
                    continue;
                }
                let chunks = store.document_chunks(document).await?;
                if chunks.is_empty() {
                    continue;
                }
                // The title the ingestion embedded with, so backfilled vectors are the same.
                let Some(named) = store
                    .ready_documents(&SourceScope::All, &[document])
                    .await?
                    .pop()
                else {
                    continue;
                };
                // On a shared store, the node that embedded it may have stored the vectors.
                let stored = store.document_vectors(document).await?;
                let entries = match crate::follow::stored_entries(self, stored, &chunks) {
                    Some(entries) => entries,
                    None => self
                        .embed_chunks(&crate::document_title(&named.name), &chunks)
                        .await
                        .map_err(|e| IngestError::Embedding(e.to_string()))?,
                };
                let vectors = Arc::clone(&self.vectors);
                blocking(move || vectors.replace_document(document, source, &entries)).await??;
                if store.document_chunks(document).await?.is_empty() {
                    // Deleted while it was embedded: take the vectors back.
                    let vectors = Arc::clone(&self.vectors);
                    blocking(move || vectors.delete_document(document)).await??;
                    continue;
                }
                report.documents += 1;
                report.chunks += chunks.len() as u64;
                self.backfilled_documents.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The text embedded for a chunk: its document's title, its heading path, then its content.
/// The heading (a paper's title, a manual's chapter) often names the topic that the passage
/// itself only implies, and the document's title names the company, product or year that a
/// passage deep in a long report never repeats.
pub fn embedding_text(title: &str, chunk: &ChunkDraft) -> String {
    let context: Vec<&str> = [title, chunk.section.as_str()]
        .into_iter()
        .filter(|line| !line.is_empty())
        .collect();
    if context.is_empty() {
        chunk.content.clone()
    } else {
        format!("{}\n\n{}", context.join("\n"), chunk.content)
    }
}

async fn ready_documents(store: &dyn Store) -> Result<HashSet<DocumentId>, IngestError> {
    let mut ready = HashSet::new();
    let mut after = None;
    loop {
        let page = store.ready_document_ids(after, WALK_PAGE).await?;
        let Some(&(last, _)) = page.last() else {
            return Ok(ready);
        };
        after = Some(last);
        ready.extend(page.into_iter().map(|(id, _)| id));
    }
}

fn set_aside(dir: &Path) -> Result<(), SemanticError> {
    let mut previous = dir.as_os_str().to_owned();
    previous.push(".previous");
    let previous = PathBuf::from(previous);
    let io = |source| SemanticError::SetAside {
        path: dir.to_path_buf(),
        source,
    };
    if previous.exists() {
        std::fs::remove_dir_all(&previous).map_err(io)?;
    }
    std::fs::rename(dir, &previous).map_err(io)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, IngestError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| IngestError::Task(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_text_leads_with_title_and_heading() {
        let chunk = |section: &str| ChunkDraft {
            ordinal: 0,
            page: 60,
            section: section.into(),
            content: "Total current liabilities 2,213,556".into(),
        };
        assert_eq!(
            embedding_text("ADOBE 2015 10K", &chunk("Balance sheets")),
            "ADOBE 2015 10K\nBalance sheets\n\nTotal current liabilities 2,213,556"
        );
        assert_eq!(
            embedding_text("", &chunk("Balance sheets")),
            "Balance sheets\n\nTotal current liabilities 2,213,556"
        );
        assert_eq!(
            embedding_text("", &chunk("")),
            "Total current liabilities 2,213,556"
        );
    }
}
