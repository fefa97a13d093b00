//! Versions and external ids: a new upload under a document's external id (or to its id) is a
//! new version processed beside the live one, and the switch to it is one transaction.

use std::sync::Arc;

use chrono::Duration;
use futures_util::future::join_all;
use quire_core::{
    ChunkDraft, DocumentId, DocumentStatus, ExternalId, NewDocument, SourceId, SourceScope,
    VersionStatus,
};
use quire_store::{ClaimedJob, Created, FinishOutcome, HeldDocument, ProcessedDocument, Store};

use crate::fixtures::{source, t0};
use crate::harness::TestDb;

/// An upload of `bytes` (stands for its SHA-256) under `external_id`.
fn upload(source: SourceId, external_id: Option<&str>, name: &str, bytes: &str) -> NewDocument {
    NewDocument {
        id: DocumentId::new(),
        source_id: source,
        name: name.into(),
        content_type: "text/plain".into(),
        size: bytes.len() as u64,
        sha256: format!("{bytes:0>64}"),
        metadata: None,
        external_id: external_id.map(|e| ExternalId::parse(e).unwrap()),
        created_at: t0(),
    }
}

/// One chunk whose text names the version.
fn text(content: &str) -> ProcessedDocument {
    ProcessedDocument {
        chunks: vec![ChunkDraft {
            ordinal: 0,
            page: 1,
            section: String::new(),
            content: content.into(),
        }],
        page_count: 1,
        vectors: None,
    }
}

async fn claim(store: &dyn Store) -> ClaimedJob {
    store
        .claim_job("w", t0(), t0() + Duration::minutes(5))
        .await
        .unwrap()
        .expect("a job to claim")
}

async fn get(store: &dyn Store, source: SourceId, id: DocumentId) -> quire_core::DocumentRecord {
    store
        .get_document(&SourceScope::All, source, id)
        .await
        .unwrap()
        .unwrap()
}

/// The live chunk's text of `id` as a search would resolve an index hit on `index_id`.
async fn resolved(store: &dyn Store, index_id: DocumentId) -> Option<String> {
    let hits = store
        .ready_documents(&SourceScope::All, &[index_id])
        .await
        .unwrap();
    hits.first()?;
    let chunks = store.chunks(&[(index_id, 0)]).await.unwrap();
    chunks.first().map(|c| c.chunk.content.clone())
}

