//! [`Ledger`]: the store, the clock and the way documents are removed and reviewed. The
//! server's [`crate::Services`] hold one; the command line builds one from the opened store
//! (it works while a server runs on the same data), so the use cases both call are the same
//! functions.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use quire_core::{Clock, DocumentId, DocumentRecord, SourceId, SourceScope};
use quire_files::OriginalStore;
use quire_ingest::{Ingest, Review};
use quire_store::Store;

use crate::AppError;

/// The store-backed part of the services.
#[derive(Clone)]
pub struct Ledger {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    engine: Engine,
}

/// How documents are removed and decided reviews resumed.
#[derive(Clone)]
enum Engine {
    /// In the server: through ingestion (indexes, vectors and original removed at once;
    /// workers woken for a decided review).
    Serving(Arc<Ingest>),
    /// From the command line: the row and the original go now, and the running server's
    /// start-up sweep removes index entries of documents that are gone; its workers find a
    /// decided review at their next poll.
    Offline {
        originals: Arc<dyn OriginalStore>,
        screening: Review,
    },
}

impl Ledger {
    /// The ledger of a running server, acting through `ingest`.
    pub fn serving(store: Arc<dyn Store>, clock: Arc<dyn Clock>, ingest: Arc<Ingest>) -> Self {
        Self {
            store,
            clock,
            engine: Engine::Serving(ingest),
        }
    }

    /// A ledger for commands run beside (or without) a server: `originals` is where uploads
    /// are kept, `screening` the configured personal-data policy (what a redact decision
    /// takes out of a document's name).
    pub fn offline(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        originals: Arc<dyn OriginalStore>,
        screening: Review,
    ) -> Self {
        Self {
            store,
            clock,
            engine: Engine::Offline {
                originals,
                screening,
            },
        }
    }

    pub(crate) fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// The service's current time (the injected clock).
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The screening policy a review decision applies.
    pub(crate) fn screening(&self) -> Review {
        match &self.engine {
            Engine::Serving(ingest) => ingest.review().cloned(),
            Engine::Offline { screening, .. } => Some(screening.clone()),
        }
        // Screening turned off after a document was held: the decision still stands, with
        // the default policy's idea of what to redact in the name.
        .unwrap_or_else(|| Review::new(Default::default()))
    }

    /// Tells the workers that a job is waiting (in the server; from the command line they
    /// find it at their next poll).
    pub(crate) fn wake_workers(&self) {
        if let Engine::Serving(ingest) = &self.engine {
            ingest.notify_worker();
        }
    }

    /// Deletes document `id` of `source` within `scope` with everything derived from it;
    /// `None` when there is no such document.
    pub(crate) async fn remove_document(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
    ) -> Result<Option<DocumentRecord>, AppError> {
        match &self.engine {
            Engine::Serving(ingest) => Ok(ingest.delete(scope, source, id).await?),
            Engine::Offline { originals, .. } => {
                let Some(deleted) = self
                    .store
                    .delete_document(scope, source, id, self.clock.now())
                    .await?
                else {
                    return Ok(None);
                };
                for index_id in &deleted.index_ids {
                    if let Err(e) = originals.remove(*index_id).await {
                        // The row is gone; the next start's sweep removes the file.
                        tracing::warn!(error = %e, %index_id, "could not remove an original file");
                    }
                }
                Ok(Some(deleted.document))
            }
        }
    }
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field(
                "engine",
                &match self.engine {
                    Engine::Serving(_) => "serving",
                    Engine::Offline { .. } => "offline",
                },
            )
            .finish_non_exhaustive()
    }
}
