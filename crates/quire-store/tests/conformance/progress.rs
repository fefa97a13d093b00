//! Progress of a document being processed: written by its worker, replaced in place, shown
//! only while the document is `processing`, gone with the document; and the pool's figures.

use chrono::Duration;
use quire_store::{DocumentProgress, ProcessingStage, Store};

use crate::fixtures::{chunks, document, source, t0};

pub async fn progress_is_shown_only_while_processing(store: &dyn Store) {
    let s = source(store, "S").await;
    let doc = document(store, s, "big.pdf").await;
    let parsing = DocumentProgress {
        stage: ProcessingStage::Parsing,
        done: None,
        total: None,
        updated_at: t0(),
    };
    // Queued: what a worker wrote is not shown (it is not processing yet).
    store.set_document_progress(doc, &parsing).await.unwrap();
    assert_eq!(store.document_progress(doc).await.unwrap(), None);

    let job = store
        .claim_job("w1", t0(), t0() + Duration::minutes(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.document_id, doc);
    assert_eq!(
        store.document_progress(doc).await.unwrap(),
        Some(parsing.clone())
    );

    // A later report replaces the earlier one, counts and all.
    let embedding = DocumentProgress {
        stage: ProcessingStage::Embedding,
        done: Some(120),
        total: Some(400),
        updated_at: t0() + Duration::seconds(3),
    };
    store.set_document_progress(doc, &embedding).await.unwrap();
    assert_eq!(
        store.document_progress(doc).await.unwrap(),
        Some(embedding.clone())
    );
    for stage in ["parsing", "screening", "embedding", "indexing"] {
        let stage: ProcessingStage = stage.parse().unwrap();
        let report = DocumentProgress {
            stage,
            ..embedding.clone()
        };
        store.set_document_progress(doc, &report).await.unwrap();
        assert_eq!(
            store.document_progress(doc).await.unwrap().unwrap().stage,
            stage
        );
    }

    // Finished: no progress any more, though the worker's last row may linger.
    store
        .finish_document(&job, chunks(2), t0() + Duration::seconds(5))
        .await
        .unwrap();
    assert_eq!(store.document_progress(doc).await.unwrap(), None);

    // A document deleted while its worker still reports: no error, nothing written.
    let gone = document(store, s, "gone.txt").await;
    store
        .delete_document(&quire_core::SourceScope::All, s, gone, chrono::Utc::now())
        .await
        .unwrap();
    store.set_document_progress(gone, &parsing).await.unwrap();
    assert_eq!(store.document_progress(gone).await.unwrap(), None);
}

/// A worker writes nothing for a document it finishes within its first report interval, so a
/// claimed document without a report since its claim is shown parsing since the claim; a
/// report of an earlier attempt (the server stopped mid-document) is not shown as current.
pub async fn a_claimed_document_is_parsing_until_its_worker_reports(store: &dyn Store) {
    let s = source(store, "S").await;
    let doc = document(store, s, "long.pdf").await;
    let first_claim = t0() + Duration::seconds(1);
    let lease = Duration::minutes(1);
    store
        .claim_job("w1", first_claim, first_claim + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store.document_progress(doc).await.unwrap(),
        Some(DocumentProgress::claimed(first_claim))
    );
    let embedding = DocumentProgress {
        stage: ProcessingStage::Embedding,
        done: Some(10),
        total: Some(40),
        updated_at: first_claim + Duration::seconds(2),
    };
    store.set_document_progress(doc, &embedding).await.unwrap();
    assert_eq!(store.document_progress(doc).await.unwrap(), Some(embedding));

    // The worker dies; the lease runs out and another worker claims the job again.
    let second_claim = first_claim + lease + Duration::seconds(1);
    let again = store
        .claim_job("w2", second_claim, second_claim + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.document_id, again.attempts), (doc, 2));
    assert_eq!(
        store.document_progress(doc).await.unwrap(),
        Some(DocumentProgress::claimed(second_claim))
    );
}

pub async fn pool_stats_are_consistent(store: &dyn Store) {
    // Use the pool first so it has opened a connection.
    source(store, "S").await;
    let stats = store.pool_stats();
    assert!(stats.max >= 1, "{stats:?}");
    assert!(stats.size >= 1 && stats.size <= stats.max, "{stats:?}");
    assert!(stats.idle <= stats.size, "{stats:?}");
}
