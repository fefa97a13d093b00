//! The storage conformance suite: every backend must pass the same stories. `conformance!`
//! lists each story once and runs it against every backend (`sqlite::…` and `postgres::…`),
//! each run on a fresh database: a temporary SQLite file, or a schema of its own in the
//! PostgreSQL server named by `QUIRE_TEST_POSTGRES_URL` (`scripts/postgres start` prints one;
//! `scripts/test` starts it). Without that variable the PostgreSQL runs fail rather than skip.

use chrono::{DateTime, Duration, Utc};
use futures_util::future::join_all;
use quire_core::{
    ChunkDraft, ConversationId, DocumentId, DocumentStatus, KeyId, MessageId, NewApiKey,
    NewDocument, NewSource, Permission, SourceDescription, SourceId, SourceName, SourceScope,
    SourceType,
};
use quire_store::{
    ChunkVectors, Created, FinishOutcome, IndexChange, IndexChangeKind, NewMessage,
    ProcessedDocument, QueueLimits, QueueRefusal, RateBucket, RateWindow, Store, StoreError,
    TicketPlace,
};

// In a folder of their own so cargo does not take them for other test binaries.
#[macro_use]
#[path = "conformance/harness.rs"]
mod harness;
#[path = "conformance/admin.rs"]
mod admin;
#[path = "conformance/progress.rs"]
mod progress;
#[path = "conformance/reviews.rs"]
mod reviews;
#[path = "conformance/webhooks.rs"]
mod webhooks;

use admin::{audit_log_is_newest_first, dashboard_counts, password_and_sessions};
use harness::TestDb;
use progress::{
    a_claimed_document_is_parsing_until_its_worker_reports, pool_stats_are_consistent,
    progress_is_shown_only_while_processing,
};
use reviews::{
    a_decision_replaces_the_findings_and_the_name,
    approval_restores_the_name_and_old_findings_are_reduced,
};
use webhooks::{
    a_claimed_delivery_comes_back_when_its_claim_runs_out, a_logged_delivery_never_comes_back,
    a_scoped_webhook_gets_only_its_sources_events, deleting_a_webhook_drops_its_events_and_log,
    deliveries_are_claimed_once_across_handles_and_restarts,
    delivery_log_is_bounded_and_newest_first, failing_a_document_writes_its_error,
    finishing_a_document_writes_one_event_per_subscriber, pii_events_carry_the_given_fields,
    released_claims_are_claimable_at_once, webhooks_are_registered_listed_and_deleted,
};

conformance! {
    // Stories on one store handle.
    stores: [
        sources_and_documents_respect_scope,
        chunks_are_read_back_by_key_and_by_document,
        jobs_are_leased_finished_and_resumed,
        documents_finished_together_each_get_their_own_outcome,
        a_restarted_node_takes_back_only_its_own_jobs,
        leases_are_renewed_until_lost,
        the_same_bytes_are_one_document_per_source,
        a_bulk_of_documents_is_created_in_order_all_or_none,
        keys_are_stored_by_hash_and_revoked,
        rate_windows_count_and_prune,
        concurrent_rate_hits_are_counted_exactly,
        conversations_belong_to_the_key_that_started_them,
        recent_messages_are_the_last_ones_oldest_first,
        conversations_are_listed_per_key_newest_first,
        message_text_round_trips_exactly,
        webhooks_are_registered_listed_and_deleted,
        finishing_a_document_writes_one_event_per_subscriber,
        a_scoped_webhook_gets_only_its_sources_events,
        failing_a_document_writes_its_error,
        delivery_log_is_bounded_and_newest_first,
        deleting_a_webhook_drops_its_events_and_log,
        pii_events_carry_the_given_fields,
        a_decision_replaces_the_findings_and_the_name,
        approval_restores_the_name_and_old_findings_are_reduced,
        a_logged_delivery_never_comes_back,
        released_claims_are_claimable_at_once,
        password_and_sessions,
        audit_log_is_newest_first,
        dashboard_counts,
        progress_is_shown_only_while_processing,
        a_claimed_document_is_parsing_until_its_worker_reports,
        pool_stats_are_consistent,
        the_index_feed_lists_what_became_ready_or_went,
    ],
    // Stories that open several handles on one database: other processes, other nodes, or
    // the same one after a restart.
    databases: [
        first_opens_at_once_agree_on_the_schema,
        reopening_keeps_data_and_skips_applied_migrations,
        deliveries_are_claimed_once_across_handles_and_restarts,
        a_claimed_delivery_comes_back_when_its_claim_runs_out,
        jobs_are_claimed_once_across_handles,
        a_queued_job_wakes_waiting_workers,
        deleting_while_workers_finish_never_fails,
        concurrent_changes_take_consecutive_feed_positions,
        a_node_with_another_model_is_refused_while_one_runs,
        the_shared_queue_is_one_fifo_line_for_every_node,
    ],
}

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-05-01T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

async fn source(store: &dyn Store, name: &str) -> SourceId {
    store
        .create_source(NewSource {
            id: SourceId::new(),
            name: SourceName::parse(name).unwrap(),
            description: SourceDescription::default(),
            source_type: SourceType::Network,
            created_at: t0(),
        })
        .await
        .unwrap()
        .id
}