pub(super) async fn an_external_id_makes_a_new_version_of_the_same_document(store: &dyn Store) {
    let s = source(store, "Policies").await;
    let first = store
        .create_document(upload(s, Some("policies/travel.pdf"), "travel.pdf", "v1"))
        .await
        .unwrap();
    let Created::New(first) = first else {
        panic!("a new document: {first:?}")
    };
    assert_eq!((first.version, first.index_id), (1, first.id));
    let job = claim(store).await;
    assert_eq!(
        (job.version, job.index_id, job.replaces),
        (1, first.id, None)
    );
    store
        .finish_document(&job, text("first"), t0())
        .await
        .unwrap();

    // The same external id with other bytes: the same document, a second version queued
    // beside the live first one.
    let second = upload(s, Some("policies/travel.pdf"), "travel-2.pdf", "v2");
    let second_index = second.id;
    let created = store.create_document(second).await.unwrap();
    let Created::Version(doc) = created else {
        panic!("a new version: {created:?}")
    };
    assert_eq!(doc.id, first.id);
    assert_eq!((doc.version, doc.status), (1, DocumentStatus::Ready));
    assert_eq!(doc.name, "travel.pdf", "the live version's name");
    let next = doc.next_version.clone().expect("the version being made");
    assert_eq!((next.version, next.status), (2, VersionStatus::Queued));
    // The same bytes again change nothing; without an external id they are a duplicate.
    let again = store
        .create_document(upload(s, Some("policies/travel.pdf"), "x.pdf", "v2"))
        .await
        .unwrap();
    assert!(
        matches!(again, Created::Existing(ref d) if d.id == first.id),
        "{again:?}"
    );
    let found = store
        .find_document_by_external_id(
            &SourceScope::All,
            s,
            &ExternalId::parse("policies/travel.pdf").unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.id, first.id);

    // Processing the second version: the first stays what searches find until the switch.
    let job = claim(store).await;
    assert_eq!(
        (job.version, job.index_id, job.replaces),
        (2, second_index, Some(first.id))
    );
    assert_eq!(job.document_name, "travel-2.pdf");
    assert_eq!(get(store, s, first.id).await.status, DocumentStatus::Ready);
    assert_eq!(resolved(store, first.id).await.as_deref(), Some("first"));
    assert_eq!(resolved(store, second_index).await, None);
    let outcome = store
        .finish_document(&job, text("second"), t0())
        .await
        .unwrap();
    assert_eq!(outcome, FinishOutcome::Stored);

    // One transaction later the second is live; the first still resolves (for nodes whose
    // indexes have not caught up) until the next switch.
    let doc = get(store, s, first.id).await;
    assert_eq!((doc.version, doc.index_id), (2, second_index));
    assert_eq!(doc.previous_index_id, Some(first.id));
    assert_eq!(
        (doc.name.as_str(), doc.next_version),
        ("travel-2.pdf", None)
    );
    assert_eq!(
        resolved(store, second_index).await.as_deref(),
        Some("second")
    );
    assert_eq!(resolved(store, first.id).await.as_deref(), Some("first"));
    let versions = store
        .document_versions(&SourceScope::All, s, first.id)
        .await
        .unwrap()
        .unwrap();
    let statuses: Vec<_> = versions.iter().map(|v| (v.version, v.status)).collect();
    assert_eq!(
        statuses,
        [(1, VersionStatus::Superseded), (2, VersionStatus::Ready)]
    );
    assert_eq!(
        store.document_chunks(second_index).await.unwrap()[0].content,
        "second"
    );

    // A third version: the first one's chunks go, the second's stay resolvable.
    let third = upload(s, Some("policies/travel.pdf"), "travel-3.pdf", "v3");
    let third_index = third.id;
    store.create_document(third).await.unwrap();
    let job = claim(store).await;
    store
        .finish_document(&job, text("third"), t0())
        .await
        .unwrap();
    assert_eq!(resolved(store, first.id).await, None);
    assert_eq!(
        resolved(store, second_index).await.as_deref(),
        Some("second")
    );
    assert_eq!(resolved(store, third_index).await.as_deref(), Some("third"));
    let existing = store
        .existing_documents(&[first.id, second_index, third_index])
        .await
        .unwrap();
    // What a start-up sweep keeps: the live version's entries and original (the one before
    // it outlives the switch only on a node that stopped in between).
    assert_eq!(existing, [third_index]);
}

pub(super) async fn a_failed_or_held_version_leaves_the_live_one(store: &dyn Store) {
    let s = source(store, "Policies").await;
    let doc = store
        .create_document(upload(s, Some("a"), "a.txt", "1"))
        .await
        .unwrap()
        .document()
        .id;
    let job = claim(store).await;
    store
        .finish_document(&job, text("one"), t0())
        .await
        .unwrap();

    let v2 = upload(s, Some("a"), "a.txt", "2");
    store
        .add_version(&SourceScope::All, doc, v2)
        .await
        .unwrap()
        .unwrap();
    let job = claim(store).await;
    store
        .fail_document(&job, "could not parse: broken", t0())
        .await
        .unwrap();
    let record = get(store, s, doc).await;
    assert_eq!((record.status, record.version), (DocumentStatus::Ready, 1));
    let next = record.next_version.unwrap();
    assert_eq!((next.version, next.status), (2, VersionStatus::Failed));
    assert_eq!(next.error.as_deref(), Some("could not parse: broken"));
    assert_eq!(resolved(store, doc).await.as_deref(), Some("one"));

    // The same bytes as the failed version are tried again as a new version.
    let v3 = upload(s, None, "a.txt", "2");
    let created = store
        .add_version(&SourceScope::All, doc, v3)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(created, Created::Version(_)), "{created:?}");
    let job = claim(store).await;
    assert_eq!(job.version, 3);
    let held = HeldDocument {
        page_count: 1,
        pii_types: vec!["EMAIL".into()],
        findings: "[]".into(),
        shown_name: None,
    };
    store.hold_document(&job, held, t0()).await.unwrap();
    let record = get(store, s, doc).await;
    assert_eq!(record.status, DocumentStatus::Ready);
    assert_eq!(
        record.next_version.unwrap().status,
        VersionStatus::PendingReview
    );
    let waiting = store.pending_reviews().await.unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].document.id, doc);
    // A decision sends the held version back to processing; the live one stays.
    let decided = quire_store::DecidedReview {
        decision: quire_store::ReviewDecision::Approve,
        findings: "[]".into(),
        name: None,
    };
    assert!(store.decide_review(doc, decided, t0()).await.unwrap());
    let job = claim(store).await;
    assert_eq!(job.version, 3);
    store
        .finish_document(&job, text("three"), t0())
        .await
        .unwrap();
    let record = get(store, s, doc).await;
    assert_eq!((record.version, record.next_version), (3, None));
    assert!(store.pending_reviews().await.unwrap().is_empty());
}

