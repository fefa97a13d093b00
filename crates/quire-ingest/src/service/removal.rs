//! Removing documents: a deletion, and the sweep at start for what a deletion interrupted by
//! a crash left behind (index entries, vectors and originals of documents that are gone).

use std::collections::HashSet;
use std::sync::Arc;

use quire_core::{DocumentId, DocumentRecord, SourceId, SourceScope};

use super::{Ingest, IngestError, blocking};

impl Ingest {
    /// Deletes a document: its record, versions, chunks and job, and every version's index
    /// entries and original.
    /// Returns `None` when it does not exist in `scope`.
    pub async fn delete(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
    ) -> Result<Option<DocumentRecord>, IngestError> {
        let Some(deleted) = self
            .store
            .delete_document(scope, source, id, self.clock.now())
            .await?
        else {
            return Ok(None);
        };
        // Every version's entries and original: a version still being processed elsewhere
        // takes its own entries back when its worker finds the document gone.
        for index_id in &deleted.index_ids {
            self.remove_from_indexes(*index_id).await?;
            self.remove_original(*index_id).await;
        }
        Ok(Some(deleted.document))
    }

    /// Removes what a deletion interrupted by a crash left behind: keyword-index entries and
    /// vectors of documents that no longer exist, and, when `originals` is set, their
    /// original files. Call it at start, before the workers run and (for originals) before
    /// uploads are accepted: an original is stored just before its document row. Returns how
    /// many documents' entries and originals were removed.
    pub async fn remove_orphans(&self, originals: bool) -> Result<(u64, u64), IngestError> {
        let index = Arc::clone(&self.index);
        let mut indexed = blocking(move || index.document_ids()).await??;
        if let Some(semantic) = self.semantic.get() {
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
    pub(super) async fn remove_original(&self, id: DocumentId) {
        if let Err(e) = self.files.remove(id).await {
            tracing::warn!(document = %id, error = %e, "could not remove the original file");
        }
    }

    /// Removes a document's chunks from the keyword index and its vectors, so searches stop
    /// finding it at once.
    pub(super) async fn remove_from_indexes(&self, id: DocumentId) -> Result<(), IngestError> {
        self.indexes().remove(id).await
    }
}