async fn document(store: &dyn Store, source: SourceId, name: &str) -> DocumentId {
    let id = DocumentId::new();
    store
        .create_document(NewDocument {
            id,
            source_id: source,
            name: name.into(),
            content_type: "text/plain".into(),
            size: 3,
            // Distinct contents: equal hashes in one source are one document.
            sha256: id.as_uuid().simple().to_string().repeat(2),
            created_at: t0(),
        })
        .await
        .unwrap()
        .document()
        .id
}

fn chunks(n: u32) -> ProcessedDocument {
    ProcessedDocument {
        chunks: (0..n)
            .map(|i| ChunkDraft {
                ordinal: i,
                page: 1,
                section: String::new(),
                content: format!("chunk {i}"),
            })
            .collect(),
        page_count: 1,
        vectors: None,
    }
}

async fn key(store: &dyn Store, hash: &str) -> KeyId {
    store
        .create_key(NewApiKey {
            id: KeyId::new(),
            name: hash.into(),
            permission: Permission::Read,
            scope: SourceScope::All,
            rate_limit: None,
            key_hash: hash.into(),
            created_at: t0(),
        })
        .await
        .unwrap()
        .id
}

fn message(
    conversation_id: ConversationId,
    key_id: KeyId,
    question: &str,
    created_at: DateTime<Utc>,
) -> NewMessage {
    NewMessage {
        id: MessageId::new(),
        conversation_id,
        key_id,
        question: question.into(),
        answer: format!("answer to {question}"),
        citations: "[]".into(),
        generator: "extractive".into(),
        created_at,
    }
}

async fn questions(store: &dyn Store, id: ConversationId, limit: u32) -> Vec<String> {
    store
        .recent_messages(id, limit)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.question)
        .collect()
}

async fn sources_and_documents_respect_scope(store: &dyn Store) {
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
            .delete_document(&only_a, b, doc_b)
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
        .delete_document(&only_a, a, doc_a)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(deleted.id, doc_a);
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

async fn chunks_are_read_back_by_key_and_by_document(store: &dyn Store) {
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

async fn leases_are_renewed_until_lost(store: &dyn Store) {
    let s = source(store, "S").await;
    let first = document(store, s, "1.txt").await;
    let lease = Duration::minutes(10);
    let job = store
        .claim_job("w1", t0(), t0() + lease)
        .await
        .unwrap()
        .unwrap();

    // Renewed before it runs out, the lease outlives its first end: nobody else claims it.
    let renewed_at = t0() + Duration::minutes(8);
    assert!(
        store
            .renew_lease(&job, renewed_at, renewed_at + lease)
            .await
            .unwrap()
    );
    let past_first_end = t0() + lease + Duration::seconds(1);
    assert!(
        store
            .claim_job("w2", past_first_end, past_first_end + lease)
            .await
            .unwrap()
            .is_none(),
        "a renewed lease is still held"
    );

    // Not renewed again, it runs out and another worker takes the job; the first worker's
    // renewal (a late one) is refused and so is its result.
    let expired = renewed_at + lease + Duration::seconds(1);
    let taken = store
        .claim_job("w2", expired, expired + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((taken.document_id, taken.attempts), (first, 2));
    assert!(
        !store
            .renew_lease(&job, expired, expired + lease)
            .await
            .unwrap()
    );
    assert!(
        store
            .renew_lease(&taken, expired, expired + lease)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .finish_document(&job, chunks(1), expired)
            .await
            .unwrap(),
        FinishOutcome::LeaseLost
    );

    // A finished job has no lease to renew, and neither has a job gone with its document.
    assert_eq!(
        store
            .finish_document(&taken, chunks(1), expired)
            .await
            .unwrap(),
        FinishOutcome::Stored
    );
    assert!(
        !store
            .renew_lease(&taken, expired, expired + lease)
            .await
            .unwrap()
    );
    let second = document(store, s, "2.txt").await;
    let job2 = store
        .claim_job("w1", expired, expired + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job2.document_id, second);
    store
        .delete_document(&SourceScope::All, s, second)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !store
            .renew_lease(&job2, expired, expired + lease)
            .await
            .unwrap()
    );
}

/// Documents finished together (a commit's worth): each is stored or not on its own terms, a
/// lost lease or a deleted document changing nothing, and each outcome comes back in order.
async fn documents_finished_together_each_get_their_own_outcome(store: &dyn Store) {
    let s = source(store, "S").await;
    let mut jobs = Vec::new();
    for n in 0..4 {
        document(store, s, &format!("{n}.txt")).await;
        // The third's lease is short, so another worker can take it over.
        let lease = if n == 2 {
            Duration::seconds(1)
        } else {
            Duration::minutes(10)
        };
        let job = store
            .claim_job("w1", t0(), t0() + lease)
            .await
            .unwrap()
            .unwrap();
        jobs.push(job);
    }
    let later = t0() + Duration::seconds(5);
    let taken = store
        .claim_job("w2", later, later + Duration::minutes(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.document_id, jobs[2].document_id);
    store
        .delete_document(&SourceScope::All, s, jobs[1].document_id)
        .await
        .unwrap();

    let finished: Vec<_> = jobs
        .iter()
        .zip([2, 3, 4, 5])
        .map(|(job, n)| (job.clone(), chunks(n)))
        .collect();
    let outcomes = store.finish_documents(&finished, later).await.unwrap();
    assert_eq!(
        outcomes,
        vec![
            FinishOutcome::Stored,
            FinishOutcome::DocumentGone,
            FinishOutcome::LeaseLost,
            FinishOutcome::Stored,
        ]
    );
    for (job, (status, chunk_count)) in jobs.iter().zip([
        (Some(DocumentStatus::Ready), 2),
        (None, 0),
        (Some(DocumentStatus::Processing), 0),
        (Some(DocumentStatus::Ready), 5),
    ]) {
        let doc = store
            .get_document(&SourceScope::All, s, job.document_id)
            .await
            .unwrap();
        assert_eq!(doc.as_ref().map(|d| d.status), status);
        assert_eq!(
            store.document_chunks(job.document_id).await.unwrap().len(),
            chunk_count
        );
    }
    // The job taken over is the new worker's to finish.
    assert_eq!(
        store
            .finish_document(&taken, chunks(1), later)
            .await
            .unwrap(),
        FinishOutcome::Stored
    );
    assert_eq!(store.finish_documents(&[], later).await.unwrap(), vec![]);
}

async fn jobs_are_leased_finished_and_resumed(store: &dyn Store) {
    let s = source(store, "S").await;
    let first = document(store, s, "1.txt").await;
    let second = document(store, s, "2.txt").await;
    let lease = Duration::minutes(10);

    let job = store
        .claim_job("w1", t0(), t0() + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (job.document_id, job.attempts, job.source_id),
        (first, 1, s)
    );
    assert_eq!(job.document_name, "1.txt");
    let doc = store
        .get_document(&SourceScope::All, s, first)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(doc.status, DocumentStatus::Processing);

    let job2 = store
        .claim_job("w2", t0(), t0() + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job2.document_id, second);
    assert!(
        store
            .claim_job("w3", t0(), t0() + lease)
            .await
            .unwrap()
            .is_none(),
        "all leased"
    );

    // w1's lease runs out; w3 takes the job over and w1 can no longer finish it.
    let later = t0() + lease + Duration::seconds(1);
    let taken = store
        .claim_job("w3", later, later + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((taken.document_id, taken.attempts), (first, 2));
    assert_eq!(
        store.finish_document(&job, chunks(2), later).await.unwrap(),
        FinishOutcome::LeaseLost
    );
    assert_eq!(
        store
            .finish_document(&taken, chunks(2), later)
            .await
            .unwrap(),
        FinishOutcome::Stored
    );
    let ready = store
        .get_document(&SourceScope::All, s, first)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (ready.status, ready.chunk_count, ready.page_count),
        (DocumentStatus::Ready, 2, 1)
    );
    assert_eq!(ready.updated_at, later);

    assert_eq!(
        store.fail_document(&job2, "bad file", later).await.unwrap(),
        FinishOutcome::Stored
    );
    let failed = store
        .get_document(&SourceScope::All, s, second)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (failed.status, failed.error.as_deref()),
        (DocumentStatus::Failed, Some("bad file"))
    );
    assert_eq!(store.pending_job_count().await.unwrap(), 0);

    let hits = store
        .ready_documents(&SourceScope::All, &[first, second])
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "only ready documents are search hits");
    assert_eq!((hits[0].id, hits[0].source_name.as_str()), (first, "S"));
    assert!(
        store
            .ready_documents(&SourceScope::only([]), &[first])
            .await
            .unwrap()
            .is_empty()
    );

    // A job running when its owner died goes back to the queue at the next start.
    let third = document(store, s, "3.txt").await;
    let job3 = store
        .claim_job("dead", later, later + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.requeue_running_jobs(None, later).await.unwrap(), 1);
    let queued = store
        .get_document(&SourceScope::All, s, third)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(queued.status, DocumentStatus::Queued);
    let again = store
        .claim_job("w4", later, later + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.document_id, again.attempts), (third, 2));
    assert_eq!(
        store
            .finish_document(&job3, chunks(1), later)
            .await
            .unwrap(),
        FinishOutcome::LeaseLost
    );

    // A document deleted while processed is not resurrected.
    store
        .delete_document(&SourceScope::All, s, third)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .finish_document(&again, chunks(1), later)
            .await
            .unwrap(),
        FinishOutcome::DocumentGone
    );
}