pub(super) async fn a_newer_upload_supersedes_a_version_in_flight(store: &dyn Store) {
    let s = source(store, "Policies").await;
    let doc = store
        .create_document(upload(s, Some("a"), "a.txt", "1"))
        .await
        .unwrap()
        .document()
        .id;
    // Version 1 is still being processed when version 2 arrives: nothing is live yet, so
    // version 2 takes its place at once and the worker on version 1 stores nothing.
    let first = claim(store).await;
    store
        .create_document(upload(s, Some("a"), "a.txt", "2"))
        .await
        .unwrap();
    let record = get(store, s, doc).await;
    assert_eq!((record.version, record.status), (2, DocumentStatus::Queued));
    assert_eq!(
        store
            .finish_document(&first, text("one"), t0())
            .await
            .unwrap(),
        FinishOutcome::Superseded
    );
    let second = claim(store).await;
    assert_eq!(second.version, 2);
    store
        .finish_document(&second, text("two"), t0())
        .await
        .unwrap();
    let record = get(store, s, doc).await;
    assert_eq!((record.version, record.status), (2, DocumentStatus::Ready));
    assert_eq!(record.previous_index_id, None, "version 1 was never live");

    // Deleting while a new version is processed takes every version, and the worker's
    // finish stores nothing.
    let v3 = upload(s, Some("a"), "a.txt", "3");
    let v3_index = v3.id;
    store.create_document(v3).await.unwrap();
    let third = claim(store).await;
    let deleted = store
        .delete_document(&SourceScope::All, s, doc, t0())
        .await
        .unwrap()
        .unwrap();
    assert!(deleted.index_ids.contains(&v3_index), "{deleted:?}");
    assert!(deleted.index_ids.contains(&record.index_id), "{deleted:?}");
    assert_eq!(
        store
            .finish_document(&third, text("three"), t0())
            .await
            .unwrap(),
        FinishOutcome::DocumentGone
    );
    assert_eq!(resolved(store, v3_index).await, None);
    assert!(store.document_chunks(v3_index).await.unwrap().is_empty());
}

/// Uploads with one new external id from several handles at once end as one document.
pub(super) async fn uploads_of_one_new_external_id_at_once_are_one_document(db: &TestDb) {
    let first = db.open().await;
    let s = source(&*first, "Sync").await;
    let handles: Vec<Arc<dyn Store>> = join_all((0..4).map(|_| db.open())).await;
    let uploads = handles.iter().enumerate().map(|(n, store)| {
        let store = Arc::clone(store);
        async move {
            // Two of the four carry the same bytes.
            let bytes = if n < 2 { "same" } else { &*format!("other{n}") };
            store
                .create_document(upload(s, Some("inbox/report.pdf"), "r.pdf", bytes))
                .await
        }
    });
    let created = join_all(uploads).await;
    let ids: std::collections::HashSet<DocumentId> = created
        .iter()
        .map(|c| c.as_ref().unwrap().document().id)
        .collect();
    assert_eq!(ids.len(), 1, "{created:?}");
    let id = *ids.iter().next().unwrap();
    let versions = first
        .document_versions(&SourceScope::All, s, id)
        .await
        .unwrap()
        .unwrap();
    assert!((3..=4).contains(&versions.len()), "{versions:?}");
    let listed = first
        .list_documents(&SourceScope::All, s)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(listed.len(), 1);
    for store in handles {
        store.close().await;
    }
    first.close().await;
}
