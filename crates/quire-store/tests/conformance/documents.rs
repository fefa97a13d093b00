//! Sources and documents: scope, chunks read back, the same bytes stored once per source, and
//! bulk creation all or none.

use chrono::Duration;
use quire_core::{DocumentId, NewDocument, PageSize, SourceId, SourceScope};
use quire_store::{Created, Store};

use crate::fixtures::{chunks, document, source, t0};

pub(super) async fn sources_and_documents_respect_scope(store: &dyn Store) {
    let a = source(store, "A").await;
    let b = source(store, "B").await;
    let doc_a = document(store, a, "a.txt").await;
    let doc_b = document(store, b, "b.txt").await;
    let only_a = SourceScope::only([a]);

    let all: Vec<_> = store
        .list_sources(&SourceScope::All)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(all, vec![a, b], "creation order");
    let visible: Vec<_> = store
        .list_sources(&only_a)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(visible, vec![a]);
    assert!(
        store
            .list_sources(&SourceScope::only([]))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .get_source(&only_a, a)
            .await
            .unwrap()
            .unwrap()
            .document_count,
        1
    );
    assert!(store.get_source(&only_a, b).await.unwrap().is_none());

    assert!(store.list_documents(&only_a, b).await.unwrap().is_none());
    assert!(
        store
            .list_documents(&SourceScope::All, SourceId::new())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        store
            .list_documents(&only_a, a)
            .await
            .unwrap()
            .unwrap()
            .len(),
        1
    );
    assert!(
        store
            .get_document(&only_a, b, doc_b)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .get_document(&only_a, a, doc_b)
            .await
            .unwrap()
            .is_none(),
        "wrong source"
    );
    assert!(
        store
            .delete_document(&only_a, b, doc_b, chrono::Utc::now())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .get_document(&SourceScope::All, b, doc_b)
            .await
            .unwrap()
            .is_some()
    );
    // By id alone (administrators): found in its source, and nothing for an unknown id.
    let found = store.find_document(doc_b).await.unwrap().unwrap();
    assert_eq!((found.id, found.source_id), (doc_b, b));
    assert!(
        store
            .find_document(DocumentId::new())
            .await
            .unwrap()
            .is_none()
    );

    let mut existing = store
        .existing_sources(&[a, SourceId::new(), b])
        .await
        .unwrap();
    existing.sort();
    let mut expected = vec![a, b];
    expected.sort();
    assert_eq!(existing, expected);

    let gone = DocumentId::new();
    assert_eq!(
        store.existing_documents(&[gone, doc_a]).await.unwrap(),
        [doc_a]
    );
    assert!(store.existing_documents(&[]).await.unwrap().is_empty());

    let deleted = store
        .delete_document(&only_a, a, doc_a, chrono::Utc::now())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(deleted.document.id, doc_a);
    assert_eq!(deleted.index_ids, [doc_a]);
    assert!(
        store
            .get_document(&only_a, a, doc_a)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        store.pending_job_count().await.unwrap(),
        1,
        "the deleted document's job went with it"
    );
}

