//! A SQLite store with one source and claimed documents, for the unit tests of the steps that
//! report on and finish a worker's documents.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use quire_core::{
    DocumentId, NewDocument, NewSource, SourceDescription, SourceId, SourceName, SourceType,
};
use quire_store::{ClaimedJob, SqliteStore, Store};

/// A store in `dir` with one source.
pub(crate) async fn with_source(dir: &Path) -> (Arc<dyn Store>, SourceId) {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("q.db")).await.unwrap());
    let source = store
        .create_source(NewSource {
            id: SourceId::new(),
            name: SourceName::parse("S").unwrap(),
            description: SourceDescription::default(),
            source_type: SourceType::Network,
            created_at: Utc::now(),
        })
        .await
        .unwrap()
        .id;
    (store, source)
}

/// Uploads document `n` (contents of its own) to `source` and claims its job as worker `w`.
pub(crate) async fn claimed_document(store: &dyn Store, source: SourceId, n: u32) -> ClaimedJob {
    claimed_document_at(store, source, n, Utc::now(), chrono::Duration::minutes(5)).await
}

/// Uploads document `n` to `source` at `now` and claims its job as worker `w` for `lease`.
pub(crate) async fn claimed_document_at(
    store: &dyn Store,
    source: SourceId,
    n: u32,
    now: DateTime<Utc>,
    lease: chrono::Duration,
) -> ClaimedJob {
    store
        .create_document(NewDocument {
            id: DocumentId::new(),
            source_id: source,
            name: format!("{n}.txt"),
            content_type: "text/plain".into(),
            size: 1,
            sha256: format!("{n:064}"),
            metadata: Default::default(),
            external_id: None,
            created_at: now,
        })
        .await
        .unwrap();
    store
        .claim_job("w", now, now + lease)
        .await
        .unwrap()
        .unwrap()
}