async fn the_same_bytes_are_one_document_per_source(store: &dyn Store) {
    let a = source(store, "A").await;
    let b = source(store, "B").await;
    let new = |source_id: SourceId| NewDocument {
        id: DocumentId::new(),
        source_id,
        name: "x.txt".into(),
        content_type: "text/plain".into(),
        size: 1,
        sha256: "ab".repeat(32),
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
async fn a_bulk_of_documents_is_created_in_order_all_or_none(store: &dyn Store) {
    let s = source(store, "S").await;
    let new = |source_id: SourceId, bytes: &str| NewDocument {
        id: DocumentId::new(),
        source_id,
        name: format!("{bytes}.txt"),
        content_type: "text/plain".into(),
        size: 1,
        sha256: bytes.repeat(32),
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

async fn keys_are_stored_by_hash_and_revoked(store: &dyn Store) {
    let s = source(store, "S").await;
    let new = |hash: &str, scope: SourceScope| NewApiKey {
        id: KeyId::new(),
        name: "k".into(),
        permission: Permission::ReadWrite,
        scope,
        rate_limit: Some(7),
        key_hash: hash.into(),
        created_at: t0(),
    };
    let scoped = store
        .create_key(new("h1", SourceScope::only([s])))
        .await
        .unwrap();
    let all = store.create_key(new("h2", SourceScope::All)).await.unwrap();
    let found = store.find_key_by_hash("h1").await.unwrap().unwrap();
    assert_eq!(found, scoped);
    assert_eq!(found.scope, SourceScope::only([s]));
    assert_eq!(
        store.find_key_by_hash("h2").await.unwrap().unwrap().scope,
        SourceScope::All
    );
    assert!(store.find_key_by_hash("nope").await.unwrap().is_none());

    let unknown = store
        .create_key(new("h3", SourceScope::only([SourceId::new()])))
        .await;
    assert!(matches!(unknown, Err(StoreError::Invalid(_))));
    assert!(
        store.find_key_by_hash("h3").await.unwrap().is_none(),
        "nothing half-created"
    );

    store.touch_key(all.id, t0()).await.unwrap();
    let revoked = store
        .revoke_key(all.id, t0() + Duration::hours(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(revoked.revoked_at, Some(t0() + Duration::hours(1)));
    assert_eq!(revoked.last_used_at, Some(t0()));
    let twice = store
        .revoke_key(all.id, t0() + Duration::hours(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        twice.revoked_at, revoked.revoked_at,
        "the first revocation time stays"
    );
    assert!(
        store
            .revoke_key(KeyId::new(), t0())
            .await
            .unwrap()
            .is_none()
    );
    let listed: Vec<_> = store
        .list_keys()
        .await
        .unwrap()
        .iter()
        .map(|k| k.id)
        .collect();
    assert_eq!(listed, vec![scoped.id, all.id]);
}

async fn rate_windows_count_and_prune(store: &dyn Store) {
    let window = |bucket, start| RateWindow {
        key: KeyId(uuid::Uuid::nil()),
        bucket,
        start,
    };
    let w = window(RateBucket::Search, t0());
    assert_eq!(store.peek_rate_window(&w).await.unwrap(), 0);
    for expected in 1..=3 {
        assert_eq!(store.hit_rate_window(&w).await.unwrap(), expected);
    }
    assert_eq!(store.peek_rate_window(&w).await.unwrap(), 3);
    assert_eq!(
        store
            .peek_rate_window(&window(RateBucket::Generate, t0()))
            .await
            .unwrap(),
        0
    );
    let next = window(RateBucket::Search, t0() + Duration::minutes(1));
    assert_eq!(store.hit_rate_window(&next).await.unwrap(), 1);
    assert_eq!(
        store
            .prune_rate_windows(t0() + Duration::seconds(30))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.peek_rate_window(&w).await.unwrap(), 0);
    assert_eq!(store.peek_rate_window(&next).await.unwrap(), 1);
}

async fn conversations_belong_to_the_key_that_started_them(store: &dyn Store) {
    let owner = key(store, "owner").await;
    let other = key(store, "other").await;
    let id = ConversationId::new();
    assert!(store.get_conversation(id).await.unwrap().is_none());
    assert!(store.recent_messages(id, 10).await.unwrap().is_empty());

    let first = message(id, owner, "first?", t0());
    let stored = store.add_message(first.clone()).await.unwrap();
    assert_eq!(
        (stored.id, stored.conversation_id, stored.created_at),
        (first.id, id, t0())
    );
    let created = store.get_conversation(id).await.unwrap().unwrap();
    assert_eq!(
        (created.id, created.key_id, created.message_count),
        (id, owner, 1)
    );
    assert_eq!((created.created_at, created.updated_at), (t0(), t0()));

    let later = t0() + Duration::minutes(1);
    store
        .add_message(message(id, owner, "second?", later))
        .await
        .unwrap();
    let continued = store.get_conversation(id).await.unwrap().unwrap();
    assert_eq!(
        (
            continued.created_at,
            continued.updated_at,
            continued.message_count
        ),
        (t0(), later, 2)
    );
    assert_eq!(questions(store, id, 10).await, ["first?", "second?"]);

    let intruder = message(id, other, "mine now?", later + Duration::minutes(1));
    let refused = store.add_message(intruder.clone()).await;
    assert!(
        matches!(&refused, Err(StoreError::Invalid(m)) if m.contains("belongs to another key")),
        "{refused:?}"
    );
    assert_eq!(
        store.get_conversation(id).await.unwrap().unwrap(),
        continued,
        "nothing written: same count and updated_at"
    );
    assert_eq!(questions(store, id, 10).await, ["first?", "second?"]);
    assert!(
        store
            .list_conversations(other, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // A key that is not stored cannot start a conversation either.
    let orphan = ConversationId::new();
    let unknown = store
        .add_message(message(orphan, KeyId::new(), "anyone?", t0()))
        .await;
    assert!(
        matches!(unknown, Err(StoreError::Invalid(_))),
        "{unknown:?}"
    );
    assert!(store.get_conversation(orphan).await.unwrap().is_none());
}

async fn recent_messages_are_the_last_ones_oldest_first(store: &dyn Store) {
    let owner = key(store, "k").await;
    let id = ConversationId::new();
    for i in 0..5 {
        store
            .add_message(message(
                id,
                owner,
                &format!("q{i}"),
                t0() + Duration::seconds(i),
            ))
            .await
            .unwrap();
    }
    assert_eq!(
        questions(store, id, 10).await,
        ["q0", "q1", "q2", "q3", "q4"]
    );
    assert_eq!(
        questions(store, id, 5).await,
        ["q0", "q1", "q2", "q3", "q4"]
    );
    assert_eq!(
        questions(store, id, 2).await,
        ["q3", "q4"],
        "keeps the last"
    );
    assert_eq!(questions(store, id, 1).await, ["q4"]);
    assert!(questions(store, id, 0).await.is_empty());

    // Messages stamped in the same millisecond keep the order they were added in, whatever
    // their ids: insert them in descending id order so sorting by id would reverse them.
    let same = ConversationId::new();
    let mut ids: Vec<MessageId> = (0..6).map(|_| MessageId::new()).collect();
    ids.sort();
    ids.reverse();
    for (i, message_id) in ids.iter().enumerate() {
        store
            .add_message(NewMessage {
                id: *message_id,
                ..message(same, owner, &format!("s{i}"), t0())
            })
            .await
            .unwrap();
    }
    let recent = store.recent_messages(same, 4).await.unwrap();
    assert_eq!(
        recent.iter().map(|m| m.id).collect::<Vec<_>>(),
        ids[2..].to_vec()
    );
    assert_eq!(
        recent
            .iter()
            .map(|m| m.question.as_str())
            .collect::<Vec<_>>(),
        ["s2", "s3", "s4", "s5"]
    );
    assert_eq!(
        questions(store, id, 10).await.len(),
        5,
        "conversations stay apart"
    );
}

async fn conversations_are_listed_per_key_newest_first(store: &dyn Store) {
    let a = key(store, "a").await;
    let b = key(store, "b").await;
    let (old, new, theirs) = (
        ConversationId::new(),
        ConversationId::new(),
        ConversationId::new(),
    );
    store.add_message(message(old, a, "1", t0())).await.unwrap();
    store
        .add_message(message(new, a, "2", t0() + Duration::minutes(1)))
        .await
        .unwrap();
    store
        .add_message(message(theirs, b, "3", t0() + Duration::minutes(2)))
        .await
        .unwrap();
    let listed = |key_id, limit| async move {
        store
            .list_conversations(key_id, limit)
            .await
            .unwrap()
            .iter()
            .map(|c| c.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(listed(a, 10).await, [new, old]);
    assert_eq!(listed(b, 10).await, [theirs]);

    // Continuing the older conversation makes it the most recently updated.
    let resumed = t0() + Duration::minutes(3);
    store
        .add_message(message(old, a, "4", resumed))
        .await
        .unwrap();
    assert_eq!(listed(a, 10).await, [old, new]);
    assert_eq!(listed(a, 1).await, [old]);
    assert!(listed(a, 0).await.is_empty());
    assert!(listed(KeyId::new(), 10).await.is_empty());
    let record = &store.list_conversations(a, 1).await.unwrap()[0];
    assert_eq!(
        (
            record.key_id,
            record.created_at,
            record.updated_at,
            record.message_count
        ),
        (a, t0(), resumed, 2)
    );
}

async fn message_text_round_trips_exactly(store: &dyn Store) {
    let owner = key(store, "k").await;
    let id = ConversationId::new();
    let citations =
        r#"[{"documentId":"d","sourceName":"Zürich ✓","quote":"«naïve» — 日本語 🦀\n\t\"x\""}]"#;
    let long_answer: String = "Ünïcödé answer 🦀 line\n".repeat(100 * 1024 / 24 + 1);
    assert!(long_answer.len() > 100 * 1024);
    let new = NewMessage {
        question: "Wie geht's? 你好 \u{0} nul and  trailing space ".into(),
        answer: long_answer.clone(),
        citations: citations.into(),
        generator: "qwen2.5-0.5b-instruct".into(),
        ..message(id, owner, "", t0())
    };
    let stored = store.add_message(new.clone()).await.unwrap();
    let read = store.recent_messages(id, 1).await.unwrap();
    assert_eq!(read, vec![stored.clone()]);
    let read = &read[0];
    assert_eq!(read.question, new.question);
    assert_eq!(read.answer, long_answer);
    assert_eq!(read.citations, citations);
    assert_eq!(read.generator, "qwen2.5-0.5b-instruct");
    assert_eq!((read.id, read.created_at), (new.id, t0()));
}

async fn concurrent_rate_hits_are_counted_exactly(store: &dyn Store) {
    let window = RateWindow {
        key: KeyId::new(),
        bucket: RateBucket::Generate,
        start: t0(),
    };
    // All at once: on PostgreSQL they run on different connections, like hits on several nodes.
    let hits = join_all((0..40).map(|_| store.hit_rate_window(&window))).await;
    let mut counts: Vec<u64> = hits.into_iter().map(Result::unwrap).collect();
    counts.sort_unstable();
    assert_eq!(
        counts,
        (1..=40).collect::<Vec<u64>>(),
        "every hit its own count"
    );
    assert_eq!(store.peek_rate_window(&window).await.unwrap(), 40);
}

async fn first_opens_at_once_agree_on_the_schema(db: &TestDb) {
    // Several nodes (or the server and the CLI) starting together on an empty database: the
    // migrations run once and every handle works.
    let (a, b, c) = tokio::join!(db.open(), db.open(), db.open());
    let s = source(&*a, "Shared").await;
    for store in [&b, &c] {
        let listed = store.list_sources(&SourceScope::All).await.unwrap();
        assert_eq!(listed.iter().map(|s| s.id).collect::<Vec<_>>(), [s]);
    }
    for store in [a, b, c] {
        store.close().await;
    }
}

async fn reopening_keeps_data_and_skips_applied_migrations(db: &TestDb) {
    let store = db.open().await;
    let s = source(&*store, "Kept").await;
    store.close().await;
    let (a, b) = tokio::join!(db.open(), db.open());
    assert_eq!(
        a.get_source(&SourceScope::All, s)
            .await
            .unwrap()
            .unwrap()
            .name,
        "Kept"
    );
    assert_eq!(b.list_sources(&SourceScope::All).await.unwrap().len(), 1);
    a.close().await;
    b.close().await;
}

async fn jobs_are_claimed_once_across_handles(db: &TestDb) {
    let first = db.open().await;
    let second = db.open().await;
    let s = source(&*first, "S").await;
    let mut docs = Vec::new();
    for i in 0..12 {
        docs.push(document(&*first, s, &format!("{i}.txt")).await);
    }
    let drain = async |store: &dyn Store, worker: &str| {
        let mut claimed = Vec::new();
        while let Some(job) = store
            .claim_job(worker, t0(), t0() + Duration::minutes(5))
            .await
            .unwrap()
        {
            claimed.push(job.document_id);
        }
        claimed
    };
    let (a, b) = tokio::join!(drain(&*first, "a"), drain(&*second, "b"));
    let mut all: Vec<DocumentId> = a.iter().chain(&b).copied().collect();
    all.sort();
    docs.sort();
    assert_eq!(all, docs, "every job claimed exactly once");
    first.close().await;
    second.close().await;
}

/// A document deleted (on one node) while its worker finishes or fails it (on another) is
/// deleted, and the worker learns it is gone: neither side gets an error. On PostgreSQL the two
/// lock the document's row and its job's row; taken in opposite orders they deadlocked, and
/// the server aborted one of them.
async fn deleting_while_workers_finish_never_fails(db: &TestDb) {
    let api = db.open().await;
    let worker = db.open().await;
    let s = source(&*api, "S").await;
    let mut docs = Vec::new();
    for i in 0..24 {
        docs.push(document(&*api, s, &format!("{i}.txt")).await);
    }
    let mut jobs = Vec::new();
    while let Some(job) = worker
        .claim_job("w", t0(), t0() + Duration::minutes(5))
        .await
        .unwrap()
    {
        jobs.push(job);
    }
    assert_eq!(jobs.len(), docs.len());
    let races = jobs.iter().enumerate().map(|(i, job)| {
        let (api, worker) = (&api, &worker);
        async move {
            let end = async {
                if i % 2 == 0 {
                    worker.finish_document(job, chunks(200), t0()).await
                } else {
                    worker.fail_document(job, "unreadable", t0()).await
                }
            };
            let delete = api.delete_document(&SourceScope::All, s, job.document_id);
            let (ended, deleted) = tokio::join!(end, delete);
            let ended = ended.unwrap_or_else(|e| panic!("ending job {i}: {e}"));
            assert!(
                matches!(ended, FinishOutcome::Stored | FinishOutcome::DocumentGone),
                "job {i}: {ended:?}"
            );
            let deleted = deleted.unwrap_or_else(|e| panic!("deleting document {i}: {e}"));
            assert!(deleted.is_some(), "document {i} was not deleted");
        }
    });
    join_all(races).await;
    for id in docs {
        assert!(api.find_document(id).await.unwrap().is_none());
        assert!(api.document_chunks(id).await.unwrap().is_empty());
    }
    api.close().await;
    worker.close().await;
}

/// A shared store lists, in commit order, each document that became ready (with the vectors
/// its worker stored) and each that was deleted; a store one process owns has no feed.
async fn the_index_feed_lists_what_became_ready_or_went(store: &dyn Store) {
    let s = source(store, "S").await;
    let (a, b) = (
        document(store, s, "a.txt").await,
        document(store, s, "b.txt").await,
    );
    let vectors = ChunkVectors {
        model: "test-model".into(),
        vectors: vec![vec![0.25, -1.5, 3.0e-7], vec![f32::MAX, 0.0, -0.0]],
    };
    for _ in 0..2 {
        let job = store
            .claim_job("w", t0(), t0() + Duration::minutes(5))
            .await
            .unwrap()
            .unwrap();
        let mut processed = chunks(2);
        processed.vectors = Some(vectors.clone());
        let outcome = store.finish_document(&job, processed, t0()).await.unwrap();
        assert_eq!(outcome, FinishOutcome::Stored);
    }
    store
        .delete_document(&SourceScope::All, s, a)
        .await
        .unwrap()
        .unwrap();
    let changes = store.index_changes(0, 100).await.unwrap();
    if !store.is_shared() {
        assert!(changes.is_empty(), "{changes:?}");
        assert_eq!(store.document_vectors(b).await.unwrap(), None);
        return;
    }
    let change = |position, document_id, kind| IndexChange {
        position,
        document_id,
        source_id: s,
        kind,
    };
    assert_eq!(
        changes,
        [
            change(1, a, IndexChangeKind::Ready),
            change(2, b, IndexChangeKind::Ready),
            change(3, a, IndexChangeKind::Removed),
        ]
    );
    assert_eq!(store.index_changes(2, 100).await.unwrap(), &changes[2..]);
    assert_eq!(store.index_changes(0, 1).await.unwrap(), &changes[..1]);
    assert!(store.index_changes(3, 100).await.unwrap().is_empty());
    // The vectors come back bit for bit, and go with their document.
    assert_eq!(store.document_vectors(b).await.unwrap(), Some(vectors));
    assert_eq!(store.document_vectors(a).await.unwrap(), None);
    // Deleting what does not exist changes nothing.
    assert!(
        store
            .delete_document(&SourceScope::All, s, a)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(store.index_changes(0, 100).await.unwrap(), changes);
}

/// Many nodes finishing and deleting at once get consecutive feed positions, each change once:
/// a follower that has read up to a position never finds a change below it appear later.
async fn concurrent_changes_take_consecutive_feed_positions(db: &TestDb) {
    let nodes = [db.open().await, db.open().await, db.open().await];
    let s = source(&*nodes[0], "S").await;
    let mut docs = Vec::new();
    for i in 0..30 {
        docs.push(document(&*nodes[0], s, &format!("{i}.txt")).await);
    }
    let work = nodes.iter().enumerate().map(|(n, store)| async move {
        let worker = format!("node{n}");
        while let Some(job) = store
            .claim_job(&worker, t0(), t0() + Duration::minutes(5))
            .await
            .unwrap()
        {
            let outcome = store.finish_document(&job, chunks(3), t0()).await.unwrap();
            assert_eq!(outcome, FinishOutcome::Stored);
            if job.document_id.as_uuid().as_bytes()[0] % 2 == 0 {
                store
                    .delete_document(&SourceScope::All, s, job.document_id)
                    .await
                    .unwrap()
                    .unwrap();
            }
        }
    });
    join_all(work).await;
    let changes = nodes[1].index_changes(0, 1_000).await.unwrap();
    if !nodes[1].is_shared() {
        assert!(changes.is_empty());
    } else {
        let positions: Vec<u64> = changes.iter().map(|c| c.position).collect();
        let expected: Vec<u64> = (1..=changes.len() as u64).collect();
        assert_eq!(positions, expected, "positions are consecutive");
        for id in &docs {
            let kinds: Vec<IndexChangeKind> = changes
                .iter()
                .filter(|c| c.document_id == *id)
                .map(|c| c.kind)
                .collect();
            let deleted = id.as_uuid().as_bytes()[0] % 2 == 0;
            let wanted = if deleted {
                vec![IndexChangeKind::Ready, IndexChangeKind::Removed]
            } else {
                vec![IndexChangeKind::Ready]
            };
            assert_eq!(kinds, wanted, "document {id}");
        }
    }
    for store in nodes {
        store.close().await;
    }
}

/// A node may join a cluster only with the model every live node searches with; a node not
/// seen for a while is gone, a keyword-only node conflicts with none, and a node that leaves
/// stops counting at once. A store one process owns has no other nodes to conflict with.
async fn a_node_with_another_model_is_refused_while_one_runs(db: &TestDb) {
    let (first, second) = (db.open().await, db.open().await);
    let at = |s: i64| t0() + Duration::seconds(s);
    // Nodes seen in the last 30 s count as running.
    let join = |store: &std::sync::Arc<dyn Store>, node: &'static str, model, now: i64| {
        let store = std::sync::Arc::clone(store);
        async move {
            store
                .join_cluster(node, model, at(now), at(now - 30))
                .await
                .unwrap()
                .map(|n| n.node)
        }
    };
    assert_eq!(join(&first, "a", Some("minilm"), 0).await, None);
    if !first.is_shared() {
        assert_eq!(join(&second, "b", Some("other"), 1).await, None);
        first.close().await;
        second.close().await;
        return;
    }
    assert_eq!(join(&second, "b", Some("e5"), 5).await, Some("a".into()));
    assert_eq!(join(&second, "b", None, 5).await, None, "keyword only");
    assert_eq!(join(&second, "c", Some("minilm"), 5).await, None);
    // "a" keeps running, "c" stops being seen: "c" no longer holds anyone back, "a" does.
    first.node_seen("a", at(40)).await.unwrap();
    assert_eq!(join(&second, "d", Some("e5"), 50).await, Some("a".into()));
    // "a" stops cleanly; then the cluster may change its model.
    first.leave_cluster("a").await.unwrap();
    assert_eq!(join(&second, "d", Some("e5"), 50).await, None);
    // A node restarting with another model is refused by the others, never by itself.
    assert_eq!(join(&first, "d", Some("gte"), 51).await, None);
    assert_eq!(join(&first, "e", Some("e5"), 52).await, Some("d".into()));
    // Two nodes with different models joining at once: exactly one gets in.
    let (x, y) = tokio::join!(
        join(&first, "x", Some("model-x"), 100),
        join(&second, "y", Some("model-y"), 100)
    );
    assert!(x.is_some() != y.is_some(), "x: {x:?}, y: {y:?}");
    first.close().await;
    second.close().await;
}

/// The generation queue of a shared store is one line for every node: places in order of
/// arrival across nodes, the bounds counted cluster-wide, free slots handed to the head of the
/// line by whichever node looks, and the tickets of a node that stopped looking removed. A
/// store one process owns has no shared queue (each process queues its own questions).
async fn the_shared_queue_is_one_fifo_line_for_every_node(db: &TestDb) {
    use uuid::Uuid;
    let (a, b) = (db.open().await, db.open().await);
    let limits = QueueLimits {
        slots: 1,
        max_waiting: 3,
        max_per_key: 2,
    };
    let at = |s: i64| t0() + Duration::seconds(s);
    let join = |store: &std::sync::Arc<dyn Store>, node: &'static str, key: KeyId, now: i64| {
        let store = std::sync::Arc::clone(store);
        async move {
            let id = Uuid::new_v4();
            let joined = store
                .queue_join(id, key, node, limits, at(now), at(now - 10))
                .await;
            (id, joined)
        }
    };
    if !a.is_shared() {
        assert!(join(&a, "na", KeyId::new(), 0).await.1.is_err());
        assert!(a.queue_view("na", 1, at(0), at(-10)).await.is_err());
        a.close().await;
        b.close().await;
        return;
    }
    let (k1, k2, k3) = (KeyId::new(), KeyId::new(), KeyId::new());
    let (t1, placed) = join(&a, "na", k1, 0).await;
    assert_eq!(placed.unwrap(), Ok(TicketPlace::Running));
    let (t2, placed) = join(&b, "nb", k2, 0).await;
    assert_eq!(placed.unwrap(), Ok(TicketPlace::Waiting(1)));
    let (t3, placed) = join(&a, "na", k3, 0).await;
    assert_eq!(placed.unwrap(), Ok(TicketPlace::Waiting(2)));
    let (t4, placed) = join(&b, "nb", k1, 0).await;
    assert_eq!(placed.unwrap(), Ok(TicketPlace::Waiting(3)));
    // k1 holds its two places (one on each node); the line holds its three.
    let (_, placed) = join(&a, "na", k1, 0).await;
    assert_eq!(placed.unwrap(), Err(QueueRefusal::KeyShareUsed));
    let (_, placed) = join(&b, "nb", KeyId::new(), 0).await;
    assert_eq!(placed.unwrap(), Err(QueueRefusal::LineFull));

    let view = a.queue_view("na", 1, at(1), at(-9)).await.unwrap();
    assert_eq!(
        view.places,
        [(t1, TicketPlace::Running), (t3, TicketPlace::Waiting(2))]
    );
    assert_eq!((view.running, view.waiting), (1, 3));
    let view = b.queue_view("nb", 1, at(1), at(-9)).await.unwrap();
    assert_eq!(
        view.places,
        [(t2, TicketPlace::Waiting(1)), (t4, TicketPlace::Waiting(3))]
    );

    // The answer on node a ends: the slot goes to the head of the line, on node b.
    a.queue_leave(t1).await.unwrap();
    let view = b.queue_view("nb", 1, at(2), at(-8)).await.unwrap();
    assert_eq!(
        view.places,
        [(t2, TicketPlace::Running), (t4, TicketPlace::Waiting(2))]
    );
    let view = a.queue_view("na", 1, at(2), at(-8)).await.unwrap();
    assert_eq!(view.places, [(t3, TicketPlace::Waiting(1))]);

    // Node a stops looking (it died): after 10 s its question leaves the line.
    let view = b.queue_view("nb", 1, at(20), at(10)).await.unwrap();
    assert_eq!(
        view.places,
        [(t2, TicketPlace::Running), (t4, TicketPlace::Waiting(1))]
    );
    assert_eq!((view.running, view.waiting), (1, 1));
    a.close().await;
    b.close().await;
}

async fn a_queued_job_wakes_waiting_workers(db: &TestDb) {
    use std::time::{Duration, Instant};

    let worker = db.open().await;
    let api = db.open().await;
    let s = source(&*api, "S").await;

    // Nothing queued: the wait lasts its whole time.
    let idle = Duration::from_millis(300);
    let started = Instant::now();
    worker.wait_for_jobs(idle).await;
    assert!(started.elapsed() >= idle, "{:?}", started.elapsed());

    // A document uploaded through another handle (another node) while two workers wait.
    let max = if db.wakes_workers() {
        Duration::from_secs(60)
    } else {
        Duration::from_millis(500)
    };
    let started = Instant::now();
    let upload = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        document(&*api, s, "new.txt").await
    };
    let ((), (), doc) = tokio::join!(worker.wait_for_jobs(max), worker.wait_for_jobs(max), upload);
    let waited = started.elapsed();
    if db.wakes_workers() {
        assert!(
            waited < Duration::from_secs(10),
            "woken, not timed out: {waited:?}"
        );
    } else {
        assert!(
            waited >= max,
            "without notifications the wait is a sleep: {waited:?}"
        );
    }
    let job = worker
        .claim_job("w", t0(), t0() + chrono::Duration::minutes(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.document_id, doc);
    worker.close().await;
    api.close().await;
}

async fn a_restarted_node_takes_back_only_its_own_jobs(store: &dyn Store) {
    let s = source(store, "S").await;
    let lease = Duration::minutes(5);
    let mine = document(store, s, "mine.txt").await;
    let theirs = document(store, s, "theirs.txt").await;
    let claimed_mine = store
        .claim_job("node-a:1111-0", t0(), t0() + lease)
        .await
        .unwrap()
        .unwrap();
    let claimed_theirs = store
        .claim_job("node-b:2222-0", t0(), t0() + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed_mine.document_id, mine);
    assert_eq!(claimed_theirs.document_id, theirs);
    // Node A restarts: its old worker's job comes back, node B's (alive) keeps its lease.
    assert_eq!(
        store
            .requeue_running_jobs(Some("node-a:"), t0())
            .await
            .unwrap(),
        1
    );
    let status = |id| async move {
        store
            .get_document(&SourceScope::All, s, id)
            .await
            .unwrap()
            .unwrap()
            .status
    };
    assert_eq!(status(mine).await, DocumentStatus::Queued);
    assert_eq!(status(theirs).await, DocumentStatus::Processing);
    let again = store
        .claim_job("node-a:3333-0", t0(), t0() + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.document_id, mine);
    assert!(
        store
            .claim_job("node-a:3333-1", t0(), t0() + lease)
            .await
            .unwrap()
            .is_none(),
        "node B's job was taken while its lease runs"
    );
}