pub(super) async fn chunks_are_read_back_by_key_and_by_document(store: &dyn Store) {
    let s = source(store, "S").await;
    let ready = document(store, s, "ready.txt").await;
    let queued = document(store, s, "queued.txt").await;
    let job = store
        .claim_job("w", t0(), t0() + Duration::minutes(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.document_id, ready);
    store.finish_document(&job, chunks(3), t0()).await.unwrap();

    let mut found = store
        .chunks(&[(ready, 2), (ready, 0), (ready, 7), (queued, 0)])
        .await
        .unwrap();
    found.sort_by_key(|c| c.chunk.ordinal);
    let shape: Vec<_> = found
        .iter()
        .map(|c| (c.document_id, c.chunk.ordinal, c.chunk.content.as_str()))
        .collect();
    assert_eq!(shape, vec![(ready, 0, "chunk 0"), (ready, 2, "chunk 2")]);
    assert!(store.chunks(&[]).await.unwrap().is_empty());

    let all = store.document_chunks(ready).await.unwrap();
    assert_eq!(all, chunks(3).chunks);
    assert!(store.document_chunks(queued).await.unwrap().is_empty());

    // The cursor walks ready documents only, in pages.
    let other = source(store, "T").await;
    let mut expected = vec![(ready, s), (queued, s)];
    for name in ["a", "b", "c"] {
        expected.push((document(store, other, name).await, other));
    }
    let still_queued = document(store, other, "d").await;
    for _ in 0..4 {
        let job = store
            .claim_job("w", t0(), t0() + Duration::minutes(5))
            .await
            .unwrap()
            .unwrap();
        assert_ne!(job.document_id, still_queued, "claimed in creation order");
        store.finish_document(&job, chunks(1), t0()).await.unwrap();
    }
    expected.sort_by_key(|(id, _)| id.to_string());
    let mut walked = Vec::new();
    let mut after = None;
    loop {
        let page = store.ready_document_ids(after, 2).await.unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 2);
        after = page.last().map(|(id, _)| *id);
        walked.extend(page);
    }
    assert_eq!(walked, expected);

    // A long document's chunks are written in several statements, all of them, in order.
    let job = store
        .claim_job("w", t0(), t0() + Duration::minutes(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.document_id, still_queued);
    store
        .finish_document(&job, chunks(4_321), t0())
        .await
        .unwrap();
    assert_eq!(
        store.document_chunks(still_queued).await.unwrap(),
        chunks(4_321).chunks
    );
    let long = store.find_document(still_queued).await.unwrap().unwrap();
    assert_eq!(long.chunk_count, 4_321);
}

pub(super) async fn the_same_bytes_are_one_document_per_source(store: &dyn Store) {
    let a = source(store, "A").await;
    let b = source(store, "B").await;
    let new = |source_id: SourceId| NewDocument {
        id: DocumentId::new(),
        source_id,
        name: "x.txt".into(),
        content_type: "text/plain".into(),
        size: 1,
        sha256: "ab".repeat(32),
        metadata: Default::default(),
        external_id: None,
        created_at: t0(),
    };
    let first = store.create_document(new(a)).await.unwrap();
    assert!(matches!(first, Created::New(_)));
    let again = store.create_document(new(a)).await.unwrap();
    assert_eq!(again, Created::Existing(first.document().clone()));
    assert!(matches!(
        store.create_document(new(b)).await.unwrap(),
        Created::New(_)
    ));
    assert_eq!(
        store.pending_job_count().await.unwrap(),
        2,
        "no job for the duplicate"
    );

    // Once the first copy has failed, the same bytes may be tried again.
    let job = store
        .claim_job("w", t0(), t0() + Duration::minutes(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.document_id, first.document().id);
    store.fail_document(&job, "broken", t0()).await.unwrap();
    assert!(matches!(
        store.create_document(new(a)).await.unwrap(),
        Created::New(_)
    ));
}

/// A bulk upload's documents are created in order in one go: each with its job, the same bytes
/// twice (in the bulk or already stored) one document, and all or none.
pub(super) async fn a_bulk_of_documents_is_created_in_order_all_or_none(store: &dyn Store) {
    let s = source(store, "S").await;
    let new = |source_id: SourceId, bytes: &str| NewDocument {
        id: DocumentId::new(),
        source_id,
        name: format!("{bytes}.txt"),
        content_type: "text/plain".into(),
        size: 1,
        sha256: bytes.repeat(32),
        metadata: Default::default(),
        external_id: None,
        created_at: t0(),
    };
    let stored = store.create_document(new(s, "aa")).await.unwrap();
    let bulk = vec![new(s, "bb"), new(s, "aa"), new(s, "cc"), new(s, "bb")];
    let ids: Vec<DocumentId> = bulk.iter().map(|d| d.id).collect();
    let created = store.create_documents(bulk).await.unwrap();
    assert_eq!(created.len(), 4);
    assert!(matches!(&created[0], Created::New(d) if d.id == ids[0]));
    assert_eq!(created[1], Created::Existing(stored.document().clone()));
    assert!(matches!(&created[2], Created::New(d) if d.id == ids[2]));
    assert_eq!(created[3], Created::Existing(created[0].document().clone()));
    assert_eq!(
        store.pending_job_count().await.unwrap(),
        3,
        "a job per new document"
    );

    // A document the store refuses (of a source that does not exist) takes the whole bulk
    // with it.
    let refused = store
        .create_documents(vec![new(s, "dd"), new(SourceId::new(), "ee")])
        .await;
    assert!(refused.is_err(), "{refused:?}");
    let names: Vec<String> = store
        .list_documents(&SourceScope::All, s)
        .await
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert!(!names.contains(&"dd.txt".to_owned()), "{names:?}");
    assert_eq!(store.pending_job_count().await.unwrap(), 3);
}

pub(super) async fn documents_are_listed_page_by_page_in_the_full_lists_order(store: &dyn Store) {
    let src = source(store, "paged").await;
    let other = source(store, "other").await;
    // Five at the same instant (insertion order breaks the tie), three at later ones.
    for i in 0..5 {
        document(store, src, &format!("same-{i}.txt")).await;
    }
    for minutes in [3, 1, 2] {
        let id = DocumentId::new();
        store
            .create_document(NewDocument {
                id,
                source_id: src,
                name: format!("later-{minutes}.txt"),
                content_type: "text/plain".into(),
                size: 3,
                sha256: id.as_uuid().simple().to_string().repeat(2),
                metadata: Default::default(),
                external_id: None,
                created_at: t0() + Duration::minutes(minutes),
            })
            .await
            .unwrap();
    }
    let full: Vec<DocumentId> = store
        .list_documents(&SourceScope::All, src)
        .await
        .unwrap()
        .unwrap()
        .iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(full.len(), 8);

    let size = PageSize::parse("3").unwrap();
    let mut paged = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let page = store
            .list_documents_page(&SourceScope::All, src, after, size)
            .await
            .unwrap()
            .unwrap();
        assert!(page.documents.len() <= 3);
        paged.extend(page.documents.iter().map(|d| d.id));
        pages += 1;
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(paged, full, "pages join into the full list, in its order");

    // A page that ends exactly at the last document says no more follow.
    let whole = store
        .list_documents_page(&SourceScope::All, src, None, PageSize::parse("8").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(whole.documents.len(), 8);
    assert!(whole.next.is_none());

    // Scope and existence as for the full list.
    let outside = SourceScope::only([other]);
    assert!(
        store
            .list_documents_page(&outside, src, None, size)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .list_documents_page(&SourceScope::All, SourceId::new(), None, size)
            .await
            .unwrap()
            .is_none()
    );
}

pub(super) async fn metadata_is_stored_and_merged_within_scope(store: &dyn Store) {
    let src = source(store, "described").await;
    let other = source(store, "elsewhere").await;
    let id = DocumentId::new();
    let metadata =
        quire_core::Metadata::from_json(&serde_json::json!({"year": 2024, "tags": ["a"]})).unwrap();
    store
        .create_document(NewDocument {
            id,
            source_id: src,
            name: "m.txt".into(),
            content_type: "text/plain".into(),
            size: 3,
            sha256: "m".repeat(64),
            metadata: Some(metadata.clone()),
            external_id: None,
            created_at: t0(),
        })
        .await
        .unwrap();
    let read = store
        .get_document(&SourceScope::All, src, id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.metadata, metadata);

    let patched = store
        .patch_document_metadata(
            &SourceScope::All,
            src,
            id,
            &serde_json::json!({"year": null, "owner": "Ana"}),
        )
        .await
        .unwrap()
        .unwrap();
    let expected =
        quire_core::Metadata::from_json(&serde_json::json!({"tags": ["a"], "owner": "Ana"}))
            .unwrap();
    assert_eq!(patched.metadata, expected);
    assert_eq!(
        store.find_document(id).await.unwrap().unwrap().metadata,
        expected
    );
    // Out of scope, in another source, or missing: nothing changes.
    for (scope, source_id, doc) in [
        (SourceScope::only([other]), src, id),
        (SourceScope::All, other, id),
        (SourceScope::All, src, DocumentId::new()),
    ] {
        assert!(
            store
                .patch_document_metadata(&scope, source_id, doc, &serde_json::json!({"x": 1}))
                .await
                .unwrap()
                .is_none()
        );
    }
    // A patch that breaks the rules is refused and stores nothing.
    let refused = store
        .patch_document_metadata(
            &SourceScope::All,
            src,
            id,
            &serde_json::json!({"bad key": 1}),
        )
        .await;
    assert!(
        matches!(refused, Err(quire_store::StoreError::Invalid(_))),
        "{refused:?}"
    );
    assert_eq!(
        store.find_document(id).await.unwrap().unwrap().metadata,
        expected
    );
}

pub(super) async fn ready_documents_are_listed_across_a_scope_in_one_call(store: &dyn Store) {
    let a = source(store, "ready A").await;
    let b = source(store, "ready B").await;
    let docs = [
        document(store, a, "a1.txt").await,
        document(store, b, "b1.txt").await,
        document(store, a, "a2.txt").await,
    ];
    // Two of the three made ready, whichever the queue hands out first.
    let mut finished = Vec::new();
    for _ in 0..2 {
        let job = store
            .claim_job("w", t0(), t0() + Duration::minutes(5))
            .await
            .unwrap()
            .unwrap();
        store.finish_document(&job, chunks(1), t0()).await.unwrap();
        finished.push(job.document_id);
    }
    finished.sort();
    let in_a: Vec<DocumentId> = finished.iter().copied().filter(|d| *d != docs[1]).collect();
    let ids = |scope: &SourceScope| {
        let scope = scope.clone();
        async move {
            let mut ids: Vec<DocumentId> = store
                .ready_documents_in_scope(&scope)
                .await
                .unwrap()
                .iter()
                .map(|d| d.id)
                .collect();
            ids.sort();
            ids
        }
    };
    assert_eq!(ids(&SourceScope::All).await, finished, "ready ones only");
    let mut in_a = in_a;
    in_a.sort();
    assert_eq!(ids(&SourceScope::only([a])).await, in_a);
    assert!(ids(&SourceScope::only([])).await.is_empty());
}
